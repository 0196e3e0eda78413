"""The protocol checker's rules: what a DCP consumer must do, each rule a function with
the public source it comes from.

A rule is a pure function over what the checker saw (``StreamHistory``: what one stream
of a DCP name was given; the request or the acknowledgement at hand; times) that returns
``None`` when the consumer kept the rule, or one line saying how it broke it. ``RULES``
names them all by rule id; ``_checker`` applies them and turns a broken rule into a
``Violation`` with the frame that shows it. Nothing here reads a clock or a socket.

The STREAM_END reasons, and what a consumer does after each (kv_engine
``docs/dcp/documentation/commands/stream-end.md`` and the comments of
``include/mcbp/protocol/dcp_stream_end_status.h``):

* OK: "the stream has finished without error" (all items up to the end seqno were
  streamed): the stream is done; asking for the same range again is a re-open the
  reason forbids.
* FILTER_EMPTY: "all filtered collections have been removed so no more data can be
  sent": it forbids a re-open (it could only be refused, or serve another filter).
* LOST_PRIVILEGES: the connection lost the privileges the stream was created with. A
  consumer may ask again (the request succeeds once the privileges are back and is
  refused with EACCESS until then) or stop: neither is a violation. java-dcp-client,
  gocbcore and go-dcp all ask again.
* STATE_CHANGED ("the stream closed early because the vbucket state changed"; on the
  wire it is also the internal Rollback, "the vbucket is rolling back and downstream
  needs to reopen the stream and rollback too": a replica or pending vbucket rolled
  back under its streams, or a backfill whose range was purged while it waited,
  ``backfill_by_seqno_disk.cc``; the re-open is then answered ROLLBACK, and
  ``rollback.ignored`` checks the consumer takes it), TOO_SLOW ("when the client is ready to
  read from the stream again it should reconnect") and BACKFILL_FAILED ("closed early
  due to backfill failure"): the stream ended before its end seqno, so a consumer
  that wants the data must re-open it.
* CLOSED (the consumer closed it) and DISCONNECTED (never sent) ask for nothing.
"""

from __future__ import annotations

import bisect
from array import array
from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol import RemoteProtocolError, StreamEndReason, failover_log_uuids

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mockdcp.protocol import DcpStreamRequest

#: STREAM_END reasons after which the stream must not be asked for again.
FINAL_REASONS = frozenset({StreamEndReason.OK, StreamEndReason.FILTER_EMPTY})
#: STREAM_END reasons after which the stream must be asked for again. ROLLBACK is never
#: written by a node (it sends STATE_CHANGED, kv_engine ``StreamEndResponse::
#: statusToFlags``); a recording that carries one asks the same of the consumer.
REOPEN_REASONS = frozenset(
    {
        StreamEndReason.STATE_CHANGED,
        StreamEndReason.TOO_SLOW,
        StreamEndReason.BACKFILL_FAILED,
        StreamEndReason.ROLLBACK,
    }
)
#: DCP_CONTROL keys a consumer may set again to another value: sizes and tunings
#: (kv_engine ``docs/dcp/documentation/flow-control.md``: buffer sizes change with the
#: consumer's memory; ``control.md``: the noop interval and priority are settings).
#: Every other key switches a behaviour on or off, and switching it back is a
#: contradiction (``control.md``: "once enabled on a producer, it cannot be disabled").
TUNABLE_CONTROLS = frozenset(
    {"connection_buffer_size", "set_noop_interval", "set_priority", "consumer_name"}
)


@attrs.frozen(kw_only=True)
class Violation:
    """One rule broken: ``rule`` (its id in ``RULES``), ``message`` (one line), the
    stream it is about (``vbucket``/``stream_id``, None for the connection), the frame
    that shows it (``frame``: its bytes, at most ``FRAME_KEPT``; ``summary``: the frame
    in one line) and ``time`` (the ``now`` the checker was given)."""

    rule: str
    message: str
    time: float
    vbucket: int | None = None
    stream_id: int | None = None
    frame: bytes = b""
    summary: str = ""


#: bytes of the frame a violation keeps (a stream request's header, extras and filter)
FRAME_KEPT = 512


