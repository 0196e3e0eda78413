"""The reference consumer with sync writes (kv_engine docs/dcp/documentation/commands/
prepare.md, commit.md, abort.md): prepares held and never delivered, a commit delivers
its prepare's document at the commit's seqno, an abort drops it."""

from __future__ import annotations

import pytest

from mockdcp.client import ConsumerCore, Emit, StreamFilter
from mockdcp.client._core import STREAM_OPAQUE_BASE
from mockdcp.protocol import (
    Abort,
    Commit,
    Deletion,
    Frame,
    FrameReader,
    Message,
    Mutation,
    Prepare,
    SnapshotMarker,
    SnapshotMarkerVersion,
)

OPAQUE = STREAM_OPAQUE_BASE


def _frame(msg: Message) -> Frame:
    reader = FrameReader()
    reader.feed(msg.encode())
    frame = reader.next_frame()
    assert frame is not None
    return frame


def _prepare(key: bytes, seqno: int, value: bytes = b"", *, deleted: bool = False) -> Prepare:
    return Prepare(
        opaque=OPAQUE,
        vbucket=0,
        cas=seqno,
        by_seqno=seqno,
        rev_seqno=1,
        key=key,
        value=value,
        deleted=deleted,
    )


def _feed(core: ConsumerCore, *msgs: Message) -> list[object]:
    events: list[object] = []
    for msg in msgs:
        events += [a.event for a in core.receive(_frame(msg)) if isinstance(a, Emit)]
    return events


def test_controls_enable_sync_writes_with_a_consumer_name() -> None:
    core = ConsumerCore(name="c1", vbuckets=[0], sync_writes=True)
    sent = [(c.key, c.value) for c in core.controls()]
    assert ("enable_sync_writes", "true") in sent
    assert ("consumer_name", "c1") in sent
    plain = ConsumerCore(vbuckets=[0])
    assert not any(c.key == "enable_sync_writes" for c in plain.controls())
    with pytest.raises(ValueError, match="stream-ids"):
        ConsumerCore(vbuckets=[0], sync_writes=True, streams=[StreamFilter(sid=1)])


def test_commits_are_delivered_and_aborted_or_pending_values_never() -> None:
    core = ConsumerCore(vbuckets=[0], collections=False, sync_writes=True)
    core.stream_request(0)
    marker = SnapshotMarker(
        opaque=OPAQUE,
        vbucket=0,
        start_seqno=0,
        end_seqno=5,
        flags=1,
        version=SnapshotMarkerVersion.V2_0,
        max_visible_seqno=5,
    )
    events = _feed(
        core,
        marker,
        Mutation(opaque=OPAQUE, vbucket=0, by_seqno=1, rev_seqno=1, key=b"a", value=b"1"),
        _prepare(b"b", 2, b"2"),
        Commit(opaque=OPAQUE, vbucket=0, prepared_seqno=2, commit_seqno=3, key=b"b"),
        _prepare(b"c", 4, b"secret"),
        Abort(opaque=OPAQUE, vbucket=0, prepared_seqno=4, abort_seqno=5, key=b"c"),
        SnapshotMarker(opaque=OPAQUE, vbucket=0, start_seqno=6, end_seqno=8, flags=1),
        _prepare(b"a", 6, deleted=True),
        Commit(opaque=OPAQUE, vbucket=0, prepared_seqno=6, commit_seqno=7, key=b"a"),
        _prepare(b"d", 8, b"pending"),
    )
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["SnapshotMarker", "Mutation", "Mutation", "SnapshotMarker", "Deletion"]
    committed = events[2]
    assert isinstance(committed, Mutation)
    assert (committed.key, committed.value, committed.by_seqno) == (b"b", b"2", 3)
    assert isinstance(events[4], Deletion)
    assert events[4].by_seqno == 7
    state = core.state
    assert set(state.documents()) == {(0, b"b")}
    values = [v.value for vs in state.versions.values() for v in vs]
    assert b"secret" not in values
    assert b"pending" not in values
    assert list(state.prepares) == [(0, None, 0, b"d")]
    pos = state.position(0)
    assert (pos.seqno, pos.snap_start, pos.snap_end) == (8, 8, 8)  # a prepare ended it
    assert state.consistent[(0, None)] == [0, 5, 8]  # an abort ended the first
    assert state.aborts == 1
    assert state.violations == []


def test_a_commit_of_an_unknown_prepare_is_a_violation_and_rollback_drops_prepares() -> None:
    core = ConsumerCore(vbuckets=[0], collections=False, sync_writes=True)
    core.stream_request(0)
    marker = SnapshotMarker(opaque=OPAQUE, vbucket=0, start_seqno=0, end_seqno=2, flags=1)
    _feed(core, marker, _prepare(b"x", 1, b"v"))
    core.state.mark_consistent(0, 0)
    core.state.roll_back(0, 0)
    assert core.state.prepares == {}
    events = _feed(
        core,
        SnapshotMarker(opaque=OPAQUE, vbucket=0, start_seqno=1, end_seqno=2, flags=1),
        Commit(opaque=OPAQUE, vbucket=0, prepared_seqno=1, commit_seqno=2, key=b"x"),
    )
    assert [type(e).__name__ for e in events] == ["SnapshotMarker"]
    assert core.state.violations == ["vb 0 commit at 2 of prepare 1 never received"]
    assert core.state.documents() == {}
