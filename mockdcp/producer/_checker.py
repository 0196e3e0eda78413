"""A protocol checker on every DCP connection: a sans-IO observer of what the consumer
asks and what the producer sends, reporting each rule the consumer breaks with the frame
that shows it.

``ProtocolChecker`` is the state of one DCP connection name, kept across that name's
connections (consumers reconnect with the same name and resume what they were given on
the last one); the node owns them (``CheckerRegistry``). ``ConnectionChecker`` watches one
connection of the name. Both are fed three verbs, and return the ``Violation`` records of
the rules broken (``_checker_rules``, where each rule and its source is):

* ``request(msg, frame, now)``: a frame from the consumer (a decoded request, or a
  response such as a DCP_NOOP answer with ``msg`` None);
* ``sent(message, now)``: something the producer sent (a ``Response``, or a stream
  message: markers, items, STREAM_END, DCP_NOOP; a ``Frame`` is decoded first);
* ``tick(now)``: time passed (noops unanswered, a full window, re-opens overdue);
  ``deadline()`` says when the next tick could report something.

On a live connection the producer feeds it per stream-level event, never per item: the
stream's snapshot markers (``snapshot``), the last seqno of each write (``written``),
STREAM_ENDs and noops as written, replies as queued; the connection's own flow-control
window and settings are read, not counted again. A checker built without them (unit
tests over recorded frames) counts the stream bytes and applies the controls itself. It
only observes: nothing it does changes what the producer sends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from mockdcp.producer._checker_rules import (
    FINAL_REASONS,
    FRAME_KEPT,
    REOPEN_REASONS,
    CheckerLimits,
    GivenLogs,
    StreamHistory,
    Violation,
    ack_not_late,
    ack_not_stalled,
    ack_within_received,
    control_kept,
    from_nothing,
    no_storm,
    noop_answered,
    reopen_allowed,
    reopened_in_time,
    resume_complete_snapshot,
    resume_not_above_sent,
    resume_snapshot_sent,
    resume_uuid_given,
    resume_within_snapshot,
    rollback_taken,
    stream_id_as_enabled,
    vbucket_in_map,
)
from mockdcp.producer._controls import DcpSettings, apply_control
from mockdcp.producer._faults import Corruption
from mockdcp.producer._flow import FlowWindow
from mockdcp.protocol import (
    DcpBufferAck,
    DcpCloseStream,
    DcpControl,
    DcpGetFailoverLog,
    DcpNoop,
    DcpOpenFlag,
    DcpStreamRequest,
    DocumentMessage,
    Frame,
    Magic,
    Opcode,
    OsoSnapshot,
    OsoSnapshotFlag,
    RemoteProtocolError,
    Response,
    SeqnoAdvanced,
    SnapshotMarker,
    Status,
    StreamEnd,
    StreamEndReason,
    StreamRequestValue,
    SystemEvent,
    decode_client_message,
    decode_server_message,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from mockdcp.protocol import Message

StreamKey = tuple[int, int | None]
#: a producer message kept as the evidence of a violation found later
Evidence = Frame | Response | DcpNoop | StreamEnd | None

#: seconds a tick may come after its deadline and still judge: later, the event loop was
#: held (a busy process, a starved machine), and an answer the consumer sent on time may
#: be unread in the socket, so the rules on time (a noop unanswered, a stream not
#: re-opened, a window not acknowledged) wait this long again, for the reader, once
LATE_TICK = 0.25
#: reconnect gaps and refusal gaps kept per name (twice what a storm needs)
_GAPS_KEPT = 16
#: stream request statuses that say "not now": the consumer retries, and must back off
_RETRY_STATUSES = frozenset({Status.NOT_MY_VBUCKET, Status.ETMPFAIL})
_RESPONSE_MAGICS = frozenset({Magic.RESPONSE, Magic.SERVER_RESPONSE, Magic.ALT_RESPONSE})


def _request_stream_id(msg: DcpStreamRequest) -> int | None:
    """The stream id a request names: the frame info, or the ``"sid"`` of its JSON
    value (kv_engine ``docs/dcp/documentation/commands/stream-request-value.md``), read
    by the producer's own parser (which refuses an oversized or too deeply nested value
    before parsing it); None for a value it refuses."""
    if msg.stream_id is not None or not msg.value:
        return msg.stream_id
    try:
        return StreamRequestValue.parse(msg.value).sid
    except RemoteProtocolError:
        return None


def describe(item: Message | Response | Frame) -> str:
    """A frame in one line: its command and the fields a violation is about."""
    if isinstance(item, Frame):
        frame = item
        try:
            if frame.magic in _RESPONSE_MAGICS:
                item = Response.decode(frame)
            else:
                item = decode_client_message(frame)
        except Exception:  # a summary never fails: show the header
            return f"opcode {frame.opcode:#04x} opaque {frame.opaque:#x}"
    if isinstance(item, Response):
        status = item.status.name if isinstance(item.status, Status) else f"{item.status:#x}"
        return f"{_opcode_name(item.opcode)} response {status} opaque {item.opaque:#x}"
    name = _opcode_name(item.OPCODE)
    if isinstance(item, DcpStreamRequest):
        sid = _request_stream_id(item)
        return (
            f"{name} vb {item.vbucket}{'' if sid is None else f' sid {sid}'} "
            f"start {item.start_seqno} end {item.end_seqno} uuid {item.vbucket_uuid:#x} "
            f"snapshot [{item.snap_start_seqno}, {item.snap_end_seqno}] opaque {item.opaque:#x}"
        )
    if isinstance(item, DcpControl):
        return f"{name} {item.key}={item.value}"
    if isinstance(item, DcpBufferAck):
        return f"{name} {item.nbytes} bytes"
    if isinstance(item, StreamEnd):
        return f"{name} vb {item.vbucket} reason {StreamEndReason(item.reason).name}"
    if isinstance(item, DcpNoop):
        return f"{name} opaque {item.opaque:#x}"
    vbucket = getattr(item, "vbucket", None)
    return f"{name}{'' if vbucket is None else f' vb {vbucket}'} opaque {item.opaque:#x}"


def _opcode_name(opcode: int) -> str:
    try:
        return Opcode(opcode).name
    except ValueError:
        return f"opcode {opcode:#04x}"


def _frame_bytes(item: Evidence | Message) -> bytes:
    if item is None:
        return b""
    try:
        return item.encode()[:FRAME_KEPT]
    except (ValueError, OverflowError):
        return b""


@attrs.define
class _Pending:
    """A request waiting for the producer's answer (by opaque)."""

    msg: DcpStreamRequest | DcpControl | DcpGetFailoverLog
    frame: Frame
    key: StreamKey = (0, None)


