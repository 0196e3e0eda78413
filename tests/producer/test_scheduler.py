"""The stream scheduler alone (no connection, no socket): round robin over ready streams,
the flow-control window, holds, and the events of what it took."""

from __future__ import annotations

from typing import Any

import attrs

from mockdcp.model import Bucket
from mockdcp.producer import DcpSettings, Stream, StreamRequestDecision, events as ev
from mockdcp.producer._encoder import ItemEncoder
from mockdcp.producer._flow import FlowWindow
from mockdcp.producer._output import OutputQueue
from mockdcp.producer._registry import StreamRegistry
from mockdcp.producer._scheduler import StreamScheduler
from mockdcp.protocol import (
    FrameReader,
    Opcode,
    Status,
    StreamEndReason,
    VBucketState,
    stream_item_seqno,
)

MAX = 2**64 - 1


def loaded(vbuckets: int = 2, per_vbucket: int = 50) -> Bucket:
    b = Bucket("default", vbuckets, seed=1, clock=lambda: 1_700_000_000.0)
    for vb in range(vbuckets):
        for i in range(per_vbucket):
            b.set(f"k{vb}-{i}", b'{"v":1}', vbucket=vb)
    return b


def scheduler(
    b: Bucket,
    holds: dict[int, int] | None = None,
    window: int = 0,
    settings: DcpSettings | None = None,
) -> tuple[StreamScheduler, StreamRegistry, FlowWindow]:
    settings = settings or DcpSettings()
    streams, flow = StreamRegistry(), FlowWindow()
    if window:
        flow.resize(window)
    encoder = ItemEncoder(settings)
    for vb in range(b.num_vbuckets):
        request = StreamRequestDecision(status=Status.SUCCESS, start_seqno=0, end_seqno=MAX)
        streams.add(
            Stream(
                vb=b.vbucket(vb),
                opaque=vb,
                request=request,
                encoder=encoder,
                cursor_name=f"{vb}",
                sync_writes=settings.sync_writes,
                sync_replication=settings.sync_replication,
            )
        )

    def event(kind: type[ev.ProducerEvent], **fields: Any) -> ev.ProducerEvent:  # noqa: ANN401
        return kind(time=0.0, conn_id=1, name="t", **fields)

    return StreamScheduler(streams, flow, lambda: holds or {}, event), streams, flow


def mutations_by_vbucket(parts: list[bytes | memoryview]) -> list[int]:
    reader = FrameReader(max_frame_size=1 << 24)
    reader.feed(b"".join(parts))
    out = []
    while (frame := reader.next_frame()) is not None:
        if frame.opcode == Opcode.DCP_MUTATION:
            out.append(frame.vbucket)
    return out


def test_drain_sends_every_ready_stream_and_notes_what_was_written() -> None:
    sched, _, _ = scheduler(loaded())
    parts: list[bytes | memoryview] = []
    events: list[ev.ProducerEvent] = []
    size = sched.drain(parts, 0, 1 << 20, events)
    assert size == sum(map(len, parts))
    assert sorted(mutations_by_vbucket(parts)) == [0] * 50 + [1] * 50
    written = {(e.vbucket, e.seqno) for e in events if isinstance(e, ev.StreamWritten)}
    assert written == {(0, 50), (1, 50)}


def test_drain_takes_turns_between_streams_within_the_limit() -> None:
    sched, _, _ = scheduler(loaded(per_vbucket=2000))
    parts: list[bytes | memoryview] = []
    sched.drain(parts, 0, 600 * 1024, [])
    vbuckets = mutations_by_vbucket(parts)
    assert set(vbuckets) == {0, 1}  # neither stream has the whole write
    assert vbuckets[0] != vbuckets[-1]


def test_a_full_flow_control_window_stops_the_drain_after_one_message() -> None:
    sched, _, flow = scheduler(loaded(vbuckets=1), window=100)
    parts: list[bytes | memoryview] = []
    sched.drain(parts, 0, 1 << 20, [])
    assert not flow.open
    sent = flow.unacked
    assert sched.drain(parts, sum(map(len, parts)), 1 << 20, []) == sum(map(len, parts))
    assert flow.unacked == sent  # nothing more until an ack
    assert not sched.can_send()
    flow.ack(sent)
    assert sched.can_send()


def test_a_hold_stops_its_vbucket_at_the_seqno_and_is_reported_once() -> None:
    sched, _, _ = scheduler(loaded(), holds={0: 10})
    parts: list[bytes | memoryview] = []
    events: list[ev.ProducerEvent] = []
    sched.drain(parts, 0, 1 << 20, events)
    assert mutations_by_vbucket(parts).count(0) == 10
    assert mutations_by_vbucket(parts).count(1) == 50
    reached = [e for e in events if isinstance(e, ev.SeqnoWritten)]
    assert [(e.vbucket, e.seqno) for e in reached] == [(0, 10)]
    more: list[ev.ProducerEvent] = []
    sched.drain(parts, 0, 1 << 20, more)
    assert not [e for e in more if isinstance(e, ev.SeqnoWritten)]


