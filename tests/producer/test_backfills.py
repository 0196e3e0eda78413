"""A connection's backfill queue: one backfill reads the disk at a time (kv_engine's
``dcp_backfill_in_progress_per_connection_limit``, 1 by default, MB-57304); the others
wait their turn, first come, first served."""

from __future__ import annotations

from typing import TypeGuard

import pytest

from mockdcp.model import Bucket
from mockdcp.producer import StreamState
from mockdcp.producer._backfills import BackfillQueue
from mockdcp.protocol import (
    DcpCloseStream,
    DcpControl,
    DcpStreamRequest,
    Mutation,
    Response,
    SnapshotMarker,
    Status,
    StreamEnd,
    StreamEndReason,
)
from mockdcp.util import ModelError
from tests.producer._session import Session, decode_all

MAX = 2**64 - 1


# -- the queue alone -------------------------------------------------------------------


def test_the_first_stream_starts_and_the_next_waits_until_it_finishes() -> None:
    told: list[str] = []
    queue: BackfillQueue[str] = BackfillQueue(on_free=told.append)
    assert queue.start("a")
    assert not queue.start("b")
    assert not queue.start("c")
    assert queue.start("a")  # going on with its own backfill
    queue.finish("a")
    assert told == ["b"]
    assert not queue.start("c")  # b asked first
    assert queue.start("b")
    queue.finish("b")
    assert told == ["b", "c"]
    assert queue.start("c")


def test_a_waiting_stream_that_leaves_gives_nobody_a_turn() -> None:
    told: list[str] = []
    queue: BackfillQueue[str] = BackfillQueue(on_free=told.append)
    assert queue.start("a")
    assert not queue.start("b")
    assert not queue.start("c")
    queue.finish("b")  # closed while waiting
    assert told == []
    queue.finish("a")
    assert told == ["c"]
    assert queue.start("c")
    queue.finish("zzz")  # never asked: nothing happens
    assert told == ["c"]


def test_a_stream_told_its_turn_that_leaves_before_starting_passes_the_place_on() -> None:
    # a failover ends the stream told it may start before it reads: the next must not
    # wait for a turn nobody will give
    told: list[str] = []
    queue: BackfillQueue[str] = BackfillQueue(on_free=told.append)
    assert queue.start("a")
    assert not queue.start("b")
    assert not queue.start("c")
    queue.finish("a")
    assert told == ["b"]
    queue.finish("b")  # ended before its turn came round
    assert told == ["b", "c"]
    assert queue.start("c")


def test_with_a_limit_of_two_both_streams_told_may_start_in_either_order() -> None:
    told: list[str] = []
    queue: BackfillQueue[str] = BackfillQueue(2, on_free=told.append)
    assert queue.start("a")
    assert queue.start("b")
    assert not queue.start("c")
    assert not queue.start("d")
    assert not queue.start("e")
    queue.finish("a")
    queue.finish("b")
    assert told == ["c", "c", "d"]
    assert queue.start("d")  # second in line, with two places free
    assert queue.start("c")
    assert not queue.start("e")


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="≥ 1"):
        BackfillQueue(0)


# -- a connection's streams ------------------------------------------------------------


def on_disk(
    vbuckets: int = 3, per_vbucket: int = 30, value_size: int = 20_000, backfills: int = 1
) -> Bucket:
    """Documents in every vbucket, only on disk (their checkpoints expelled); a
    vbucket's backfill (600 kB) takes more than a piece (``PIECE_BYTES``) and more than
    a stream's turn (``QUANTUM``). ``backfills``: the bucket's backfills per connection."""
    b = Bucket(
        "default",
        vbuckets,
        seed=1,
        clock=lambda: 1_700_000_000.0,
        backfills_per_connection=backfills,
    )
    for vb in range(vbuckets):
        for i in range(per_vbucket):
            b.set(f"k{vb}-{i}", b"v" * value_size, vbucket=vb)
        b.checkpoint(vb)
        b.persist(vb)
    return b


def dcp_session(b: Bucket) -> Session:
    """A legacy DCP connection to ``b``, opened as a producer, no stream yet."""
    session = Session(b, features=())
    session.open_dcp()
    session.read()
    return session


def request(vb: int, start: int = 0, end: int = MAX, uuid: int = 0) -> bytes:
    return DcpStreamRequest(
        opaque=vb,
        vbucket=vb,
        flags=0,
        start_seqno=start,
        end_seqno=end,
        vbucket_uuid=uuid,
        snap_start_seqno=start,
        snap_end_seqno=start,
    ).encode()


