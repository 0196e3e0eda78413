"""The reference consumer's protocol, without I/O: messages to send, frames received.

``ConsumerCore`` makes the requests a DCP consumer sends (HELLO, DCP_OPEN, the controls,
the stream requests from where ``ConsumerState`` says each stream is) and takes the frames
the producer sends, one at a time (``receive``), returning what must happen next:
``Send`` a message (a NOOP's answer, a buffer acknowledgement), ``Emit`` an event to the
consumer's callback, ``Reopen`` a stream after a pause. The trio driver
(``mockdcp.client.DcpConsumer``) does the sending, the pausing and the reading; tests feed
frames straight to the core.

The rules it follows are in ``mockdcp.client``'s docstring.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import attrs

from mockdcp.client._bootstrap import (
    OPTIONAL_CONTROLS as OPTIONAL_CONTROLS,
    control_pairs,
    hello_features,
    optional_refusal,
    with_change_streams,
)
from mockdcp.client._routing import (
    OPAQUE_SLOT as OPAQUE_SLOT,
    STREAM_OPAQUE_BASE as STREAM_OPAQUE_BASE,
    StreamRoutes,
)
from mockdcp.client._state import ConsumerError, ConsumerState, StreamRefused, Version
from mockdcp.client._streams import ManifestView, StreamFilter, StreamKey
from mockdcp.client._sync_writes import resolve as resolve_sync_write
from mockdcp.protocol import (
    Abort,
    ClusterMapChangeNotification,
    Commit,
    Datatype,
    DcpBufferAck,
    DcpControl,
    DcpNoop,
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    Deletion,
    Expiration,
    Frame,
    Hello,
    Magic,
    Message,
    Mutation,
    Opcode,
    OsoSnapshot,
    OsoSnapshotFlag,
    Prepare,
    RemoteProtocolError,
    Response,
    SeqnoAdvanced,
    SnapshotFlag,
    SnapshotMarker,
    Status,
    StreamEnd,
    StreamEndReason,
    SystemEvent,
    decode_failover_log,
    decode_server_message,
    split_xattrs,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

log = logging.getLogger("mockdcp.client")

MAX_SEQNO = 0xFFFFFFFFFFFFFFFF
#: Pause before re-opening a stream that ended with a reason other than OK.
REOPEN_DELAY = 0.05
#: Pause before asking again for a stream refused with a status worth retrying; it
#: doubles with each refusal in a row, up to ``MAX_RETRY_DELAY`` (a back-off, as
#: couchbase-jvm-core ``AbstractEndpoint.reconnectDelay`` does for reconnects).
RETRY_DELAY = 0.1
MAX_RETRY_DELAY = 1.0
#: Stream-request statuses that say "not now", not "never".
RETRY_STATUSES = frozenset({Status.NOT_MY_VBUCKET, Status.ETMPFAIL})
#: Stream-request statuses that say the filter names nothing that exists any more (the
#: collections or the scope were dropped while the consumer was away): the stream is
#: over, as after STREAM_END FILTER_EMPTY.
GONE_STATUSES = frozenset({Status.UNKNOWN_COLLECTION, Status.UNKNOWN_SCOPE})
#: every opcode a response may carry (``unknown_response``)
_OPCODES = frozenset(int(op) for op in Opcode)
#: a ``ConsumerState.cleared`` seqno above any: every document of the collection is gone
_AFTER_EVERY_SEQNO = 1 << 64
#: STREAM_END reasons after which the stream is done: the end seqno was reached, the
#: filter became empty, or the connection may no longer read the collections (asking
#: again would only be refused).
FINAL_REASONS = frozenset(
    {StreamEndReason.OK, StreamEndReason.FILTER_EMPTY, StreamEndReason.LOST_PRIVILEGES}
)


@attrs.frozen
class Send:
    """Send ``message`` to the producer now."""

    message: Message | Response


@attrs.frozen
class Emit:
    """Tell the consumer's callback: ``event`` happened on ``vbucket``."""

    vbucket: int
    event: object


@attrs.frozen
class Reopen:
    """Ask for stream ``key`` again (from where it is) after ``delay`` seconds."""

    key: StreamKey
    delay: float


Action = Send | Emit | Reopen


