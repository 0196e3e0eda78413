"""Helpers for the cluster tests: a bucket with a moving clock, keys of one vbucket, and
the checks every cluster must pass after any step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model import Bucket, Cluster, Item, SystemEventItem, vbucket_of
from mockdcp.model._replication import is_prefix
from mockdcp.protocol import SystemEventType, VBucketState

if TYPE_CHECKING:
    from mockdcp.model import VBucket


def new_bucket(num_vbuckets: int = 4, **kw: object) -> Bucket:
    t = [1_700_000_000.0]

    def clock() -> float:
        t[0] += 0.001
        return t[0]

    return Bucket("default", num_vbuckets, seed=7, clock=clock, **kw)  # type: ignore[arg-type]


def keys_in(vb: int, count: int, num_vbuckets: int = 4, prefix: str = "k") -> list[str]:
    """``count`` keys that hash to vbucket ``vb``."""
    found: list[str] = []
    i = 0
    while len(found) < count:
        key = f"{prefix}{i}"
        if vbucket_of(key.encode(), num_vbuckets) == vb:
            found.append(key)
        i += 1
    return found


def documents(items: list[Item], live: set[int]) -> dict[tuple[int, bytes], Item]:
    """The live documents a write log leaves, replayed from the start (a collection's
    flush forgets its documents so far), in collections of ``live``."""
    latest: dict[tuple[int, bytes], Item] = {}
    for item in items:
        if isinstance(item, SystemEventItem):
            if item.event is SystemEventType.BEGIN_COLLECTION and item.flush_uid:
                cid = item.event_collection_id
                latest = {k: v for k, v in latest.items() if k[0] != cid}
            continue
        latest[item.doc_key] = item
    return {k: v for k, v in latest.items() if not v.deleted and k[0] in live}


def check_cluster(cluster: Cluster) -> None:
    """The invariants of any cluster (each assert says which)."""
    bucket, vbmap = cluster.bucket, cluster.map
    placed = {(n, vb) for vb in range(vbmap.num_vbuckets) for n in vbmap.chain(vb) if n}
    held = {(n, vb) for n in cluster.nodes for vb in cluster.copies_on(n)}
    assert placed == held, "every copy the map names exists, and no other"
    assert set(vbmap.nodes) <= set(cluster.nodes), "the map names cluster nodes only"
    for vb in range(vbmap.num_vbuckets):
        active = bucket.vbuckets[vb]
        node = vbmap.active(vb)
        if node is None:
            assert active.state is VBucketState.DEAD, "a lost vbucket has a dead stand-in"
            assert all(it.system for it in active.log), "holding no document"
            continue
        assert cluster.copy(node, vb) is active, "the bucket's vbucket is the active copy"
        assert active.state is VBucketState.ACTIVE
        assert active.online is (node not in cluster.down)
        for rnode, replica in cluster.replicas(vb).items():
            assert replica.state is VBucketState.REPLICA
            assert replica is not active
            if node in cluster.down or rnode in cluster.down:
                continue
            assert is_prefix(replica, active), f"vb {vb} on {rnode}: a prefix of the active"
            assert replica.failover.entries == active.failover.entries, "the same branch"
    live = set(bucket.manifest.collections)
    expected: dict[tuple[int, bytes], Item] = {}
    for vb in range(vbmap.num_vbuckets):
        expected.update(documents(bucket.vbuckets[vb].log, live))
    oracle = cluster.oracle()
    assert set(oracle) == set(expected), "the oracle is the actives' documents"
    assert all(oracle[k] is expected[k] for k in expected)


def caught_up(cluster: Cluster, vb: int) -> dict[str, VBucket]:
    """The replicas of ``vb`` that hold everything its active has."""
    active = cluster.active(vb)
    return {n: r for n, r in cluster.replicas(vb).items() if r.high_seqno == active.high_seqno}