class ProtocolChecker:
    """The checker of one DCP connection name: what the name's streams were given,
    across its connections (see the module docstring). ``connect`` starts watching a
    connection of the name."""

    def __init__(
        self,
        name: str,
        *,
        limits: CheckerLimits,
        num_vbuckets: int,
        others: GivenLogs | None = None,
        owing: dict[StreamKey, set[ConnectionChecker]] | None = None,
    ) -> None:
        self.name = name
        self.limits = limits
        self.num_vbuckets = num_vbuckets
        #: the failover logs any name was given (the registry's, shared): a consumer
        #: that reconnects under a new name resumes with what its last connection was
        #: given (java-dcp-client puts a channel id in each connection's name:
        #: ``DcpChannel``'s DCP_OPEN)
        self.others = GivenLogs() if others is None else others
        #: (vbucket, stream id) -> what that stream was given
        self.streams: dict[StreamKey, StreamHistory] = {}
        #: the failover logs the name was given (read as ``others`` are, when a resume
        #: asks: most streams start from nothing, ``from_nothing``), and the last of each
        #: vbucket (``gave``)
        self.logs = GivenLogs(self.others.read)
        self._logs: dict[int, bytes] = {}
        #: the name's live connections
        self.connections: dict[int, ConnectionChecker] = {}
        #: node -> seconds from each of the name's connections to it closing to the next
        #: one opening there, and when the last one there closed: reconnects are counted
        #: per node (``no_storm``: a cluster consumer holds a connection to every node
        #: under one name)
        self.reconnect_gaps: dict[str, list[float]] = {}
        self.last_closed: dict[str, float] = {}
        #: per stream: when its last request was refused for now (NOT_MY_VBUCKET,
        #: ETMPFAIL), and the seconds from each refusal to the next request
        self.refused_at: dict[StreamKey, float] = {}
        self.retry_gaps: dict[StreamKey, list[float]] = {}
        #: violations found, by rule
        self.found: dict[str, int] = {}
        #: called when the name's last live connection closes (the registry's budget)
        self.on_idle: Callable[[ProtocolChecker], None] | None = None
        #: (vbucket, stream id) -> the connections that owe its re-open (``reopened``):
        #: the registry's, shared by every name (a stream asked for again under one
        #: name settles what every name owed for it), else the name's own. A request
        #: finds them at once, not by a walk of every name's connections (200
        #: consumers: 200 names walked for each of 204,800 stream requests)
        self.owing: dict[StreamKey, set[ConnectionChecker]] = {} if owing is None else owing

    def given(self, vbucket: int) -> tuple[int, ...] | None:
        """The uuids of ``vbucket`` this name may resume with: None when it was never
        given a failover log of it with one (not judged), else those it was given and
        those any other name was (see ``others``)."""
        mine = self.logs.uuids(vbucket)
        if mine is None:
            return None
        return mine + (self.others.uuids(vbucket) or ())

    def gave(self, vbucket: int, value: bytes) -> None:
        """A failover log (``value``) of ``vbucket`` was sent to one of this name's
        connections: its uuids are the consumer's to resume with. The same log again
        (every stream of the vbucket until it fails over) adds nothing."""
        if self._logs.get(vbucket) == value:
            return
        self._logs[vbucket] = value
        self.logs.add(vbucket, value)
        self.others.add(vbucket, value)

    def history(self, key: StreamKey) -> StreamHistory:
        history = self.streams.get(key)
        if history is None:
            history = self.streams[key] = StreamHistory()
        return history

    def reopened(self, key: StreamKey) -> None:
        """``key`` was asked for again: the re-open each connection owed for it is made,
        on this name's connections and (through the registry's ``owing``) on every other
        name's: a consumer re-opens a vbucket that moved on its new node's connection,
        which java-dcp-client names apart from the old node's (``DcpChannel``'s DCP_OPEN
        puts a channel id in each name), as ``stream_end.not_reopened`` allows."""
        for conn in self.owing.pop(key, ()):
            conn.settle(key)

    def connect(
        self,
        conn_id: int,
        now: float,
        *,
        opened_at: float | None = None,
        frame: Frame | None = None,
        open_flags: int = 0,
        flow: FlowWindow | None = None,
        settings: DcpSettings | None = None,
        node: str = "",
    ) -> tuple[ConnectionChecker, list[Violation]]:
        """A connection of this name opened (DCP_OPEN ``frame``; the TCP connection
        opened at ``opened_at``) to ``node``. ``flow`` and ``settings``: the connection's
        own window and negotiated settings to read (None: the checker keeps its own from
        what it is fed). Returns its checker and the violations the connection itself
        shows (a reconnect storm: the name's reconnects to the same node, ``no_storm``)."""
        conn = ConnectionChecker(
            self, conn_id, flow=flow, settings=settings, open_flags=open_flags, node=node
        )
        found = []
        closed = self.last_closed.get(node)
        if closed is not None:
            gap = max(0.0, (now if opened_at is None else opened_at) - closed)
            gaps = self.reconnect_gaps.setdefault(node, [])
            gaps.append(gap)
            del gaps[:-_GAPS_KEPT]
            message = no_storm(gaps, self.limits, "reconnects")
            if message is not None:
                gaps.clear()
                found.append(violation("reconnect.storm", message, now, evidence=frame))
        self.connections[conn_id] = conn
        self._count(found)
        return conn, found

    def _count(self, violations: list[Violation]) -> None:
        for v in violations:
            self.found[v.rule] = self.found.get(v.rule, 0) + 1


