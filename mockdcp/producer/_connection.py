"""The byte pump of one KV connection, sans-IO.

Three verbs (h11 style): ``receive_data(bytes, now)`` takes what the socket read;
``data_to_send(now)`` returns what to write (replies first, in request order, then
stream messages under flow control); ``next_deadline()`` says when to call again for
noops and the idle disconnect. The connection never touches a socket or a clock.

Each job lives in a module of its own: every frame goes through ``_dispatch`` (decoding,
admission, the one handler table) to the session, lookup, DCP and document handlers;
handlers answer through ``Replies`` (``_replies``); ``StreamScheduler`` (``_scheduler``)
drains the streams under flow control and holds. A frame that cannot be parsed closes
this connection only (``close_reason`` says why); a handler that raises fails its request
only (``_containment``); replies due when the connection closes are still handed out;
while unsent output is at its limit no more requests are answered (``_output``,
``input_paused``).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import attrs

from mockdcp.producer import events as ev
from mockdcp.producer._access import Access
from mockdcp.producer._backfills import BackfillQueue
from mockdcp.producer._checker_tap import CheckerTap
from mockdcp.producer._containment import contain
from mockdcp.producer._controls import DcpSettings, apply_control
from mockdcp.producer._dispatch import handle_frame
from mockdcp.producer._encoder import ItemEncoder
from mockdcp.producer._faults import Faults
from mockdcp.producer._flow import FlowWindow
from mockdcp.producer._keepalive import Keepalive
from mockdcp.producer._output import DEFAULT_OUTPUT_LIMIT
from mockdcp.producer._registry import StreamRegistry
from mockdcp.producer._replies import Replies
from mockdcp.producer._scheduler import StreamScheduler
from mockdcp.producer._state import (
    ConnectionEvent,
    ConnectionState,
    transition_connection,
)
from mockdcp.protocol import (
    ClusterMapChangeNotification,
    FrameReader,
    HelloFeature,
    RemoteProtocolError,
    StreamEndReason,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Protocol

    from mockdcp.model import Bucket, NodeView, Users
    from mockdcp.producer._checker import CheckerRegistry
    from mockdcp.producer._rejections import Rejections
    from mockdcp.producer._stream import Stream
    from mockdcp.protocol import DcpOpenFlag, Frame, ServerProfile, Status

    class NodeServices(Protocol):
        """What a connection needs of the node that owns it (``Node`` provides it;
        the connection never imports the node)."""

        bucket: Bucket
        users: Users
        #: the node's name in the cluster (the checker counts reconnects per node)
        name: str
        host: str
        #: the server version the node behaves as
        profile: ServerProfile
        idle_timeout: float
        #: the ``reject`` step's rejections pending
        rejections: Rejections

        @property
        def version(self) -> str: ...

        @property
        def view(self) -> NodeView:
            """The bucket as the node holds it: its copies of the vbuckets."""

        @property
        def config_rev(self) -> int: ...
        @property
        def config_epoch(self) -> int: ...

        @property
        def holds(self) -> Mapping[int, int]:
            """vbucket -> seqno: streams send nothing past it until released."""

        @property
        def checkers(self) -> CheckerRegistry:
            """The protocol checkers, one per DCP connection name."""

        def config_bytes(self, host: str | None = None) -> bytes: ...
        def claim_producer_name(self, name: bytes, conn: Connection) -> None: ...
        def forget(self, conn: Connection) -> None: ...
        def record(self, event: ev.ProducerEvent) -> None: ...
        def select_bucket(self, conn: Connection, bucket: str) -> bool: ...


log = logging.getLogger("mockdcp.producer")

#: STREAM_END reasons only a collection-aware connection is sent.
_COLLECTION_END_REASONS = frozenset({StreamEndReason.FILTER_EMPTY, StreamEndReason.LOST_PRIVILEGES})

#: Most bytes one ``data_to_send`` call returns: kv_engine's bound on a connection's
#: send queue (``max_send_queue_size``, 1 MiB: kv_engine daemon/settings.h; a DCP
#: connection steps its producer while the queue holds less, daemon/connection.cc
#: ``processDcpStep``). A write's buffers live until the socket took them all, so a
#: process serving N nodes holds N connections' at once, and faults their pages in again
#: after each heap trim (docs/performance.md: at 4 MiB, 3,700 page faults a pass of
#: 300,000 items from one node, 7,400 from three).
MAX_WRITE = 1 * 1024 * 1024


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

    @classmethod
    def of(cls, conn: Connection) -> ConnectionStatistics:
        return cls(
            conn_id=conn.conn_id,
            name=conn.name.decode(errors="replace"),
            state=conn.state.value,
            streams=len(conn.streams),
            bytes_received=conn.bytes_received,
            bytes_sent=conn.bytes_sent,
            unacked_bytes=conn.flow.unacked,
            acked_bytes=conn.flow.acked,
            buffer_size=conn.settings.buffer_size,
            noops_sent=conn.keepalive.sent,
            noops_answered=conn.keepalive.answered,
            messages_sent=conn.flow.messages,
            acks=conn.flow.acks,
            output_limit=conn.replies.queue.limit,
            unsent_bytes=conn.replies.queue.unsent,
        )


class Connection:
    """The producer state machine of one KV connection (see the module docstring), made
    and owned by ``Node.open_connection``; ``close`` tells the node."""

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
        self.name, self.text_name = b"", ""  # DCP_OPEN's name, and as text (its events')
        #: who the connection is (its user, its SASL exchange) and the privilege re-check
        self.access = Access(node.users, sasl_enabled=certificate_user is None)
        self.streams = StreamRegistry()
        #: its streams' backfills, the bucket's ``backfills_per_connection`` reading the
        #: disk at a time (kv_engine's default: one); a waiting stream's turn marks it
        #: ready (the shell then asks for data to send, as after any change)
        self.backfills: BackfillQueue[Stream] = BackfillQueue(
            node.bucket.backfills_per_connection, on_free=self.streams.mark_ready
        )
        self.keepalive = Keepalive(last_received=now, last_noop=now)
        self.faults = Faults()
        self.flow = FlowWindow()
        self.bytes_received = 0
        self.bytes_sent = 0
        #: the time of the last verb called (replies delayed by a fault count from it)
        self.now = now
        self.opened_at = now
        #: the protocol checker's tap: what it is shown, what it found
        self.tap = CheckerTap(conn_id, lambda: self.text_name, self._record)
        #: an OBSERVE_SEQNO was answered (``SeqnoObserved`` reported once)
        self.observing = False
        self.replies = Replies(self, output_limit)
        self.scheduler = StreamScheduler(
            self.streams, self.flow, lambda: self.node.holds, self.event
        )
        self._reader = FrameReader()
        self._encoder: ItemEncoder | None = None
        #: events of the last ``buffers_to_send``, released by ``data_written``
        self._unwritten: list[ev.ProducerEvent] = []
        self.emit(ev.ConnectionOpened, peer=self.peer_host)
        if certificate_user is not None:  # it cannot change identity with SASL (``_access``)
            self.authenticated(certificate_user)

    def rehome(self, node: NodeServices) -> None:
        """SELECT_BUCKET chose another bucket: ``node`` (that bucket's, on the same data
        node) serves this connection from now on. Only before DCP_OPEN (no stream yet)."""
        self.node = node
        self.backfills = BackfillQueue(
            node.bucket.backfills_per_connection, on_free=self.streams.mark_ready
        )

    # -- the three verbs ---------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview, now: float) -> None:
        """Feed bytes read from the socket; requests are answered into the send queue.

        A frame that cannot be parsed closes the connection (``close_reason`` names the
        field); it never raises.
        """
        if self.closed:
            return
        self.now = now
        self.bytes_received += len(data)
        self.keepalive.received(now)
        self._reader.feed(data)  # never poisoned here: a bad frame closed the connection
        self.process_pending(now)

    def process_pending(self, now: float) -> None:
        """Answer the whole frames received, until the output limit stops it (issue 18:
        the rest wait in the reader until the client drains its replies)."""
        self.now = now
        try:
            while not self.closed and not self.replies.queue.over_limit:
                frame = self._reader.next_frame()
                if frame is None:
                    return
                handle = partial(handle_frame, self, frame, now)
                replies = self.replies
                contain(self.conn_id, frame, handle, replies.owed, partial(replies.respond, frame))
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
        self.now = now
        budget = self.faults.write_budget(now)
        if budget <= 0:
            return []
        self._maybe_noop(now)
        parts = self.replies.queue.take()
        held = self.faults.release_held(now, parts)
        size = sum(map(len, parts))
        if not held and self.state is ConnectionState.DCP_OPEN and self.streams.ready:
            limit = int(min(limit, max(budget, 1)))
            size = self.scheduler.drain(parts, size, limit, self._unwritten)
        if (corruption := self.faults.apply_corruption(parts, 0)) is not None:
            self.tap.corrupted(corruption)
        self.faults.wrote(now, size)
        self.replies.queue.handed_out(size)
        self.bytes_sent += size
        self.tap.handed_out(self._unwritten, now)
        self.tap.tick(now)
        return parts

    def _replies_due(self) -> list[bytes | memoryview]:
        parts = self.replies.queue.take()
        size = sum(map(len, parts))
        self.replies.queue.handed_out(size)
        self.bytes_sent += size
        return parts

    def data_written(self, now: float) -> None:
        """The buffers of the last ``buffers_to_send`` are on the socket: release the
        events that describe them (stream progress, noops sent)."""
        self.replies.queue.written()
        self.tap.handed_out(self._unwritten, now)
        self.tap.written()
        events, self._unwritten = self._unwritten, []
        for event in events:
            if isinstance(event, ev.StreamWritten):
                self.streams.written[(event.vbucket, event.stream_id)] = event.seqno
            self._record(ev.written_at(event, now))

    @property
    def output_limit(self) -> int:
        """Bytes of unsent output past which no more requests are read (issue 18)."""
        return self.replies.queue.limit

    @output_limit.setter
    def output_limit(self, limit: int) -> None:
        self.replies.queue.set_limit(limit)

    @property
    def unsent_bytes(self) -> int:
        """Replies queued plus what the shell took and has not yet written."""
        return self.replies.queue.unsent

    @property
    def input_paused(self) -> bool:
        """True while the shell must not read: unsent output is at the limit. It reads
        again once a write drained it and ``process_pending`` answered what waited."""
        return self.replies.queue.over_limit and not self.closed

    def next_deadline(self) -> float | None:
        """When ``buffers_to_send``/``check_idle`` must run again (noops, the idle
        disconnect, a fault's end), or None."""
        if self.closed:
            return None
        fault = self.faults.deadline(self.now)
        times = [] if fault is None else [fault]
        if self.settings.noop_enabled:
            # nothing may be written (a stall): a noop due goes when writing may resume
            held = None if self.faults.write_budget(self.now) else fault
            times.append(
                self.keepalive.deadline(self.settings.noop_interval, self.node.idle_timeout, held)
            )
        checked = self.tap.deadline()
        if checked is not None:
            times.append(checked)
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
            return bool(self.replies.queue)  # the replies due when it closed
        return bool(self.replies.queue) or (
            self.state is ConnectionState.DCP_OPEN and self.scheduler.can_send()
        )

    def close(self, reason: str) -> None:
        """Mark the connection closed (the shell closes the socket once the replies
        already queued are written) and drop its streams."""
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self.state = transition_connection(self.state, ConnectionEvent.CLOSE)
        self.streams.close_all()
        self.tap.closed_at(self.now)
        self.node.forget(self)
        log.info(
            "connection %d (%s) closed: %s",
            self.conn_id,
            self.name.decode(errors="replace"),
            reason,
        )
        self.emit(ev.ConnectionClosed, reason=reason)

    def push_config(self) -> bool:
        """Push the new cluster config (a server request, magic 0x82) if the client
        negotiated HELLO CLUSTERMAP_CHANGE_NOTIFICATION (the config JSON) or its BRIEF
        form (epoch and revision only), once it selected the bucket (kv_engine
        ``docs/BinaryProtocol.md``, "0x01 Clustermap Change Notification"). True if
        something was queued."""
        brief = HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF in self.features
        full = HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION in self.features
        if self.closed or not (brief or full):
            return False
        if self.state not in (ConnectionState.BUCKET_SELECTED, ConnectionState.DCP_OPEN):
            return False
        notice = ClusterMapChangeNotification(
            opaque=0,
            bucket=self.node.bucket.name,
            epoch=self.node.config_epoch,
            revision=self.node.config_rev,
            config=b"" if brief else self.config_bytes(),
        )
        self.replies.queue.append(notice.encode())
        self.emit(ev.ConfigPushed, revision=notice.revision, brief=brief)
        return True

    def on_vbucket_change(self, vbid: int, *, reset: bool = False) -> bool:
        """The model changed ``vbid``: mark its streams ready, or end them now when its
        copy was ``reset``. True if any."""
        ended = reset and self.scheduler.end_reset_streams(
            self.streams.of_vbucket(vbid), self.replies.queue, self._unwritten
        )
        return self.streams.mark_vbucket_ready(vbid) or ended

    def release(self) -> None:
        """The shell is done with the closed connection: the parts that call back into
        it (replies, scheduler, the checker's tap) let it go, for reference counts to
        free (``mockdcp serve`` runs the cyclic collector seldom: ``test_release.py``)."""
        del self.replies, self.scheduler, self.tap

    def statistics(self) -> ConnectionStatistics:
        return ConnectionStatistics.of(self)

    def _maybe_noop(self, now: float) -> None:
        if not self.settings.noop_enabled:
            return
        noop = self.keepalive.due(now, self.settings.noop_interval)
        if noop is not None:
            self.replies.queue.append(noop)
            self._unwritten.append(self.event(ev.NoopSent, opaque=self.keepalive.opaque))

    # -- events --------------------------------------------------------------------------

    def event(self, kind: type[ev.E], **fields: object) -> ev.E:
        """An event of this connection, now."""
        return kind(
            time=self.now,
            conn_id=self.conn_id,
            name=self.text_name,
            **fields,
        )

    def emit(self, kind: type[ev.ProducerEvent], **fields: object) -> None:
        """Record an event of this connection, now (``event`` and ``_record`` in one)."""
        self.node.record(kind(time=self.now, conn_id=self.conn_id, name=self.text_name, **fields))

    def _record(self, event: ev.ProducerEvent) -> None:
        self.node.record(event)

    # -- the protocol checker ---------------------------------------------------------------

    def watch(self, frame: Frame, now: float) -> None:
        """DCP_OPEN succeeded (``frame``): the checker of the connection's name watches
        it from now on (``CheckerTap.watch``), every reply shown to it."""
        tap, flow, settings = self.tap, self.flow, self.settings
        tap.watch(
            self.node.checkers,
            frame,
            now,
            opened_at=self.opened_at,
            flow=flow,
            settings=settings,
            node=self.node.name,
        )
        if tap.checker is not None:
            self.replies.observe = lambda response: tap.reply(response, self.now)

    # -- what handlers use ------------------------------------------------------------

    @property
    def user(self) -> str | None:
        """The authenticated user (``Access``), None before."""
        return self.access.user

    def authenticated(self, user: str) -> None:
        """The connection is ``user``'s from now on (SASL, or its client certificate)."""
        self.access.user = user
        self.state = transition_connection(self.state, ConnectionEvent.AUTH)
        self.emit(ev.Authenticated, user=user)

    def negotiated(self, features: Iterable[int]) -> None:
        """HELLO granted ``features``: the settings they decide follow them."""
        self.features = frozenset(features)
        self.settings.collections = HelloFeature.COLLECTIONS in self.features
        snappy = {HelloFeature.SNAPPY, HelloFeature.SNAPPY_EVERYWHERE}
        self.settings.snappy = bool(snappy & self.features)

    def bucket_selected(self) -> None:
        """SELECT_BUCKET succeeded."""
        self.state = transition_connection(self.state, ConnectionEvent.SELECT_BUCKET)

    def opened(self, name: bytes, flags: DcpOpenFlag) -> None:
        """DCP_OPEN succeeded: the connection is the producer ``name`` with ``flags``."""
        self.settings.open_flags = flags
        self.name, self.text_name = name, name.decode(errors="replace")
        self.state = transition_connection(self.state, ConnectionEvent.DCP_OPEN)

    def control(self, key: str, value: str) -> Status:
        """DCP_CONTROL ``key`` = ``value`` (``apply_control``, its status); streams
        opened from now on get an encoder of the new settings."""
        self.settings.history_capable = self.node.bucket.storage == "magma"
        status = apply_control(self.settings, key, value, self.node.profile)
        self._encoder = None
        return status

    def observed(self) -> bool:
        """An OBSERVE_SEQNO was answered: True the first time (``SeqnoObserved`` is
        reported once)."""
        first, self.observing = not self.observing, True
        return first

    def config_bytes(self) -> bytes:
        """The cluster config as this client should see it (its address for ``$HOST``)."""
        return self.node.config_bytes(self.peer_host)

    def encoder_for_streams(self) -> ItemEncoder:
        """The encoder of this connection's settings (one for all its streams)."""
        if self._encoder is None:
            self._encoder = ItemEncoder(self.settings)
        return self._encoder

    # -- steps from outside -------------------------------------------------------------

    def end_streams(self, vbid: int, reason: StreamEndReason) -> int:
        """End the live streams of ``vbid`` with ``reason`` (the end_stream step).

        FILTER_EMPTY and LOST_PRIVILEGES exist for collection-aware connections only;
        others get OK instead (kv_engine ``active_stream.cc`` ``getEndStreamStatus``).
        """
        if not self.settings.collections and reason in _COLLECTION_END_REASONS:
            reason = StreamEndReason.OK
        return self.scheduler.end_streams(self.streams.of_vbucket(vbid), reason)

    def holds_released(self) -> None:
        """The node lifted its holds: every stream may send again."""
        self.scheduler.holds_released()

    def privileges_changed(self) -> bool:
        """The user's roles changed: a producer connection without DcpProducer any
        more is shut down; a stream without DcpStream on its data ends at its next
        snapshot marker, one that has it again goes on (``Access.recheck``). True if
        the shell must look at the connection again."""
        if self.closed or self.state is not ConnectionState.DCP_OPEN:
            return False
        losing = self.access.recheck(self.node.bucket, self.streams, self.settings.collections)
        if losing is None:
            self.close("DcpProducer privilege no longer available")
            return True
        return self.scheduler.lose(losing)

    def stall(self, seconds: float) -> None:
        """Write nothing for ``seconds`` (the stall fault)."""
        self.faults.stall(self.now, seconds)

    def throttle(self, rate: float, seconds: float) -> None:
        """Write at most ``rate`` bytes a second for ``seconds`` (the throttle fault)."""
        self.faults.throttle(self.now, rate, seconds)
