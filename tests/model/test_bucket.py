from __future__ import annotations

import copy
import itertools
from typing import TYPE_CHECKING, Any

import pytest

from mockdcp import ModelError
from mockdcp.model import Bucket, ItemKind, vbucket_of
from mockdcp.protocol import Datatype, Deletion, Mutation, VBucketState

if TYPE_CHECKING:
    from collections.abc import Callable


def bucket(**kw: object) -> Bucket:
    t = [1_700_000_000.0]

    def clock() -> float:
        t[0] += 0.001
        return t[0]

    return Bucket("default", 4, seed=7, clock=clock, **kw)  # type: ignore[arg-type]


def write_in(b: Bucket, vb: int, key: str, value: str = "{}") -> None:
    b.set(key, value, vbucket=vb)


def read_all(b: Bucket, vb: int, name: str = "c") -> list[int]:
    cursor = b.vbucket(vb).register_cursor(name, 0)
    assert cursor is not None
    seqnos: list[int] = []
    while (batch := cursor.next_batch()) is not None:
        seqnos += [it.seqno for it in batch.items]
    return seqnos


@pytest.mark.parametrize(("key", "vb"), [(b"foo", 115), (b"user::000001", 762), (b"doc1", 389)])
def test_vbucket_of_matches_couchbase_crc32(key: bytes, vb: int) -> None:
    # computed with Go's hash/crc32 IEEE as gocbcore's cbCrc does: (crc >> 16) & 0x7fff
    assert vbucket_of(key, 1024) == vb


def test_set_assigns_seqnos_revs_and_increasing_cas() -> None:
    b = bucket()
    a = b.set("k", b"1", vbucket=0)
    c = b.set("k", b"2", vbucket=0)
    assert (a.seqno, a.rev_seqno, c.seqno, c.rev_seqno) == (1, 1, 2, 2)
    assert c.cas > a.cas > 0
    assert b.vbucket(0).high_seqno == 2


def test_datatype_is_json_only_for_json_values() -> None:
    b = bucket()
    assert b.set("j", '{"a":1}', vbucket=0).datatype == Datatype.JSON
    assert b.set("r", b"\x00raw", vbucket=0).datatype == Datatype.RAW


def test_item_wire_is_the_canonical_mutation_frame() -> None:
    b = bucket()
    it = b.set("doc1", '{"a":1}', vbucket=3, flags=0x02000000)
    expected = Mutation(
        opaque=0,
        vbucket=3,
        cas=it.cas,
        by_seqno=1,
        rev_seqno=1,
        flags=0x02000000,
        key=b"doc1",
        collection_id=0,
        value=b'{"a":1}',
        datatype=Datatype.JSON,
    ).encode()
    assert it.wire == expected
    assert it.value == b'{"a":1}'


def test_tombstone_wire_is_a_v1_deletion() -> None:
    b = bucket()
    b.set("doc1", "{}", vbucket=1)
    tomb = b.delete("doc1", vbucket=1)
    assert tomb.kind is ItemKind.DELETION
    assert tomb.rev_seqno == 2
    expected = Deletion(
        opaque=0,
        vbucket=1,
        cas=tomb.cas,
        by_seqno=2,
        rev_seqno=2,
        key=b"doc1",
        collection_id=0,
        value=b"",
        datatype=0,
        delete_time=None,
    ).encode()
    assert tomb.wire == expected


def test_open_checkpoint_deduplicates_for_a_cursor_that_has_not_read_it() -> None:
    b = bucket()
    write_in(b, 0, "a")
    write_in(b, 0, "b")
    write_in(b, 0, "a")
    assert read_all(b, 0) == [2, 3]


def test_cursor_that_read_the_old_version_sees_the_new_one() -> None:
    b = bucket()
    write_in(b, 0, "a")
    cursor = b.vbucket(0).register_cursor("c", 0)
    assert cursor is not None
    batch = cursor.next_batch()
    assert batch is not None
    assert [i.seqno for i in batch.items] == [1]
    write_in(b, 0, "a")
    batch = cursor.next_batch()
    assert batch is not None
    assert [i.seqno for i in batch.items] == [2]