class ConsumerCore:
    """The protocol state of one consumer across its connections; see the module
    docstring. ``streams``: one ``StreamFilter`` per stream to open on each vbucket
    (``ValueError`` for filters without ``collections``, or stream-ids on some only).
    ``vbuckets`` None: every vbucket of the bucket, counted from the cluster map
    (``take_cluster_config``)."""

    def __init__(
        self,
        *,
        name: str = "mockdcp-consumer",
        vbuckets: Iterable[int] | None,
        collections: bool = True,
        buffer_size: int = 20 * 1024 * 1024,
        noop_interval: float = 120.0,
        end_seqno: int = MAX_SEQNO,
        state: ConsumerState | None = None,
        reconnect: bool = True,
        open_flags: int = 0,
        stream_flags: int = 0,
        controls: Iterable[tuple[str, str]] = (),
        streams: Iterable[StreamFilter] = (),
        sync_writes: bool = False,
        clustermap_notification: bool = False,
        change_streams: bool = False,
    ) -> None:
        self.name = name
        #: HELLO asks for cluster config pushes (DUPLEX, CLUSTERMAP_CHANGE_NOTIFICATION
        #: and its BRIEF form); ``on_config_push`` takes them
        self.clustermap_notification = clustermap_notification
        #: the HELLO features the node granted (its HELLO response), once logged in
        self.granted: frozenset[int] = frozenset()
        #: every vbucket of the bucket, counted in the cluster map at bootstrap
        self.every_vbucket = vbuckets is None
        self.vbuckets = [] if vbuckets is None else list(vbuckets)
        self.collections = collections
        self.buffer_size = buffer_size
        self.noop_interval = noop_interval
        self.end_seqno = end_seqno
        self.state = state or ConsumerState()
        self.reconnect = reconnect
        self.open_flags = open_flags
        self.stream_flags = stream_flags
        self.extra_controls = with_change_streams(controls, change_streams)
        #: optional controls the node refused (key -> status): ``control_refused``
        self.refused: dict[str, int] = {}
        #: ``enable_sync_writes`` (and ``consumer_name``) are sent: prepares are held,
        #: delivered when committed, dropped when aborted
        self.sync_writes = sync_writes or any(k == "enable_sync_writes" for k, _ in controls)
        if self.sync_writes and self.stream_ids_asked(streams):
            raise ValueError("sync writes and stream-ids exclude each other (MB-32318)")
        self.streams = _check_streams(list(streams) or [StreamFilter()], collections)
        #: True once every stream has ended for good (OK, FILTER_EMPTY, ...)
        self.finished = False
        self._opaque = 1
        self._unacked = 0
        #: stream-request opaque -> the stream its frames belong to
        self.routes = StreamRoutes()
        #: streams asked for and not ended
        self.open: set[StreamKey] = set()
        self._snap: dict[StreamKey, tuple[int, int]] = {}
        #: the keys each stream's current snapshot carried, or None when its marker says
        #: it may repeat one (MayDuplicateKeys, a change-streams history snapshot)
        self._snap_keys: dict[StreamKey, set[tuple[int, bytes]] | None] = {}
        #: streams inside an OSO snapshot -> the highest seqno received in it
        self._oso: dict[StreamKey, int] = {}
        #: streams refused for now -> refusals in a row (the retry back-off)
        self._refusals: dict[StreamKey, int] = {}

    @staticmethod
    def stream_ids_asked(streams: Iterable[StreamFilter]) -> bool:
        return any(spec.sid is not None for spec in streams)

    @property
    def stream_ids(self) -> bool:
        """True when the streams carry stream-ids (``enable_stream_id`` is sent)."""
        return self.streams[0].sid is not None

    def next_opaque(self) -> int:
        self._opaque += 1
        return self._opaque

    def new_connection(self) -> None:
        """A new connection: nothing unacknowledged, no snapshot under way (an OSO
        snapshot cut short resumes from before its start)."""
        self._unacked = 0
        self._snap.clear()
        self._snap_keys.clear()
        self._oso.clear()

    # -- bootstrap ------------------------------------------------------------------------

    def hello(self) -> Hello:
        """HELLO with what the consumer needs (``_bootstrap.hello_features``)."""
        features = hello_features(
            collections=self.collections, clustermap_notification=self.clustermap_notification
        )
        return Hello(opaque=self.next_opaque(), agent=b"mockdcp-client", features=features)

    def take_cluster_config(self, config: bytes) -> None:
        """GET_CLUSTER_CONFIG's answer: with ``vbuckets`` None, every vbucket it maps."""
        if self.every_vbucket:
            vbucket_map = json.loads(config)["vBucketServerMap"]["vBucketMap"]
            self.vbuckets = list(range(len(vbucket_map)))

    def dcp_open(self) -> DcpOpen:
        flags = DcpOpenFlag.PRODUCER | self.open_flags
        return DcpOpen(opaque=self.next_opaque(), name=self.name.encode(), flags=int(flags))

    def control_refused(self, key: str, status: int) -> bool:
        """A DCP_CONTROL was refused: True if the consumer goes on without it (an
        optional one, ``_bootstrap.optional_refusal``: kept in ``refused``)."""
        if not optional_refusal(key, status):
            return False
        self.refused[key] = status
        return True

    def controls(self) -> list[DcpControl]:
        """The DCP_CONTROLs after DCP_OPEN, in order (``_bootstrap.control_pairs``)."""
        controls = control_pairs(
            name=self.name,
            noop_interval=self.noop_interval,
            buffer_size=self.buffer_size,
            stream_ids=self.stream_ids,
            extra=self.extra_controls,
            sync_writes=self.sync_writes,
        )
        return [DcpControl(opaque=self.next_opaque(), key=k, value=v) for k, v in controls]

    # -- streams --------------------------------------------------------------------------

    def _spec(self, sid: int | None) -> tuple[int, StreamFilter]:
        for slot, spec in enumerate(self.streams):
            if spec.sid == sid:
                return slot, spec
        raise KeyError(f"no stream with stream-id {sid}")

    def stream_request(self, vb: int, sid: int | None = None) -> DcpStreamRequest:
        """The request for stream ``(vb, sid)`` from where it is (the first filter's sid
        when ``sid`` is None and the filters have stream-ids); the stream is open from
        now on."""
        if sid is None:
            sid = self.streams[0].sid
        slot, spec = self._spec(sid)
        pos = self.state.position(vb, sid)
        self.state.manifests.setdefault((vb, sid), ManifestView.for_filter(spec))
        self.open.add((vb, sid))
        return DcpStreamRequest(
            opaque=self.routes.opaque(vb, sid, slot),
            vbucket=vb,
            flags=int(self.stream_flags),
            start_seqno=pos.seqno,
            end_seqno=self.end_seqno,
            vbucket_uuid=pos.uuid,
            snap_start_seqno=pos.snap_start,
            snap_end_seqno=pos.snap_end,
            value=spec.value(),
        )

    def stream_requests(self, vb: int) -> list[DcpStreamRequest]:
        """The requests for every stream of ``vb`` that is not done."""
        return [
            self.stream_request(vb, spec.sid)
            for spec in self.streams
            if not self.state.position(vb, spec.sid).ended
        ]

    def all_stream_requests(self) -> list[DcpStreamRequest]:
        """The requests for every stream of every vbucket that is not done."""
        return [request for vb in self.vbuckets for request in self.stream_requests(vb)]

    def stream_of(self, frame: Frame) -> StreamKey:
        """The stream a frame belongs to (``StreamRoutes.stream_of``)."""
        return self.routes.stream_of(frame)

    # -- receiving ------------------------------------------------------------------------

    def receive(self, frame: Frame) -> list[Action]:
        """Take one frame from the producer; what must happen next, in order.

        Raises ``ConsumerError`` for a stream refused in a way the consumer cannot fix,
        ``RemoteProtocolError`` for a frame it cannot decode."""
        if frame.magic is Magic.RESPONSE:
            if self.routes.is_stream_response(frame):
                return self.on_stream_response(self.stream_of(frame), frame)
            unknown_response(frame)
            return []
        msg = decode_server_message(frame, collections=self.collections)
        if isinstance(msg, ClusterMapChangeNotification):
            # a server request outside the DCP streams: no flow-control bytes, no reply
            # (kv_engine docs/BinaryProtocol.md, "0x01 Clustermap Change Notification")
            self.state.config_pushes += 1
            self.on_config_push(msg)
            return []
        if isinstance(msg, DcpNoop):
            reply = Response(opcode=Opcode.DCP_NOOP, status=Status.SUCCESS, opaque=msg.opaque)
            return [Send(reply)]
        if isinstance(msg, Mutation | Deletion | Expiration | Prepare):
            check_value(msg)  # before anything moves: the resume asks for it again
        key = self.stream_of(frame)
        self._unacked += frame.size
        actions: list[Action] = []
        #: what the callback is told: the message, but for sync writes (below)
        told: object = msg
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
            actions += self._on_stream_end(key, msg)
        elif isinstance(msg, Prepare | Commit | Abort):
            # a commit: its document, as a mutation would be; a prepare or an abort:
            # nothing (an uncommitted value is never delivered)
            told = self._on_sync_write(key, msg)
        if told is not None:
            actions.append(Emit(key[0], told))
        ack = self.buffer_ack()
        if ack is not None:
            actions.append(Send(ack))
        return actions

    def on_config_push(self, notice: ClusterMapChangeNotification) -> None:
        """A new cluster config was pushed (its revision; the config itself unless
        brief). One connection has nothing to do with it; ``ClusterConsumer`` reads
        the map again."""

    def buffer_ack(self) -> DcpBufferAck | None:
        """The buffer acknowledgement due (at half the window), if one is."""
        if self.buffer_size and self._unacked >= self.buffer_size // 2:
            nbytes, self._unacked = self._unacked, 0
            return DcpBufferAck(opaque=0, nbytes=nbytes)
        return None

    def on_stream_response(self, key: StreamKey, frame: Frame) -> list[Action]:
        """The answer to a stream request: accepted (the failover log kept), rolled back
        and asked again, asked again later, or over (its filter names nothing left)."""
        vb, sid = key
        pos = self.state.position(vb, sid)
        refusals = self._refusals.pop(key, 0)
        if frame.status == Status.SUCCESS:
            pos.failover_log = list(decode_failover_log(frame.value))
            if pos.failover_log:
                pos.uuid = pos.failover_log[0][0]
            return []
        if frame.status == Status.KEY_EEXISTS and key in self.open:
            return self.on_already_open(key)
        self.open.discard(key)
        if frame.status == Status.ROLLBACK:
            seqno = int.from_bytes(frame.value[:8], "big")
            self.state.roll_back(vb, seqno, sid)
            return [Emit(vb, ("rollback", seqno)), Reopen(key, 0.0)]
        if frame.status in RETRY_STATUSES:
            log.info("stream request for vbucket %d: status %#x; retrying", vb, frame.status)
            self._refusals[key] = refusals + 1
            return [Reopen(key, min(RETRY_DELAY * 2**refusals, MAX_RETRY_DELAY))]
        spec = self.streams[self._spec(sid)[0]]
        if frame.status in GONE_STATUSES and not spec.passes_through:
            log.info("stream %s: its filter names nothing left (%#x); done", key, frame.status)
            # its drop events may have been purged while the consumer was away: what it
            # has of the filter's collections in this vbucket is gone
            for cid in spec.collections_in(self.state.manifests.get(key)):
                self.state.cleared[(vb, cid)] = _AFTER_EVERY_SEQNO
            self._end(key, int(frame.status))
            return [Emit(vb, StreamRefused(vbucket=vb, stream_id=sid, status=int(frame.status)))]
        raise ConsumerError(
            f"stream request for vbucket {vb}{_sid_text(sid)} failed: status {frame.status:#x}"
        )

    def on_already_open(self, key: StreamKey) -> list[Action]:
        """KEY_EEXISTS: the connection has a live stream ``key`` (kv_engine
        ``DcpProducer::streamRequest``, ``engines/ep/src/dcp/producer.cc``), whose
        frames go on (same opaque): it stays open, nothing asked again, as
        java-dcp-client's ``DcpChannel.openStream`` takes it ("Stream already open")."""
        log.warning("stream request for %s: KEY_EEXISTS, the stream is already open", key)
        return []

    def _end(self, key: StreamKey, reason: int) -> None:
        """Stream ``key`` is done: it is not asked for again, even after a reconnect."""
        pos = self.state.position(*key)
        pos.ended, pos.end_reason = True, reason
        every = (
            self.state.position(vb, spec.sid).ended for vb in self.vbuckets for spec in self.streams
        )
        if all(every):
            self.finished = True

    def _on_stream_end(self, key: StreamKey, msg: StreamEnd) -> list[Action]:
        self.open.discard(key)
        self._oso.pop(key, None)
        self.state.stream_ends.append((key[0], int(msg.reason)))
        self.state.position(*key).end_reason = int(msg.reason)
        if msg.reason in FINAL_REASONS:
            self._end(key, int(msg.reason))
        elif self.reconnect or msg.reason != StreamEndReason.CLOSED:
            return [Reopen(key, REOPEN_DELAY)]  # as java-dcp-client does (50 ms)
        return []

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
        # kv_engine docs/dcp/documentation/commands/snapshot-marker.md: without
        # MayDuplicateKeys (0x20) a snapshot's keys are unique; with it (a history
        # snapshot of a change-streams connection) every revision may come, in order
        dup = msg.flags & SnapshotFlag.MAY_CONTAIN_DUPLICATE_KEYS
        self._snap_keys[key] = None if dup else set()

    def _on_sync_write(
        self, key: StreamKey, msg: Prepare | Commit | Abort
    ) -> Mutation | Deletion | None:
        """A durable write (``_sync_writes``): a prepare is held, never delivered; its
        commit delivers the held document at the commit's seqno; an abort drops it.
        Each takes a seqno of the snapshot."""
        document, seqno = resolve_sync_write(self.state, key, msg)
        if document is None:
            self._advance(key, seqno)
        else:
            self._on_item(key, document)
        return document

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
        seen = self._snap_keys.get(key)
        if seen is not None:
            if (cid, msg.key) in seen:
                self.state.violations.append(
                    f"vb {vb}{_sid_text(sid)} key {msg.key!r} twice in snapshot {snap} "
                    "without MayDuplicateKeys"
                )
            seen.add((cid, msg.key))
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