def violation(
    rule: str,
    message: str,
    now: float,
    *,
    key: StreamKey | None = None,
    evidence: Evidence | Message = None,
) -> Violation:
    """A ``Violation`` of ``rule`` on stream ``key`` shown by ``evidence`` (a frame or
    message)."""
    return Violation(
        rule=rule,
        message=message,
        time=now,
        vbucket=None if key is None else key[0],
        stream_id=None if key is None else key[1],
        frame=_frame_bytes(evidence),
        summary="" if evidence is None else describe(evidence),
    )


def _request_rules(
    msg: DcpStreamRequest,
    sid: int | None,
    stream_ids: bool,
    parent: ProtocolChecker,
    history: StreamHistory | None,
) -> list[tuple[str, str | None]]:
    """What each rule a stream request is judged by says of it (``None``: kept): the
    rules on what the stream was given only when it was given something (none yet, none
    broken), the resume rules only when it resumes (``from_nothing``: a request from
    nothing keeps them all)."""
    checks = [
        ("vbucket.not_in_map", vbucket_in_map(msg, parent.num_vbuckets)),
        ("control.stream_id", stream_id_as_enabled(sid, stream_ids)),
    ]
    if history is not None:
        checks.append(("stream_end.reopened", reopen_allowed(msg, history)))
    if not from_nothing(msg):
        checks += (
            ("resume.range", resume_within_snapshot(msg)),
            ("resume.uuid", resume_uuid_given(msg, parent.given(msg.vbucket))),
        )
        if history is not None:
            checks += (
                ("rollback.ignored", rollback_taken(msg, history)),
                ("resume.above_sent", resume_not_above_sent(msg, history)),
                ("resume.snapshot", resume_snapshot_sent(msg, history)),
                ("resume.complete", resume_complete_snapshot(msg, history)),
            )
    return checks


