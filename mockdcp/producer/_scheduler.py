"""Which stream sends next, and how much: the scheduling of one connection's streams.

``StreamScheduler.drain`` goes round the ready streams taking their encoded chunks while
the flow-control window is open (kv_engine ``DcpProducer::BufferLog``: a message may be
sent while outstanding < buffer size, checked before each message, so the producer
overshoots by at most one message), never past a held vbucket's seqno (a scenario's
``wait``), and notes the events the write makes (``StreamWritten``, ``SeqnoWritten``) for
the connection to release once the bytes are written. ``end_reset_streams`` ends, at once,
the streams of a vbucket the model reset (failover, restart, state change: the change
feed says so). A stream whose user lost its DcpStream privilege (``losing``) sends up
to its next snapshot marker, then ends LOST_PRIVILEGES instead of sending the marker
(kv_engine ``DcpProducer::getAndValidateNextItemFromStream``).
Sans-IO: bytes in, lists out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.producer import events as ev
from mockdcp.producer._state import StreamState
from mockdcp.protocol import Opcode, StreamEndReason, stream_frame_seqno, stream_item_seqno

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from mockdcp.producer._flow import FlowWindow
    from mockdcp.producer._output import OutputQueue
    from mockdcp.producer._registry import StreamRegistry
    from mockdcp.producer._stream import Chunk, Stream

#: bytes one stream may send before the next ready stream gets its turn
QUANTUM = 256 * 1024


class StreamScheduler:
    """The streams of one connection, drained in turn under flow control and holds."""

    def __init__(
        self,
        streams: StreamRegistry,
        flow: FlowWindow,
        holds: Callable[[], Mapping[int, int]],
        event: Callable[..., ev.ProducerEvent],
    ) -> None:
        self.streams = streams
        self.flow = flow
        #: vbucket -> seqno: streams send nothing past it until released (``Node.holds``)
        self._holds = holds
        #: makes an event of this connection (kind, **fields)
        self._event = event
        #: (vbucket, seqno) holds already reported as reached
        self.reached: set[tuple[int, int]] = set()
        #: streams whose user lost DcpStream on their data: they end at their next
        #: snapshot marker (``end_at_marker``); the reason sent (LOST_PRIVILEGES, or OK
        #: for a connection that is not collection-aware)
        self.losing: dict[Stream, StreamEndReason] = {}

    def can_send(self) -> bool:
        """A ready stream has something to send and the window is open."""
        if not self.flow.open:
            return False
        return any(s.chunks or s.alive for s in self.streams.ready.values())

    def drain(
        self,
        parts: list[bytes | memoryview],
        size: int,
        limit: int,
        events: list[ev.ProducerEvent],
    ) -> int:
        """Append stream data to ``parts`` (``size`` bytes so far) up to about ``limit``;
        returns the new size. Round robin over ready streams, ``QUANTUM`` bytes a turn,
        while the window is open. A stream of a held vbucket sends nothing past the
        hold's seqno. The events of what was taken go to ``events``."""
        holds = self._holds()
        ready = self.streams.ready
        flow = self.flow
        idle_rounds = 0
        while size < limit and ready and flow.open:
            progressed = False
            marks = self.streams.marks
            for key, stream in list(ready.items()):
                if not stream.refill():
                    hold = holds.get(stream.vbucket)
                    if hold is not None:  # it may have read past it with nothing to send
                        self._check_hold(stream, hold, events)
                    if stream.finished:
                        self.streams.forget(stream)
                    else:
                        ready.pop(key, None)
                    if key in ready:
                        ready.pop(key, None)
                    continue
                hold = holds.get(stream.vbucket)
                stop = None if hold is None else frames_up_to(stream.chunks[0], hold)
                if stream in self.losing:
                    # up to the next marker, and not into the next chunk (it may open
                    # with one)
                    first = stream.chunks[0]
                    marker = next_marker(first)
                    if marker == first.pos:
                        self.end_at_marker(stream)
                        stream.refill()
                        stop = None
                    else:
                        marker = len(first.ends) if marker is None else marker
                        stop = marker if stop is None else min(stop, marker)
                budget = min(QUANTUM, limit - size)  # a throttle's limit may be small
                taken = flow.take(stream.chunks, parts, budget, stop=stop)
                if taken:
                    self._wrote(stream, events)
                    if stream.state is StreamState.ENDING and not stream.chunks:
                        events.append(self._ended(stream))
                stream.mark_drained()
                size += taken
                progressed |= taken > 0
                if hold is not None:
                    self._check_hold(stream, hold, events)
                if stream.finished:
                    self.streams.forget(stream)
                if size >= limit or not flow.open:
                    break
            if not progressed:
                # A round that sent nothing ends the drain, unless a stream was marked
                # ready during it: a backfill that queued nothing still handed its place
                # on, and the stream told must start now, not at its vbucket's next
                # change. Bounded: each such round starts another stream's turn.
                idle_rounds += 1
                if self.streams.marks == marks or idle_rounds > len(self.streams):
                    break
        return size

    def _wrote(self, stream: Stream, events: list[ev.ProducerEvent]) -> None:
        """Note the last item of ``stream`` in this write (an event once written), also
        when a STREAM_END or a marker comes after it in the write."""
        seqno = self.flow.last_item
        if seqno is None:
            return
        events.append(
            self._event(
                ev.StreamWritten, vbucket=stream.vbucket, stream_id=stream.stream_id, seqno=seqno
            )
        )

    def _ended(self, stream: Stream) -> ev.ProducerEvent:
        """The event of a STREAM_END just taken (the last of its stream's chunks)."""
        reason = stream.end_reason.name if stream.end_reason is not None else ""
        return self._event(
            ev.StreamEnded,
            vbucket=stream.vbucket,
            stream_id=stream.stream_id,
            reason=reason,
            opaque=stream.opaque,
        )

    def _check_hold(self, stream: Stream, hold: int, events: list[ev.ProducerEvent]) -> None:
        """Report a hold as reached once every frame of the stream up to its seqno has
        been taken: the next queued frame lies past it, or nothing is queued and the
        stream has read past it."""
        if (stream.vbucket, hold) in self.reached:
            return
        if stream.refill():  # the next piece, if one is pending
            chunk = stream.chunks[0]
            start = chunk.ends[chunk.pos - 1] - chunk.base if chunk.pos else 0
            if stream_frame_seqno(chunk.buf, start) <= hold:
                return
        elif stream.last_read_seqno < hold and stream.alive:
            return
        self.reached.add((stream.vbucket, hold))
        flow_bytes = self.flow.acked + self.flow.unacked
        events.append(
            self._event(ev.SeqnoWritten, vbucket=stream.vbucket, seqno=hold, flow_bytes=flow_bytes)
        )

    def end_at_marker(self, stream: Stream) -> None:
        """A losing stream reached a snapshot marker: it ends there, the marker and
        everything queued after it dropped (kv_engine
        ``ActiveStream::endIfRequiredPrivilegesLost``)."""
        reason = self.losing.pop(stream)
        stream.end(reason, discard_queue=True)

    def lose(self, losing: dict[Stream, StreamEndReason]) -> bool:
        """The user's privileges changed: the streams ``losing`` end at their next
        snapshot marker (with the reason each is given), the others go on. Each looks
        again; True if the streams losing are not the ones they were."""
        for stream in losing:
            self.streams.mark_ready(stream)
        changed = losing.keys() != self.losing.keys()
        self.losing = losing
        return changed

    def end_streams(self, streams: Iterable[Stream], reason: StreamEndReason) -> int:
        """End the live ``streams`` with ``reason`` (the end_stream step): each sends
        what it queued, then its STREAM_END, in its turn; how many."""
        n = 0
        for stream in streams:
            if stream.alive:
                stream.end(reason)
                self.streams.mark_ready(stream)
                n += 1
        return n

    def holds_released(self) -> None:
        """The node lifted its holds: every stream may send again."""
        self.reached.clear()
        for stream in self.streams:
            self.streams.mark_ready(stream)

    def end_reset_streams(
        self,
        streams: list[Stream],
        out: OutputQueue,
        events: list[ev.ProducerEvent] | None = None,
    ) -> bool:
        """End, now, ``streams``: their vbucket's history was cut or its state changed
        (failover, restart, state change: a reset on the change feed; kv_engine
        ``docs/dcp/documentation/failure-scenarios.md``).

        A node ends them when the vbucket changes, not when the stream next reads: the
        STREAM_END(STATE_CHANGED) goes into the reply queue ``out`` at once, so it is
        written before the answer to any later request on this connection (an
        OBSERVE_SEQNO or GET_FAILOVER_LOG that would show the new branch).
        Rollback-mitigating clients rely on that order (java-dcp-client would otherwise
        release lost writes). The end message skips the flow-control wait (one message
        of overshoot, as flow control allows: kv_engine
        ``docs/dcp/documentation/flow-control.md``) but is counted as outstanding like
        every stream message. ``events`` gets a ``StreamEnded`` for each (released once
        the reply queue is written). True if any stream ended.
        """
        ended = False
        for stream in streams:
            if not stream.alive:
                continue
            stream.end(StreamEndReason.STATE_CHANGED, discard_queue=True)
            for chunk in stream.chunks:  # just the STREAM_END: the queue was discarded
                frame = bytes(chunk.buf[chunk.offset : chunk.ends[-1] - chunk.base])
                out.append(frame)
                if self.flow.size:
                    self.flow.unacked += len(frame)
            stream.chunks.clear()
            stream.mark_drained()
            self.streams.forget(stream)
            if events is not None:
                events.append(self._ended(stream))
            ended = True
        return ended


