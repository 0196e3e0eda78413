"""The ephemeral bucket (``mockdcp.model._ephemeral``): the sequence list, the purger by
age, restart, the persistence steps refused, and the memory quota's two full policies."""

from __future__ import annotations

import pytest

from mockdcp.model import Bucket, Ephemeral, MemoryFull, NoPersistence, ephemeral_settings
from mockdcp.model._ephemeral import purge_cut
from mockdcp.util import ModelError

T0 = 1_700_000_000.0


def ephemeral(vbuckets: int = 1, clock: list[float] | None = None, **settings: object) -> Bucket:
    now = clock if clock is not None else [T0]
    return Bucket(
        "cache",
        vbuckets,
        seed=3,
        clock=lambda: now[0],
        bucket_type="ephemeral",
        ephemeral=Ephemeral(**settings) if settings else None,  # type: ignore[arg-type]
    )


def test_the_sequence_list_holds_every_write_at_once() -> None:
    """kv_engine ``EphemeralVBucket::getPersistenceSeqno``: the high seqno; a backfill
    reads the sequence list (``backfill_memory.cc``) up to it, without a flusher."""
    b = ephemeral()
    for i in range(5):
        b.set(f"k{i}", b"v")
    b.set("k0", b"again")
    vb = b.vbucket(0)
    assert vb.persisted_seqno == vb.high_seqno == 6
    snap = vb.disk_snapshot(0)
    assert [it.seqno for it in snap.items] == [2, 3, 4, 5, 6]  # newest per key
    assert snap.end_seqno == 6
    # a couchbase bucket without a flusher keeps its writes in memory only
    couch = Bucket("default", 1, clock=lambda: T0)
    couch.set("k", b"v")
    assert couch.vbucket(0).persisted_seqno == 0


@pytest.mark.parametrize(
    ("step", "call"),
    [
        ("persist", lambda b: b.persist()),
        ("purge", lambda b: b.purge()),
        ("purge_history", lambda b: b.purge_history()),
    ],
)
def test_persistence_steps_are_refused_by_name(step: str, call: object) -> None:
    b = ephemeral()
    b.set("k", b"v")
    with pytest.raises(NoPersistence, match=f"^{step}: bucket 'cache' is ephemeral"):
        call(b)  # type: ignore[operator]
    assert b.vbucket(0).purge_seqno == 0


def test_the_purger_removes_tombstones_older_than_the_age_and_raises_the_purge_seqno() -> None:
    """kv_engine ``HTTombstonePurger::visit`` (age), ``purgeStaleItems`` (never the
    list's last element; the purge seqno is the highest deleted seqno purged)."""
    now = [T0]
    b = ephemeral(clock=now)
    for i in range(4):
        b.set(f"k{i}", b"v")  # 1-4
    b.delete("k0")  # 5, deleted at T0
    b.delete("k1")  # 6, deleted at T0
    now[0] = T0 + 100
    b.delete("k2")  # 7, deleted at T0 + 100
    b.set("k3", b"w")  # 8
    vb = b.vbucket(0)
    assert b.ephemeral_purge(age=200) == 0  # nothing that old yet
    assert vb.purge_seqno == 0
    now[0] = T0 + 150
    assert b.ephemeral_purge(age=120) == 2  # 5 and 6; 7 is 50 s old
    assert vb.purge_seqno == 6
    assert vb.get(b"k0") is None
    assert vb.get(b"k2") is not None
    now[0] = T0 + 1000
    assert b.ephemeral_purge(age=120) == 1
    assert vb.purge_seqno == 7


def test_the_default_age_is_a_day_as_ns_server_sets_it() -> None:
    """ns_server ``memcached_bucket_config.erl``: ``ephemeral_metadata_purge_age`` is the
    purge interval (1 day by default) in seconds."""
    now = [T0]
    b = ephemeral(clock=now)
    assert b.ephemeral is not None
    assert b.ephemeral.purge_age == 86_400
    b.set("a", b"v")
    b.delete("a")
    b.set("b", b"v")
    now[0] = T0 + 86_399
    assert b.ephemeral_purge() == 0
    now[0] = T0 + 86_400
    assert b.ephemeral_purge() == 1


