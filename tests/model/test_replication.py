"""Replica copies: filled by replication with the active's items, system events and
checkpoint boundaries; paused and resumed on cue; persisted on their own."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from mockdcp import ModelError
from mockdcp.model import Cluster
from mockdcp.model._replication import attach, catch_up, is_prefix, new_replica
from mockdcp.protocol import VBucketState
from tests.model._cluster import check_cluster, keys_in, new_bucket


def test_one_node_and_no_replica_is_the_bucket_as_it_was() -> None:
    b = new_bucket()
    vbuckets = list(b.vbuckets)
    c = Cluster(b)
    assert c.nodes == ("node0",)
    assert b.vbuckets == vbuckets
    assert all(c.copy("node0", vb) is b.vbuckets[vb] for vb in range(4))
    assert c.replicas(0) == {}
    item = b.set("k", "{}")
    assert c.replicate() == 0
    assert c.oracle()[(0, b"k")] is item
    assert c.map.to_json()["vBucketMap"] == [[0], [0], [0], [0]]
    check_cluster(c)


def test_a_replica_shares_the_active_items_seqnos_and_system_events() -> None:
    b = new_bucket(collections={"s": ["c"]})
    c = Cluster(b, ["a", "b"], 1)
    keys = keys_in(0, 5)
    for k in keys:
        b.set(k, "{}")
    b.delete(keys[0], vbucket=0)
    b.create_collection("s", "d")
    assert c.replicate() > 0
    active = c.active(0)
    [replica] = c.replicas(0).values()
    assert replica.high_seqno == active.high_seqno
    assert is_prefix(replica, active)
    assert len(replica.log) == len(active.log)
    assert all(replica.get(k.encode()) is active.get(k.encode()) for k in keys)
    assert [e.seqno for e in replica.system_events] == [e.seqno for e in active.system_events]
    assert replica.manifest_uid == active.manifest_uid
    assert replica.collection_high == active.collection_high
    assert replica.failover.entries == active.failover.entries
    assert replica.state is VBucketState.REPLICA
    check_cluster(c)


def test_a_replica_closes_checkpoints_where_its_active_did() -> None:
    b = new_bucket(checkpoint_max_items=3)
    c = Cluster(b, ["a", "b"], 1)
    keys = keys_in(1, 8)
    for k in keys[:4]:
        b.set(k, "1")
    b.checkpoint(1)
    for k in keys[4:]:
        b.set(k, "2")
    b.set(keys[5], "3")  # de-duplicated in the open checkpoint
    b.checkpoint(1)
    c.replicate()
    active, [replica] = c.active(1), list(c.replicas(1).values())

    def ranges(vb: object) -> list[tuple[int, int]]:
        return [(cp.start_seqno, cp.end_seqno) for cp in vb.checkpoints]  # type: ignore[attr-defined]

    assert ranges(replica) == ranges(active)
    assert [e.seqno if e else None for e in replica.checkpoints[-2].entries] == [
        e.seqno if e else None for e in active.checkpoints[-2].entries
    ]


def test_a_replica_costs_no_more_memory_than_its_active() -> None:
    b = new_bucket(num_vbuckets=1)
    c = Cluster(b, ["a", "b"], 1)
    c.pause_replication()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        b.set_many([b"key%06d" % i for i in range(5000)], [b'{"v":%d}' % i for i in range(5000)])
        written = tracemalloc.get_traced_memory()[0] - before
        c.resume_replication()
        c.replicate()
        replicated = tracemalloc.get_traced_memory()[0] - before - written
    finally:
        tracemalloc.stop()
    assert c.replicas(0)["b"].high_seqno == 5000
    assert replicated < written / 2, (replicated, written)


def test_paused_replicas_fall_behind_until_resumed() -> None:
    b = new_bucket()
    c = Cluster(b, ["a", "b", "c"], 2)
    seen: list[tuple[str, int]] = []
    c.bucket.feed.subscribe(lambda change: seen.extend(change.copies))
    c.pause_replication(node="b")
    c.pause_replication(vbucket=2)
    for vb in range(4):
        for k in keys_in(vb, 2):
            b.set(k, "{}")
    seen.clear()
    c.replicate()
    for vb in range(4):
        for node, replica in c.replicas(vb).items():
            behind = node == "b" or vb == 2
            assert (replica.high_seqno == 0) is behind, (node, vb)
    assert all(node != "b" and vb != 2 for node, vb in seen)
    assert c.is_paused("b", 0)
    assert c.is_paused("c", 2)
    assert not c.is_paused("c", 0)
    c.resume_replication(node="b")
    c.replicate()
    assert all(r.high_seqno == 2 for vb in (0, 1, 3) for r in c.replicas(vb).values())
    assert all(r.high_seqno == 0 for r in c.replicas(2).values())
    c.resume_replication(vbucket=2)
    c.replicate(vbucket=2)
    assert all(r.high_seqno == 2 for r in c.replicas(2).values())
    check_cluster(c)


def test_replicate_can_target_one_node_or_vbucket() -> None:
    b = new_bucket()
    c = Cluster(b, ["a", "b", "c"], 2)
    for vb in range(4):
        b.set(keys_in(vb, 1)[0], "{}")
    assert c.replicate(node="a", vbucket=3) == (1 if "a" in c.map.replicas(3) else 0)
    assert c.replicate(vbucket=0) == 2
    with pytest.raises(ModelError, match="no node 'z'"):
        c.replicate(node="z")
    with pytest.raises(ModelError, match="no vbucket 9"):
        c.pause_replication(vbucket=9)


def test_replicas_persist_on_their_own() -> None:
    b = new_bucket()
    c = Cluster(b, ["a", "b"], 1)
    for k in keys_in(0, 4):
        b.set(k, "{}")
    c.replicate()
    [replica] = c.replicas(0).values()
    assert replica.persisted_seqno == 0
    c.persist_replicas(vbucket=0, upto=2)
    assert replica.persisted_seqno == 2
    assert c.active(0).persisted_seqno == 0, "the active persists by its own flusher"
    c.persist_replicas(upto=100)  # each as far as it has
    assert replica.persisted_seqno == 4
    with pytest.raises(ModelError, match="non-negative"):
        c.persist_replicas(upto=-1)


def test_a_released_replica_persists_as_far_as_its_active_did() -> None:
    """Replication held while the active took a write and persisted it; released, the
    replica takes the write and persists it at once (a replica's flusher does not wait
    for its active's next write). go-dcp's rollback mitigation waits for every replica
    to report a write persisted: the replica stuck unpersisted held it for ever."""
    b = new_bucket()
    c = Cluster(b, ["a", "b"], 1)
    c.pause_replication()
    for k in keys_in(0, 3):
        b.set(k, "{}")
    b.persist(0)
    [replica] = c.replicas(0).values()
    assert replica.high_seqno == 0
    c.resume_replication()
    c.replicate()
    assert (replica.high_seqno, replica.persisted_seqno) == (3, 3)


def test_new_replicas_start_caught_up_and_persisted_as_their_active() -> None:
    b = new_bucket()
    for vb in range(4):
        for k in keys_in(vb, 3):
            b.set(k, "{}")
    b.persist(upto=None)
    b.set(keys_in(0, 4)[3], "{}")
    c = Cluster(b, ["a", "b"], 1)
    for vb in range(4):
        [replica] = c.replicas(vb).values()
        assert replica.high_seqno == c.active(vb).high_seqno
        assert replica.persisted_seqno == c.active(vb).persisted_seqno
    check_cluster(c)


def test_attach_rolls_a_replica_back_to_where_the_histories_part() -> None:
    b = new_bucket(num_vbuckets=1)
    active = b.vbuckets[0]
    for i in range(10):
        b.set(f"k{i}", "{}")
    import random

    replica = new_replica(active, random.Random(1))
    assert attach(replica, active) is None
    catch_up(replica, active)
    b.failover(0, lose_after=6)  # the active's history now parts at 6
    assert attach(replica, active) == 6
    assert replica.high_seqno == 6
    assert is_prefix(replica, active)
    assert replica.failover.entries == active.failover.entries


def test_the_bucket_own_failover_and_flush_roll_the_replicas_back() -> None:
    b = new_bucket()
    c = Cluster(b, ["a", "b"], 1)
    keys = keys_in(0, 6)
    for k in keys:
        b.set(k, "{}")
    c.replicate()
    b.failover(0, lose_after=3)
    [replica] = c.replicas(0).values()
    assert replica.high_seqno == 3
    check_cluster(c)
    b.flush()
    assert all(r.high_seqno == 0 for vb in range(4) for r in c.replicas(vb).values())
    check_cluster(c)