def test_closed_checkpoint_does_not_deduplicate() -> None:
    b = bucket()
    write_in(b, 0, "a")
    b.checkpoint(0)
    write_in(b, 0, "a")
    assert read_all(b, 0) == [1, 2]


def test_batches_never_span_checkpoints_and_flag_new_ones() -> None:
    b = bucket()
    write_in(b, 0, "a")
    write_in(b, 0, "b")
    b.checkpoint(0)
    write_in(b, 0, "c")
    cursor = b.vbucket(0).register_cursor("c", 0)
    assert cursor is not None
    first, second = cursor.next_batch(), cursor.next_batch()
    assert first is not None
    assert second is not None
    assert [i.seqno for i in first.items] == [1, 2]
    assert not first.starts_checkpoint
    assert [i.seqno for i in second.items] == [3]
    assert second.starts_checkpoint
    assert second.checkpoint_start_seqno == 3
    assert cursor.next_batch() is None


def test_checkpoint_closes_by_item_count() -> None:
    b = bucket(checkpoint_max_items=3)
    for i in range(7):
        write_in(b, 0, f"k{i}")
    assert [cp.open for cp in b.vbucket(0).checkpoints] == [False, False, True]


def test_persist_expels_closed_checkpoints_and_cursor_needs_backfill() -> None:
    b = bucket()
    for i in range(5):
        write_in(b, 0, f"k{i}")
    b.checkpoint(0)
    write_in(b, 0, "late")
    b.persist(0)
    vb = b.vbucket(0)
    assert vb.checkpoints[0].start_seqno == 6
    assert vb.register_cursor("x", 0) is None
    assert vb.register_cursor("y", 5) is not None


def test_live_cursor_pins_its_checkpoint_until_dropped() -> None:
    b = bucket()
    write_in(b, 0, "a")
    vb = b.vbucket(0)
    assert vb.register_cursor("pin", 0) is not None
    b.checkpoint(0)
    b.persist(0)
    assert vb.checkpoints[0].start_seqno == 1
    assert b.drop_cursor(0, "pin") == [(0, "pin")]
    assert vb.checkpoints[0].start_seqno == 2
    assert vb.register_cursor("again", 0) is None


def test_disk_snapshot_has_latest_version_per_key_with_tombstones() -> None:
    b = bucket()
    write_in(b, 0, "a")
    write_in(b, 0, "b")
    b.checkpoint(0)
    write_in(b, 0, "a")
    b.delete("b", vbucket=0)
    write_in(b, 0, "c")
    b.persist(0, upto=4)
    snap = b.vbucket(0).disk_snapshot(0)
    assert (snap.start_seqno, snap.end_seqno) == (1, 4)
    assert [(i.key, i.seqno, i.deleted) for i in snap.items] == [(b"a", 3, False), (b"b", 4, True)]


def test_purge_removes_persisted_tombstones_and_raises_purge_seqno() -> None:
    b = bucket()
    write_in(b, 0, "a")
    write_in(b, 0, "b")
    b.delete("a", vbucket=0)
    b.persist(0)
    assert b.purge(0) == 1
    vb = b.vbucket(0)
    assert vb.purge_seqno == 3
    assert [i.key for i in vb.disk_snapshot(0).items] == [b"b"]
    assert vb.get(b"a") is None


def test_purge_beyond_persisted_is_refused_and_changes_nothing() -> None:
    b = bucket()
    write_in(b, 0, "a")
    b.delete("a", vbucket=0)
    before = b.vbucket(0).purge_seqno
    with pytest.raises(ModelError):
        b.purge(0, upto=2)
    assert b.vbucket(0).purge_seqno == before