class ConnectionChecker:
    """The checker of one connection (the module docstring): ``ProtocolChecker.connect``."""

    def __init__(
        self,
        parent: ProtocolChecker,
        conn_id: int,
        *,
        flow: FlowWindow | None = None,
        settings: DcpSettings | None = None,
        open_flags: int = 0,
        node: str = "",
    ) -> None:
        self.parent = parent
        self.conn_id = conn_id
        #: the node the connection is to (reconnects are counted per node)
        self.node = node
        self.limits = parent.limits
        #: the window and settings are the connection's (read only) or kept here
        self._own = flow is None
        self.flow = FlowWindow() if flow is None else flow
        if settings is None:
            settings = DcpSettings(open_flags=DcpOpenFlag(open_flags))
        self.settings = settings
        self.closed = False
        self._pending: dict[int, _Pending] = {}
        #: control key -> the value last set on this connection
        self._controls: dict[str, str] = {}
        #: the outstanding DCP_NOOP: (opaque, written at, the noop, reported or not owed)
        self._noop: tuple[int, float, DcpNoop, bool] | None = None
        #: since when the flow-control window has been full (None: it is not)
        self._full_since: float | None = None
        self._late_acks = 0
        #: the DCP_CONTROL that set the buffer size, and the last acknowledgement
        self._window_frame: Frame | None = None
        self._last_ack: Frame | None = None
        #: streams that ended early and must be re-opened: when, why, the STREAM_END
        self._reopen: dict[StreamKey, tuple[float, StreamEndReason, StreamEnd]] = {}
        #: (vbucket, stream id) -> the highest seqno before an OSO snapshot under way
        self._oso_from: dict[StreamKey, int] = {}
        #: ROLLBACKs answered and not asked again here, whether a damaged frame went out
        self._rolled: dict[StreamKey, int] = {}
        self._torn = self._unframed = False  # ``_unframed``: its length was off
        #: (rule, vbucket, stream id) reported on this connection (each once)
        self._reported: set[tuple[str, int | None, int | None]] = set()
        self._deadline: float | None = None
        #: the deadline a tick came late for, and when it is judged (``LATE_TICK``)
        self._late: float | None = None
        self._grace = 0.0

    # -- the three verbs -------------------------------------------------------------------

    def request(self, msg: Message | Response | None, frame: Frame, now: float) -> list[Violation]:
        """A frame from the consumer: ``msg`` its decoded request (None: decoded here, or
        a response such as a DCP_NOOP answer)."""
        if frame.magic in _RESPONSE_MAGICS:
            noop = self._noop
            if frame.opcode == Opcode.DCP_NOOP and noop is not None and frame.opaque == noop[0]:
                self._noop = None
                self._deadline = None
            return []
        if msg is None:
            try:
                msg = decode_client_message(frame)
            except Exception:  # the producer refuses it: nothing to check
                return []
        if isinstance(msg, DcpStreamRequest):
            return self._stream_request(msg, frame, now)
        if isinstance(msg, DcpBufferAck):
            return self._buffer_ack(msg, frame, now)
        if isinstance(msg, DcpControl | DcpGetFailoverLog):
            self._pending[msg.opaque] = _Pending(msg, frame)
        elif isinstance(msg, DcpCloseStream):
            self.settle((msg.vbucket, msg.stream_id))
        return []

    def sent(self, item: Message | Response | Frame, now: float) -> list[Violation]:
        """Something the producer sent: a response (a stream request's answer, a failover
        log, a control's status), a stream message, or a DCP_NOOP."""
        if isinstance(item, Frame):
            size = item.size
            try:
                if item.magic in _RESPONSE_MAGICS:
                    item = Response.decode(item)
                else:
                    item = decode_server_message(item, collections=False)
            except Exception:  # not a frame the checker can read: not its to judge
                return []
        else:
            size = 0
        if isinstance(item, Response):
            return self.answered(item, now)
        if isinstance(item, DcpNoop):
            self._noop = (item.opaque, now, item, self._unframed)
            self._deadline = None
            return []
        if self._own and self.flow.size:  # stream messages take window space
            self.flow.unacked += size or len(item.encode())
        key: StreamKey = (getattr(item, "vbucket", 0), getattr(item, "stream_id", None))
        if isinstance(item, SnapshotMarker):
            self.snapshot(key[0], key[1], item.start_seqno, item.end_seqno)
        elif isinstance(item, DocumentMessage | SystemEvent | SeqnoAdvanced):
            self.written(key[0], key[1], item.by_seqno)
        elif isinstance(item, OsoSnapshot):
            history = self.parent.history(key)
            if item.flags & OsoSnapshotFlag.START:
                self._oso_from[key] = history.sent_high
                history.oso_high = history.sent_high
            elif key in self._oso_from:
                high = history.oso_high if history.oso_high is not None else history.sent_high
                history.oso_snapshot(self._oso_from.pop(key) + 1, high)
                history.oso_high = None
        elif isinstance(item, StreamEnd):
            try:
                reason = StreamEndReason(item.reason)
            except ValueError:
                return []
            self._stream_end(key, reason, item, now)
        return []

    def tick(self, now: float) -> list[Violation]:
        """Time passed: the rules that fire on time (a noop unanswered, a window full
        and unacknowledged, a stream not re-opened)."""
        flow = self.flow
        if flow.size and not flow.open:
            if self._full_since is None:
                self._full_since = now
                self._deadline = None
        elif self._full_since is not None:
            self._full_since = None
            self._deadline = None
        deadline = self.deadline()
        if deadline is None or now < deadline:
            return []
        if now - deadline > LATE_TICK:
            # the loop ran late (the process was busy): what the consumer sent meanwhile
            # may wait unread in the socket; judge once the reader has had its turn
            if self._late != deadline:
                self._late, self._grace = deadline, now + LATE_TICK
            if now < self._grace:
                self._deadline = self._grace
                return []
        found: list[Violation] = []
        message = ack_not_stalled(self._full_since, now, self.limits.ack_stall)
        if message is not None:
            evidence = self._last_ack or self._window_frame
            found += self._report("flow.stall", message, now, evidence=evidence)
            self._full_since = now  # the next report, if any, after another full stall
        if self._noop is not None and not self._noop[3]:
            opaque, sent_at, noop, _ = self._noop
            message = noop_answered(sent_at, self.settings.noop_interval, now)
            if message is not None:
                found.append(violation("noop.unanswered", message, now, evidence=noop))
                self._noop = (opaque, sent_at, noop, True)  # reported: wait for its answer
        for key, (ended_at, reason, end) in list(self._reopen.items()):
            message = reopened_in_time(reason, ended_at, now, self.limits.reopen_within)
            if message is not None:
                self.settle(key)  # reported once: owed no more
                found += self._report(
                    "stream_end.not_reopened", message, now, key=key, evidence=end
                )
        self._deadline = None
        self.parent._count(found)
        return found

    def deadline(self) -> float | None:
        """When ``tick`` could next report something (None: not before something else
        happens)."""
        if self._deadline is not None:
            return self._deadline
        times = []
        if self._full_since is not None:
            times.append(self._full_since + self.limits.ack_stall)
        if self._noop is not None and not self._noop[3]:
            times.append(self._noop[1] + self.settings.noop_interval)
        times += [t + self.limits.reopen_within for t, _, _ in self._reopen.values()]
        self._deadline = min(times) if times else None
        return self._deadline

    def settle(self, key: StreamKey) -> None:
        """``key`` was asked for again (on any connection), or closed: its re-open is
        owed no more."""
        if self._reopen.pop(key, None) is not None:
            self._deadline = None
            owing = self.parent.owing
            owers = owing.get(key)
            if owers is not None:
                owers.discard(self)
                if not owers:
                    del owing[key]

    def _owe(self, key: StreamKey, entry: tuple[float, StreamEndReason, StreamEnd]) -> None:
        """``key`` ended early: this connection owes its re-open (``settle``)."""
        self._reopen[key] = entry
        self._deadline = None
        self.parent.owing.setdefault(key, set()).add(self)

    def at_rest_until(self, since: float, until: float) -> bool:
        """This connection owes nothing, and no rule on time can report on it by
        ``until`` unless the consumer sends what it does not owe
        (``CheckerRegistry.at_rest_until``)."""
        if self._reopen or self._rolled or (self.flow.size and not self.flow.open):
            return False
        deadline = self.deadline()
        if deadline is not None and deadline <= until:
            return False
        return not (self.settings.noop_enabled and since + self.settings.noop_interval <= until)

    def corrupted(self, kind: Corruption) -> None:
        """A damaged frame was written (the ``corrupt`` step): the consumer's framing
        can no longer be trusted. No DCP_NOOP written after a body length off by one is
        owed an answer: the consumer reads the next as the frame's rest (explore --seed 39
        schedule 106 on 2 nodes: java-dcp-client reconnected and was failed for it)."""
        self._torn, self._unframed = True, self._unframed or kind is Corruption.LENGTH

    def closed_at(self, now: float) -> None:
        """The connection closed: what it still owed is forgotten (a reconnect asks
        again), and the name's next connection is a reconnect. After a damaged frame, so
        are the ROLLBACKs answered here and not asked again here: past the damage the
        consumer could trust no frame, and a reconnect is answered ROLLBACK again
        (explore --seed 39, schedule 4546: ROLLBACKs read as a torn frame's rest)."""
        if self.closed:
            return
        self.closed = True
        for key in list(self._reopen):
            self.settle(key)
        parent = self.parent
        for key, seqno in self._rolled.items() if self._torn else ():
            history = parent.streams.get(key)
            if history is not None and history.rollback == seqno:
                history.rollback = None
        parent.last_closed[self.node] = now
        parent.connections.pop(self.conn_id, None)
        if not parent.connections and parent.on_idle is not None:
            parent.on_idle(parent)

    # -- stream-level observations from the producer ----------------------------------------

    def snapshot(
        self, vbucket: int, stream_id: int | None, start: int, end: int, oso: bool = False
    ) -> None:
        """A snapshot marker [start, end] was queued on a stream (``oso``: an OSO snapshot
        covering it)."""
        history = self.parent.history((vbucket, stream_id))
        if oso:
            history.oso_snapshot(start, end)
        else:
            history.marker(start, end, self.limits.max_markers)

    def written(self, vbucket: int, stream_id: int | None, seqno: int) -> None:
        """The stream's frames up to ``seqno`` were written."""
        self.parent.history((vbucket, stream_id)).written(seqno)

    # -- what the consumer asked -------------------------------------------------------------

    def _stream_request(self, msg: DcpStreamRequest, frame: Frame, now: float) -> list[Violation]:
        parent = self.parent
        sid = _request_stream_id(msg)
        key = (msg.vbucket, sid)
        history = parent.streams.get(key)
        found: list[Violation] = []
        for rule, message in _request_rules(msg, sid, self.settings.stream_ids, parent, history):
            if message is not None:
                found += self._report(rule, message, now, key=key, evidence=frame)
        # (each dict looked into only when it holds something: most requests find
        # nothing refused, rolled back or owed)
        refused = parent.refused_at.pop(key, None) if parent.refused_at else None
        if refused is not None:
            gaps = parent.retry_gaps.setdefault(key, [])
            gaps.append(now - refused)
            del gaps[:-_GAPS_KEPT]
            message = no_storm(gaps, self.limits, f"requests for vbucket {msg.vbucket} refused")
            if message is not None:
                gaps.clear()
                found += self._report("vbucket.retry_storm", message, now, key=key, evidence=frame)
        rollback = None if history is None else history.rollback
        if history is not None and rollback is not None and msg.start_seqno <= rollback:
            history.rollback = None
        if self._rolled:
            self._rolled.pop(key, None)
        if parent.owing:
            parent.reopened(key)
        self._pending[msg.opaque] = _Pending(msg, frame, key)
        if found:
            parent._count(found)
        return found

    def _buffer_ack(self, msg: DcpBufferAck, frame: Frame, now: float) -> list[Violation]:
        flow = self.flow
        found: list[Violation] = []
        message = ack_within_received(msg.nbytes, flow.unacked, flow.size)
        if message is not None:
            found += self._report("flow.over_ack", message, now, evidence=frame)
        full = self._full_since
        late = (
            flow.size > 0
            and full is not None
            and now - full >= self.limits.late_ack_after
            and msg.nbytes >= flow.size
        )
        self._late_acks = self._late_acks + 1 if late else 0
        message = ack_not_late(self._late_acks, self.limits)
        if message is not None:
            found += self._report("flow.late_ack", message, now, evidence=frame)
        self._last_ack = frame
        self._full_since = None
        self._deadline = None
        if self._own:
            flow.ack(msg.nbytes)
        self.parent._count(found)
        return found

    # -- what the producer answered ------------------------------------------------------------

    def answered(self, response: Response, now: float) -> list[Violation]:
        """The producer answered a request (``sent`` of a ``Response``)."""
        pending = self._pending.pop(response.opaque, None)
        if pending is None:
            return []
        msg, status = pending.msg, response.status
        parent = self.parent
        if isinstance(msg, DcpControl):
            return self._control_answered(msg, pending.frame, status, now)
        if isinstance(msg, DcpGetFailoverLog):
            if status == Status.SUCCESS:
                parent.gave(msg.vbucket, response.value)
            return []
        key = pending.key
        if status == Status.SUCCESS:
            history = parent.history(key)
            history.accepted(
                msg.start_seqno, msg.snap_start_seqno, msg.snap_end_seqno, msg.end_seqno
            )
            parent.gave(msg.vbucket, response.value)
            if parent.retry_gaps:
                parent.retry_gaps.pop(key, None)
        elif status == Status.ROLLBACK and len(response.value) >= 8:
            seqno = self._rolled[key] = int.from_bytes(response.value[:8], "big")
            parent.history(key).rolled_back(seqno)
        elif status in _RETRY_STATUSES:
            parent.refused_at[key] = now
        return []

    def _control_answered(
        self, msg: DcpControl, frame: Frame, status: Status | int, now: float
    ) -> list[Violation]:
        if status != Status.SUCCESS:
            return []
        found: list[Violation] = []
        message = control_kept(msg.key, msg.value, self._controls.get(msg.key))
        if message is not None:
            found += self._report("control.contradicted", message, now, evidence=frame)
        self._controls[msg.key] = msg.value
        if msg.key == "connection_buffer_size":
            self._window_frame = frame
        if self._own:
            apply_control(self.settings, msg.key, msg.value)
            if msg.key == "connection_buffer_size":
                self.flow.resize(self.settings.buffer_size)
        self.parent._count(found)
        return found

    def _stream_end(
        self, key: StreamKey, reason: StreamEndReason, end: StreamEnd, now: float
    ) -> None:
        history = self.parent.history(key)
        self._oso_from.pop(key, None)
        history.oso_high = None
        if reason in FINAL_REASONS:
            history.ended = (reason, history.end_seqno)
        elif reason in REOPEN_REASONS:
            self._owe(key, (now, reason, end))

    # -- reporting ---------------------------------------------------------------------------

    def _report(
        self,
        rule: str,
        message: str,
        now: float,
        *,
        key: StreamKey | None = None,
        evidence: Evidence | Message = None,
    ) -> list[Violation]:
        """The violation, the first time this rule breaks for this stream on this
        connection (a consumer retrying the same mistake is reported once)."""
        seen = (rule, *(key or (None, None)))
        if seen in self._reported:
            return []
        self._reported.add(seen)
        return [violation(rule, message, now, key=key, evidence=evidence)]