def open_streams(session: Session, vbuckets: range) -> None:
    for vb in vbuckets:
        session.send(request(vb))


def is_marker(m: object) -> TypeGuard[SnapshotMarker]:
    return isinstance(m, SnapshotMarker)


def markers_in_order(session: Session, limit: int = 1 << 30) -> list[tuple[int, int, int]]:
    """(vbucket, start, end) of each marker sent, in the order sent, reading
    ``limit`` bytes a write."""
    out: list[tuple[int, int, int]] = []
    while data := session.conn.data_to_send(session.now, limit):
        sent = decode_all(data, collections=False)
        out += [
            (m.vbucket, m.start_seqno, m.end_seqno) for m in sent if isinstance(m, SnapshotMarker)
        ]
    return out


def test_streams_from_disk_are_backfilled_one_after_the_other_in_the_order_asked() -> None:
    b = on_disk()
    session = dcp_session(b)
    open_streams(session, range(2, -1, -1))
    sent = []
    while data := session.conn.data_to_send(session.now, 1 << 30):
        for m in decode_all(data, collections=False):
            if isinstance(m, (SnapshotMarker, Mutation)):
                sent.append(m.vbucket)
            assert len(session.conn.backfills.running) <= 1
    # each vbucket's marker and thirty mutations, whole, before the next vbucket's
    assert sent == [2] * 31 + [1] * 31 + [0] * 31


def test_a_bucket_staging_a_node_before_mb_57304_interleaves_the_backfills() -> None:
    """``backfills_per_connection=3`` (kv_engine
    ``dcp_backfill_in_progress_per_connection_limit`` raised, as a node before
    MB-57304 behaved): three backfills of one connection read at once."""
    b = on_disk(backfills=3)
    session = dcp_session(b)
    assert session.conn.backfills.limit == 3
    open_streams(session, range(3))
    sent = []
    while data := session.conn.data_to_send(session.now, 1 << 30):
        sent += [m.vbucket for m in decode_all(data, collections=False) if isinstance(m, Mutation)]
        assert len(session.conn.backfills.running) <= 3
    assert sent != sorted(sent)  # the test above would pass without the queue otherwise
    assert sorted(sent) == [0] * 30 + [1] * 30 + [2] * 30


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "2"])
def test_a_backfill_limit_below_one_or_not_an_integer_is_refused(limit: object) -> None:
    with pytest.raises(ModelError, match="backfills_per_connection is an integer ≥ 1"):
        Bucket("default", 4, clock=lambda: 0.0, backfills_per_connection=limit)  # type: ignore[arg-type]


def test_a_stream_waiting_for_its_backfill_has_read_nothing_yet() -> None:
    b = on_disk()
    session = dcp_session(b)
    open_streams(session, range(3))
    session.conn.data_to_send(session.now, 1000)  # vb 0's marker and a few mutations
    waiting = [session.conn.streams.get(vb, None) for vb in (1, 2)]
    assert all(
        s is not None and s.backfills == 0 and s.state.value == "backfilling" for s in waiting
    )
    assert session.conn.backfills.running == [session.conn.streams.get(0, None)]


def test_closing_the_stream_whose_backfill_runs_lets_the_next_one_start() -> None:
    b = on_disk()
    session = dcp_session(b)
    open_streams(session, range(2))
    session.conn.data_to_send(session.now, 1000)  # vb 0 started
    session.send(DcpCloseStream(opaque=9, vbucket=0).encode())
    rest = markers_in_order(session)
    assert rest == [(1, 0, 30)]


def test_a_stream_ended_while_waiting_leaves_the_queue() -> None:
    b = on_disk()
    session = dcp_session(b)
    open_streams(session, range(3))
    session.conn.data_to_send(session.now, 1000)
    session.send(DcpCloseStream(opaque=9, vbucket=1).encode())  # waiting: it just leaves
    assert [m[0] for m in markers_in_order(session)] == [2]
    assert session.conn.backfills.running == []
    assert session.conn.backfills.waiting == {}


def test_memory_streams_do_not_wait_for_a_backfill() -> None:
    b = on_disk(vbuckets=2)  # vb 0's backfill: more than a turn's bytes
    b.set("new", b"x", vbucket=1)
    session = dcp_session(b)
    open_streams(session, range(1))  # vb 0 from disk
    session.send(request(1, start=30, uuid=b.vbucket(1).failover.entries[0][0]))
    sent = decode_all(session.conn.data_to_send(session.now, 1 << 30), collections=False)
    order = [(m.vbucket, m.by_seqno) for m in sent if isinstance(m, Mutation)]
    assert order.index((1, 31)) < order.index((0, 30))


