"""The sans-IO producer side of one KV connection.

Three verbs (h11 style): ``receive_data(bytes, now)`` takes what the socket read;
``data_to_send(now)`` returns what to write (responses first, in request order, then
stream messages under flow control); ``next_deadline()`` says when to call again for
noops and the idle disconnect. The connection never touches a socket or a clock.

A frame that cannot be parsed closes this connection only (``close_reason`` says why);
a request with a bad shape gets EINVAL; an unknown opcode gets UNKNOWN_COMMAND; commands
out of order get the status a real node gives (``_admission``). Without HELLO XERROR the
statuses EACCESS, NO_BUCKET and DCP_STREAMID_INVALID disconnect instead (kv_engine
``Connection::remapErrorCode``).
A handler that raises fails its request only (``_containment``); replies due when the
connection closes are still handed out; while unsent output is at its limit no more
requests are answered (``_output``, ``input_paused``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp._errors import RemoteProtocolError
from mockdcp._numpy import load_numpy
from mockdcp.producer import _events as ev, _lookups as lookups
from mockdcp.producer._admission import admission_status
from mockdcp.producer._containment import contain
from mockdcp.producer._controls import DcpSettings, apply_control
from mockdcp.producer._documents import HANDLERS as DOCUMENT_HANDLERS
from mockdcp.producer._encoder import ItemEncoder
from mockdcp.producer._faults import Faults
from mockdcp.producer._flow import FlowWindow
from mockdcp.producer._keepalive import Keepalive
from mockdcp.producer._output import DEFAULT_OUTPUT_LIMIT, OutputQueue
from mockdcp.producer._registry import StreamRegistry
from mockdcp.producer._state import (
    ConnectionEvent,
    ConnectionState,
    transition_connection,
)
from mockdcp.producer._stream import Stream
from mockdcp.producer._stream_request import StreamRequestDecision, decide_stream_request
from mockdcp.protocol import (
    Datatype,
    DcpAddStream,
    DcpBufferAck,
    DcpCloseStream,
    DcpControl,
    DcpGetFailoverLog,
    DcpOpen,
    DcpOpenFlag,
    DcpSeqnoAcknowledged,
    DcpStreamRequest,
    Frame,
    FrameReader,
    GetAllVbSeqnos,
    GetClusterConfig,
    GetCollectionId,
    GetCollectionsManifest,
    GetErrorMap,
    GetScopeId,
    Hello,
    HelloFeature,
    Magic,
    Noop,
    ObserveSeqno,
    Opcode,
    Response,
    SaslAuth,
    SaslListMechs,
    SaslStep,
    SelectBucket,
    Status,
    StreamEndReason,
    Version,
    decode_client_message,
    encode_failover_log,
    encode_hello_features,
    encode_rollback_value,
    error_map,
)
from mockdcp.protocol._document_frame import stream_frame_seqno, stream_item_seqno

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Protocol

    from mockdcp.model import Bucket, VBucket
    from mockdcp.producer._stream import Chunk
    from mockdcp.protocol import SaslResult, SaslServer

    class NodeServices(Protocol):
        """What a connection needs of the node that owns it (``Node`` provides it;
        the connection never imports the node)."""

        bucket: Bucket
        users: Mapping[str, str]
        host: str
        version: str
        idle_timeout: float
        config_rev: int
        config_epoch: int

        @property
        def holds(self) -> Mapping[int, int]:
            """vbucket -> seqno: streams send nothing past it until released."""

        def config_bytes(self, host: str | None = None) -> bytes: ...
        def claim_producer_name(self, name: bytes, conn: Connection) -> None: ...
        def forget(self, conn: Connection) -> None: ...
        def record(self, event: ev.ProducerEvent) -> None: ...
        def take_rejection(self, opcode: int, vbucket: int | None) -> Status | None: ...


log = logging.getLogger("mockdcp.producer")

#: HELLO features a current node grants (kv_engine ``hello_packet_executor.cc``).
#: DUPLEX-dependent cluster-map notifications are not granted: mockdcp does not push maps,
#: so clients keep polling.
SUPPORTED_FEATURES = frozenset(
    {
        HelloFeature.TCP_NODELAY,
        HelloFeature.MUTATION_SEQNO,
        HelloFeature.XATTR,
        HelloFeature.XERROR,
        HelloFeature.SELECT_BUCKET,
        HelloFeature.SNAPPY,
        HelloFeature.JSON,
        HelloFeature.DUPLEX,
        HelloFeature.ALT_REQUEST_SUPPORT,
        HelloFeature.SYNC_REPLICATION,
        HelloFeature.COLLECTIONS,
        HelloFeature.SNAPPY_EVERYWHERE,
        HelloFeature.PRESERVE_TTL,
        HelloFeature.SUBDOC_CREATE_AS_DELETED,
        HelloFeature.SUBDOC_REPLACE_BODY_WITH_XATTR,
        HelloFeature.SUBDOC_REPLICA_READ,
        HelloFeature.GET_CLUSTER_CONFIG_WITH_KNOWN_VERSION,
        HelloFeature.DEDUPE_NOT_MY_VBUCKET_CLUSTERMAP,
        HelloFeature.SUBDOC_ALLOW_REPLICA_READ_ON_DELETED_DOCUMENTS,
        HelloFeature.SUBDOC_BINARY_XATTR,
        HelloFeature.DCP_SKIP_DELETES_IN_INITIAL_BACKFILL,
    }
)

#: kv_engine ``Connection::remapErrorCode``: statuses that disconnect a connection without
#: XERROR.
XERROR_ONLY = frozenset({Status.EACCESS, Status.NO_BUCKET, Status.DCP_STREAMID_INVALID})

#: STREAM_END reasons only a collection-aware connection is sent.
_COLLECTION_END_REASONS = frozenset({StreamEndReason.FILTER_EMPTY, StreamEndReason.LOST_PRIVILEGES})

#: DCP_OPEN flags a producer accepts (kv_engine ``dcp_open_validator``).
_OPEN_FLAGS_OK = (
    DcpOpenFlag.PRODUCER
    | DcpOpenFlag.INCLUDE_XATTRS
    | DcpOpenFlag.NO_VALUE
    | DcpOpenFlag.INCLUDE_DELETE_TIMES
    | DcpOpenFlag.NO_VALUE_WITH_UNDERLYING_DATATYPE
    | DcpOpenFlag.INCLUDE_DELETED_USER_XATTRS
    | DcpOpenFlag.SKIP_DELETES_IN_INITIAL_BACKFILL
)

#: Most bytes one ``data_to_send`` call returns: keeps each write bounded.
MAX_WRITE = 4 * 1024 * 1024


@attrs.frozen(kw_only=True)
class ConnectionStatistics:
    """A snapshot of one connection's counters."""

    conn_id: int
    name: str
    state: str
    streams: int
    bytes_received: int
    bytes_sent: int
    unacked_bytes: int
    acked_bytes: int
    buffer_size: int
    noops_sent: int
    noops_answered: int
    #: stream messages sent (mutations, markers, stream ends...) and buffer acks received
    messages_sent: int = 0
    acks: int = 0
    #: issue 18: bytes of unsent output past which the connection is not read
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    #: replies queued plus bytes handed to the socket and not yet written
    unsent_bytes: int = 0