def test_restart_loses_unpersisted_items_and_adds_a_failover_entry() -> None:
    b = bucket()
    write_in(b, 0, "a")
    write_in(b, 0, "b")
    b.persist(0)
    write_in(b, 0, "c")
    write_in(b, 0, "a", '{"v":2}')
    old_uuid = b.vbucket(0).failover.newest_uuid
    b.restart(0)
    vb = b.vbucket(0)
    assert vb.high_seqno == 2
    assert sorted(k for _, k in b.oracle()) == [b"a", b"b"]
    assert b.oracle()[(0, b"a")].value == b"{}"
    assert [s for _, s in vb.failover.entries] == [2, 0]
    assert vb.failover.entries[1][0] == old_uuid
    assert b.set("d", "{}", vbucket=0).seqno == 3


def test_failover_loses_items_above_lose_after_and_restores_older_versions() -> None:
    b = bucket()
    write_in(b, 0, "a", '{"v":1}')
    write_in(b, 0, "b")
    write_in(b, 0, "a", '{"v":2}')  # dedups seqno 1 in the checkpoint
    b.failover(0, lose_after=2)
    assert b.vbucket(0).high_seqno == 2
    assert b.oracle()[(0, b"a")].value == b'{"v":1}'
    assert b.vbucket(0).failover.entries[0][1] == 2


def test_failover_to_a_replica_behind_the_flusher_loses_persisted_items_too() -> None:
    b = bucket()
    write_in(b, 0, "a", '{"v":1}')
    write_in(b, 0, "b")
    write_in(b, 0, "a", '{"v":2}')
    b.persist(0)  # the old active had all three on disk; the replica only seqno 1
    b.failover(0, lose_after=1)
    vb = b.vbucket(0)
    assert (vb.high_seqno, vb.persisted_seqno) == (1, 1)
    assert b.oracle() == {(0, b"a"): vb.get(b"a")}
    assert b.oracle()[(0, b"a")].value == b'{"v":1}'
    assert [it.seqno for it in vb.disk_snapshot(0).items] == [1]


def test_failover_without_loss_only_changes_the_branch() -> None:
    b = bucket()
    write_in(b, 0, "a")
    b.failover(0, lose_unpersisted=False)
    assert b.vbucket(0).high_seqno == 1
    assert [s for _, s in b.vbucket(0).failover.entries] == [1, 0]


def test_state_change_to_active_from_replica_adds_entry_but_not_to_dead() -> None:
    b = bucket()
    b.set_vbucket_state(1, VBucketState.REPLICA)
    gen = b.vbucket(1).generation
    b.set_vbucket_state(1, VBucketState.ACTIVE)
    assert len(b.vbucket(1).failover.entries) == 2
    assert b.vbucket(1).generation == gen + 1
    b.set_vbucket_state(1, VBucketState.DEAD)
    assert len(b.vbucket(1).failover.entries) == 2
    with pytest.raises(ModelError):
        b.set("x", "{}", vbucket=1)


def test_flush_empties_every_vbucket_with_a_new_history() -> None:
    b = bucket()
    for i in range(10):
        b.set(f"k{i}", "{}")
    uuids = [vb.failover.newest_uuid for vb in b.vbuckets]
    b.flush()
    assert b.oracle() == {}
    assert all(vb.high_seqno == 0 for vb in b.vbuckets)
    assert all(len(vb.failover.entries) == 1 for vb in b.vbuckets)
    assert [vb.failover.newest_uuid for vb in b.vbuckets] != uuids


def test_expire_and_touch() -> None:
    b = bucket()
    b.set("k", "{}", vbucket=0, expiry=123)
    touched = b.touch("k", 456, vbucket=0)
    assert (touched.expiry, touched.value) == (456, b"{}")
    gone = b.expire("k", vbucket=0)
    assert gone.kind is ItemKind.EXPIRATION
    assert gone.delete_time == 456
    assert b.oracle() == {}


