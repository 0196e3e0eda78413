"""The on-disk view a backfill reads: items by key, and seqnos with frames beside them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, strategies as st

from mockdcp import ModelError
from mockdcp.model import Bucket

keys = st.sampled_from([f"k{i}" for i in range(6)])
ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), keys, st.integers(0, 9)),
        st.tuples(st.just("delete"), keys),
        st.tuples(st.just("persist"), st.integers(0, 40)),
        st.tuples(
            st.just("purge"),
        ),
        st.tuples(
            st.just("restart"),
        ),
        st.tuples(st.just("failover"), st.integers(0, 40)),
    ),
    max_size=60,
)


def apply(b: Bucket, op: tuple[Any, ...]) -> None:
    vb = b.vbucket(0)
    try:
        if op[0] == "set":
            b.set(op[1], f'{{"v":{op[2]}}}', vbucket=0)
        elif op[0] == "delete":
            b.delete(op[1], vbucket=0)
        elif op[0] == "persist":  # a flusher behind, at, or (clamped) ahead of the writes
            b.persist(0, min(vb.high_seqno, max(vb.persisted_seqno, op[1])))
        elif op[0] == "purge":
            b.purge(0)
        elif op[0] == "restart":
            b.restart(0)
        elif op[0] == "failover":
            b.failover(0, lose_after=min(op[1], vb.high_seqno))
    except ModelError:
        pass


@given(ops)
def test_disk_frames_stay_beside_their_seqnos_through_every_step(steps: list[Any]) -> None:
    b = Bucket("default", 1, seed=1, clock=lambda: 1_700_000_000.0)
    for op in steps:
        apply(b, op)
        vb = b.vbucket(0)
        by_seqno = vb.disk_by_seqno
        cols = vb.store.columns
        assert list(cols.seqnos) == sorted(by_seqno)
        assert cols.heads == [by_seqno[s].head for s in cols.seqnos]
        assert cols.tails == [by_seqno[s].tail for s in cols.seqnos]
        assert bytes(cols.tags) == bytes(by_seqno[s].tag for s in cols.seqnos)
        assert list(cols.cids) == [by_seqno[s].collection_id for s in cols.seqnos]
        assert list(cols.sizes) == [by_seqno[s].size for s in cols.seqnos]
        assert sorted(it.seqno for it in vb.disk.values()) == list(cols.seqnos)
        for after in (0, vb.persisted_seqno // 2):
            items = vb.disk_snapshot(after).items
            frames = vb.disk_snapshot(after, frames=True)
            assert [it.seqno for it in items] == list(frames.seqnos)
            assert [it.head for it in items] == frames.heads
            assert [it.tail for it in items] == frames.tails