class Connection:
    """The producer state machine of one KV connection (see the module docstring).

    Created by ``Node.open_connection``, which owns it; ``close`` tells the node.
    """

    def __init__(
        self,
        node: NodeServices,
        *,
        conn_id: int,
        now: float,
        peer_host: str = "",
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        certificate_user: str | None = None,
    ) -> None:
        self.node = node
        self.conn_id = conn_id
        self.peer_host = peer_host or node.host
        self.state = ConnectionState.CONNECTED
        self.closed = False
        self.close_reason: str | None = None
        self.features: frozenset[int] = frozenset()
        self.settings = DcpSettings()
        self.name = b""
        self.user: str | None = None
        self.streams = StreamRegistry()
        self.keepalive = Keepalive(last_received=now, last_noop=now)
        self.faults = Faults()
        self.flow = FlowWindow()
        self.bytes_received = 0
        self.bytes_sent = 0
        self._reader = FrameReader()
        self._sasl_server: SaslServer | None = None
        self._out = OutputQueue(output_limit)
        self._encoder: ItemEncoder | None = None
        self._now = now
        #: events of the last ``buffers_to_send``, released by ``data_written``
        self._unwritten: list[ev.ProducerEvent] = []
        #: (vbucket, seqno) holds already reported as reached
        self._reached: set[tuple[int, int]] = set()
        #: False once a TLS client certificate authenticated the connection: it cannot
        #: change its identity with SASL (kv_engine ``Connection::tryAuthUserFromX509Cert``)
        self.sasl_enabled = True
        self._emit(ev.ConnectionOpened, peer=self.peer_host)
        if certificate_user is not None:
            self._authenticated(certificate_user)
            self.sasl_enabled = False

    # -- the three verbs ---------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview, now: float) -> None:
        """Feed bytes read from the socket; requests are answered into the send queue.

        A frame that cannot be parsed closes the connection (``close_reason`` names the
        field); it never raises.
        """
        if self.closed:
            return
        self._now = now
        self.bytes_received += len(data)
        self.keepalive.received(now)
        self._reader.feed(data)  # never poisoned here: a bad frame closed the connection
        self.process_pending(now)

    def process_pending(self, now: float) -> None:
        """Answer the whole frames received, until the output limit stops it (issue 18:
        the rest wait in the reader until the client drains its replies)."""
        self._now = now
        try:
            while not self.closed and not self._out.over_limit:
                frame = self._reader.next_frame()
                if frame is None:
                    return
                handle = partial(self._handle_frame, frame, now)
                contain(self.conn_id, frame, handle, self._replies, partial(self._respond, frame))
        except RemoteProtocolError as exc:
            where = f" (field {exc.field})" if exc.field else ""
            self.close(f"malformed frame{where}: {exc}")

    def data_to_send(self, now: float, limit: int = MAX_WRITE) -> bytes | memoryview:
        """Everything ready to write now, at most about ``limit`` bytes (empty if none).
        Counts as written (``data_written``) at once: for callers without a socket."""
        parts = self.buffers_to_send(now, limit)
        self.data_written(now)
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)

    def buffers_to_send(self, now: float, limit: int = MAX_WRITE) -> list[bytes | memoryview]:
        """``data_to_send`` as the list of buffers it joins, for a gathering write
        (``sendmsg``) that spares the copy. The buffers are never written again. Call
        ``data_written`` once they are all on the socket (``unsent_bytes`` counts them
        until then). A closed connection still hands out the replies that were due when
        it closed (issue 18), then nothing."""
        if self.closed:
            return self._replies_due()
        self._now = now
        budget = self.faults.write_budget(now)
        if budget <= 0:
            return []
        self._maybe_noop(now)
        parts = self._out.take()
        held = self.faults.release_held(now, parts)
        size = sum(map(len, parts))
        if not held and self.state is ConnectionState.DCP_OPEN and self.streams.ready:
            size = self._drain_streams(parts, size, int(min(limit, max(budget, 1))))
        self.faults.apply_corruption(parts, 0)
        self.faults.wrote(now, size)
        self._out.handed_out(size)
        self.bytes_sent += size
        return parts

    def _replies_due(self) -> list[bytes | memoryview]:
        parts = self._out.take()
        size = sum(map(len, parts))
        self._out.handed_out(size)
        self.bytes_sent += size
        return parts

    def data_written(self, now: float) -> None:
        """The buffers of the last ``buffers_to_send`` are on the socket: release the
        events that describe them (stream progress, noops sent)."""
        self._out.written()
        events, self._unwritten = self._unwritten, []
        for event in events:
            if isinstance(event, ev.StreamWritten):
                self.streams.written[(event.vbucket, event.stream_id)] = event.seqno
            self._record(attrs.evolve(event, time=now))

    def _replies(self) -> int:
        """Replies queued or held back by a fault (``contain`` counts them)."""
        return len(self._out) + len(self.faults.held)

    @property
    def output_limit(self) -> int:
        """Bytes of unsent output past which no more requests are read (issue 18)."""
        return self._out.limit

    @output_limit.setter
    def output_limit(self, limit: int) -> None:
        self._out.set_limit(limit)

    @property
    def unsent_bytes(self) -> int:
        """Replies queued plus what the shell took and has not yet written."""
        return self._out.unsent

    @property
    def input_paused(self) -> bool:
        """True while the shell must not read: unsent output is at the limit. It reads
        again once a write drained it and ``process_pending`` answered what waited."""
        return self._out.over_limit and not self.closed

    def next_deadline(self) -> float | None:
        """When ``buffers_to_send``/``check_idle`` must run again (noops, the idle
        disconnect, a fault's end), or None."""
        if self.closed:
            return None
        times = []
        fault = self.faults.deadline(self._now)
        if fault is not None:
            times.append(fault)
        if self.settings.noop_enabled:
            times.append(
                self.keepalive.deadline(self.settings.noop_interval, self.node.idle_timeout)
            )
        return min(times) if times else None

    def check_idle(self, now: float) -> None:
        """Disconnect when noop is on and nothing arrived for the idle timeout."""
        if self.closed or not self.settings.noop_enabled:
            return
        silent = self.keepalive.idle_for(now, self.node.idle_timeout)
        if silent is not None:
            self.close(f"idle for {silent:.0f}s with noop enabled")

    @property
    def wants_write(self) -> bool:
        """True when ``data_to_send`` would return something right now."""
        if self.closed:
            return bool(self._out)  # the replies due when it closed
        return bool(self._out) or (self.state is ConnectionState.DCP_OPEN and self._can_send())

    def close(self, reason: str) -> None:
        """Mark the connection closed (the shell closes the socket once the replies
        already queued are written) and drop its streams."""
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self.state = transition_connection(self.state, ConnectionEvent.CLOSE)
        self.streams.close_all()
        self.node.forget(self)
        log.info(
            "connection %d (%s) closed: %s",
            self.conn_id,
            self.name.decode(errors="replace"),
            reason,
        )
        self._emit(ev.ConnectionClosed, reason=reason)

    def on_vbucket_change(self, vbid: int) -> bool:
        """The model changed ``vbid``: mark its streams ready. True if any."""
        ended = self._end_reset_streams(self.streams.of_vbucket(vbid))
        return self.streams.mark_vbucket_ready(vbid) or ended

    def _end_reset_streams(self, streams: list[Stream]) -> bool:
        """End, now, the streams whose vbucket's history was cut or whose state changed
        (failover, restart, state change: a new generation; kv_engine
        ``docs/dcp/documentation/failure-scenarios.md``).

        A node ends them when the vbucket changes, not when the stream next reads: the
        STREAM_END(STATE_CHANGED) goes into the response queue at once, so it is written
        before the answer to any later request on this connection (an OBSERVE_SEQNO or
        GET_FAILOVER_LOG that would show the new branch). Rollback-mitigating clients
        rely on that order (java-dcp-client would otherwise release lost writes). The
        end message skips the flow-control wait (one message of overshoot, as flow
        control allows: kv_engine ``docs/dcp/documentation/flow-control.md``) but is
        counted as outstanding like every stream message.
        True if any stream ended.
        """
        ended = False
        for stream in streams:
            # the stream notes the vbucket's generation when it opens (_stream.py)
            if not stream.alive or stream.vb.generation == stream._generation:
                continue
            stream.end(StreamEndReason.STATE_CHANGED, discard_queue=True)
            for chunk in stream.chunks:  # just the STREAM_END: the queue was discarded
                frame = bytes(chunk.buf[chunk.offset : chunk.ends[-1] - chunk.base])
                self._out.append(frame)
                if self.flow.size:
                    self.flow.unacked += len(frame)
            stream.chunks.clear()
            stream.mark_drained()
            self.streams.forget(stream)
            ended = True
        return ended

    def statistics(self) -> ConnectionStatistics:
        return ConnectionStatistics(
            conn_id=self.conn_id,
            name=self.name.decode(errors="replace"),
            state=self.state.value,
            streams=len(self.streams),
            bytes_received=self.bytes_received,
            bytes_sent=self.bytes_sent,
            unacked_bytes=self.flow.unacked,
            acked_bytes=self.flow.acked,
            buffer_size=self.settings.buffer_size,
            noops_sent=self.keepalive.sent,
            noops_answered=self.keepalive.answered,
            messages_sent=self.flow.messages,
            acks=self.flow.acks,
            output_limit=self._out.limit,
            unsent_bytes=self._out.unsent,
        )

    # -- sending stream data under flow control -----------------------------------------

    def _can_send(self) -> bool:
        if not self.flow.open:
            return False
        return any(s.chunks or s.alive for s in self.streams.ready.values())

    def _drain_streams(self, parts: list[bytes | memoryview], size: int, limit: int) -> int:
        """Round-robin over ready streams, taking chunks while the window is open.

        kv_engine ``DcpProducer::BufferLog``: a message may be sent while outstanding <
        buffer size (checked before each message), so the producer overshoots by at most
        one message. A stream of a held vbucket (``node.holds``) sends nothing past the
        hold's seqno.
        """
        quantum = 256 * 1024
        holds = self.node.holds
        ready = self.streams.ready
        while size < limit and ready and self.flow.open:
            progressed = False
            for key, stream in list(ready.items()):
                if not stream.refill():
                    if stream.finished:
                        self.streams.forget(stream)
                    else:
                        ready.pop(key, None)
                    if key in ready:
                        ready.pop(key, None)
                    continue
                hold = holds.get(stream.vbucket)
                stop = None if hold is None else _frames_up_to(stream.chunks[0], hold)
                budget = min(quantum, limit - size)  # a throttle's limit may be small
                taken = self.flow.take(stream.chunks, parts, budget, stop=stop)
                if taken:
                    self._wrote(stream)
                stream.mark_drained()
                size += taken
                progressed |= taken > 0
                if hold is not None:
                    self._check_hold(stream, hold)
                if stream.finished:
                    self.streams.forget(stream)
                if size >= limit or not self.flow.open:
                    break
            if not progressed:
                break
        return size

    def _wrote(self, stream: Stream) -> None:
        """Note the last item of ``stream`` in this write (an event once written)."""
        assert self.flow.last is not None
        seqno = stream_item_seqno(*self.flow.last)
        if seqno is None:
            return
        self._unwritten.append(
            self._event(
                ev.StreamWritten, vbucket=stream.vbucket, stream_id=stream.stream_id, seqno=seqno
            )
        )

    def _check_hold(self, stream: Stream, hold: int) -> None:
        """Report a hold as reached once every frame of the stream up to its seqno has
        been taken: the next queued frame lies past it, or nothing is queued and the
        stream has read past it."""
        if (stream.vbucket, hold) in self._reached:
            return
        if stream.refill():  # the next piece, if one is pending
            chunk = stream.chunks[0]
            start = chunk.ends[chunk.pos - 1] - chunk.base if chunk.pos else 0
            if stream_frame_seqno(chunk.buf, start) <= hold:
                return
        elif stream.last_read_seqno < hold and stream.alive:
            return
        self._reached.add((stream.vbucket, hold))
        flow_bytes = self.flow.acked + self.flow.unacked
        self._unwritten.append(
            self._event(ev.SeqnoWritten, vbucket=stream.vbucket, seqno=hold, flow_bytes=flow_bytes)
        )

    def _maybe_noop(self, now: float) -> None:
        if not self.settings.noop_enabled:
            return
        noop = self.keepalive.due(now, self.settings.noop_interval)
        if noop is not None:
            self._out.append(noop)
            self._unwritten.append(self._event(ev.NoopSent, opaque=self.keepalive.opaque))

    # -- events --------------------------------------------------------------------------

    def _event(self, kind: type[ev.E], **fields: object) -> ev.E:
        return kind(
            time=self._now,
            conn_id=self.conn_id,
            name=self.name.decode(errors="replace"),
            **fields,
        )

    def _emit(self, kind: type[ev.ProducerEvent], **fields: object) -> None:
        self._record(self._event(kind, **fields))

    def _record(self, event: ev.ProducerEvent) -> None:
        self.node.record(event)

    # -- requests ----------------------------------------------------------------------

    def _respond(
        self,
        frame: Frame,
        status: Status = Status.SUCCESS,
        *,
        value: bytes = b"",
        extras: bytes = b"",
        datatype: int = 0,
        context: str | None = None,
        cas: int = 0,
    ) -> None:
        if status in XERROR_ONLY and HelloFeature.XERROR not in self.features:
            self.close(f"{Opcode(frame.opcode).name} refused with {status.name} (no XERROR)")
            return
        if (
            context
            and not value
            and status not in (Status.SUCCESS, Status.ROLLBACK)
            and self._json_enabled
        ):
            value = json.dumps({"error": {"context": context}}).encode()
            datatype = Datatype.JSON
        data = Response(
            opcode=frame.opcode,
            status=status,
            opaque=frame.opaque,
            extras=extras,
            value=value,
            datatype=datatype,
            cas=cas,
        ).encode()
        faults = self.faults
        delay = faults.reply_delay(frame.opcode)
        if delay or faults.held:
            # replies keep their order: one held back holds back those after it
            not_before = max(self._now + delay, faults.held[-1][0] if faults.held else 0.0)
            faults.held.append((not_before, data))
        else:
            self._out.append(data)

    @property
    def _json_enabled(self) -> bool:
        return HelloFeature.JSON in self.features or self.state is ConnectionState.DCP_OPEN

    def _handle_frame(self, frame: Frame, now: float) -> None:
        if frame.magic in (Magic.RESPONSE, Magic.SERVER_RESPONSE, Magic.ALT_RESPONSE):
            self._handle_response(frame)
            return
        if frame.magic not in (Magic.REQUEST, Magic.ALT_REQUEST):
            self.close(f"unexpected magic {int(frame.magic):#04x} from a client")
            return
        try:
            msg = decode_client_message(frame)
        except RemoteProtocolError as exc:
            log.info("connection %d: bad %#04x request: %s", self.conn_id, frame.opcode, exc)
            self._respond(frame, exc.status, context=str(exc))
            return
        status = admission_status(self.state, frame.opcode)
        if status is not None:
            self._respond(frame, status, context=f"{status.name} for this command now")
            return
        rejected = self.node.take_rejection(frame.opcode, frame.vbucket)
        if rejected is Status.NOT_MY_VBUCKET:
            self._not_my_vbucket(frame)
            return
        if rejected is not None:
            self._respond(frame, rejected, context="rejected by a scenario step")
            return
        handler = _HANDLERS.get(type(msg))
        if handler is None:
            self._respond(frame, Status.UNKNOWN_COMMAND)
            return
        handler(self, frame, msg, now)

    def _handle_response(self, frame: Frame) -> None:
        """A consumer's answer to something the producer sent (kv_engine
        ``dcp/producer.cc``, README).

        DCP_NOOP replies clear the pending noop; an unexpected success, or any status a
        producer does not tolerate, disconnects.
        """
        if frame.opcode == Opcode.DCP_NOOP:
            if self.keepalive.answer(frame.opaque):
                self._emit(ev.NoopAnswered, opaque=frame.opaque)
                return
            self.close(f"DCP_NOOP reply with unknown opaque {frame.opaque}")
            return
        tolerated = {Status.SUCCESS, Status.NOT_MY_VBUCKET, 0x0A, 0x0B}
        if frame.opcode == Opcode.DCP_STREAM_END:
            tolerated.add(Status.KEY_ENOENT)
        if frame.status not in tolerated:
            self.close(f"consumer answered {frame.opcode:#04x} with status {frame.status:#06x}")

    # -- bootstrap handlers --------------------------------------------------------------

    def _on_hello(self, frame: Frame, msg: Hello, now: float) -> None:
        asked = list(dict.fromkeys(msg.features))
        notify = {
            HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION,
            HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF,
        }
        if notify & set(asked) and HelloFeature.DUPLEX not in asked:
            self._respond(frame, Status.EINVAL, context="cluster map notifications need DUPLEX")
            return
        granted = sorted({f for f in asked if f in SUPPORTED_FEATURES})
        self.features = frozenset(granted)
        self.settings.collections = HelloFeature.COLLECTIONS in self.features
        self.settings.snappy = bool(
            {HelloFeature.SNAPPY, HelloFeature.SNAPPY_EVERYWHERE} & self.features
        )
        self._respond(frame, value=encode_hello_features(granted))

    def _on_version(self, frame: Frame, msg: Version, now: float) -> None:
        self._respond(frame, value=self.node.version.encode())

    def _on_noop(self, frame: Frame, msg: Noop, now: float) -> None:
        self._respond(frame)

    def _on_error_map(self, frame: Frame, msg: GetErrorMap, now: float) -> None:
        if msg.version < 1:
            self._respond(frame, Status.EINVAL, context="error map version must be >= 1")
            return
        self._respond(frame, value=error_map(min(msg.version, 2)), datatype=Datatype.JSON)

    @property
    def _sasl(self) -> SaslServer:
        if self._sasl_server is None:
            from mockdcp.protocol import SaslServer

            self._sasl_server = SaslServer(self.node.users)
        return self._sasl_server

    def _on_sasl_list(self, frame: Frame, msg: SaslListMechs, now: float) -> None:
        # a certificate-authenticated connection lists none (``getSaslMechanisms``)
        names = self._sasl.mechanisms_string() if self.sasl_enabled else ""
        self._respond(frame, value=names.encode())

    def _on_sasl_auth(self, frame: Frame, msg: SaslAuth, now: float) -> None:
        if not self.sasl_enabled:  # kv_engine ``SaslStartCommandContext::initial``
            self._respond(frame, Status.NOT_SUPPORTED)
            return
        self._sasl_result(frame, self._sasl.start(msg.mechanism, msg.payload))

    def _on_sasl_step(self, frame: Frame, msg: SaslStep, now: float) -> None:
        if not self.sasl_enabled:
            self._respond(frame, Status.NOT_SUPPORTED)
            return
        self._sasl_result(frame, self._sasl.step(msg.mechanism, msg.payload))

    def _sasl_result(self, frame: Frame, result: SaslResult) -> None:
        if result.status == Status.SUCCESS:
            self._authenticated(result.user or "")
        self._respond(frame, result.status, value=result.payload)

    def _authenticated(self, user: str) -> None:
        self.user = user
        self.state = transition_connection(self.state, ConnectionEvent.AUTH)
        self._emit(ev.Authenticated, user=user)

    def _on_select_bucket(self, frame: Frame, msg: SelectBucket, now: float) -> None:
        if msg.bucket != self.node.bucket.name:
            self._respond(frame, Status.KEY_ENOENT, context=f"no bucket {msg.bucket!r}")
            return
        self.state = transition_connection(self.state, ConnectionEvent.SELECT_BUCKET)
        self._respond(frame)

    def _on_cluster_config(self, frame: Frame, msg: GetClusterConfig, now: float) -> None:
        node = self.node
        if (msg.epoch, msg.revision) == (node.config_epoch, node.config_rev):
            self._respond(frame)  # the client has this map (BinaryProtocol.md 0xb5)
            return
        self._respond(frame, value=node.config_bytes(self.peer_host), datatype=Datatype.JSON)

    def _reply(self, frame: Frame, reply: lookups.Reply) -> None:
        self._respond(
            frame,
            reply.status,
            value=reply.value,
            extras=reply.extras,
            datatype=reply.datatype,
            context=reply.context,
        )

    def _on_all_vb_seqnos(self, frame: Frame, msg: GetAllVbSeqnos, now: float) -> None:
        bucket = self.node.bucket
        self._reply(
            frame, lookups.all_vb_seqnos(bucket, msg, collections=self.settings.collections)
        )

    def _on_observe_seqno(self, frame: Frame, msg: ObserveSeqno, now: float) -> None:
        reply = lookups.observe_seqno(self.node.bucket, msg)
        if reply is None:
            self._not_my_vbucket(frame)
        else:
            self._reply(frame, reply)

    def _not_my_vbucket(self, frame: Frame) -> None:
        """NOT_MY_VBUCKET carries the current config, which clients apply (kv_engine
        ``Cookie::sendNotMyVBucket``)."""
        self._respond(
            frame,
            Status.NOT_MY_VBUCKET,
            value=self.node.config_bytes(self.peer_host),
            datatype=Datatype.JSON,
        )

    def _on_manifest(self, frame: Frame, msg: GetCollectionsManifest, now: float) -> None:
        self._reply(frame, lookups.collections_manifest(self.node.bucket))

    def _on_collection_id(self, frame: Frame, msg: GetCollectionId, now: float) -> None:
        self._reply(frame, lookups.collection_id(self.node.bucket, msg))

    def _on_scope_id(self, frame: Frame, msg: GetScopeId, now: float) -> None:
        self._reply(frame, lookups.scope_id(self.node.bucket, msg))

    # -- DCP handlers --------------------------------------------------------------------

    def _on_dcp_open(self, frame: Frame, msg: DcpOpen, now: float) -> None:
        flags = DcpOpenFlag(msg.flags)
        if not flags & DcpOpenFlag.PRODUCER:
            self._respond(frame, Status.NOT_SUPPORTED, context="mockdcp only serves producers")
            return
        problem = _check_open_flags(flags)
        if problem:
            self._respond(frame, Status.EINVAL, context=problem)
            return
        if HelloFeature.UNORDERED_EXECUTION in self.features:
            self._respond(frame, Status.NOT_SUPPORTED, context="unordered execution")
            return
        self.settings.open_flags = flags
        self.name = msg.name
        self.state = transition_connection(self.state, ConnectionEvent.DCP_OPEN)
        self.node.claim_producer_name(msg.name, self)
        self.keepalive.restart(now)
        load_numpy()  # once per process: at connection set-up, not on the first batch
        self._respond(frame)
        self._emit(ev.DcpOpened, flags=int(flags))

    def _on_control(self, frame: Frame, msg: DcpControl, now: float) -> None:
        status = apply_control(self.settings, msg.key, msg.value)
        if msg.key == "connection_buffer_size" and status == Status.SUCCESS:
            self.flow.resize(self.settings.buffer_size)
        if msg.key == "set_noop_interval" or msg.key == "enable_noop":
            self.keepalive.restart(now)
        self._encoder = None  # settings changed: rebuild on next stream
        self._respond(
            frame,
            status,
            context=None if status == Status.SUCCESS else f"control {msg.key}={msg.value}",
        )

    def _encoder_for_streams(self) -> ItemEncoder:
        if self._encoder is None:
            self._encoder = ItemEncoder(self.settings)
        return self._encoder

    def _vbucket_or_nmvb(self, frame: Frame, vbid: int) -> VBucket | None:
        bucket = self.node.bucket
        if vbid >= bucket.num_vbuckets:
            self._not_my_vbucket(frame)
            return None
        return bucket.vbucket(vbid)

    def _on_failover_log(self, frame: Frame, msg: DcpGetFailoverLog, now: float) -> None:
        vb = self._vbucket_or_nmvb(frame, msg.vbucket)
        if vb is not None:
            self._respond(frame, value=encode_failover_log(vb.failover.entries))

    def _on_stream_request(self, frame: Frame, msg: DcpStreamRequest, now: float) -> None:
        def active_stream_exists(sid: int | None) -> bool:
            existing = self.streams.get(msg.vbucket, sid)
            return existing is not None and existing.alive

        decision: StreamRequestDecision = decide_stream_request(
            msg,
            bucket=self.node.bucket,
            settings=self.settings,
            active_stream_exists=active_stream_exists,
        )
        log.info(
            "connection %d stream request vb %d start %d uuid %#x snap [%d,%d] flags %#x -> %s %s",
            self.conn_id,
            msg.vbucket,
            msg.start_seqno,
            msg.vbucket_uuid,
            msg.snap_start_seqno,
            msg.snap_end_seqno,
            msg.flags,
            decision.status.name,
            decision.rollback_seqno if decision.status == Status.ROLLBACK else decision.reason,
        )
        self._emit(
            ev.StreamRequested,
            vbucket=msg.vbucket,
            stream_id=msg.stream_id,
            start_seqno=msg.start_seqno,
            end_seqno=msg.end_seqno,
            vbucket_uuid=msg.vbucket_uuid,
            snap_start_seqno=msg.snap_start_seqno,
            snap_end_seqno=msg.snap_end_seqno,
            flags=msg.flags,
            status=decision.status.name,
            rollback_seqno=(
                decision.rollback_seqno if decision.status == Status.ROLLBACK else None
            ),
        )
        if decision.status == Status.ROLLBACK:
            self._respond(
                frame, Status.ROLLBACK, value=encode_rollback_value(decision.rollback_seqno)
            )
            return
        if decision.status == Status.NOT_MY_VBUCKET:
            self._not_my_vbucket(frame)
            return
        if decision.status != Status.SUCCESS:
            self._respond(
                frame,
                decision.status,
                value=decision.error_body,
                datatype=Datatype.JSON if decision.error_body else 0,
                context=decision.reason,
            )
            return
        vb = self.node.bucket.vbucket(msg.vbucket)
        self._respond(frame, value=encode_failover_log(vb.failover.entries))
        stream = Stream(
            vb=vb,
            opaque=msg.opaque,
            stream_id=decision.stream_id,
            start_seqno=decision.start_seqno,
            end_seqno=decision.end_seqno,
            snap_start_seqno=decision.snap_start_seqno,
            snap_end_seqno=decision.snap_end_seqno,
            encoder=self._encoder_for_streams(),
            cursor_name=f"{self.conn_id}:{msg.vbucket}:{decision.stream_id or 0}",
            collections=decision.collections,
            scope=decision.scope,
            oso=self.settings.oso,
            marker_version=decision.marker_version,
            disk_only=decision.disk_only,
            ignore_purged_tombstones=decision.ignore_purged_tombstones,
            client_purge_seqno=decision.client_purge_seqno,
        )
        self.streams.add(stream)
        self._emit(
            ev.StreamOpened,
            vbucket=msg.vbucket,
            stream_id=decision.stream_id,
            start_seqno=decision.start_seqno,
            end_seqno=decision.end_seqno,
        )

    def _on_close_stream(self, frame: Frame, msg: DcpCloseStream, now: float) -> None:
        if (msg.stream_id is not None) != self.settings.stream_ids:
            self._respond(frame, Status.DCP_STREAMID_INVALID, context="stream-id mismatch")
            return
        stream = self.streams.get(msg.vbucket, msg.stream_id)
        if stream is None or not stream.alive:
            others = self.streams.of_vbucket(msg.vbucket)
            status = (
                Status.DCP_STREAMID_INVALID
                if others and msg.stream_id is not None
                else Status.KEY_ENOENT
            )
            self._respond(frame, status, context="no such stream")
            return
        self._respond(frame)
        if self.settings.stream_end_on_close:
            stream.end(StreamEndReason.CLOSED, discard_queue=stream.state.value == "backfilling")
            self.streams.mark_ready(stream)
        else:
            stream.close()
            self.streams.forget(stream)
        self._emit(ev.StreamClosed, vbucket=msg.vbucket, stream_id=msg.stream_id)

    def _on_buffer_ack(self, frame: Frame, msg: DcpBufferAck, now: float) -> None:
        # No response, ever (kv_engine docs/dcp/documentation/commands/buffer-ack.md;
        # Java drops a connection that gets one).
        excess = self.flow.ack(msg.nbytes)
        if excess:
            log.debug("connection %d acked %d bytes never outstanding", self.conn_id, excess)
        self._emit(ev.BytesAcked, nbytes=msg.nbytes, total=self.flow.acked)

    def _on_add_stream(self, frame: Frame, msg: object, now: float) -> None:
        # README corrections: a producer disconnects on DCP_ADD_STREAM (a consumer opcode)
        self.close("DCP_ADD_STREAM sent to a producer")

    def _on_unsupported(self, frame: Frame, msg: object, now: float) -> None:
        self._respond(frame, Status.NOT_SUPPORTED, context="not supported by a producer")

    # -- steps from outside -------------------------------------------------------------

    def end_streams(self, vbid: int, reason: StreamEndReason) -> int:
        """End the live streams of ``vbid`` with ``reason`` (the end_stream step).

        FILTER_EMPTY and LOST_PRIVILEGES exist for collection-aware connections only;
        others get OK instead (kv_engine ``active_stream.cc`` ``getEndStreamStatus``).
        """
        if not self.settings.collections and reason in _COLLECTION_END_REASONS:
            reason = StreamEndReason.OK
        n = 0
        for stream in self.streams.of_vbucket(vbid):
            if stream.alive:
                stream.end(reason)
                self.streams.mark_ready(stream)
                n += 1
        return n

    def holds_released(self) -> None:
        """The node lifted its holds: every stream may send again."""
        self._reached.clear()
        for stream in self.streams:
            self.streams.mark_ready(stream)

    def stall(self, seconds: float) -> None:
        """Write nothing for ``seconds`` (the stall fault)."""
        self.faults.stall(self._now, seconds)

    def throttle(self, rate: float, seconds: float) -> None:
        """Write at most ``rate`` bytes a second for ``seconds`` (the throttle fault)."""
        self.faults.throttle(self._now, rate, seconds)


