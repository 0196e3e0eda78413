"""mockdcp's reference DCP consumer: follows the protocol exactly, on trio.

It does what a correct consumer must (clients.md, producer.md):

* bootstrap: HELLO (XATTR, XERROR, SELECT_BUCKET, JSON, COLLECTIONS), SASL (SCRAM-SHA512
  by default), SELECT_BUCKET, DCP_OPEN, controls (noop, interval, buffer size);
* one stream per vbucket, resumed with (start, vbucket uuid, snapshot start, end): the
  snapshot range is what lets the producer decide a rollback (seed 001);
* ROLLBACK: drop every version above the rollback seqno, take the failover entry whose
  seqno is at or below it, and ask again;
* STREAM_END with a reason other than OK re-opens the stream from where it was;
* a stream request answered NOT_MY_VBUCKET or ETMPFAIL is asked again a little later
  (the vbucket is moving or warming up; java-dcp-client retries these too);
* DCP_NOOP answered, buffer acks sent at half the window;
* a dropped connection, or a frame it cannot decode (the framing can no longer be
  trusted), is re-established and every stream resumed.

``state`` keeps, per (collection, key), the versions received (so a rollback can undo
them) and per vbucket the position to resume from; ``documents()`` gives the live state
a test compares with ``Bucket.oracle()``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable

import attrs
import trio

from mockdcp._errors import MockDcpError, RemoteProtocolError
from mockdcp.protocol import (
    DcpBufferAck,
    DcpControl,
    DcpNoop,
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    Deletion,
    Expiration,
    Frame,
    FrameReader,
    GetClusterConfig,
    Hello,
    HelloFeature,
    Magic,
    Message,
    Mutation,
    Opcode,
    Response,
    SaslAuth,
    SaslClient,
    SaslStep,
    SelectBucket,
    SeqnoAdvanced,
    SnapshotMarker,
    Status,
    StreamEnd,
    StreamEndReason,
    SystemEvent,
    SystemEventType,
    decode_failover_log,
    decode_server_message,
)

log = logging.getLogger("mockdcp.client")

MAX_SEQNO = 0xFFFFFFFFFFFFFFFF
STREAM_OPAQUE_BASE = 0x1000
#: Pause before re-opening a stream that ended with a reason other than OK.
REOPEN_DELAY = 0.05
#: Pause before asking again for a stream refused with a status worth retrying.
RETRY_DELAY = 0.1
#: Stream-request statuses that say "not now", not "never".
RETRY_STATUSES = frozenset({Status.NOT_MY_VBUCKET, Status.ETMPFAIL})


class ConsumerError(MockDcpError):
    """The producer refused the bootstrap or a stream in a way the consumer cannot fix."""


class CallbackError(ConsumerError):
    """The ``on_event`` callback raised (the original exception is the cause).

    Kept apart from connection errors: an ``OSError`` from the callback (a closed pipe,
    a full disk) must stop the consumer, not make it reconnect and resume forever.
    """


@attrs.define
class Version:
    """One version of a document as received."""

    vbucket: int
    seqno: int
    value: bytes
    deleted: bool
    rev: int = 0
    cas: int = 0


@attrs.define
class VbPosition:
    """Where a vbucket's stream resumes: last seqno, branch uuid, last snapshot."""

    seqno: int = 0
    uuid: int = 0
    snap_start: int = 0
    snap_end: int = 0
    failover_log: list[tuple[int, int]] = attrs.field(factory=list)
    ended: bool = False