def test_the_last_element_and_a_collections_newest_tombstone_stay() -> None:
    b = ephemeral()
    b.set("a", b"v")
    b.delete("a")  # seqno 2, the high seqno: the list's last element
    vb = b.vbucket(0)
    assert purge_cut(vb, T0 + 10, 0) == 0
    b.set("b", b"v")
    assert purge_cut(vb, T0 + 10, 0) == 2


def test_a_restart_loses_everything_and_gives_new_uuids() -> None:
    """An ephemeral bucket has no warmup: its vbuckets come back empty with a new
    failover table (consumers roll back to 0)."""
    b = ephemeral(vbuckets=2)
    for i in range(10):
        b.set(f"k{i}", b"v")
    uuids = [vb.failover.newest_uuid for vb in b.vbuckets]
    b.restart()
    assert [vb.high_seqno for vb in b.vbuckets] == [0, 0]
    assert [vb.failover.entries for vb in b.vbuckets] == [
        [(vb.failover.newest_uuid, 0)] for vb in b.vbuckets
    ]
    assert all(vb.failover.newest_uuid != old for vb, old in zip(b.vbuckets, uuids, strict=True))
    assert not b.oracle().rows()


def test_no_eviction_refuses_a_write_when_full_and_writes_nothing() -> None:
    """kv_engine ``fail_new_data``: a write above ``mutation_mem_ratio`` of the quota is a
    temporary failure (TMPFAIL)."""
    b = ephemeral(eviction_policy="noEviction", memory_quota=4_000)
    written = 0
    while written < 100:
        try:
            b.set(f"k{written}", b"v" * 100)
        except MemoryFull as exc:
            assert "TMPFAIL" in str(exc)  # noqa: PT017 - the loop ends at the refusal
            break
        written += 1
    assert 0 < written < 100
    assert b.vbucket(0).high_seqno == written
    assert b.memory_used() < 4_000 * 0.93
    with pytest.raises(MemoryFull):
        b.set_many([b"x", b"y"], [b"v" * 100, b"v" * 100])
    assert b.vbucket(0).high_seqno == written
    b.delete("k0")  # a deletion needs no room


def test_nru_eviction_deletes_the_oldest_documents_as_deletions() -> None:
    """kv_engine ``auto_delete``: above the high watermark the pager soft-deletes items
    (``EphemeralVBucket::pageOut``: rev seqno + 1, a deletion at the next seqno) down to
    the low watermark."""
    b = ephemeral(eviction_policy="nruEviction", memory_quota=10_000)
    for i in range(40):
        b.set(f"k{i:02d}", b"v" * 500)
    assert b.auto_deleted > 0
    assert b.memory_used() <= 10_000 * 0.85
    vb = b.vbucket(0)
    gone = [it for it in vb.all_items() if it.deleted]
    assert len(gone) == b.auto_deleted
    assert sorted(it.key for it in gone)[0] == b"k00"  # oldest first
    assert all(it.rev_seqno == 2 for it in gone)
    live = {row["key"] for row in b.oracle().rows()}
    assert "k39" in live
    assert "k00" not in live


def test_settings_are_checked() -> None:
    with pytest.raises(ModelError, match="noEviction or nruEviction"):
        Ephemeral("fullEviction")
    with pytest.raises(ModelError, match="bytes > 0"):
        Ephemeral(memory_quota=0)
    with pytest.raises(ModelError, match="an ephemeral bucket's"):
        ephemeral_settings("couchbase", "nruEviction")
    with pytest.raises(ModelError, match="no storage backend"):
        Bucket("b", 1, clock=lambda: T0, bucket_type="ephemeral", storage="magma")
    with pytest.raises(ModelError, match="bucket type is one of"):
        Bucket("b", 1, clock=lambda: T0, bucket_type="memcached")
    with pytest.raises(ModelError, match="not ephemeral"):
        Bucket("b", 1, clock=lambda: T0).ephemeral_purge()
    assert ephemeral_settings("couchbase") is None