def unknown_response(frame: Frame) -> None:
    """``RemoteProtocolError`` (field ``opcode``) for a response whose opcode no command
    has: a response carries the opcode of the request it answers (kv_engine
    ``docs/BinaryProtocol.md``, "Response header"), so this one answers nothing the
    consumer can name, and may be the answer to one of its stream requests (with the
    failover log it resumes by). Ignored, the stream runs on with vbucket uuid 0 and
    its resume is refused (explore --seed 39, schedule 5092: ``corrupt: opcode`` on a
    stream request's answer, then a resume from seqno 3 with uuid 0). As a frame it
    cannot decode: the driver reconnects and asks for every stream again; java-dcp-client
    closes the connection on a response it cannot match (``DcpMessageHandler``)."""
    if frame.opcode not in _OPCODES:
        raise RemoteProtocolError(
            f"a response with opcode {frame.opcode:#04x}, which no command has "
            f"(opaque {frame.opaque:#x})",
            field="opcode",
        )


def check_value(msg: Mutation | Deletion | Expiration | Prepare) -> None:
    """``RemoteProtocolError`` (field ``value``) for a value that contradicts its
    datatype: flagged JSON, its body (past the xattrs, when flagged XATTR) does not
    parse as JSON, or its xattr section is malformed. kv_engine
    ``include/mcbp/protocol/datatype.h``: JSON means the value "is JSON" and XATTR that
    it starts with the xattr section (``docs/Document.md``); a consumer that takes such
    a value as a document holds bytes the bucket never had. It is a protocol error, as
    a bad frame is: the driver reconnects and resumes before it (issue 45). A value
    flagged SNAPPY is not looked into (the consumer never negotiates compression)."""
    datatype = Datatype(msg.datatype)
    if Datatype.SNAPPY in datatype or not datatype & (Datatype.JSON | Datatype.XATTR):
        return
    body = bytes(msg.value)
    if Datatype.XATTR in datatype:
        _, body = split_xattrs(body)
    if Datatype.JSON not in datatype:
        return
    try:
        json.loads(body)
    except ValueError:
        raise RemoteProtocolError(
            f"vb {msg.vbucket} seqno {msg.by_seqno} key {bytes(msg.key)!r}: the value is "
            "flagged JSON but does not parse as JSON",
            field="value",
        ) from None


def _sid_text(sid: int | None) -> str:
    return "" if sid is None else f" sid {sid}"


def _check_streams(streams: list[StreamFilter], collections: bool) -> list[StreamFilter]:
    """The consumer's filters, checked: see ``ConsumerCore``."""
    sids = [spec.sid for spec in streams]
    if any(sid is None for sid in sids) and any(sid is not None for sid in sids):
        raise ValueError("with stream-ids every stream needs one (enable_stream_id)")
    if len(set(sids)) != len(sids):
        raise ValueError(f"streams of one vbucket need distinct stream-ids: {sids}")
    if not collections and any(not s.passes_through or s.sid is not None for s in streams):
        raise ValueError("collection filters and stream-ids need collections=True")
    return streams