def frames(parts: list[bytes | memoryview]) -> list[tuple[int, int]]:
    """(opcode, the seqno it stands at) of each item frame in ``parts``."""
    reader = FrameReader(max_frame_size=1 << 24)
    reader.feed(b"".join(parts))
    out = []
    while (frame := reader.next_frame()) is not None:
        seqno = stream_item_seqno(frame.encode(), 0)
        if seqno is not None:
            out.append((frame.opcode, seqno))
    return out


def test_a_hold_lets_prepares_commits_and_aborts_up_to_its_seqno_through() -> None:
    # a sync-writes stream: DCP_PREPARE, DCP_COMMIT and DCP_ABORT stand at their own
    # seqnos (a commit's and an abort's second extras field), not after every seqno
    b = Bucket("default", 1, seed=1, clock=lambda: 1_700_000_000.0)
    b.set("a", b"1", vbucket=0)  # 1
    b.sync_write("b", b"2", vbucket=0, outcome="abort")  # 2, 3
    b.sync_write("c", b"3", vbucket=0)  # 4, 5
    b.set("d", b"4", vbucket=0)  # 6
    settings = DcpSettings(sync_writes=True, consumer_name="replica")
    holds = {0: 5}
    sched, _, _ = scheduler(b, holds=holds, settings=settings)
    parts: list[bytes | memoryview] = []
    events: list[ev.ProducerEvent] = []
    sched.drain(parts, 0, 1 << 20, events)
    assert frames(parts) == [
        (Opcode.DCP_MUTATION, 1),
        (Opcode.DCP_PREPARE, 2),
        (Opcode.DCP_ABORT, 3),
        (Opcode.DCP_PREPARE, 4),
        (Opcode.DCP_COMMIT, 5),
    ]
    assert [(e.vbucket, e.seqno) for e in events if isinstance(e, ev.SeqnoWritten)] == [(0, 5)]
    written = [e.seqno for e in events if isinstance(e, ev.StreamWritten)]
    assert written[-1] == 5


def test_a_stream_ended_short_of_a_hold_sends_its_stream_end() -> None:
    """A hold at seqno 10 on a stream that ended at 5: nothing of it lies past the hold,
    so its STREAM_END goes out (held, the consumer could never re-open to reach 10: a
    ``wait`` after an ``end_stream`` and a write timed out)."""
    b = loaded(vbuckets=1, per_vbucket=5)
    sched, streams, _ = scheduler(b, holds={0: 10})
    parts: list[bytes | memoryview] = []
    sched.drain(parts, 0, 1 << 20, [])
    assert len(mutations_by_vbucket(parts)) == 5
    b.set("later", b"1", vbucket=0)  # 6: the stream is ended before it reads it
    (stream,) = streams.of_vbucket(0)
    stream.end(StreamEndReason.CLOSED)
    streams.mark_ready(stream)
    ending: list[bytes | memoryview] = []
    events: list[ev.ProducerEvent] = []
    sched.drain(ending, 0, 1 << 20, events)
    reader = FrameReader()
    reader.feed(b"".join(ending))
    frame = reader.next_frame()
    assert frame is not None
    assert frame.opcode == Opcode.DCP_STREAM_END
    assert [e.reason for e in events if isinstance(e, ev.StreamEnded)] == ["CLOSED"]


def test_a_write_that_ends_with_the_stream_end_still_notes_its_last_item() -> None:
    """Items and the STREAM_END after them in one write: the stream was written up to
    its last item (the protocol checker judges a resume against it: a consumer that got
    seqno 5 and resumes from 5 did not resume above what it was sent; found by explore,
    seed 3, schedule 79)."""
    b = loaded(vbuckets=1, per_vbucket=5)
    sched, streams, _ = scheduler(b)
    (stream,) = streams.of_vbucket(0)
    stream.refill()
    stream.end(StreamEndReason.STATE_CHANGED)
    streams.mark_ready(stream)
    parts: list[bytes | memoryview] = []
    events: list[ev.ProducerEvent] = []
    sched.drain(parts, 0, 1 << 20, events)
    assert len(mutations_by_vbucket(parts)) == 5
    assert [type(e) for e in events] == [ev.StreamWritten, ev.StreamEnded]
    (written,) = [e for e in events if isinstance(e, ev.StreamWritten)]
    assert written.seqno == 5


def test_a_stream_end_behind_frames_past_the_hold_stays_held() -> None:
    b = loaded(vbuckets=1, per_vbucket=5)
    sched, streams, _ = scheduler(b, holds={0: 3})
    (stream,) = streams.of_vbucket(0)
    stream.refill()
    stream.end(StreamEndReason.CLOSED)
    streams.mark_ready(stream)
    parts: list[bytes | memoryview] = []
    events: list[ev.ProducerEvent] = []
    sched.drain(parts, 0, 1 << 20, events)
    assert len(mutations_by_vbucket(parts)) == 3
    assert not [e for e in events if isinstance(e, ev.StreamEnded)]