def test_the_purger_runs_on_the_virtual_clock_every_purge_interval() -> None:
    """kv_engine ``EphTombstoneHTCleaner``: every ``ephemeral_metadata_purge_interval``
    (60 s) it purges the tombstones older than the purge age; ``advance_clock`` runs it
    where a couchbase bucket's compaction would run (there is none on ephemeral)."""
    from mockdcp.model import VirtualClock

    clock = VirtualClock(T0)
    b = Bucket("cache", 1, clock=clock, bucket_type="ephemeral")
    b.set("a", b"v")
    b.delete("a")
    b.set("b", b"v")
    done = b.advance_clock(T0 + 86_400 - 1)
    assert (done.purged, b.vbucket(0).purge_seqno) == (0, 0)
    done = b.advance_clock(T0 + 86_400 + 60)
    assert done.purged == 1
    assert b.vbucket(0).purge_seqno == 2
    assert done.vbuckets == (0,)


def test_a_node_of_an_ephemeral_cluster_comes_back_empty_with_new_uuids() -> None:
    """An ephemeral node keeps nothing across a restart: its copies come back empty
    with a new failover table, and their replicas follow them (to 0)."""
    from mockdcp.model import Cluster

    b = ephemeral(vbuckets=4)
    cluster = Cluster(b, ("n0", "n1"), replicas=1, seed=1)
    cluster.auto_replicate = True
    for i in range(20):
        b.set(f"k{i}", b"v")
    down = cluster.map.active(0)
    assert down is not None
    vbs = [vb for vb in range(4) if cluster.map.active(vb) == down]
    uuids = {vb: b.vbucket(vb).failover.newest_uuid for vb in vbs}
    assert all(b.vbucket(vb).high_seqno for vb in vbs)
    cluster.node_down(down)
    cluster.node_up(down)
    for vb in vbs:
        active = cluster.active(vb)
        assert active.high_seqno == 0
        assert uuids[vb] not in [uuid for uuid, _ in active.failover.entries]
        assert all(r.high_seqno == 0 for r in cluster.replicas(vb).values())


def test_a_failover_loses_nothing_by_default_the_replica_held_it_all() -> None:
    """An ephemeral vbucket's persistence seqno is its high seqno (kv_engine
    ``EphemeralVBucket::getPersistenceSeqno``, what replication and takeover use): a
    failover that loses unpersisted writes loses none; a new branch starts at the top."""
    b = ephemeral(vbuckets=1)
    for i in range(5):
        b.set(f"k{i}", b"v")
    old = b.vbucket(0).failover.newest_uuid
    b.failover(0)
    vb = b.vbucket(0)
    assert vb.high_seqno == 5
    assert vb.failover.entries[0][1] == 5
    assert vb.failover.newest_uuid != old


def test_the_pager_deletes_from_active_vbuckets_only() -> None:
    """kv_engine ``EphemeralVBucket::canEvict``: only an active vbucket is evicted from
    (its replicas receive the deletions)."""
    from mockdcp.protocol import VBucketState

    b = ephemeral(vbuckets=2, eviction_policy="nruEviction", memory_quota=20_000)
    for i in range(10):
        b.set(f"r{i}", b"v" * 500, vbucket=1)
    b.set_vbucket_state(1, VBucketState.REPLICA)
    for i in range(40):
        b.set(f"a{i}", b"v" * 500, vbucket=0)
    assert b.auto_deleted > 0
    assert not [it for it in b.vbucket(1).all_items() if it.deleted]


def test_a_quota_sends_a_bulk_load_through_the_quota_not_the_cold_tier() -> None:
    # the cold tier would take any number of documents past the quota unnoticed
    b = ephemeral(eviction_policy="noEviction", memory_quota=10_000)
    with pytest.raises(ModelError, match="loads through set_many"):
        b.cold_load()
    with pytest.raises(MemoryFull, match="more needed"):
        b.set_many([b"k%d" % i for i in range(100)], [b"v" * 100] * 100)
    assert ephemeral().cold_load() is not None  # without a quota, as a couchbase bucket
