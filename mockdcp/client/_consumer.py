"""mockdcp's reference DCP consumer: follows the protocol exactly, on trio.

It does what a correct consumer must (kv_engine docs/dcp/documentation):

* bootstrap: HELLO (XATTR, XERROR, SELECT_BUCKET, JSON, COLLECTIONS), SASL (SCRAM-SHA512
  by default), SELECT_BUCKET, DCP_OPEN, controls (noop, interval, buffer size);
* one stream per vbucket, resumed with (start, vbucket uuid, snapshot start, end): the
  snapshot range is what lets the producer decide a rollback (kv_engine
  ``docs/dcp/documentation/discussion.md``); or, with
  ``streams``, one stream per ``StreamFilter`` and vbucket: a collection or scope filter
  sent as the stream request's JSON value, and with stream-ids (``enable_stream_id``)
  several streams of one vbucket, each tracked on its own as (vbucket, stream-id);
* ROLLBACK: drop every version above the rollback seqno, take the failover entry whose
  seqno is at or below it, and ask again;
* STREAM_END OK, FILTER_EMPTY (the filter's last collection or its scope was dropped)
  and LOST_PRIVILEGES end the stream for good; CLOSED re-opens it only when
  ``reconnect`` is on; any other reason re-opens it from where it was;
* system events and SEQNO_ADVANCED hold a seqno of the snapshot like an item: the
  stream may resume from it (kv_engine docs/dcp/documentation/commands/seqno-advanced.md);
  each stream keeps its own view of the manifest (``ManifestView``);
* an OSO backfill (DCP_OSO_SNAPSHOT start .. end, items in key order) does not move the
  resume position until its end, then it is the highest seqno received (kv_engine
  docs/dcp/documentation/commands/oso_snapshot.md);
* a stream request answered NOT_MY_VBUCKET or ETMPFAIL is asked again a little later
  (the vbucket is moving or warming up; java-dcp-client retries these too);
* DCP_NOOP answered, buffer acks sent at half the window;
* a dropped connection, or a frame it cannot decode (the framing can no longer be
  trusted), is re-established and every stream resumed.

``state`` keeps, per (collection, key), the versions received (so a rollback can undo
them) and per stream (vbucket, stream-id) the position to resume from; ``documents()``
gives the live state a test compares with ``Bucket.oracle()``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable

import attrs
import trio

from mockdcp.client._streams import ManifestView, StreamFilter, StreamKey
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
    GetCollectionId,
    GetScopeId,
    Hello,
    HelloFeature,
    Magic,
    Message,
    Mutation,
    Opcode,
    OsoSnapshot,
    OsoSnapshotFlag,
    RemoteProtocolError,
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
    decode_failover_log,
    decode_id_lookup_extras,
    decode_server_message,
)
from mockdcp.util import MockDcpError

log = logging.getLogger("mockdcp.client")

MAX_SEQNO = 0xFFFFFFFFFFFFFFFF
STREAM_OPAQUE_BASE = 0x1000
#: A stream's opaque is ``STREAM_OPAQUE_BASE + vbucket + OPAQUE_SLOT * i`` for the i-th
#: of the consumer's filters (vbuckets are below 1024).
OPAQUE_SLOT = 0x10000
#: Pause before re-opening a stream that ended with a reason other than OK.
REOPEN_DELAY = 0.05
#: Pause before asking again for a stream refused with a status worth retrying.
RETRY_DELAY = 0.1
#: Stream-request statuses that say "not now", not "never".
RETRY_STATUSES = frozenset({Status.NOT_MY_VBUCKET, Status.ETMPFAIL})
#: Stream-request statuses that say the filter names nothing that exists any more (the
#: collections or the scope were dropped while the consumer was away): the stream is
#: over, as after STREAM_END FILTER_EMPTY.
GONE_STATUSES = frozenset({Status.UNKNOWN_COLLECTION, Status.UNKNOWN_SCOPE})
#: a ``ConsumerState.cleared`` seqno above any: every document of the collection is gone
_AFTER_EVERY_SEQNO = 1 << 64
#: STREAM_END reasons after which the stream is done: the end seqno was reached, the
#: filter became empty, or the connection may no longer read the collections (asking
#: again would only be refused).
FINAL_REASONS = frozenset(
    {StreamEndReason.OK, StreamEndReason.FILTER_EMPTY, StreamEndReason.LOST_PRIVILEGES}
)


class ConsumerError(MockDcpError):
    """The producer refused the bootstrap or a stream in a way the consumer cannot fix."""


class CallbackError(ConsumerError):
    """The ``on_event`` callback raised (the original exception is the cause).

    Kept apart from connection errors: an ``OSError`` from the callback (a closed pipe,
    a full disk) must stop the consumer, not make it reconnect and resume forever.
    """


@attrs.frozen(kw_only=True)
class StreamRefused:
    """Passed to ``on_event`` when a stream request is refused for good: its filter names
    collections or a scope that no longer exist (the stream is over, not an error)."""

    vbucket: int
    stream_id: int | None
    status: int


@attrs.define
class Version:
    """One version of a document as received (``sid``: the stream it came on)."""

    vbucket: int
    seqno: int
    value: bytes
    deleted: bool
    rev: int = 0
    cas: int = 0
    sid: int | None = None


@attrs.define
class VbPosition:
    """Where a stream resumes: last seqno, branch uuid, last snapshot."""

    seqno: int = 0
    uuid: int = 0
    snap_start: int = 0
    snap_end: int = 0
    failover_log: list[tuple[int, int]] = attrs.field(factory=list)
    #: the stream is done and is not asked for again (``end_reason`` says why)
    ended: bool = False
    #: the last STREAM_END reason, or the status that refused the stream for good
    end_reason: int | None = None


def _newest(versions: list[Version]) -> Version:
    # one stream delivers a key's versions in seqno order; two streams whose filters
    # overlap interleave theirs
    if len(versions) == 1:
        return versions[0]
    return max(reversed(versions), key=lambda v: v.seqno)


@attrs.define
class ConsumerState:
    """What the consumer holds: versions per document, position per stream.

    Streams are named ``(vbucket, stream id)``; the stream id is ``None`` without
    stream-ids, so ``position(vb)`` is the vbucket's one stream.
    """

    versions: dict[tuple[int, bytes], list[Version]] = attrs.field(factory=dict)
    positions: dict[StreamKey, VbPosition] = attrs.field(factory=dict)
    rollbacks: list[tuple[int, int]] = attrs.field(factory=list)
    stream_ends: list[tuple[int, int]] = attrs.field(factory=list)
    #: per stream, the seqnos at which the consumer held a complete snapshot: the only
    #: points a rollback can return to with a consistent state (dedup inside a snapshot
    #: means a seqno in its middle is not one).
    consistent: dict[StreamKey, list[int]] = attrs.field(factory=dict)
    markers: int = 0
    items: int = 0
    violations: list[str] = attrs.field(factory=list)
    #: (vbucket, collection id) -> seqno of the last END_COLLECTION (drop) or
    #: BEGIN_COLLECTION (create or flush) event seen: the collection's documents of that
    #: vbucket written before it are gone
    cleared: dict[tuple[int, int], int] = attrs.field(factory=dict)
    system_events: int = 0
    seqno_advances: int = 0
    #: per stream, the manifest as its system events tell it
    manifests: dict[StreamKey, ManifestView] = attrs.field(factory=dict)

    def position(self, vb: int, sid: int | None = None) -> VbPosition:
        return self.positions.setdefault((vb, sid), VbPosition())

    def manifest(self, vb: int, sid: int | None = None) -> ManifestView:
        """The stream's view of the manifest (pass-through until it saw anything)."""
        return self.manifests.setdefault((vb, sid), ManifestView.for_filter(StreamFilter()))

    def documents(self) -> dict[tuple[int, bytes], Version]:
        """The live documents: the newest version of each key that is not a deletion,
        leaving out those written before their collection was dropped or flushed."""
        out = {}
        cleared = self.cleared
        for key, versions in self.versions.items():
            if not versions:
                continue
            last = _newest(versions)
            if last.deleted or last.seqno < cleared.get((last.vbucket, key[0]), -1):
                continue
            out[key] = last
        return out

    def mark_consistent(self, vb: int, seqno: int, sid: int | None = None) -> None:
        points = self.consistent.setdefault((vb, sid), [0])
        if seqno > points[-1]:
            points.append(seqno)

    def roll_back(self, vb: int, rollback_seqno: int, sid: int | None = None) -> int:
        """Return stream ``(vb, sid)`` to its last consistent point at or below
        ``rollback_seqno``.

        Every version that stream received above that point is undone, and the drops
        and flushes it saw there; the point is where the stream resumes. Returns the
        seqno rolled back to.
        """
        key = (vb, sid)
        points = [p for p in self.consistent.get(key, [0]) if p <= rollback_seqno] or [0]
        self.consistent[key] = points
        seqno = points[-1]
        for doc in list(self.versions):
            kept = [
                v for v in self.versions[doc] if v.vbucket != vb or v.sid != sid or v.seqno <= seqno
            ]
            if kept:
                self.versions[doc] = kept
            else:
                del self.versions[doc]
        view = self.manifests.get(key)
        if view is not None:
            undone = {e.by_seqno for e in view.history if e.by_seqno > seqno}
            view.roll_back(seqno)
            for at in [k for k, s in self.cleared.items() if k[0] == vb and s in undone]:
                del self.cleared[at]
        else:
            for at in [k for k, s in self.cleared.items() if k[0] == vb and s > seqno]:
                del self.cleared[at]
        pos = self.position(vb, sid)
        pos.seqno = pos.snap_start = pos.snap_end = seqno
        entries = [e for e in pos.failover_log if e[1] <= seqno]
        pos.uuid = entries[0][0] if entries else 0
        self.rollbacks.append((vb, rollback_seqno))
        return seqno