def test_a_stream_that_reaches_its_end_from_disk_frees_its_place() -> None:
    b = on_disk(vbuckets=2)
    session = dcp_session(b)
    for vb in range(2):
        session.send(request(vb, end=10))
    messages = decode_all(session.conn.data_to_send(session.now, 1 << 20), collections=False)
    ends = [m.vbucket for m in messages if isinstance(m, StreamEnd)]
    assert ends == [0, 1]


def test_a_stream_told_its_turn_after_a_backfill_that_sent_nothing_still_gets_it() -> None:
    # vb 0 has new documents on disk only, more than a piece; vb 1-3 nothing new. After
    # the memory-to-disk switch vb 0 reads first and, its last piece queued, tells vb 1
    # it may start; vb 1's backfill reads nothing and tells vb 2 without queueing a
    # byte. vb 2 must get its turn in the same write, not wait for a change in its
    # vbucket that may never come.
    b = on_disk(vbuckets=4)
    session = dcp_session(b)
    session.call(DcpControl(opaque=0, key="supports_cursor_dropping_vulcan", value="true"))
    for vb in range(4):
        session.send(request(vb, start=30, uuid=b.vbucket(vb).failover.entries[0][0]))
    while session.conn.data_to_send(session.now, 1 << 30):
        pass
    assert all(s.state is StreamState.IN_MEMORY for s in session.conn.streams)
    assert len(session.node.steps.drop_cursor()) == 4
    for i in range(30):
        b.set(f"new{i}", b"n" * 20_000, vbucket=0)
    b.checkpoint(0)
    b.persist(0)
    sent = []
    while data := session.conn.data_to_send(session.now, 1 << 30):
        sent += [m.vbucket for m in decode_all(data, collections=False) if isinstance(m, Mutation)]
    assert sent == [0] * 30
    assert [s.state for s in session.conn.streams] == [StreamState.IN_MEMORY] * 4
    assert (session.conn.backfills.running, session.conn.backfills.waiting) == ([], {})


def test_a_backfill_whose_range_was_purged_while_it_waited_ends_state_changed() -> None:
    """kv_engine ``DCPBackfillBySeqnoDisk::create``: tombstones purged past the start
    while the backfill waited its turn: the stream is set dead with Rollback, which a
    node writes as STATE_CHANGED (``StreamEndResponse::statusToFlags``); asked again,
    the stream is answered ROLLBACK to 0."""
    b = on_disk(vbuckets=2)
    session = dcp_session(b)
    uuid = b.vbucket(1).failover.newest_uuid
    session.send(request(0))
    session.send(request(1, start=5, uuid=uuid))  # accepted: nothing purged yet
    first = decode_all(session.conn.data_to_send(session.now, 1000), collections=False)
    assert not [m for m in first if isinstance(m, StreamEnd)]
    for i in range(10, 20):
        b.delete(f"k1-{i}", vbucket=1)
    b.checkpoint(1)
    b.persist(1)
    assert b.purge(1) == 10
    rest = []
    while data := session.conn.data_to_send(session.now, 1 << 30):
        rest += decode_all(data, collections=False)
    ends = [(m.vbucket, m.reason) for m in rest if isinstance(m, StreamEnd)]
    assert ends == [(1, StreamEndReason.STATE_CHANGED)]
    assert not [m for m in rest if isinstance(m, Mutation) and m.vbucket == 1]
    session.send(request(1, start=5, uuid=uuid))
    [reply] = decode_all(session.conn.data_to_send(session.now, 1 << 30), collections=False)
    assert isinstance(reply, Response)
    assert (reply.status, reply.value) == (Status.ROLLBACK, (0).to_bytes(8, "big"))


def test_a_stream_ended_for_a_rollback_is_told_state_changed() -> None:
    """kv_engine ``StreamEndResponse::statusToFlags``: reason 6 (Rollback) is never
    written; a node ending streams for a rollback sends STATE_CHANGED (2)."""
    b = on_disk(vbuckets=1, per_vbucket=2, value_size=10)
    session = dcp_session(b)
    session.send(request(0))
    session.read()
    assert session.conn.end_streams(0, StreamEndReason.ROLLBACK) == 1
    [end] = [m for m in session.read() if isinstance(m, StreamEnd)]
    assert end.reason is StreamEndReason.STATE_CHANGED