@attrs.define
class ConsumerState:
    """What the consumer holds: versions per document, position per vbucket."""

    versions: dict[tuple[int, bytes], list[Version]] = attrs.field(factory=dict)
    positions: dict[int, VbPosition] = attrs.field(factory=dict)
    rollbacks: list[tuple[int, int]] = attrs.field(factory=list)
    stream_ends: list[tuple[int, int]] = attrs.field(factory=list)
    #: per vbucket, the seqnos at which the consumer held a complete snapshot: the only
    #: points a rollback can return to with a consistent state (dedup inside a snapshot
    #: means a seqno in its middle is not one).
    consistent: dict[int, list[int]] = attrs.field(factory=dict)
    markers: int = 0
    items: int = 0
    violations: list[str] = attrs.field(factory=list)
    #: (vbucket, collection id) -> seqno of the last END_COLLECTION (drop) or
    #: BEGIN_COLLECTION (create or flush) event seen: the collection's documents of that
    #: vbucket written before it are gone
    cleared: dict[tuple[int, int], int] = attrs.field(factory=dict)
    system_events: int = 0

    def position(self, vb: int) -> VbPosition:
        return self.positions.setdefault(vb, VbPosition())

    def documents(self) -> dict[tuple[int, bytes], Version]:
        """The live documents: the newest version of each key that is not a deletion."""
        out = {}
        cleared = self.cleared
        for key, versions in self.versions.items():
            if versions and not versions[-1].deleted:
                last = versions[-1]
                if last.seqno < cleared.get((last.vbucket, key[0]), -1):
                    continue  # its collection was dropped or flushed after it
                out[key] = last
        return out

    def mark_consistent(self, vb: int, seqno: int) -> None:
        points = self.consistent.setdefault(vb, [0])
        if seqno > points[-1]:
            points.append(seqno)

    def roll_back(self, vb: int, rollback_seqno: int) -> int:
        """Return ``vb`` to its last consistent point at or below ``rollback_seqno``.

        Every version above that point is undone; the point is where the stream resumes.
        Returns the seqno rolled back to.
        """
        points = [p for p in self.consistent.get(vb, [0]) if p <= rollback_seqno] or [0]
        self.consistent[vb] = points
        seqno = points[-1]
        for key in list(self.versions):
            kept = [v for v in self.versions[key] if v.vbucket != vb or v.seqno <= seqno]
            if kept:
                self.versions[key] = kept
            else:
                del self.versions[key]
        for at in [k for k, s in self.cleared.items() if k[0] == vb and s > seqno]:
            del self.cleared[at]
        pos = self.position(vb)
        pos.seqno = pos.snap_start = pos.snap_end = seqno
        entries = [e for e in pos.failover_log if e[1] <= seqno]
        pos.uuid = entries[0][0] if entries else 0
        self.rollbacks.append((vb, rollback_seqno))
        return seqno


EventCallback = Callable[[int, object], None]


