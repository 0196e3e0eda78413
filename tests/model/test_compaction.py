"""Compaction: writes that arrived one at a time move into the cold tier once persisted
(``mockdcp.model._compaction``), and nothing a reader sees changes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from mockdcp import ModelError
from mockdcp.model import Bucket, Cluster, Item, ItemKind, _compaction

T0 = 1_700_000_000.0


def bucket(vbuckets: int = 1, *, compacts: bool = True) -> Bucket:
    b = Bucket("default", vbuckets, seed=1, clock=lambda: T0, collections={"s": ["c"]})
    for vb in b.vbuckets:
        vb.store.compacts = compacts
    return b


def fields(item: Item | None) -> tuple[Any, ...] | None:
    if item is None:
        return None
    return (item.kind, item.key, item.collection_id, item.seqno, item.rev_seqno, item.cas,
            item.flags, item.expiry, item.datatype, item.delete_time, item.tag, item.head,
            item.tail)  # fmt: skip


def seen(b: Bucket, keys: list[bytes]) -> tuple[Any, ...]:
    """What readers see of vbucket 0: seqnos, each key's newest version (both
    collections), the hash table, the disk's snapshots (items and frames) from several
    seqnos, the max visible seqno at each seqno."""
    vb = b.vbucket(0)
    versions = [fields(vb.get(k, cid)) for k in keys for cid in (0, 8)]
    table = sorted((k, fields(it)) for k, it in vb.hash_table())
    disk = []
    for after in sorted({0, vb.persisted_seqno // 3, vb.persisted_seqno // 2, vb.persisted_seqno}):
        snap = vb.disk_snapshot(after)
        frames = vb.disk_snapshot(after, frames=True)
        disk.append(
            (
                [fields(it) for it in snap.items],
                list(frames.seqnos),
                [bytes(h) for h in frames.heads],
                [bytes(t) for t in frames.tails],
                bytes(frames.tags),
                list(frames.cids),
                list(frames.sizes),
                (snap.end_seqno, snap.purge_seqno, snap.max_visible_seqno),
            )
        )
    visible = [vb.visible_upto(s) for s in range(vb.high_seqno + 1)]
    return (vb.high_seqno, vb.persisted_seqno, vb.purge_seqno, versions, table, disk, visible)


def write_many(b: Bucket, keys: list[bytes], value: str, cid: int = 0) -> None:
    for k in keys:
        b.set(k, value, vbucket=0, collection_id=cid)


def test_writes_one_at_a_time_move_into_the_cold_tier_once_persisted() -> None:
    b, twin = bucket(), bucket(compacts=False)
    keys = [b"k%04d" % i for i in range(700)]
    for x in (b, twin):
        write_many(x, keys, '{"v":1}')
        write_many(x, keys[:300], '{"v":2}', cid=8)
        for k in keys[::5]:
            x.delete(k, vbucket=0)
        x.set(keys[1], "{}", vbucket=0, flags=7, expiry=int(T0) + 50)
        x.persist(0)
    vb = b.vbucket(0)
    assert vb.cold is not None
    assert vb.cold.upto == vb.high_seqno
    # no Python object per item left: only the collection's creation stays hot
    assert all(it.system for it in (*vb.log, *vb.items.values(), *vb.disk.values()))
    assert twin.vbucket(0).cold is None
    assert seen(b, keys) == seen(twin, keys)
    # a write after: its rev seqno one above the cold version's
    for x in (b, twin):
        x.set(keys[2], '{"v":3}', vbucket=0)
        x.set_many([keys[3], b"new"], [b'{"v":4}'] * 2)
        x.persist(0)
    assert vb.get(keys[2]).rev_seqno == 2  # type: ignore[union-attr]
    assert seen(b, [*keys, b"new"]) == seen(twin, [*keys, b"new"])


def test_a_rollback_into_the_folded_writes_brings_older_versions_back() -> None:
    b, twin = bucket(), bucket(compacts=False)
    keys = [b"k%04d" % i for i in range(400)]
    for x in (b, twin):
        write_many(x, keys, '{"v":1}')
        write_many(x, keys, '{"v":2}')
        x.persist(0)
        x.failover(0, lose_after=500)  # inside the first writes' run
    assert b.vbucket(0).cold is not None
    assert seen(b, keys) == seen(twin, keys)
    assert b.vbucket(0).get(keys[-1]).value == b'{"v":1}'  # type: ignore[union-attr]


def test_a_stream_cursor_keeps_its_checkpoint_hot() -> None:
    b = bucket()
    write_many(b, [b"a%04d" % i for i in range(300)], "{}")
    vb = b.vbucket(0)
    cursor = vb.register_cursor("stream", 0)
    assert cursor is not None
    b.persist(0)
    assert vb.cold is None  # the open checkpoint holds them for the cursor
    vb.remove_cursor("stream")
    write_many(b, [b"b%04d" % i for i in range(300)], "{}")
    b.persist(0)
    assert vb.cold is not None
    assert vb.cold.upto == vb.high_seqno


def test_a_system_event_after_the_cold_tier_stops_folding() -> None:
    b = bucket()
    write_many(b, [b"a%04d" % i for i in range(300)], "{}")
    b.persist(0)
    vb = b.vbucket(0)
    assert vb.cold is not None
    upto = vb.cold.upto
    b.create_collection("s", "d")
    write_many(b, [b"b%04d" % i for i in range(300)], "{}")
    b.persist(0)
    assert vb.cold.upto == upto
    assert vb.store.fold_after == _compaction.BLOCKED
    assert sum(not it.system for it in vb.items.values()) == 300


def test_sync_writes_and_clusters_with_copies_do_not_fold() -> None:
    b = bucket()
    b.sync_write("p", "{}", vbucket=0)
    write_many(b, [b"a%04d" % i for i in range(300)], "{}")
    b.persist(0)
    assert b.vbucket(0).cold is None
    two = bucket(2)
    Cluster(two, ("n0", "n1"), replicas=1)
    assert not any(vb.store.compacts for vb in two.vbuckets)
    one = bucket(2)
    cluster = Cluster(one, ("n0",))
    assert all(vb.store.compacts for vb in one.vbuckets)
    cluster.add_node("n1")
    assert not any(vb.store.compacts for vb in one.vbuckets)


def test_folded_tombstones_purge() -> None:
    b, twin = bucket(), bucket(compacts=False)
    keys = [b"k%04d" % i for i in range(300)]
    for x in (b, twin):
        write_many(x, keys, "{}")
        for k in keys[:100]:
            x.delete(k, vbucket=0)
        x.persist(0)
        assert x.purge(0) == 100
    assert seen(b, keys) == seen(twin, keys)


keys = st.sampled_from([b"k%d" % i for i in range(8)])
ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), keys, st.integers(0, 9), st.sampled_from([0, 8])),
        st.tuples(st.just("set_many"), st.lists(keys, min_size=1, max_size=4, unique=True)),
        st.tuples(st.just("delete"), keys, st.sampled_from([0, 8])),
        st.tuples(st.just("expire"), keys),
        st.tuples(st.just("persist"), st.integers(0, 60)),
        st.tuples(st.just("checkpoint")),
        st.tuples(st.just("purge")),
        st.tuples(st.just("restart")),
        st.tuples(st.just("failover"), st.integers(0, 60)),
        st.tuples(st.just("collection")),
    ),
    max_size=50,
)


def apply(b: Bucket, op: tuple[Any, ...]) -> None:
    vb = b.vbucket(0)
    try:
        if op[0] == "set":
            b.set(op[1], f'{{"v":{op[2]}}}', vbucket=0, collection_id=op[3])
        elif op[0] == "set_many":
            b.set_many(op[1], [b"{}"] * len(op[1]))
        elif op[0] == "delete":
            b.delete(op[1], vbucket=0, collection_id=op[2])
        elif op[0] == "expire":
            b.expire(op[1], vbucket=0)
        elif op[0] == "persist":
            b.persist(0, min(vb.high_seqno, max(vb.persisted_seqno, op[1])))
        elif op[0] == "checkpoint":
            b.checkpoint(0)
        elif op[0] == "purge":
            b.purge(0)
        elif op[0] == "restart":
            b.restart(0)
        elif op[0] == "failover":
            b.failover(0, lose_after=min(op[1], vb.high_seqno))
        elif op[0] == "collection":
            b.create_collection("s", f"n{vb.high_seqno}")
    except ModelError:
        pass


@settings(max_examples=150, deadline=None)
@given(ops)
def test_whatever_the_steps_a_folding_vbucket_reads_as_one_that_does_not(
    steps: list[Any],
) -> None:
    previous = _compaction.FOLD_MIN
    _compaction.FOLD_MIN = 1  # fold at every persist
    try:
        b, twin = bucket(), bucket(compacts=False)
        names = [b"k%d" % i for i in range(8)]
        for op in steps:
            apply(b, op)
            apply(twin, op)
            assert seen(b, names) == seen(twin, names), op
    finally:
        _compaction.FOLD_MIN = previous


def test_a_restart_after_a_first_fold_past_a_system_event_keeps_the_newer_version() -> None:
    """The first fold takes the writes after the last system event; a key written
    before that event keeps its older version in the write log. A restart rebuilt the
    hash table from that log and brought the older version back over the folded newer
    one (found by the property test below)."""
    steps = [("set", b"k0", 0, 0), ("collection",), ("delete", b"k0", 0), ("persist", 5)]
    previous = _compaction.FOLD_MIN
    _compaction.FOLD_MIN = 1
    try:
        b, twin = bucket(), bucket(compacts=False)
        for op in [*steps, ("restart",)]:
            apply(b, op)
            apply(twin, op)
        assert b.vbucket(0).cold is not None
        names = [b"k%d" % i for i in range(8)]
        assert seen(b, names) == seen(twin, names)
        item = b.vbucket(0).get(b"k0")
        assert item is not None
        assert item.kind is ItemKind.DELETION
    finally:
        _compaction.FOLD_MIN = previous


def test_fold_min_is_what_the_module_says() -> None:
    assert _compaction.FOLD_MIN == 256
    b = bucket()
    write_many(b, [b"a%04d" % i for i in range(255)], "{}")
    b.persist(0)
    assert b.vbucket(0).cold is None
    write_many(b, [b"b"], "{}")
    b.persist(0)
    assert b.vbucket(0).cold is not None


@pytest.fixture(autouse=True)
def _fold_min() -> None:
    assert _compaction.FOLD_MIN == 256


def test_a_rebalance_moves_folded_vbuckets_whole() -> None:
    b = bucket(4)
    cluster = Cluster(b, ("n0",))
    keys = [b"k%04d" % i for i in range(3000)]
    for k in keys:
        b.set(k, "{}")
    for k in keys[:500]:
        b.set(k, '{"v":2}')
    b.persist()
    assert all(vb.cold is not None for vb in b.vbuckets)

    def table() -> list[Any]:
        return [sorted((k, fields(it)) for k, it in vb.hash_table()) for vb in b.vbuckets]

    before = table()
    cluster.add_node("n1")
    assert cluster.rebalance()  # two vbuckets move to the new node
    assert {cluster.map.active(vb) for vb in range(4)} == {"n0", "n1"}
    assert table() == before