@pytest.mark.parametrize(
    "step",
    [
        lambda b: b.vbucket(4),
        lambda b: b.set("k", "{}", vbucket=9),
        lambda b: b.delete("missing", vbucket=0),
        lambda b: b.persist(0, upto=99),
        lambda b: b.failover(0, lose_after=99),
        lambda b: b.set("", "{}"),
        lambda b: b.set("k", "{}", flags=-1),
        lambda b: b.set_vbucket_state(0, 9),
        lambda b: b.touch("missing", 5, vbucket=0),
    ],
)
def test_bad_arguments_raise_and_change_nothing(step: Callable[[Bucket], object]) -> None:
    b = bucket()
    write_in(b, 0, "a")
    before = [
        (vb.high_seqno, vb.persisted_seqno, vb.state, list(vb.failover.entries))
        for vb in b.vbuckets
    ]
    oracle = copy.copy(b.oracle())
    with pytest.raises(ModelError):
        step(b)
    after = [
        (vb.high_seqno, vb.persisted_seqno, vb.state, list(vb.failover.entries))
        for vb in b.vbuckets
    ]
    assert after == before
    assert b.oracle() == oracle


def test_same_seed_gives_the_same_uuids() -> None:
    assert [vb.failover.newest_uuid for vb in bucket().vbuckets] == [
        vb.failover.newest_uuid for vb in bucket().vbuckets
    ]


def test_persist_keeps_a_version_deduplicated_away_in_the_open_checkpoint() -> None:
    b = bucket()
    write_in(b, 0, "a", '{"v":1}')
    write_in(b, 0, "b")
    write_in(b, 0, "a", '{"v":2}')  # removes a@1 from the open checkpoint
    b.persist(0, upto=2)
    snap = b.vbucket(0).disk_snapshot(0)
    assert [(i.key, i.seqno) for i in snap.items] == [(b"a", 1), (b"b", 2)]
    b.restart(0)
    assert b.oracle()[(0, b"a")].value == b'{"v":1}'


def test_rewriting_one_key_does_not_close_checkpoints() -> None:
    b = bucket(checkpoint_max_items=10)
    for i in range(1000):
        write_in(b, 0, "same", f'{{"i":{i}}}')
    vb = b.vbucket(0)
    assert len(vb.checkpoints) == 1
    assert vb.checkpoints[0].bytes == len(vb.get(b"same").wire)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "kwargs",
    [{"flags": "x"}, {"expiry": 1.5}, {"collection_id": -1}, {"datatype": 0x80}, {"flags": True}],
)
def test_bad_field_types_raise_model_error(kwargs: dict[str, Any]) -> None:  # wrong on purpose
    b = bucket()
    with pytest.raises(ModelError):
        b.set("k", "{}", vbucket=0, **kwargs)
    assert b.vbucket(0).high_seqno == 0


def test_dead_to_active_is_a_promotion_with_a_failover_entry() -> None:
    b = bucket()
    b.set_vbucket_state(0, VBucketState.DEAD)
    b.set_vbucket_state(0, VBucketState.ACTIVE)
    assert len(b.vbucket(0).failover.entries) == 2


def test_batch_frames_and_ends_skip_holes_left_by_deduplication() -> None:
    b = bucket()
    for key in ("a", "b", "c"):
        write_in(b, 0, key)
    cursor = b.vbucket(0).register_cursor("c", 0)
    assert cursor is not None
    first = cursor.next_batch()
    assert first is not None
    write_in(b, 0, "a", '{"v":2}')  # a hole where the first "a" was: before this batch
    write_in(b, 0, "d")
    batch = cursor.next_batch()
    assert batch is not None
    assert [it.seqno for it in batch.items] == [4, 5]
    assert batch.heads == [it.head for it in batch.items]
    assert batch.tails == [it.tail for it in batch.items]
    assert bytes(batch.tags) == bytes(it.tag for it in batch.items)
    assert [e - batch.base for e in batch.ends] == list(
        itertools.accumulate(len(it.wire) for it in batch.items)
    )
    write_in(b, 0, "e")
    write_in(b, 0, "e", '{"v":2}')  # a hole inside the next read: left out
    write_in(b, 0, "f")
    batch = cursor.next_batch()
    assert batch is not None
    assert [it.seqno for it in batch.items] == [7, 8]
    assert batch.heads == [it.head for it in batch.items]
    assert batch.tails == [it.tail for it in batch.items]
    assert bytes(batch.tags) == bytes(it.tag for it in batch.items)
    assert [e - batch.base for e in batch.ends] == list(
        itertools.accumulate(len(it.wire) for it in batch.items)
    )