class CheckerRegistry:
    """A node's checkers, one per DCP connection name (``checker``), within
    ``limits.max_names`` and ``limits.max_idle_streams``: past them, the names without a
    live connection that were used longest ago are forgotten."""

    def __init__(self, num_vbuckets: int, limits: CheckerLimits | None = None) -> None:
        self.num_vbuckets = num_vbuckets
        self.limits = limits or CheckerLimits()
        #: name -> checker, least recently used first
        self.checkers: dict[str, ProtocolChecker] = {}
        #: the failover logs any name was given (``others``)
        self.given = GivenLogs()
        #: stream -> the connections of any name that owe its re-open (``owing``)
        self.owing: dict[StreamKey, set[ConnectionChecker]] = {}

    def checker(self, name: str) -> ProtocolChecker:
        """The checker of ``name`` (made on first use, with the current limits)."""
        checker = self.checkers.pop(name, None)
        if checker is None:
            checker = ProtocolChecker(
                name,
                limits=self.limits,
                num_vbuckets=self.num_vbuckets,
                others=self.given,
                owing=self.owing,
            )
            checker.on_idle = self._idle
            self._make_room(1)
        self.checkers[name] = checker
        return checker

    def _idle(self, checker: ProtocolChecker) -> None:
        """``checker``'s last connection closed: it is the most recently used idle
        name; make room."""
        if self.checkers.get(checker.name) is checker:
            del self.checkers[checker.name]
            self.checkers[checker.name] = checker
        self._make_room()

    def _make_room(self, coming: int = 0) -> None:
        """Forget the names without a live connection used longest ago while there are
        more than ``max_names`` names (with ``coming`` more), or their streams number
        more than ``max_idle_streams``: when a name is made, and when one's last
        connection closes."""
        limits = self.limits
        idle = [(name, c) for name, c in self.checkers.items() if not c.connections]
        names = len(self.checkers) + coming
        streams = sum(len(c.streams) for _, c in idle)
        for name, checker in idle:
            if names <= limits.max_names and streams <= limits.max_idle_streams:
                return
            del self.checkers[name]
            names -= 1
            streams -= len(checker.streams)

    def __iter__(self) -> Iterator[ProtocolChecker]:
        return iter(list(self.checkers.values()))

    def at_rest_until(self, since: float, until: float) -> bool:
        """No rule can report before ``until`` unless the consumer sends something it
        does not owe: what lets a ``conformant`` window end once nothing can break a
        rule in what is left of it. The rules report on a frame the consumer sends or on
        time passing (``deadline``); a consumer that is connected and owes nothing sends
        no frame of its own accord. So every name has a live connection (one away
        reconnects, and that is judged), none owes a request (a ROLLBACK to ask again
        after, kv_engine ``docs/dcp/documentation/rollback.md``; a STREAM_END to re-open,
        ``docs/dcp/documentation/commands/stream-end.md``; a refusal that asks for a
        retry), no flow-control window is full (an acknowledgement is owed,
        ``docs/dcp/documentation/flow-control.md``), no rule on time is due by ``until``
        (a noop unanswered), and no noop interval fits between ``since`` (the window's
        start) and ``until`` (a noop sent in it could go unanswered: kv_engine
        ``docs/dcp/documentation/dead-connections.md``; such a consumer is watched the
        whole window). No name at all is not at rest: a consumer may yet connect."""
        if not self.checkers:
            return False
        for checker in self.checkers.values():
            if not checker.connections or checker.refused_at:
                return False
            if any(history.rollback is not None for history in checker.streams.values()):
                return False
            if not all(conn.at_rest_until(since, until) for conn in checker.connections.values()):
                return False
        return True

    def found(self) -> dict[str, int]:
        """Violations found so far on every name, by rule."""
        totals: dict[str, int] = {}
        for checker in self.checkers.values():
            for rule, n in checker.found.items():
                totals[rule] = totals.get(rule, 0) + n
        return totals
