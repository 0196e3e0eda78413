"""mockdcp's reference DCP consumer: follows the protocol exactly, on trio.

The protocol is ``ConsumerCore`` (``_core.py``, no I/O); ``DcpConsumer`` here is its trio
driver: it connects, authenticates, sends what the core makes and feeds it what it reads.

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
  (the vbucket is moving or warming up; java-dcp-client retries these too), waiting
  twice as long after each refusal in a row (0.1 s, 0.2 s, ... up to 1 s);
* a stream request answered KEY_EEXISTS: the stream is already open on the connection
  and goes on (java-dcp-client's ``DcpChannel.openStream`` takes it as a success);
* DCP_NOOP answered, buffer acks sent at half the window;
* a reconnect refused AUTH_ERROR (its password changed, its user deleted) is
  reported and tried again with the same back-off: the node dropped nothing, and once
  the credentials are right again it resumes (a refusal at the first login is raised);
* a dropped connection, a frame it cannot decode (the framing can no longer be
  trusted), or a value that contradicts its datatype (flagged JSON, it does not parse;
  a malformed xattr section: ``_core.check_value``) is re-established and every stream
  resumed from before it.

``state`` keeps, per (collection, key), the versions received (so a rollback can undo
them) and per stream (vbucket, stream-id) the position to resume from; ``documents()``
gives the live state a test compares with ``Bucket.oracle()``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

import trio

from mockdcp.client._core import MAX_SEQNO, ConsumerCore, Emit, Reopen, Send
from mockdcp.client._state import (
    AuthenticationFailed,
    CallbackError,
    ConsumerError,
    ConsumerState,
)
from mockdcp.protocol import (
    Frame,
    FrameReader,
    GetClusterConfig,
    GetCollectionId,
    GetScopeId,
    Magic,
    Message,
    RemoteProtocolError,
    Response,
    SaslAuth,
    SaslClient,
    SaslStep,
    SelectBucket,
    Status,
    decode_hello_features,
    decode_id_lookup_extras,
)

if TYPE_CHECKING:
    from mockdcp.client._streams import StreamFilter, StreamKey

log = logging.getLogger("mockdcp.client")

EventCallback = Callable[[int, object], None]


class DcpConsumer:
    """A reference consumer of one mock (or real) node; see the module docstring.

    ``streams``: one ``StreamFilter`` per stream to open on each vbucket (default: one
    pass-through stream). Filters need ``collections``; stream-ids (``sid``) are all or
    none. Raises ``ValueError`` when they are not. ``core``: the protocol to drive
    (default: a ``ConsumerCore`` of these options; a test passes one that breaks a rule).
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
        core: ConsumerCore | None = None,
        sync_writes: bool = False,
        clustermap_notification: bool = False,
        change_streams: bool = False,
    ) -> None:
        self.host, self.port = host, port
        self.user, self.password, self.bucket = user, password, bucket
        self.mechanism = mechanism
        self.core = core or ConsumerCore(
            name=name,
            vbuckets=vbuckets,
            collections=collections,
            buffer_size=buffer_size,
            noop_interval=noop_interval,
            end_seqno=end_seqno,
            state=state,
            reconnect=reconnect,
            open_flags=open_flags,
            stream_flags=stream_flags,
            controls=controls,
            streams=streams,
            sync_writes=sync_writes,
            clustermap_notification=clustermap_notification,
            change_streams=change_streams,
        )
        self.on_event = on_event
        self._connect = connect or self._open_tcp
        self.connects = 0
        #: set once every stream has ended for good (OK, FILTER_EMPTY, ...)
        self.finished = trio.Event()
        self._stream: trio.abc.Stream | None = None
        self._reader = FrameReader()
        self._task_status: trio.TaskStatus[None] | None = None
        #: per stream, when its re-open after a pause is due (trio time), while a session
        #: reads (``_session``); None: not reading (a pause is slept where it comes)
        self._reopens: dict[StreamKey, float] | None = None

    @property
    def state(self) -> ConsumerState:
        """What the consumer holds (``ConsumerState``)."""
        return self.core.state

    @property
    def vbuckets(self) -> list[int]:
        """The vbuckets streamed (every one of the bucket's once bootstrapped, when the
        consumer was given none)."""
        return self.core.vbuckets

    @property
    def streams(self) -> list[StreamFilter]:
        return self.core.streams

    @property
    def stream_ids(self) -> bool:
        """True when the streams carry stream-ids (``enable_stream_id`` is sent)."""
        return self.core.stream_ids

    # -- low level -----------------------------------------------------------------------

    async def _send(self, message: Message | Response) -> None:
        assert self._stream is not None
        await self._stream.send_all(message.encode())

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

    async def _next_frame_by(self, deadline: float) -> Frame | None:
        """The next frame, or None at ``deadline`` (trio time) if none came by then
        (nothing read is lost: a receive cancelled has received nothing)."""
        assert self._stream is not None
        while True:
            frame = self._reader.next_frame()
            if frame is not None:
                return frame
            data = None
            with trio.move_on_at(deadline):
                data = await self._stream.receive_some(256 * 1024)
            if data is None:
                return None
            if not data:
                raise trio.BrokenResourceError("producer closed the connection")
            self._reader.feed(data)

    async def _open_tcp(self) -> trio.abc.Stream:
        return await trio.open_tcp_stream(self.host, self.port)

    async def _call(self, message: Message) -> Frame:
        """Send a request and wait for its response (bootstrap is strictly sequential)."""
        await self._send(message)
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
        core = self.core
        await self._login()
        if core.every_vbucket:
            frame = await self._expect_ok(
                GetClusterConfig(opaque=core.next_opaque()), "GET_CLUSTER_CONFIG"
            )
            core.take_cluster_config(frame.value)
        await self._expect_ok(core.dcp_open(), "DCP_OPEN")
        for control in core.controls():
            frame = await self._call(control)
            if frame.status != Status.SUCCESS and not core.control_refused(
                control.key, frame.status
            ):
                raise ConsumerError(
                    f"control {control.key} failed with status {frame.status:#x}: {frame.value!r}"
                )

    async def _login(self) -> None:
        """HELLO, SASL and SELECT_BUCKET: what any KV connection starts with."""
        hello = await self._expect_ok(self.core.hello(), "HELLO")
        self.core.granted = frozenset(decode_hello_features(hello.value))
        await self._authenticate()
        await self._expect_ok(
            SelectBucket(opaque=self.core.next_opaque(), bucket=self.bucket), "SELECT_BUCKET"
        )

    async def _authenticate(self) -> None:
        client = SaslClient(self.user, self.password, self.mechanism)
        opaque = self.core.next_opaque
        frame = await self._call(
            SaslAuth(opaque=opaque(), mechanism=self.mechanism, payload=client.first())
        )
        while frame.status == Status.AUTH_CONTINUE:
            frame = await self._call(
                SaslStep(
                    opaque=opaque(), mechanism=self.mechanism, payload=client.step(frame.value)
                )
            )
        if frame.status != Status.SUCCESS:
            raise AuthenticationFailed(f"authentication failed with status {frame.status:#x}")
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
                opaque = self.core.next_opaque()
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
        for request in self.core.all_stream_requests():
            await self._send(request)

    def hand_over(self) -> bytearray:
        """Stop reading the connection: the bytes read past the last frame handled, for a
        caller that reads the stream's frames itself from here on (``mockdcp bench``)."""
        self._stream = None
        return self._reader.take_buffered()

    # -- running --------------------------------------------------------------------------

    async def _handle_frame(self, frame: Frame) -> None:
        """Feed ``frame`` to the core and do what it says."""
        for action in self.core.receive(frame):
            if isinstance(action, Send):
                await self._send(action.message)
            elif isinstance(action, Emit):
                self._emit(action.vbucket, action.event)
            elif isinstance(action, Reopen):
                await self._reopen(action)
        if self.core.finished:
            self.finished.set()

    async def _reopen(self, action: Reopen) -> None:
        """Ask for the stream again, now or after its pause. While a session reads, the
        pause is waited for reading on: the consumer goes on answering noops, acking,
        and taking the answers to requests sent before (a ROLLBACK among them), as
        java-dcp-client's scheduled re-open does; a pause slept here would hold every
        stream's frames for it, one pause after another."""
        reopens = self._reopens
        if reopens is not None:
            reopens.pop(action.key, None)
            if action.delay:
                reopens[action.key] = trio.current_time() + action.delay
                return
        elif action.delay:
            await trio.sleep(action.delay)
        await self._send(self.core.stream_request(*action.key))

    async def _reopen_due(self) -> float:
        """Send the re-opens whose pause is over; when the next one is due (or inf)."""
        reopens = self._reopens
        assert reopens is not None
        now = trio.current_time()
        for key, due in sorted(reopens.items(), key=lambda kv: kv[1]):
            if due <= now:
                del reopens[key]
                await self._send(self.core.stream_request(*key))
        return min(reopens.values(), default=math.inf)

    def _emit(self, vb: int, event: object) -> None:
        if self.on_event is not None:
            try:
                self.on_event(vb, event)
            except Exception as exc:
                raise CallbackError(f"on_event raised {exc!r}") from exc

    async def _session(self) -> None:
        self._reader = FrameReader()
        self.core.new_connection()
        self._stream = stream = await self._connect()
        try:
            self.connects += 1
            await self._bootstrap()
            await self.request_streams()
            if self._task_status is not None:
                self._task_status.started()
                self._task_status = None
            self._reopens = {}
            while True:
                frame = await self._next_frame_by(await self._reopen_due())
                if frame is not None:
                    await self._handle_frame(frame)
        finally:
            self._reopens = None  # a new session asks for every stream anew
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
                if not self.core.reconnect or self.connects == 0:  # never reached the producer
                    raise
                log.info("connection lost (%s); resuming", exc)
                await trio.sleep(delay)
                delay = min(delay * 2, 1.0)
            except AuthenticationFailed as exc:
                # refused on a reconnect (the password changed, the user was deleted):
                # reported, and tried again with the same back-off; refused before any
                # streaming, the credentials are wrong and that is the caller's to fix
                if not self.core.reconnect or self._task_status is not None:
                    raise
                log.warning("%s; trying again in %.2fs", exc, delay)
                await trio.sleep(delay)
                delay = min(delay * 2, 1.0)