def _frames_up_to(chunk: Chunk, seqno: int) -> int:
    """Index (in ``chunk.ends``) of the first frame from ``chunk.pos`` on that lies past
    ``seqno``: the frames of a stream chunk are in seqno order, so a bisection over their
    seqnos, read from the frames themselves, finds it."""
    lo, hi = chunk.pos, len(chunk.ends)
    while lo < hi:
        mid = (lo + hi) // 2
        start = chunk.ends[mid - 1] - chunk.base if mid else 0
        if stream_frame_seqno(chunk.buf, start) <= seqno:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _check_open_flags(flags: DcpOpenFlag) -> str | None:
    """kv_engine ``dcp_open_validator``: the DCP_OPEN flag combinations a producer refuses
    (EINVAL)."""
    if flags & ~_OPEN_FLAGS_OK:
        return f"invalid DCP_OPEN flags {int(flags & ~_OPEN_FLAGS_OK):#x}"
    if flags & DcpOpenFlag.NO_VALUE and flags & DcpOpenFlag.NO_VALUE_WITH_UNDERLYING_DATATYPE:
        return "NO_VALUE and NO_VALUE_WITH_UNDERLYING_DATATYPE are exclusive"
    if flags & DcpOpenFlag.INCLUDE_DELETED_USER_XATTRS and not flags & DcpOpenFlag.INCLUDE_XATTRS:
        return "INCLUDE_DELETED_USER_XATTRS needs INCLUDE_XATTRS"
    return None