def test_released_holds_let_the_stream_go_on() -> None:
    holds = {0: 10}
    sched, _, _ = scheduler(loaded(vbuckets=1), holds=holds)
    first: list[bytes | memoryview] = []
    sched.drain(first, 0, 1 << 20, [])
    holds.clear()
    sched.holds_released()
    rest: list[bytes | memoryview] = []
    sched.drain(rest, 0, 1 << 20, [])
    assert len(mutations_by_vbucket(first)) + len(mutations_by_vbucket(rest)) == 50


def test_a_state_change_ends_the_stream_at_once_into_the_reply_queue() -> None:
    b = loaded(vbuckets=1)
    sched, streams, _ = scheduler(b)
    b.set_vbucket_state(0, VBucketState.REPLICA)
    out = OutputQueue()
    assert sched.end_reset_streams(streams.of_vbucket(0), out)
    reader = FrameReader()
    reader.feed(b"".join(out.take()))
    frame = reader.next_frame()
    assert frame is not None
    assert frame.opcode == Opcode.DCP_STREAM_END
    assert not streams.of_vbucket(0)


def test_a_hold_never_keeps_back_the_stream_end_that_comes_next() -> None:
    # issue 45: a wait holds vb 0 at 50, everything up to it is written, the stream
    # ends STATE_CHANGED: the STREAM_END goes out (the consumer re-opens on it), and
    # the hold is still reported reached
    sched, streams, _ = scheduler(loaded(vbuckets=1), holds={0: 50})
    parts: list[bytes | memoryview] = []
    sched.drain(parts, 0, 1 << 20, [])
    (stream,) = streams.of_vbucket(0)
    stream.end(StreamEndReason.STATE_CHANGED)
    streams.mark_ready(stream)
    events: list[ev.ProducerEvent] = []
    sched.drain(parts, 0, 1 << 20, events)
    reader = FrameReader(max_frame_size=1 << 24)
    reader.feed(b"".join(parts))
    opcodes = []
    while (frame := reader.next_frame()) is not None:
        opcodes.append(frame.opcode)
    assert opcodes[-1] == Opcode.DCP_STREAM_END
    assert opcodes.count(Opcode.DCP_MUTATION) == 50
    assert [e.reason for e in events if isinstance(e, ev.StreamEnded)] == ["STATE_CHANGED"]


def test_a_hold_below_queued_items_keeps_them_and_the_end_behind_them() -> None:
    sched, streams, _ = scheduler(loaded(vbuckets=1), holds={0: 10})
    (stream,) = streams.of_vbucket(0)
    parts: list[bytes | memoryview] = []
    sched.drain(parts, 0, 1 << 20, [])
    stream.end(StreamEndReason.STATE_CHANGED)
    streams.mark_ready(stream)
    sched.drain(parts, 0, 1 << 20, [])
    assert mutations_by_vbucket(parts) == [0] * 10  # items 11..50 and the end wait


def test_items_written_with_the_stream_end_after_them_are_reported() -> None:
    """explore --seed 8 --nodes 3 --replicas 1 --vbuckets 8 (schedule 135 at the time):
    a stream ended (``end_stream``) with items still queued sends them and the
    STREAM_END in one take; the write was reported by its last frame only, the
    STREAM_END at no seqno, so the checker believed seqno 1 the highest sent and
    blamed the consumer's resume from 3 (``resume.above_sent``)."""
    b = loaded(vbuckets=1, per_vbucket=5)
    sched, streams, _ = scheduler(b)
    (stream,) = streams.of_vbucket(0)
    stream.refill()  # 1..5 queued, none sent
    stream.end(StreamEndReason.CLOSED)
    streams.mark_ready(stream)
    parts: list[bytes | memoryview] = []
    events: list[ev.ProducerEvent] = []
    sched.drain(parts, 0, 1 << 20, events)
    assert len(mutations_by_vbucket(parts)) == 5
    written = [e.seqno for e in events if isinstance(e, ev.StreamWritten)]
    assert written == [5]
    assert [e.reason for e in events if isinstance(e, ev.StreamEnded)] == ["CLOSED"]


def test_an_event_stamped_when_written_keeps_every_other_field() -> None:
    """``written_at``: what ``Connection.data_written`` records once a write is done,
    field by field for a ``StreamWritten`` as ``attrs.evolve`` gives any other event."""
    written = ev.StreamWritten(time=1.0, conn_id=3, name="n", vbucket=7, stream_id=2, seqno=9)
    noop = ev.NoopSent(time=1.0, conn_id=3, name="n", opaque=5)
    for event in (written, noop):
        stamped = ev.written_at(event, 2.5)
        assert type(stamped) is type(event)
        assert stamped == attrs.evolve(event, time=2.5)