class DcpConsumer:
    """A reference consumer of one mock (or real) node; see the module docstring."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        user: str = "Administrator",
        password: str = "password",
        bucket: str = "default",
        name: str = "mockdcp-consumer",
        vbuckets: Iterable[int] | None,
        collections: bool = True,
        buffer_size: int = 20 * 1024 * 1024,
        noop_interval: float = 120.0,
        mechanism: str = "SCRAM-SHA512",
        end_seqno: int = MAX_SEQNO,
        state: ConsumerState | None = None,
        on_event: EventCallback | None = None,
        reconnect: bool = True,
        open_flags: int = 0,
        stream_flags: int = 0,
        controls: Iterable[tuple[str, str]] = (),
        connect: Callable[[], Awaitable[trio.abc.Stream]] | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.user, self.password, self.bucket, self.name = user, password, bucket, name
        #: ``None``: every vbucket of the bucket, counted in the cluster map at bootstrap
        self._every_vbucket = vbuckets is None
        self.vbuckets = [] if vbuckets is None else list(vbuckets)
        self.collections = collections
        self.buffer_size = buffer_size
        self.noop_interval = noop_interval
        self.mechanism = mechanism
        self.end_seqno = end_seqno
        self.state = state or ConsumerState()
        self.on_event = on_event
        self.reconnect = reconnect
        self.open_flags = open_flags
        self.stream_flags = stream_flags
        self.extra_controls = list(controls)
        self._connect = connect or self._open_tcp
        self.connects = 0
        self._opaque = 1
        self._stream: trio.abc.Stream | None = None
        self._reader = FrameReader()
        self._unacked = 0
        self._opaques: dict[int, int] = {}
        self._open: set[int] = set()
        self._snap: dict[int, tuple[int, int]] = {}
        self._task_status: trio.TaskStatus[None] | None = None

    # -- low level -----------------------------------------------------------------------

    def _next_opaque(self) -> int:
        self._opaque += 1
        return self._opaque

    async def _send(self, data: bytes) -> None:
        assert self._stream is not None
        await self._stream.send_all(data)

    async def _next_frame(self) -> Frame:
        assert self._stream is not None
        while True:
            frame = self._reader.next_frame()
            if frame is not None:
                return frame
            data = await self._stream.receive_some(256 * 1024)
            if not data:
                raise trio.BrokenResourceError("producer closed the connection")
            self._reader.feed(data)

    async def _open_tcp(self) -> trio.abc.Stream:
        return await trio.open_tcp_stream(self.host, self.port)

    async def _call(self, message: Message) -> Frame:
        """Send a request and wait for its response (bootstrap is strictly sequential)."""
        await self._send(message.encode())
        while True:
            frame = await self._next_frame()
            if frame.magic is Magic.RESPONSE and frame.opaque == message.opaque:
                return frame
            await self._handle_frame(frame)

    async def _expect_ok(self, message: Message, what: str) -> Frame:
        frame = await self._call(message)
        if frame.status != Status.SUCCESS:
            raise ConsumerError(f"{what} failed with status {frame.status:#x}: {frame.value!r}")
        return frame

    # -- bootstrap ----------------------------------------------------------------------

    async def _bootstrap(self) -> None:
        features = [
            HelloFeature.XATTR,
            HelloFeature.XERROR,
            HelloFeature.SELECT_BUCKET,
            HelloFeature.JSON,
        ]
        if self.collections:
            features.append(HelloFeature.COLLECTIONS)
        await self._expect_ok(
            Hello(opaque=self._next_opaque(), agent=b"mockdcp-client", features=tuple(features)),
            "HELLO",
        )
        await self._authenticate()
        await self._expect_ok(
            SelectBucket(opaque=self._next_opaque(), bucket=self.bucket), "SELECT_BUCKET"
        )
        if self._every_vbucket:
            frame = await self._expect_ok(
                GetClusterConfig(opaque=self._next_opaque()), "GET_CLUSTER_CONFIG"
            )
            vbucket_map = json.loads(frame.value)["vBucketServerMap"]["vBucketMap"]
            self.vbuckets = list(range(len(vbucket_map)))
        flags = DcpOpenFlag.PRODUCER | self.open_flags
        await self._expect_ok(
            DcpOpen(opaque=self._next_opaque(), name=self.name.encode(), flags=int(flags)),
            "DCP_OPEN",
        )
        controls = [
            ("enable_noop", "true"),
            ("set_noop_interval", str(self.noop_interval)),
            ("connection_buffer_size", str(self.buffer_size)),
            *self.extra_controls,
        ]
        for key, value in controls:
            await self._expect_ok(
                DcpControl(opaque=self._next_opaque(), key=key, value=value), f"control {key}"
            )

    async def _authenticate(self) -> None:
        client = SaslClient(self.user, self.password, self.mechanism)
        frame = await self._call(
            SaslAuth(opaque=self._next_opaque(), mechanism=self.mechanism, payload=client.first())
        )
        while frame.status == Status.AUTH_CONTINUE:
            frame = await self._call(
                SaslStep(
                    opaque=self._next_opaque(),
                    mechanism=self.mechanism,
                    payload=client.step(frame.value),
                )
            )
        if frame.status != Status.SUCCESS:
            raise ConsumerError(f"authentication failed with status {frame.status:#x}")
        client.finish(frame.value)

    # -- streams --------------------------------------------------------------------------

    async def _open_stream(self, vb: int) -> None:
        pos = self.state.position(vb)
        opaque = STREAM_OPAQUE_BASE + vb
        self._opaques[opaque] = vb
        request = DcpStreamRequest(
            opaque=opaque,
            vbucket=vb,
            flags=int(self.stream_flags),
            start_seqno=pos.seqno,
            end_seqno=self.end_seqno,
            vbucket_uuid=pos.uuid,
            snap_start_seqno=pos.snap_start,
            snap_end_seqno=pos.snap_end,
        )
        await self._send(request.encode())
        self._open.add(vb)

    def _on_stream_response(self, vb: int, frame: Frame) -> bool:
        """The answer to a stream request; True when the stream must be asked again."""
        pos = self.state.position(vb)
        if frame.status == Status.SUCCESS:
            pos.failover_log = list(decode_failover_log(frame.value))
            if pos.failover_log:
                pos.uuid = pos.failover_log[0][0]
            return False
        self._open.discard(vb)
        if frame.status == Status.ROLLBACK:
            seqno = int.from_bytes(frame.value[:8], "big")
            self.state.roll_back(vb, seqno)
            self._emit(vb, ("rollback", seqno))
            return True
        if frame.status in RETRY_STATUSES:
            log.info("stream request for vbucket %d: status %#x; retrying", vb, frame.status)
            return True
        raise ConsumerError(f"stream request for vbucket {vb} failed: status {frame.status:#x}")

    def _emit(self, vb: int, event: object) -> None:
        if self.on_event is not None:
            try:
                self.on_event(vb, event)
            except Exception as exc:
                raise CallbackError(f"on_event raised {exc!r}") from exc

    async def _handle_frame(self, frame: Frame) -> None:
        if frame.magic is Magic.RESPONSE:
            vb = self._opaques.get(frame.opaque)
            if (
                frame.opcode == Opcode.DCP_STREAM_REQ
                and vb is not None
                and self._on_stream_response(vb, frame)
            ):
                if frame.status in RETRY_STATUSES:
                    await trio.sleep(RETRY_DELAY)
                await self._open_stream(vb)
            return
        msg = decode_server_message(frame, collections=self.collections)
        if isinstance(msg, DcpNoop):
            reply = Response(opcode=Opcode.DCP_NOOP, status=Status.SUCCESS, opaque=msg.opaque)
            await self._send(reply.encode())
            return
        vb = self._opaques.get(frame.opaque, frame.vbucket)
        self._account(frame.size)
        if isinstance(msg, SnapshotMarker):
            self._on_marker(vb, msg)
        elif isinstance(msg, Mutation | Deletion | Expiration):
            self._on_item(vb, msg)
        elif isinstance(msg, SeqnoAdvanced | SystemEvent):
            # a system event holds a seqno of the snapshot like an item (and may end it)
            if isinstance(msg, SystemEvent):
                self._on_system_event(vb, msg)
            pos = self.state.position(vb)
            pos.seqno = msg.by_seqno
            snap = self._snap.get(vb)
            if snap is not None and msg.by_seqno == snap[1]:
                pos.snap_start = pos.snap_end = msg.by_seqno
                self.state.mark_consistent(vb, msg.by_seqno)
        elif isinstance(msg, StreamEnd):
            self._open.discard(vb)
            self.state.stream_ends.append((vb, int(msg.reason)))
            pos = self.state.position(vb)
            if msg.reason == StreamEndReason.OK:
                pos.ended = True
            elif self.reconnect or msg.reason != StreamEndReason.CLOSED:
                await trio.sleep(REOPEN_DELAY)  # as java-dcp-client does (50 ms)
                await self._open_stream(vb)
        self._emit(vb, msg)
        await self._maybe_ack()

    def _on_system_event(self, vb: int, msg: SystemEvent) -> None:
        self.state.system_events += 1
        if msg.event in (SystemEventType.END_COLLECTION, SystemEventType.BEGIN_COLLECTION):
            cid = getattr(msg.data(), "collection_id", None)
            if cid is not None:
                self.state.cleared[(vb, cid)] = msg.by_seqno

    def _on_marker(self, vb: int, msg: SnapshotMarker) -> None:
        self.state.markers += 1
        self._snap[vb] = (msg.start_seqno, msg.end_seqno)

    def _on_item(self, vb: int, msg: Mutation | Deletion | Expiration) -> None:
        pos = self.state.position(vb)
        snap = self._snap.get(vb)
        if snap is None or not snap[0] <= msg.by_seqno <= snap[1]:
            self.state.violations.append(f"vb {vb} seqno {msg.by_seqno} outside marker {snap}")
        elif msg.by_seqno <= pos.seqno:
            self.state.violations.append(f"vb {vb} seqno {msg.by_seqno} not above {pos.seqno}")
        cid = msg.collection_id or 0
        deleted = not isinstance(msg, Mutation)
        versions = self.state.versions.setdefault((cid, msg.key), [])
        versions.append(Version(vb, msg.by_seqno, msg.value, deleted, msg.rev_seqno, msg.cas))
        self.state.items += 1
        pos.seqno = msg.by_seqno
        if snap is not None:
            pos.snap_start, pos.snap_end = snap
            if msg.by_seqno == snap[1]:
                pos.snap_start = pos.snap_end = msg.by_seqno
                self.state.mark_consistent(vb, msg.by_seqno)

    def _account(self, size: int) -> None:
        self._unacked += size

    async def _maybe_ack(self) -> None:
        if self.buffer_size and self._unacked >= self.buffer_size // 2:
            nbytes, self._unacked = self._unacked, 0
            await self._send(DcpBufferAck(opaque=0, nbytes=nbytes).encode())

    # -- running --------------------------------------------------------------------------

    async def _session(self) -> None:
        self._reader = FrameReader()
        self._unacked = 0
        self._snap.clear()
        self._stream = stream = await self._connect()
        try:
            self.connects += 1
            await self._bootstrap()
            for vb in self.vbuckets:
                if not self.state.position(vb).ended:
                    await self._open_stream(vb)
            if self._task_status is not None:
                self._task_status.started()
                self._task_status = None
            while True:
                frame = await self._next_frame()
                await self._handle_frame(frame)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Stream until cancelled, reconnecting (and resuming) after a dropped connection.

        Raises ``ConsumerError`` when the producer refuses what it must not.
        """
        self._task_status = task_status
        delay = 0.05
        while True:
            try:
                await self._session()
            except (
                trio.BrokenResourceError,
                trio.ClosedResourceError,
                OSError,
                RemoteProtocolError,
            ) as exc:
                if not self.reconnect or self.connects == 0:  # never reached the producer
                    raise
                log.info("connection lost (%s); resuming", exc)
                await trio.sleep(delay)
                delay = min(delay * 2, 1.0)