_Handler = Callable[[Connection, Frame, Any, float], None]
_HANDLERS: dict[type, _Handler] = {
    Hello: Connection._on_hello,
    Version: Connection._on_version,
    Noop: Connection._on_noop,
    GetErrorMap: Connection._on_error_map,
    SaslListMechs: Connection._on_sasl_list,
    SaslAuth: Connection._on_sasl_auth,
    SaslStep: Connection._on_sasl_step,
    SelectBucket: Connection._on_select_bucket,
    GetClusterConfig: Connection._on_cluster_config,
    GetAllVbSeqnos: Connection._on_all_vb_seqnos,
    ObserveSeqno: Connection._on_observe_seqno,
    GetCollectionsManifest: Connection._on_manifest,
    GetCollectionId: Connection._on_collection_id,
    GetScopeId: Connection._on_scope_id,
    DcpOpen: Connection._on_dcp_open,
    DcpControl: Connection._on_control,
    DcpGetFailoverLog: Connection._on_failover_log,
    DcpStreamRequest: Connection._on_stream_request,
    DcpCloseStream: Connection._on_close_stream,
    DcpBufferAck: Connection._on_buffer_ack,
    DcpAddStream: Connection._on_add_stream,
    DcpSeqnoAcknowledged: Connection._on_unsupported,
}
#: KV document commands: GET, SET, ..., sub-document multi-path (producer/_documents.py)
_HANDLERS.update(DOCUMENT_HANDLERS)