@attrs.frozen(kw_only=True)
class CheckerLimits:
    """The times and counts the rules that need one use (seconds, counts)."""

    #: a STREAM_END that requires a re-open must be followed by a stream request
    #: within this long (the reference consumer takes 50 ms, java-dcp-client too)
    reopen_within: float = 5.0
    #: a full flow-control window with no acknowledgement for this long is a stall
    ack_stall: float = 10.0
    #: an acknowledgement that frees the whole window after it was full this long...
    late_ack_after: float = 0.5
    #: ... this many times in a row: the consumer acknowledges too late
    late_acks: int = 3
    #: this many reconnects (or retries of a refused stream) in a row, each within
    #: ``storm_gap`` seconds of the failure before it...
    storm_count: int = 5
    storm_gap: float = 1.0
    #: ... whose last wait is not this many times the first, are a storm (no back-off:
    #: a doubling back-off grows 16 times over five waits, and still over 3 times when
    #: a loaded machine stretched its first waits)
    storm_growth: float = 2.0
    #: snapshot markers kept per stream (the oldest are forgotten past it)
    max_markers: int = 1 << 20
    #: DCP names a node keeps the history of (those without a live connection go first)
    max_names: int = 10_000
    #: streams the names without a live connection may keep the history of, in all
    #: (about half a KiB each: 2 MiB, which a consumer of 1,024 vbuckets needs four times)
    max_idle_streams: int = 4_096


