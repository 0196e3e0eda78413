"""Durable writes on streams of consumers with ``enable_sync_writes`` (kv_engine
``active_stream.cc``; docs/dcp/documentation/commands/prepare.md, commit.md, abort.md,
seqno-acknowledged.md, snapshot-marker.md): DCP_PREPARE, DCP_COMMIT from memory,
commits from disk as mutations, DCP_ABORT, v2.0 markers with the max visible seqno
(and the high completed seqno on disk) once a consumer name is set too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mockdcp.protocol import (
    Abort,
    Commit,
    DcpControl,
    DcpSeqnoAcknowledged,
    DcpStreamRequest,
    Deletion,
    HelloFeature,
    Mutation,
    Prepare,
    Response,
    SeqnoAdvanced,
    SnapshotMarker,
    SnapshotMarkerVersion,
    Status,
    StreamEnd,
    StreamEndReason,
)
from tests.producer._session import FEATURES, Session
from tests.producer.test_durable_streams import MAX, bucket, writes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model import Bucket


def session(b: Bucket, *, collections: bool, name: bool = True) -> Session:
    extra = (HelloFeature.COLLECTIONS,) if collections else ()
    s = Session(b, features=(*FEATURES, *extra))
    s.open_dcp()
    s.call(DcpControl(opaque=0, key="enable_noop", value="true"))
    assert s.call(DcpControl(opaque=0, key="enable_sync_writes", value="true"))[0].status == 0  # type: ignore[union-attr]
    if name:
        s.call(DcpControl(opaque=0, key="consumer_name", value="replica"))
    return s


def stream(s: Session) -> list[Any]:
    req = DcpStreamRequest(
        opaque=1,
        vbucket=0,
        flags=0,
        start_seqno=0,
        end_seqno=MAX,
        vbucket_uuid=0,
        snap_start_seqno=0,
        snap_end_seqno=0,
    )
    return [m for m in s.call(req) if not isinstance(m, Response)]


def summary(msgs: Sequence[object]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for m in msgs:
        if isinstance(m, SnapshotMarker):
            mvs = m.max_visible_seqno if m.version is not SnapshotMarkerVersion.V1 else None
            out.append(("marker", m.start_seqno, m.end_seqno, mvs))
        elif isinstance(m, Mutation):
            out.append(("mutation", m.key, m.value, m.by_seqno))
        elif isinstance(m, Prepare):
            out.append(("prepare", m.key, m.value, m.by_seqno))
        elif isinstance(m, Commit):
            out.append(("commit", m.key, m.prepared_seqno, m.commit_seqno))
        elif isinstance(m, Abort):
            out.append(("abort", m.key, m.prepared_seqno, m.abort_seqno))
        elif isinstance(m, SeqnoAdvanced):
            out.append(("advanced", m.by_seqno))
        else:
            out.append((type(m).__name__,))
    return out


def to_disk_only(b: Bucket) -> None:
    """Persist everything and leave the checkpoints without seqno 1: streams backfill."""
    b.persist()
    vb = b.vbucket(0)
    vb.drop_cursor()
    b.checkpoint()
    b.set("z", "9", vbucket=0)
    b.persist()
    while len(vb.checkpoints) > 1:
        vb.checkpoints.pop(0)
    assert vb.register_cursor("probe", 0) is None
    vb.remove_cursor("probe")


MEMORY = [
    ("mutation", b"a", b"1", 1),
    ("prepare", b"b", b"2", 2),
    ("commit", b"b", 2, 3),
    ("prepare", b"c", b"3", 4),
]


def test_legacy_memory_stream_gets_prepares_commits_and_aborts() -> None:
    b = bucket()
    writes(b)
    got = summary(stream(session(b, collections=False)))
    # the abort of c (5) opened a new checkpoint; the prepare of d (6) is its tail
    assert got == [
        ("marker", 0, 4, 3),
        *MEMORY,
        ("marker", 5, 6, 3),
        ("abort", b"c", 4, 5),
        ("prepare", b"d", b"4", 6),
    ]


def test_collection_aware_memory_stream_sends_no_seqno_advanced() -> None:
    b = bucket()
    writes(b)
    cid = b.create_collection("_default", "hotel")  # 7
    b.sync_write("h", "x", collection_id=cid, vbucket=0, level="persist_to_majority")  # 8, 9
    msgs = stream(session(b, collections=True))
    got = summary(msgs)
    assert ("advanced", 4) not in got
    assert ("advanced", 6) not in got
    assert got[:5] == [("marker", 0, 4, 3), *MEMORY]
    prepare = next(m for m in msgs if isinstance(m, Prepare) and m.key == b"h")
    assert (prepare.collection_id, prepare.durability_level, prepare.deleted) == (cid, 3, False)
    commit = next(m for m in msgs if isinstance(m, Commit) and m.key == b"h")
    assert (commit.collection_id, commit.prepared_seqno, commit.commit_seqno) == (cid, 8, 9)
    first = next(m for m in msgs if isinstance(m, Prepare))
    assert first.collection_id == 0
    assert first.durability_level == 1


def test_prepared_deletion_and_prepare_fields() -> None:
    b = bucket()
    b.set("a", "1", vbucket=0, flags=7)  # 1
    b.sync_write("a", deleted=True, vbucket=0, level="majority_and_persist_on_master")  # 2, 3
    msgs = stream(session(b, collections=False))
    prepare = next(m for m in msgs if isinstance(m, Prepare))
    assert (prepare.by_seqno, prepare.deleted, prepare.durability_level) == (2, True, 2)
    assert prepare.rev_seqno == 2
    assert prepare.key == b"a"
    assert prepare.collection_id is None
    assert isinstance(msgs[-1], Commit)
    assert msgs[-1].commit_seqno == 3


def test_without_a_consumer_name_markers_stay_v1() -> None:
    b = bucket()
    writes(b)
    msgs = stream(session(b, collections=False, name=False))
    markers = [m for m in msgs if isinstance(m, SnapshotMarker)]
    assert {m.version for m in markers} == {SnapshotMarkerVersion.V1}
    assert [type(m) for m in msgs if not isinstance(m, SnapshotMarker)] == [
        Mutation,
        Prepare,
        Commit,
        Prepare,
        Abort,
        Prepare,
    ]


def test_disk_stream_sends_commits_as_mutations_and_the_high_completed_seqno() -> None:
    b = bucket()
    writes(b)
    to_disk_only(b)
    for collections in (False, True):
        msgs = stream(session(b, collections=collections))
        marker = msgs[0]
        assert isinstance(marker, SnapshotMarker)
        assert marker.version is SnapshotMarkerVersion.V2_0
        assert (marker.start_seqno, marker.end_seqno) == (0, 7)
        assert (marker.max_visible_seqno, marker.high_completed_seqno) == (7, 4)
        # the committed prepare of b left the disk; c's abort and d's prepare stay
        assert summary(msgs[1:]) == [
            ("mutation", b"a", b"1", 1),
            ("mutation", b"b", b"2", 3),
            ("abort", b"c", 4, 5),
            ("prepare", b"d", b"4", 6),
            ("mutation", b"z", b"9", 7),
        ]


def test_disk_marker_max_visible_seqno_below_a_prepare_tail() -> None:
    b = bucket()
    b.set("a", "1", vbucket=0)  # 1
    b.sync_write("d", "4", vbucket=0, outcome="pending")  # 2
    b.persist()
    vb = b.vbucket(0)
    vb.drop_cursor()
    b.checkpoint()
    b.set("y", "8", vbucket=0)  # 3: a checkpoint after the backfill
    while len(vb.checkpoints) > 1:
        vb.checkpoints.pop(0)
    got = summary(stream(session(b, collections=True)))
    assert got[:3] == [
        ("marker", 0, 2, 1),
        ("mutation", b"a", b"1", 1),
        ("prepare", b"d", b"4", 2),
    ]


def test_legacy_backfill_with_sync_writes_fails_once_collections_exist() -> None:
    b = bucket()
    writes(b)
    b.create_collection("_default", "hotel")
    to_disk_only(b)
    msgs = stream(session(b, collections=False))
    assert len(msgs) == 1
    assert isinstance(msgs[0], StreamEnd)
    assert msgs[0].reason is StreamEndReason.BACKFILL_FAILED


def test_seqno_acknowledged_needs_sync_replication_and_gets_no_reply() -> None:
    b = bucket()
    writes(b)
    ack = DcpSeqnoAcknowledged(opaque=1, vbucket=0, prepared_seqno=4)
    s = session(b, collections=False)
    stream(s)
    assert s.call(ack) == []
    plain = session(b, collections=False, name=False)
    (reply,) = plain.call(ack)
    assert isinstance(reply, Response)
    assert reply.status == Status.EINVAL


def test_deletion_commit_from_disk_is_a_deletion() -> None:
    b = bucket()
    b.set("a", "1", vbucket=0)  # 1
    b.sync_write("a", deleted=True, vbucket=0)  # 2, 3
    to_disk_only(b)
    got = stream(session(b, collections=False))
    assert any(isinstance(m, Deletion) and m.by_seqno == 3 for m in got)
    assert not any(isinstance(m, Commit | Prepare) for m in got)


def filtered(s: Session, value: bytes) -> list[Any]:
    req = DcpStreamRequest(
        opaque=1,
        vbucket=0,
        flags=0,
        start_seqno=0,
        end_seqno=MAX,
        vbucket_uuid=0,
        snap_start_seqno=0,
        snap_end_seqno=0,
        value=value,
    )
    return s.call(req)


def test_a_collection_filter_cannot_stream_sync_writes_a_scope_filter_can() -> None:
    # kv_engine ``DcpProducer::streamRequest`` refuses FilterType::Collection only
    b = bucket()
    sid = b.create_scope("s")
    cid = b.create_collection("s", "hotel")
    (reply,) = filtered(session(b, collections=True), f'{{"collections": ["{cid:x}"]}}'.encode())
    assert isinstance(reply, Response)
    assert reply.status == Status.NOT_SUPPORTED
    got = filtered(session(b, collections=True), f'{{"scope": "{sid:x}"}}'.encode())
    assert isinstance(got[0], Response)
    assert got[0].status == Status.SUCCESS


def scoped_writes() -> tuple[Bucket, int, int]:
    """A scope's collection with a visible item (3), a default-collection one above it
    (4), then a prepare in the scope (5): vbucket 0, one checkpoint."""
    b = bucket()
    sid = b.create_scope("s")  # 1
    cid = b.create_collection("s", "hotel")  # 2
    b.set("h", "1", collection_id=cid, vbucket=0)  # 3
    b.set("a", "2", vbucket=0)  # 4: not the scope's
    b.sync_write("p", "3", collection_id=cid, vbucket=0, outcome="pending")  # 5
    return b, sid, cid


def test_a_filtered_memory_marker_has_the_max_visible_seqno_of_what_the_stream_sends() -> None:
    # kv_engine ``ActiveStream::processItemsInner``: the visible seqno is that of the
    # last visible item the filter lets through, not the vbucket's
    b, sid, _ = scoped_writes()
    msgs = filtered(session(b, collections=True), f'{{"scope": "{sid:x}"}}'.encode())
    got = summary([m for m in msgs if not isinstance(m, Response)])
    assert got[0] == ("marker", 0, 5, 3)
    assert ("mutation", b"a", b"2", 4) not in got
    assert got[-1] == ("prepare", b"p", b"3", 5)
    # the whole vbucket's stream: the default collection's item at 4
    assert summary(stream(session(b, collections=True)))[0] == ("marker", 0, 5, 4)


def test_a_legacy_memory_marker_has_the_max_visible_seqno_of_the_default_collection() -> None:
    b, _, cid = scoped_writes()
    b.set("z", "4", collection_id=cid, vbucket=0)  # 6: not the default collection's
    b.sync_write("q", "5", vbucket=0, outcome="pending")  # 7
    got = summary(stream(session(b, collections=False)))
    assert got == [
        ("marker", 0, 7, 4),
        ("mutation", b"a", b"2", 4),
        ("prepare", b"q", b"5", 7),
    ]


def test_a_v2_marker_over_a_cold_loaded_vbucket_carries_its_max_visible_seqno() -> None:
    """The cold tier's documents are visible: a v2.0 disk marker of a bulk-loaded
    vbucket carries their last seqno as its max visible seqno (kv_engine
    ``ActiveStream::markDiskSnapshot``), not 0 as a count of the write log alone (the
    cold tier's items are in no log) gave it; a prepare written after them does not
    move it."""
    b = bucket()
    b.load_cold([b"a", b"b", b"c"], [b"1", b"2", b"3"])
    b.persist()
    msgs = stream(session(b, collections=False))
    assert summary(msgs)[0] == ("marker", 0, 3, 3)
    b.sync_write("d", "4", vbucket=0, outcome="pending")
    b.persist()
    msgs = stream(session(b, collections=False))
    assert summary(msgs)[0] == ("marker", 0, 4, 3)