EventCallback = Callable[[int, object], None]


class DcpConsumer:
    """A reference consumer of one mock (or real) node; see the module docstring.

    ``streams``: one ``StreamFilter`` per stream to open on each vbucket (default: one
    pass-through stream). Filters need ``collections``; stream-ids (``sid``) are all or
    none. Raises ``ValueError`` when they are not.
    """

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
        streams: Iterable[StreamFilter] = (),
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
        self.streams = _check_streams(list(streams) or [StreamFilter()], collections)
        self._connect = connect or self._open_tcp
        self.connects = 0
        #: set once every stream has ended for good (OK, FILTER_EMPTY, ...)
        self.finished = trio.Event()
        self._opaque = 1
        self._stream: trio.abc.Stream | None = None
        self._reader = FrameReader()
        self._unacked = 0
        #: stream-request opaque -> vbucket, and -> stream id
        self._opaques: dict[int, int] = {}
        self._sids: dict[int, int | None] = {}
        self._open: set[StreamKey] = set()
        self._snap: dict[StreamKey, tuple[int, int]] = {}
        #: streams inside an OSO snapshot -> the highest seqno received in it
        self._oso: dict[StreamKey, int] = {}
        self._task_status: trio.TaskStatus[None] | None = None

    @property
    def stream_ids(self) -> bool:
        """True when the streams carry stream-ids (``enable_stream_id`` is sent)."""
        return self.streams[0].sid is not None

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
        await self._login()
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
            *([("enable_stream_id", "true")] if self.stream_ids else []),
            *self.extra_controls,
        ]
        for key, value in controls:
            await self._expect_ok(
                DcpControl(opaque=self._next_opaque(), key=key, value=value), f"control {key}"
            )

    async def _login(self) -> None:
        """HELLO, SASL and SELECT_BUCKET: what any KV connection starts with."""
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

    async def lookup_ids(self, paths: Iterable[str], *, scopes: bool = False) -> list[int]:
        """The ids of collections (``scope.collection``) or, with ``scopes``, of scopes,
        asked with GET_COLLECTION_ID / GET_SCOPE_ID on a connection of their own.

        Raises ``ConsumerError`` naming a path the bucket does not have (UNKNOWN_COLLECTION
        or UNKNOWN_SCOPE), or when the node refuses the login.
        """
        self._reader = FrameReader()
        self._stream = stream = await self._connect()
        ids = []
        try:
            await self._login()
            for path in paths:
                opaque = self._next_opaque()
                message = (
                    GetScopeId(opaque=opaque, path=path)
                    if scopes
                    else GetCollectionId(opaque=opaque, path=path)
                )
                frame = await self._call(message)
                if frame.status != Status.SUCCESS:
                    what = "scope" if scopes else "collection"
                    raise ConsumerError(f"no {what} {path!r} (status {frame.status:#x})")
                ids.append(decode_id_lookup_extras(frame.extras)[1])
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            self._stream = None
        return ids

    # -- driving a connection of the caller's -------------------------------------------

    async def start_on(self, stream: trio.abc.Stream) -> None:
        """Bootstrap DCP on a connection the caller opened (HELLO, SASL, SELECT_BUCKET,
        DCP_OPEN, the controls), as ``run`` does on each of its own."""
        self._reader = FrameReader()
        self._stream = stream
        await self._bootstrap()

    async def request_streams(self) -> None:
        """Ask for every stream of every vbucket (from where ``state`` says it is)."""
        for vb in self.vbuckets:
            await self._open_streams(vb)

    def hand_over(self) -> bytearray:
        """Stop reading the connection: the bytes read past the last frame handled, for a
        caller that reads the stream's frames itself from here on (``mockdcp bench``)."""
        self._stream = None
        return self._reader.take_buffered()

    # -- streams --------------------------------------------------------------------------

    def _spec(self, sid: int | None) -> tuple[int, StreamFilter]:
        for slot, spec in enumerate(self.streams):
            if spec.sid == sid:
                return slot, spec
        raise KeyError(f"no stream with stream-id {sid}")

    async def _open_stream(self, vb: int, sid: int | None = None) -> None:
        """Ask for stream ``(vb, sid)`` from where it is (the first filter's sid when
        ``sid`` is None and the filters have stream-ids)."""
        if sid is None:
            sid = self.streams[0].sid
        slot, spec = self._spec(sid)
        pos = self.state.position(vb, sid)
        self.state.manifests.setdefault((vb, sid), ManifestView.for_filter(spec))
        opaque = STREAM_OPAQUE_BASE + vb + OPAQUE_SLOT * slot
        self._opaques[opaque] = vb
        self._sids[opaque] = sid
        request = DcpStreamRequest(
            opaque=opaque,
            vbucket=vb,
            flags=int(self.stream_flags),
            start_seqno=pos.seqno,
            end_seqno=self.end_seqno,
            vbucket_uuid=pos.uuid,
            snap_start_seqno=pos.snap_start,
            snap_end_seqno=pos.snap_end,
            value=spec.value(),
        )
        await self._send(request.encode())
        self._open.add((vb, sid))

    async def _open_streams(self, vb: int) -> None:
        """Ask for every stream of ``vb`` that is not done."""
        for spec in self.streams:
            if not self.state.position(vb, spec.sid).ended:
                await self._open_stream(vb, spec.sid)

    def _on_stream_response(self, key: StreamKey, frame: Frame) -> bool:
        """The answer to a stream request; True when the stream must be asked again."""
        vb, sid = key
        pos = self.state.position(vb, sid)
        if frame.status == Status.SUCCESS:
            pos.failover_log = list(decode_failover_log(frame.value))
            if pos.failover_log:
                pos.uuid = pos.failover_log[0][0]
            return False
        self._open.discard(key)
        if frame.status == Status.ROLLBACK:
            seqno = int.from_bytes(frame.value[:8], "big")
            self.state.roll_back(vb, seqno, sid)
            self._emit(vb, ("rollback", seqno))
            return True
        if frame.status in RETRY_STATUSES:
            log.info("stream request for vbucket %d: status %#x; retrying", vb, frame.status)
            return True
        spec = self.streams[self._spec(sid)[0]]
        if frame.status in GONE_STATUSES and not spec.passes_through:
            log.info("stream %s: its filter names nothing left (%#x); done", key, frame.status)
            # its drop events may have been purged while the consumer was away: what it
            # has of the filter's collections in this vbucket is gone
            gone = set(spec.collections)
            if spec.scope is not None:
                view = self.state.manifests.get(key)
                if view is not None:
                    gone |= {
                        c for c, info in view.collections.items() if info.scope_id == spec.scope
                    }
            for cid in gone:
                self.state.cleared[(vb, cid)] = _AFTER_EVERY_SEQNO
            self._end(key, int(frame.status))
            self._emit(vb, StreamRefused(vbucket=vb, stream_id=sid, status=int(frame.status)))
            return False
        raise ConsumerError(
            f"stream request for vbucket {vb}{_sid_text(sid)} failed: status {frame.status:#x}"
        )

    def _end(self, key: StreamKey, reason: int) -> None:
        """Stream ``key`` is done: it is not asked for again, even after a reconnect."""
        pos = self.state.position(*key)
        pos.ended, pos.end_reason = True, reason
        every = (
            self.state.position(vb, spec.sid).ended for vb in self.vbuckets for spec in self.streams
        )
        if all(every):
            self.finished.set()

    def _emit(self, vb: int, event: object) -> None:
        if self.on_event is not None:
            try:
                self.on_event(vb, event)
            except Exception as exc:
                raise CallbackError(f"on_event raised {exc!r}") from exc

    def _key(self, frame: Frame) -> StreamKey:
        """The stream a frame belongs to: by the opaque of its stream request, as the
        clients route (the stream-id frame info when the opaque is not one of ours)."""
        vb = self._opaques.get(frame.opaque)
        if vb is None:
            return frame.vbucket, frame.stream_id()
        return vb, self._sids.get(frame.opaque)

    async def _handle_frame(self, frame: Frame) -> None:
        if frame.magic is Magic.RESPONSE:
            if frame.opcode == Opcode.DCP_STREAM_REQ and frame.opaque in self._opaques:
                key = self._key(frame)
                if self._on_stream_response(key, frame):
                    if frame.status in RETRY_STATUSES:
                        await trio.sleep(RETRY_DELAY)
                    await self._open_stream(*key)
            return
        msg = decode_server_message(frame, collections=self.collections)
        if isinstance(msg, DcpNoop):
            reply = Response(opcode=Opcode.DCP_NOOP, status=Status.SUCCESS, opaque=msg.opaque)
            await self._send(reply.encode())
            return
        key = self._key(frame)
        vb = key[0]
        self._account(frame.size)
        if isinstance(msg, SnapshotMarker):
            self._on_marker(key, msg)
        elif isinstance(msg, Mutation | Deletion | Expiration):
            self._on_item(key, msg)
        elif isinstance(msg, SystemEvent):
            self._on_system_event(key, msg)
        elif isinstance(msg, SeqnoAdvanced):
            self.state.seqno_advances += 1
            self._advance(key, msg.by_seqno)
        elif isinstance(msg, OsoSnapshot):
            self._on_oso(key, msg)
        elif isinstance(msg, StreamEnd):
            await self._on_stream_end(key, msg)
        self._emit(vb, msg)
        await self._maybe_ack()

    async def _on_stream_end(self, key: StreamKey, msg: StreamEnd) -> None:
        self._open.discard(key)
        self._oso.pop(key, None)
        self.state.stream_ends.append((key[0], int(msg.reason)))
        self.state.position(*key).end_reason = int(msg.reason)
        if msg.reason in FINAL_REASONS:
            self._end(key, int(msg.reason))
        elif self.reconnect or msg.reason != StreamEndReason.CLOSED:
            await trio.sleep(REOPEN_DELAY)  # as java-dcp-client does (50 ms)
            await self._open_stream(*key)

    def _on_system_event(self, key: StreamKey, msg: SystemEvent) -> None:
        self.state.system_events += 1
        cid = self.state.manifest(*key).apply(msg)
        if cid is not None:  # a drop, a create or a flush: what came before is gone
            self.state.cleared[(key[0], cid)] = msg.by_seqno
        # a system event holds a seqno of the snapshot like an item (and may end it)
        self._advance(key, msg.by_seqno)

    def _advance(self, key: StreamKey, seqno: int) -> None:
        """The stream received ``seqno`` without a document (a system event, or a
        SEQNO_ADVANCED): a position it may resume from; it completes the snapshot when
        it is the snapshot's end (or lies past it)."""
        if key in self._oso:
            self._oso[key] = max(self._oso[key], seqno)
            return
        pos = self.state.position(*key)
        pos.seqno = seqno
        snap = self._snap.get(key)
        if snap is None or seqno >= snap[1]:
            pos.snap_start = pos.snap_end = seqno
            self.state.mark_consistent(key[0], seqno, key[1])
        else:
            pos.snap_start, pos.snap_end = snap

    def _on_oso(self, key: StreamKey, msg: OsoSnapshot) -> None:
        """OSO start: hold the position until the end; OSO end: the highest seqno
        received is where the stream resumes, and a consistent point (oso_snapshot.md)."""
        if msg.flags & OsoSnapshotFlag.START:
            self._oso[key] = self.state.position(*key).seqno
        elif msg.flags & OsoSnapshotFlag.END and key in self._oso:
            high = self._oso.pop(key)
            pos = self.state.position(*key)
            pos.seqno = pos.snap_start = pos.snap_end = high
            self._snap.pop(key, None)
            self.state.mark_consistent(key[0], high, key[1])

    def _on_marker(self, key: StreamKey, msg: SnapshotMarker) -> None:
        self.state.markers += 1
        if key in self._oso:
            self.state.violations.append(f"stream {key}: snapshot marker inside an OSO snapshot")
        self._snap[key] = (msg.start_seqno, msg.end_seqno)

    def _on_item(self, key: StreamKey, msg: Mutation | Deletion | Expiration) -> None:
        vb, sid = key
        cid = msg.collection_id or 0
        deleted = not isinstance(msg, Mutation)
        versions = self.state.versions.setdefault((cid, msg.key), [])
        versions.append(Version(vb, msg.by_seqno, msg.value, deleted, msg.rev_seqno, msg.cas, sid))
        self.state.items += 1
        if key in self._oso:  # key order, no marker: the position waits for the end
            self._oso[key] = max(self._oso[key], msg.by_seqno)
            return
        pos = self.state.position(vb, sid)
        snap = self._snap.get(key)
        if snap is None or not snap[0] <= msg.by_seqno <= snap[1]:
            self.state.violations.append(
                f"vb {vb}{_sid_text(sid)} seqno {msg.by_seqno} outside marker {snap}"
            )
        elif msg.by_seqno <= pos.seqno:
            self.state.violations.append(
                f"vb {vb}{_sid_text(sid)} seqno {msg.by_seqno} not above {pos.seqno}"
            )
        pos.seqno = msg.by_seqno
        if snap is not None:
            pos.snap_start, pos.snap_end = snap
            if msg.by_seqno == snap[1]:
                pos.snap_start = pos.snap_end = msg.by_seqno
                self.state.mark_consistent(vb, msg.by_seqno, sid)

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
        self._oso.clear()  # an OSO snapshot cut short resumes from before its start
        self._stream = stream = await self._connect()
        try:
            self.connects += 1
            await self._bootstrap()
            for vb in self.vbuckets:
                await self._open_streams(vb)
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

        Streams that ended for good stay ended (``finished`` is set once all have).
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


def _sid_text(sid: int | None) -> str:
    return "" if sid is None else f" sid {sid}"


def _check_streams(streams: list[StreamFilter], collections: bool) -> list[StreamFilter]:
    """The consumer's filters, checked: see ``DcpConsumer``."""
    sids = [spec.sid for spec in streams]
    if any(sid is None for sid in sids) and any(sid is not None for sid in sids):
        raise ValueError("with stream-ids every stream needs one (enable_stream_id)")
    if len(set(sids)) != len(sids):
        raise ValueError(f"streams of one vbucket need distinct stream-ids: {sids}")
    if not collections and any(not s.passes_through or s.sid is not None for s in streams):
        raise ValueError("collection filters and stream-ids need collections=True")
    return streams