def frames_up_to(chunk: Chunk, seqno: int) -> int:
    """Index (in ``chunk.ends``) of the first frame from ``chunk.pos`` on that a hold at
    ``seqno`` keeps back: the frames of a stream chunk are in seqno order, so a bisection
    over their seqnos, read from the frames themselves, finds the first past it. A hold
    keeps back the items past its seqno and the markers that open them, never a frame
    that stands at no seqno and comes next: a STREAM_END (the consumer needs it to
    re-open the stream and get the items the wait is about: issue 45; kv_engine
    ``docs/dcp/documentation/commands/stream-end.md``) or an OSO snapshot's begin or end
    marker."""
    lo, hi = chunk.pos, len(chunk.ends)
    while lo < hi:
        mid = (lo + hi) // 2
        if stream_frame_seqno(chunk.buf, _frame_start(chunk, mid)) <= seqno:
            lo = mid + 1
        else:
            hi = mid
    while lo < len(chunk.ends) and _at_no_seqno(chunk.buf, _frame_start(chunk, lo)):
        lo += 1
    return lo


def next_marker(chunk: Chunk) -> int | None:
    """Index (in ``chunk.ends``) of the first snapshot marker from ``chunk.pos`` on, or
    None if the chunk holds none."""
    for index in range(chunk.pos, len(chunk.ends)):
        if chunk.buf[_frame_start(chunk, index) + 1] == Opcode.DCP_SNAPSHOT_MARKER:
            return index
    return None


def _frame_start(chunk: Chunk, index: int) -> int:
    return chunk.ends[index - 1] - chunk.base if index else 0


def _at_no_seqno(buf: bytes | bytearray | memoryview, offset: int) -> bool:
    """The frame at ``offset`` is neither an item nor a snapshot marker (a STREAM_END,
    an OSO snapshot marker): it stands at no seqno a hold could be before."""
    return buf[offset + 1] != Opcode.DCP_SNAPSHOT_MARKER and stream_item_seqno(buf, offset) is None