class StreamHistory:
    """What one stream (vbucket, stream id) of a DCP name was given, across the name's
    connections: the snapshot markers sent (as runs: one per stream opened, each in
    increasing order), the snapshots and consistent points it was accepted from, the
    highest seqno written, the OSO snapshots, and the rollback it was told to take.

    A consumer's resume must be made of these (kv_engine
    ``docs/dcp/documentation/rollback.md``, "Rollback logic on DCP Consumer": it stores
    the snapshot start and end of each marker and resumes from them). A node keeps one
    per stream of every name it watches, so what most streams never need is made on
    first use.
    """

    __slots__ = (
        "_new_run",
        "end_seqno",
        "ended",
        "forgotten",
        "known",
        "markers",
        "oso",
        "oso_high",
        "points",
        "ranges",
        "rollback",
        "runs",
        "sent_high",
    )

    def __init__(self) -> None:
        #: snapshot markers sent: one array per stream opened, start and end of each
        #: marker one after the other (``_starts``/``_ends`` read them)
        self.runs: list[array[int]] = []
        self._new_run = True
        self.markers = 0
        #: snapshots (start < end) of requests the producer accepted
        self.ranges: set[tuple[int, int]] | None = None
        #: consistent points besides 0 and marker ends: accepted complete-snapshot
        #: starts, rollback seqnos
        self.points: set[int] | None = None
        #: OSO snapshots sent: (first seqno, last) ranges, every seqno a consistent point
        self.oso: list[tuple[int, int]] | None = None
        #: inside an OSO snapshot: the highest seqno sent in it so far (else None)
        self.oso_high: int | None = None
        #: the highest seqno written on the stream, or accepted as a start
        self.sent_high = 0
        #: the name was accepted on, or sent something of, this stream
        self.known = False
        #: markers ending at or below this were forgotten (``max_markers``)
        self.forgotten = -1
        #: the end seqno of the last request accepted
        self.end_seqno = 0
        #: the last ROLLBACK answer's seqno, until a request at or below it
        self.rollback: int | None = None
        #: the STREAM_END that ended the stream for good (reason, its end seqno)
        self.ended: tuple[StreamEndReason, int] | None = None

    # -- what the producer did -----------------------------------------------------------

    def accepted(self, start: int, snap_start: int, snap_end: int, end: int) -> None:
        """A request from (start, snapshot) was accepted: a new run of markers begins.
        From 0 the consumer starts over with nothing: what the stream was given before
        is forgotten (a consumer restarted from scratch again and again keeps one run)."""
        if start == 0:
            self.runs.clear()
            self.markers = 0
            self.ranges = self.points = self.oso = None
            self.sent_high = 0
            self.forgotten = -1
        self.known = True
        self._new_run = True
        self.sent_high = max(self.sent_high, start)
        if snap_start == snap_end:
            self._point(start)
        else:
            if self.ranges is None:
                self.ranges = set()
            self.ranges.add((snap_start, snap_end))
        self.end_seqno = end
        self.ended = None

    def rolled_back(self, seqno: int) -> None:
        """ROLLBACK to ``seqno`` was answered: the stream must be asked for at or below
        it, where the consumer holds a consistent state."""
        self.rollback = seqno
        self._point(seqno)

    def _point(self, seqno: int) -> None:
        if seqno:
            if self.points is None:
                self.points = set()
            self.points.add(seqno)

    def marker(self, start: int, end: int, max_markers: int) -> None:
        """A snapshot marker [start, end] was sent."""
        self.known = True
        runs = self.runs
        if self._new_run or not runs or start <= runs[-1][-1]:
            runs.append(array("q"))
            self._new_run = False
        run = runs[-1]
        run.append(start)
        run.append(end)
        self.markers += 1
        if self.markers > max_markers:
            self._forget(max_markers // 2)

    def _forget(self, keep: int) -> None:
        """Drop the oldest markers until ``keep`` are left (rules then leave resumes
        from before them alone)."""
        while self.markers > keep and self.runs:
            run = self.runs[0]
            drop = min(len(run) // 2, self.markers - keep)
            self.forgotten = max(self.forgotten, run[2 * drop - 1])
            if 2 * drop >= len(run):
                self.runs.pop(0)
            else:
                del run[: 2 * drop]
            self.markers -= drop

    def written(self, seqno: int) -> None:
        """Frames up to ``seqno`` of the stream were written."""
        self.known = True
        if seqno > self.sent_high:
            self.sent_high = seqno
        if self.oso_high is not None and seqno > self.oso_high:
            self.oso_high = seqno

    def oso_snapshot(self, first: int, last: int) -> None:
        """An OSO snapshot covering [first, last] was sent (in key order: every seqno in
        it is where a consumer that received all of it may stand)."""
        self.known = True
        if self.oso is None:
            self.oso = []
        self.oso.append((first, last))
        self.sent_high = max(self.sent_high, last)

    # -- what the consumer may claim -----------------------------------------------------

    def sent_range(self, start: int, end: int) -> bool:
        """[start, end] was a snapshot marker sent, or the snapshot of an accepted
        request."""
        if self.ranges is not None and (start, end) in self.ranges:
            return True
        for run in self.runs:
            starts, ends = _starts(run), _ends(run)
            i = bisect.bisect_left(starts, start)
            if i < len(starts) and starts[i] == start and ends[i] == end:
                return True
        return False

    def consistent(self, seqno: int) -> bool:
        """A consumer may hold a complete snapshot at ``seqno``: a marker's end, an
        accepted start, a rollback seqno, 0, or a seqno of an OSO snapshot."""
        if seqno == 0 or seqno <= self.forgotten:
            return True
        if self.points is not None and seqno in self.points:
            return True
        for run in self.runs:
            ends = _ends(run)
            i = bisect.bisect_left(ends, seqno)
            if i < len(ends) and ends[i] == seqno:
                return True
        return self.oso is not None and any(first <= seqno <= last for first, last in self.oso)

    def marker_around(self, seqno: int) -> tuple[int, int] | None:
        """A marker [start, end] sent with start <= ``seqno`` < end, if any."""
        for run in self.runs:
            starts, ends = _starts(run), _ends(run)
            i = bisect.bisect_right(starts, seqno) - 1
            if i >= 0 and seqno < ends[i]:
                return starts[i], ends[i]
        return None


class GivenLogs:
    """The failover logs of each vbucket given to a DCP name (or to any name: the
    registry's), and their vbucket uuids, the ones a consumer may resume with (kv_engine
    ``docs/dcp/documentation/failure-scenarios.md``: a consumer sends the vbucket uuid of
    the failover log it received with its data). A log is kept as sent and read (one
    ``struct`` unpack: ``failover_log_uuids``) when a resume asks (``uuids``), or once
    more than ``UNREAD`` of a vbucket wait: most streams start from nothing and never
    ask, and a vbucket failed over again and again keeps its uuids, not every log it
    had. ``read`` is shared by every name: each is given the same log of a vbucket
    until it fails over."""

    #: logs of a vbucket kept unread at most (then they are read into its uuids)
    UNREAD = 4
    #: logs ``read`` remembers at most (then it starts over)
    READ_KEPT = 4096

    __slots__ = ("_unread", "_uuids", "read")

    def __init__(self, read: dict[bytes, tuple[int, ...]] | None = None) -> None:
        self._unread: dict[int, list[bytes]] = {}
        self._uuids: dict[int, tuple[int, ...]] = {}
        #: a log's uuids by its bytes
        self.read: dict[bytes, tuple[int, ...]] = {} if read is None else read

    def add(self, vbucket: int, log: bytes) -> None:
        """``log`` of ``vbucket`` was given."""
        unread = self._unread.get(vbucket)
        if unread is None:  # (a name's first log of the vbucket: most are)
            self._unread[vbucket] = [log]
        elif log not in unread:
            unread.append(log)
            if len(unread) > self.UNREAD:
                self.uuids(vbucket)

    def uuids(self, vbucket: int) -> tuple[int, ...] | None:
        """The uuids of every log of ``vbucket`` given, in the order given, each once;
        None if none was (a malformed log gives none)."""
        known = self._uuids.get(vbucket)
        unread = self._unread.pop(vbucket, None)
        if not unread:
            return known
        read = self.read
        found = dict.fromkeys(known or ())
        for log in unread:
            uuids = read.get(log)
            if uuids is None:
                try:
                    uuids = failover_log_uuids(log)
                except RemoteProtocolError:
                    uuids = ()
                if len(read) >= self.READ_KEPT:
                    read.clear()
                read[log] = uuids
            found.update(dict.fromkeys(uuids))
        if not found:
            return None
        known = self._uuids[vbucket] = tuple(found)
        return known


def _starts(run: array[int]) -> memoryview:
    """The marker starts of a run (every other element, from the first), without a copy."""
    return memoryview(run)[0::2]


def _ends(run: array[int]) -> memoryview:
    """The marker ends of a run (every other element, from the second)."""
    return memoryview(run)[1::2]


# -- stream requests (resumes) ---------------------------------------------------------------


def from_nothing(req: DcpStreamRequest) -> bool:
    """A request from nothing: vbucket uuid 0, start 0, snapshot [0, 0] (kv_engine
    ``docs/dcp/documentation/commands/stream-request.md``: "Set VBucket UUID to 0 to
    receive all data ... the consumer don't have any data at all"). It keeps every
    resume rule whatever the stream was given (``resume.range``: 0 in [0, 0];
    ``resume.uuid``: 0 with nothing to resume; ``rollback.ignored``: 0 is at or below
    any rollback seqno; ``resume.above_sent``: 0 was seen; ``resume.snapshot`` and
    ``resume.complete``: an empty snapshot at 0), so the checker does not ask them:
    every stream of a consumer's first pass, and of ``mockdcp tail``'s, is one."""
    return not (req.start_seqno or req.snap_start_seqno or req.snap_end_seqno or req.vbucket_uuid)


def resume_within_snapshot(req: DcpStreamRequest) -> str | None:
    """``resume.range``: the start lies in the snapshot sent with it.

    kv_engine ``docs/dcp/documentation/rollback.md``: "A correct request will have the
    below invariant: SnapStartSeqno <= StartSeqno <= SnapEndSeqno"."""
    if req.snap_start_seqno <= req.start_seqno <= req.snap_end_seqno:
        return None
    return (
        f"start {req.start_seqno} outside its snapshot "
        f"[{req.snap_start_seqno}, {req.snap_end_seqno}]"
    )


def resume_uuid_given(req: DcpStreamRequest, given: tuple[int, ...] | None) -> str | None:
    """``resume.uuid``: the vbucket uuid is one the consumer was given (in a stream
    request's or DCP_GET_FAILOVER_LOG's failover log), or 0 with nothing to resume.

    kv_engine ``docs/dcp/documentation/commands/stream-request.md``: "Set VBucket UUID
    to 0 to receive all data ... the consumer don't have any data at all";
    ``failure-scenarios.md``: a consumer sends the vbucket uuid of the failover log it
    received with its data. ``given`` None: the name was never given a failover log of
    this vbucket (a consumer resuming a position it kept from elsewhere): not judged.
    """
    uuid = req.vbucket_uuid
    if uuid == 0:
        if req.start_seqno > 0:
            return f"vbucket uuid 0 (no data) with start {req.start_seqno}"
        return None
    if given is None or uuid in given:
        return None
    return f"vbucket uuid {uuid:#x} was never given for vbucket {req.vbucket}"


def resume_not_above_sent(req: DcpStreamRequest, history: StreamHistory | None) -> str | None:
    """``resume.above_sent``: the start is not above what the stream was sent.

    kv_engine ``docs/dcp/documentation/commands/stream-request.md``: the start seqno is
    "the last by sequence number that has been seen by the consumer"; a seqno never
    written cannot have been seen."""
    if history is None or not history.known or req.start_seqno <= history.sent_high:
        return None
    return f"start {req.start_seqno} above the highest seqno sent, {history.sent_high}"


def resume_snapshot_sent(req: DcpStreamRequest, history: StreamHistory | None) -> str | None:
    """``resume.snapshot``: a partial snapshot resumed from is one that was sent.

    kv_engine ``docs/dcp/documentation/commands/stream-request.md``: snapshot start and
    end are "the start/end sequence of the last partial snapshot that was received";
    ``rollback.md`` ("Rollback logic on DCP Consumer"): the consumer stores the marker's
    start and end. A range no marker (nor an accepted request) had is made up."""
    start, end = req.snap_start_seqno, req.snap_end_seqno
    if history is None or not history.known or start == end or end <= history.forgotten:
        return None
    if history.sent_range(start, end):
        return None
    return f"snapshot [{start}, {end}] was never sent on this stream"


def resume_complete_snapshot(req: DcpStreamRequest, history: StreamHistory | None) -> str | None:
    """``resume.complete``: a resume that claims a complete snapshot (start = snapshot
    start = snapshot end) stands where one ended.

    kv_engine ``docs/dcp/documentation/discussion.md`` ("Why does a client need to
    provide snapshot start & end seqnos"): a consumer that received part of snapshot
    [1, 4] and resumes with start = snapshot start = snapshot end = 3 makes the
    producer wrongly conclude it needs no rollback, and loses a document."""
    seqno = req.start_seqno
    if history is None or not history.known or seqno == 0:
        return None
    if not req.snap_start_seqno == req.snap_end_seqno == seqno or history.consistent(seqno):
        return None
    around = history.marker_around(seqno)
    if around is None:
        return None
    return (
        f"claims a complete snapshot at {seqno}, inside snapshot [{around[0]}, {around[1]}] "
        "(resume with that snapshot instead)"
    )


def rollback_taken(req: DcpStreamRequest, history: StreamHistory | None) -> str | None:
    """``rollback.ignored``: after ROLLBACK to R the stream is asked for again from R or
    below.

    kv_engine ``docs/dcp/documentation/rollback.md``: "the consumer has to rollback till
    that point and resend the stream request"; ``commands/stream-request.md``: "The
    client retries with the information that the server replied with"."""
    if history is None or history.rollback is None or req.start_seqno <= history.rollback:
        return None
    return f"ROLLBACK to {history.rollback} answered, re-requested from {req.start_seqno}"


def reopen_allowed(req: DcpStreamRequest, history: StreamHistory | None) -> str | None:
    """``stream_end.reopened``: a stream that ended for good is not asked for again.

    kv_engine ``docs/dcp/documentation/commands/stream-end.md`` (OK: "the stream has
    finished without error") and ``include/mcbp/protocol/dcp_stream_end_status.h``
    (FilterEmpty: "no more data can be sent"). After OK a request for
    more (a higher end seqno) is a new stream, not a re-open."""
    if history is None or history.ended is None:
        return None
    reason, end = history.ended
    if reason is StreamEndReason.OK and req.end_seqno > end:
        return None
    return f"re-opened after STREAM_END {reason.name}"


def vbucket_in_map(req: DcpStreamRequest, num_vbuckets: int) -> str | None:
    """``vbucket.not_in_map``: the vbucket is one the cluster map gives.

    The bucket config's ``vBucketServerMap.vBucketMap`` (served by GET_CLUSTER_CONFIG,
    kv_engine ``docs/BinaryProtocol.md``) has one entry per vbucket; a consumer streams
    the vbuckets it lists for the node."""
    if req.vbucket < num_vbuckets:
        return None
    return f"vbucket {req.vbucket} is not in the map ({num_vbuckets} vbuckets)"


def stream_id_as_enabled(stream_id: int | None, enabled: bool) -> str | None:
    """``control.stream_id``: with ``enable_stream_id`` set every stream
    request names a stream id, and without it none does.

    kv_engine ``docs/dcp/documentation/commands/control.md``: "Once enabled the client
    must provide a stream-id value to all stream-requests"."""
    if (stream_id is not None) == enabled:
        return None
    if enabled:
        return "enable_stream_id=true set, then a stream request without a stream id"
    return f"stream id {stream_id} without enable_stream_id"


# -- stream ends -------------------------------------------------------------------------------


def reopened_in_time(
    reason: StreamEndReason, ended_at: float, now: float, within: float
) -> str | None:
    """``stream_end.not_reopened``: a stream ended early (STATE_CHANGED, TOO_SLOW,
    BACKFILL_FAILED) is asked for again within ``within`` seconds, on any connection of
    any node under any name (a vbucket that moved is asked of its new node, and
    java-dcp-client names each node's connection apart: ``DcpChannel``'s DCP_OPEN).

    kv_engine ``docs/dcp/documentation/commands/stream-end.md`` (Too Slow: "when the
    client is ready to read from the stream again it should reconnect") and
    ``include/mcbp/protocol/dcp_stream_end_status.h`` (each "closed early"; Rollback,
    sent as STATE_CHANGED: "downstream needs to reopen the stream")."""
    if now < ended_at + within:
        return None
    return f"not re-opened {now - ended_at:.1f}s after STREAM_END {reason.name}"


# -- flow control ------------------------------------------------------------------------------


def ack_within_received(nbytes: int, unacked: int, buffer_size: int) -> str | None:
    """``flow.over_ack``: an acknowledgement frees no more than was sent and not yet
    acknowledged.

    kv_engine ``docs/dcp/documentation/flow-control.md``: the consumer acknowledges "the
    amount of buffer space that it has freed" and the producer "will decrement the
    amount of bytes sent"; ``commands/buffer-ack.md``: "the amount of bytes that the
    Consumer has processed"."""
    if buffer_size == 0 or nbytes <= unacked:
        return None
    return f"acknowledged {nbytes} bytes, {unacked} outstanding"


def ack_not_stalled(full_since: float | None, now: float, limit: float) -> str | None:
    """``flow.stall``: a full window is acknowledged within ``limit`` seconds.

    kv_engine ``docs/dcp/documentation/flow-control.md``: once the buffer is full "the
    Producer will put the connection to sleep and wait until the Consumer signals" with
    a buffer acknowledgement; one that never comes stops the stream for good."""
    if full_since is None or now < full_since + limit:
        return None
    return f"flow-control window full for {now - full_since:.1f}s without an acknowledgement"


def ack_not_late(late_in_a_row: int, limits: CheckerLimits) -> str | None:
    """``flow.late_ack``: acknowledgements do not wait until the whole window is used.

    kv_engine ``docs/dcp/documentation/flow-control.md``, "Consumer-Side Buffer
    Advertising": "It is recommend however that Consumers send an acknowledgement after
    50KB or 20% of the buffer has been processed." A consumer that acknowledges the
    whole window only after it has been full for ``late_ack_after`` seconds, time after
    time, keeps the producer waiting with the window full."""
    if late_in_a_row < limits.late_acks:
        return None
    return (
        f"{late_in_a_row} acknowledgements in a row freed the whole window after it was "
        f"full for {limits.late_ack_after:g}s or more"
    )


# -- noops and controls ------------------------------------------------------------------------


def noop_answered(sent_at: float, interval: float, now: float) -> str | None:
    """``noop.unanswered``: a DCP_NOOP is answered within the noop interval.

    kv_engine ``docs/dcp/documentation/dead-connections.md``: "When the Consumer
    receives a noop message it should immediately respond with a noop response ... The
    Producer will wait for a response for an amount of time equal to the noop
    interval"."""
    if now < sent_at + interval:
        return None
    return f"DCP_NOOP not answered within the noop interval ({interval:g}s)"


def control_kept(key: str, value: str, earlier: str | None) -> str | None:
    """``control.contradicted``: a DCP_CONTROL switch set on a connection is not set
    back to another value on it.

    kv_engine ``docs/dcp/documentation/commands/control.md``: the switches turn a
    behaviour on for the connection ("once enabled on a producer, it cannot be
    disabled"); sizes and tunings (``TUNABLE_CONTROLS``) may change."""
    if earlier is None or key in TUNABLE_CONTROLS or _switch(earlier) == _switch(value):
        return None
    return f"DCP_CONTROL {key}={value!r} contradicts {key}={earlier!r} set before"


def _switch(value: str) -> str:
    """A control value as a switch reads it: "false" and an empty value are off (kv_engine
    ``DcpProducer::control`` turns a switch on for "true" only)."""
    return "false" if value in ("false", "") else value


# -- reconnects and retries --------------------------------------------------------------------


def no_storm(gaps: Sequence[float], limits: CheckerLimits, what: str) -> str | None:
    """``reconnect.storm`` / ``vbucket.retry_storm``: a consumer that fails again and
    again backs off.

    couchbase-jvm-core ``AbstractEndpoint.reconnectDelay``: "an exponential back-off
    algorithm (2^attempt) until a fixed ceiling is reached"; the reference consumer
    doubles its wait too. ``gaps``: the seconds between each failure (a closed
    connection, a NOT_MY_VBUCKET or ETMPFAIL answer) and the next attempt, oldest
    first. The last ``storm_count`` of them, each under ``storm_gap``, are a storm
    unless they back off: the last ``storm_growth`` times the first or more, or twice
    that times the shortest. A busy machine adds to each wait unevenly: the reference
    consumer's 50 ms first wait was once measured 0.5 s in the fast tier under load,
    its last (800 ms) 0.85 s, which the first comparison alone took for a storm; a
    doubling back-off still grows 16 times over five waits from its shortest.

    A name's reconnects are counted per node (its checker keeps ``gaps`` for each): a
    cluster consumer holds one connection to every node under one name, and a failover
    or a rebalance closes them all at once, so the gaps between one node's close and
    another node's open are no retries. java-dcp-client opens a channel to every KV node
    of the config (``Conductor``: one ``DcpChannel`` per node address, each with the
    same DCP_OPEN name), gocbcore one connection per node (``KVConfig.PoolSize`` 1,
    which go-dcp keeps), and the reference consumer one per node of the map."""
    n = limits.storm_count
    if len(gaps) < n:
        return None
    last = gaps[-n:]
    if max(last) >= limits.storm_gap:
        return None
    if last[-1] >= limits.storm_growth * last[0]:
        return None  # backing off, however unevenly (a loaded machine stretches the waits)
    if last[-1] >= 2 * limits.storm_growth * min(last):
        return None  # backing off from a first wait the machine stretched
    low, high = min(last) * 1000, max(last) * 1000
    return f"{n} {what} in a row, {low:.0f}-{high:.0f} ms after the failure before, no back-off"


#: every rule, by id (what ``Violation.rule`` holds)
RULES: dict[str, Callable[..., str | None]] = {
    "resume.range": resume_within_snapshot,
    "resume.uuid": resume_uuid_given,
    "resume.above_sent": resume_not_above_sent,
    "resume.snapshot": resume_snapshot_sent,
    "resume.complete": resume_complete_snapshot,
    "rollback.ignored": rollback_taken,
    "stream_end.reopened": reopen_allowed,
    "stream_end.not_reopened": reopened_in_time,
    "vbucket.not_in_map": vbucket_in_map,
    "vbucket.retry_storm": no_storm,
    "reconnect.storm": no_storm,
    "flow.over_ack": ack_within_received,
    "flow.stall": ack_not_stalled,
    "flow.late_ack": ack_not_late,
    "noop.unanswered": noop_answered,
    "control.contradicted": control_kept,
    "control.stream_id": stream_id_as_enabled,
}
