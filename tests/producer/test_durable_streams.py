"""Durable writes on streams of consumers without sync writes (kv_engine
``active_stream.cc``): prepares and aborts never sent, commits as mutations, a legacy
snapshot ending on its last visible item, a collection-aware one reaching a hidden tail
with SEQNO_ADVANCED."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mockdcp.model import Bucket
from mockdcp.protocol import (
    DcpControl,
    DcpStreamRequest,
    HelloFeature,
    Mutation,
    Response,
    SeqnoAdvanced,
    SnapshotMarker,
)
from tests.producer._session import FEATURES, Session

if TYPE_CHECKING:
    from collections.abc import Sequence

MAX = 0xFFFFFFFFFFFFFFFF


def bucket() -> Bucket:
    return Bucket("default", 1, seed=1, clock=lambda: 1_700_000_000.0)


def session(b: Bucket, *, collections: bool) -> Session:
    extra = (HelloFeature.COLLECTIONS,) if collections else ()
    s = Session(b, features=(*FEATURES, *extra))
    s.open_dcp()
    s.call(DcpControl(opaque=0, key="enable_noop", value="true"))
    return s


def stream(s: Session, start: int = 0) -> list[tuple[Any, ...]]:
    req = DcpStreamRequest(
        opaque=1,
        vbucket=0,
        flags=0,
        start_seqno=start,
        end_seqno=MAX,
        vbucket_uuid=s.node.bucket.vbucket(0).failover.entries[0][0] if start else 0,
        snap_start_seqno=start,
        snap_end_seqno=start,
    )
    return summary(s.call(req))


def summary(msgs: Sequence[object]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for m in msgs:
        if isinstance(m, SnapshotMarker):
            out.append(("marker", m.start_seqno, m.end_seqno))
        elif isinstance(m, Mutation):
            out.append((m.key, m.value, m.by_seqno))
        elif isinstance(m, SeqnoAdvanced):
            out.append(("advanced", m.by_seqno))
        elif not isinstance(m, Response):
            out.append((type(m).__name__,))
    return out


def writes(b: Bucket) -> None:
    b.set("a", "1", vbucket=0)  # 1
    b.sync_write("b", "2", vbucket=0)  # 2 prepare, 3 commit
    b.sync_write("c", "3", vbucket=0, outcome="abort")  # 4 prepare, 5 abort
    b.sync_write("d", "4", vbucket=0, outcome="pending")  # 6 prepare


def test_legacy_memory_stream_gets_commits_as_mutations_and_no_prepares() -> None:
    b = bucket()
    writes(b)
    s = session(b, collections=False)
    assert stream(s) == [("marker", 0, 3), (b"a", b"1", 1), (b"b", b"2", 3)]


def test_collection_aware_memory_snapshot_reaches_a_hidden_tail() -> None:
    b = bucket()
    writes(b)
    s = session(b, collections=True)
    # the abort of c (5) found c's prepare (4) in the open checkpoint: a new one at 5
    assert [(c.start_seqno, c.end_seqno) for c in b.vbucket(0).checkpoints] == [(1, 4), (5, 6)]
    assert stream(s) == [
        ("marker", 0, 4),
        (b"a", b"1", 1),
        (b"b", b"2", 3),
        ("advanced", 4),
        ("marker", 5, 6),
        ("advanced", 6),
    ]


def test_a_batch_of_only_a_prepare_is_a_marker_and_seqno_advanced() -> None:
    b = bucket()
    b.set("a", "1", vbucket=0)
    s = session(b, collections=True)
    assert stream(s) == [("marker", 0, 1), (b"a", b"1", 1)]
    b.sync_write("d", "4", vbucket=0, outcome="pending")
    assert summary(s.read()) == [("marker", 2, 2), ("advanced", 2)]
    s2 = session(b, collections=False)
    assert stream(s2) == [("marker", 0, 1), (b"a", b"1", 1)]
    b.sync_write("e", "5", vbucket=0, outcome="abort")
    assert summary(s2.read()) == []


def test_legacy_disk_snapshot_ends_at_the_max_visible_seqno() -> None:
    b = bucket()
    writes(b)
    b.persist()
    b.vbucket(0).drop_cursor()
    b.checkpoint()
    b.set("z", "9", vbucket=0)  # 7: the checkpoints no longer hold 1..6
    b.persist()
    vb = b.vbucket(0)
    while len(vb.checkpoints) > 1:
        vb.checkpoints.pop(0)
    assert vb.register_cursor("probe", 0) is None
    vb.remove_cursor("probe")
    legacy = stream(session(b, collections=False))
    assert legacy[:3] == [("marker", 0, 7), (b"a", b"1", 1), (b"b", b"2", 3)]
    aware = stream(session(b, collections=True))
    assert ("marker", 0, 7) in aware
    assert (b"z", b"9", 7) in aware
    assert all(m[0] in ("marker", b"a", b"b", b"z") for m in aware)
