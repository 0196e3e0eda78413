from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mockdcp import ModelError
from mockdcp.model import Bucket, needs_rollback
from mockdcp.model._item import SYSTEM_COLLECTION_ID, SystemEventItem
from mockdcp.model._manifest import Manifest, VBucketManifest
from mockdcp.protocol import (
    FrameReader,
    SeqnoAdvanced,
    SystemEvent,
    SystemEventType,
    decode_server_message,
)

if TYPE_CHECKING:
    from collections.abc import Callable

E = SystemEventType


def bucket(collections: object = None, vbuckets: int = 4) -> Bucket:
    return Bucket(
        "default",
        vbuckets,
        seed=1,
        clock=lambda: 1_700_000_000.0,
        collections=collections,  # type: ignore[arg-type]
    )


def events(b: Bucket, vb: int = 0) -> list[SystemEventItem]:
    return list(b.vbucket(vb).system_events)


def summary(b: Bucket, vb: int = 0) -> list[tuple[int, E, int | None, int]]:
    return [
        (e.seqno, e.event, e.event_collection_id or e.scope_id, e.manifest_uid)
        for e in events(b, vb)
    ]


def decode(wire: bytes) -> object:
    reader = FrameReader()
    reader.feed(wire)
    frame = reader.next_frame()
    assert frame is not None
    return decode_server_message(frame, collections=True)


# -- the manifest ------------------------------------------------------------------------


def test_default_only_bucket_has_uid_zero_and_no_system_events() -> None:
    b = bucket()
    assert b.manifest.uid == 0
    assert b.manifest.to_json() == {
        "uid": "0",
        "scopes": [
            {"name": "_default", "uid": "0", "collections": [{"name": "_default", "uid": "0"}]}
        ],
    }
    assert all(vb.high_seqno == 0 and not vb.system_events for vb in b.vbuckets)


def test_declared_collections_get_ids_from_8_and_a_uid_per_change() -> None:
    b = bucket({"inventory": ["hotel", "airline"], "tenant": [{"name": "users", "maxTTL": 60}]})
    m = b.manifest
    assert m.uid == 5  # scope, 2 collections, scope, collection
    assert [(s.sid, s.name) for s in m.scopes.values()] == [
        (0, "_default"),
        (8, "inventory"),
        (9, "tenant"),
    ]
    assert b.resolve_collection("inventory.hotel") == 8
    assert b.resolve_collection("inventory.airline") == 9
    assert b.resolve_collection("tenant.users") == 10
    assert m.collections[10].max_ttl == 60


def test_declared_collections_are_created_at_the_first_seqnos_of_every_vbucket() -> None:
    b = bucket({"inventory": ["hotel", "airline"]})
    for vb in b.vbuckets:
        assert [(e.seqno, e.event, e.manifest_uid) for e in vb.system_events] == [
            (1, E.CREATE_SCOPE, 1),
            (2, E.BEGIN_COLLECTION, 2),
            (3, E.BEGIN_COLLECTION, 3),
        ]
        assert vb.high_seqno == 3


def test_richer_spec_with_a_mapping_of_collections() -> None:
    b = bucket({"_default": {"extra": {"maxTTL": 5}}, "s": {"c": None}})
    assert b.resolve_collection("extra") == 8
    assert b.manifest.collections[8].max_ttl == 5
    assert b.resolve_collection("s.c") == 9


@pytest.mark.parametrize(
    "spec",
    [
        ["inventory"],
        {"inventory": "hotel"},
        {"inventory": [{"name": "h", "ttl": 1}]},
        {"inventory": [{"name": "h", "maxTTL": -1}]},
        {"_bad": ["x"]},
        {"inventory": ["hotel", "hotel"]},
    ],
)
def test_bad_declaration_raises(spec: object) -> None:
    with pytest.raises(ModelError):
        bucket(spec)


def test_manifest_json_has_hex_ids_and_max_ttl_only_when_set() -> None:
    b = bucket({"s": [{"name": "c", "maxTTL": 3600}, "d"]})
    assert b.manifest_json() == {
        "uid": "3",
        "scopes": [
            {"name": "_default", "uid": "0", "collections": [{"name": "_default", "uid": "0"}]},
            {
                "name": "s",
                "uid": "8",
                "collections": [
                    {"name": "c", "uid": "8", "maxTTL": 3600},
                    {"name": "d", "uid": "9"},
                ],
            },
        ],
    }


def test_uid_advances_with_every_change() -> None:
    b = bucket()
    uids = []
    b.create_scope("s")
    uids.append(b.manifest.uid)
    b.create_collection("s", "c", max_ttl=10)
    uids.append(b.manifest.uid)
    b.modify_collection("s", "c", max_ttl=20)
    uids.append(b.manifest.uid)
    b.drop_collection("s", "c")
    uids.append(b.manifest.uid)
    b.drop_scope("s")
    uids.append(b.manifest.uid)
    assert uids == [1, 2, 3, 4, 5]
    assert [e.event for e in events(b)] == [
        E.CREATE_SCOPE,
        E.BEGIN_COLLECTION,
        E.MODIFY_COLLECTION,
        E.END_COLLECTION,
        E.DROP_SCOPE,
    ]


def test_only_the_last_event_of_a_change_carries_the_new_uid() -> None:
    b = bucket({"s": ["a", "b"]})
    b.drop_scope("s")
    assert summary(b)[-3:] == [
        (4, E.END_COLLECTION, 8, 3),
        (5, E.END_COLLECTION, 9, 3),
        (6, E.DROP_SCOPE, 8, 4),
    ]


def test_ids_are_never_reused_after_a_drop() -> None:
    b = bucket({"s": ["c"]})
    b.drop_scope("s")
    assert b.create_scope("s") == 9
    assert b.create_collection("s", "c") == 9


def test_default_collection_can_be_dropped_and_then_takes_no_writes() -> None:
    b = bucket()
    b.set("k", "{}")
    b.drop_collection("_default", "_default")
    assert b.manifest.uid == 1
    assert 0 not in b.manifest.collections
    with pytest.raises(ModelError, match="unknown collection id"):
        b.set("k", "{}")
    with pytest.raises(ModelError):
        b.create_collection("_default", "_default")
    assert b.oracle() == {}


def test_default_scope_cannot_be_dropped() -> None:
    with pytest.raises(ModelError, match="_default scope"):
        bucket().drop_scope("_default")


@pytest.mark.parametrize(
    "step",
    [
        lambda b: b.create_scope("s"),
        lambda b: b.create_scope(""),
        lambda b: b.create_scope("%x"),
        lambda b: b.create_scope("a" * 252),
        lambda b: b.create_collection("nope", "c"),
        lambda b: b.create_collection("s", "c"),
        lambda b: b.create_collection("s", "d", max_ttl=2**31),
        lambda b: b.create_collection("s", "d", max_ttl=True),
        lambda b: b.drop_collection("s", "nope"),
        lambda b: b.drop_scope("nope"),
        lambda b: b.modify_collection("s", "c", max_ttl=None),
        lambda b: b.modify_collection("s", "nope", max_ttl=1),
    ],
)
def test_bad_manifest_change_raises_and_changes_nothing(step: Callable[[Bucket], object]) -> None:
    b = bucket({"s": ["c"]})
    before = (b.manifest.to_json(), [vb.high_seqno for vb in b.vbuckets])
    with pytest.raises(ModelError):
        step(b)
    assert (b.manifest.to_json(), [vb.high_seqno for vb in b.vbuckets]) == before


@pytest.mark.parametrize(
    "write",
    [
        lambda b: b.set("k", "{}", collection_id=9),
        lambda b: b.set("k", "{}", collection_id=SYSTEM_COLLECTION_ID),
        lambda b: b.delete("k", collection_id=12),
        lambda b: b.touch("k", 5, collection_id=12),
    ],
)
def test_unknown_collection_is_rejected(write: Callable[[Bucket], object]) -> None:
    b = bucket({"s": ["c"]})
    with pytest.raises(ModelError, match="unknown collection id"):
        write(b)


def test_dropped_collection_is_rejected_and_leaves_the_oracle() -> None:
    b = bucket({"s": ["c"]})
    b.set("k", "{}", collection_id=8)
    b.set("k", "{}")
    b.drop_collection("s", "c")
    with pytest.raises(ModelError):
        b.set("k2", "{}", collection_id=8)
    assert list(b.oracle()) == [(0, b"k")]


def test_resolve_names_paths() -> None:
    b = bucket({"s": ["c"]})
    assert b.resolve_collection("_default._default") == 0
    assert b.resolve_collection("_default") == 0
    assert b.resolve_collection("s.c") == 8
    for bad in ("s.nope", "nope.c", "a.b.c"):
        with pytest.raises(ModelError):
            b.resolve_collection(bad)
    assert b.manifest.paths() == ["_default._default", "s.c"]


# -- system events as items ----------------------------------------------------------------


def test_creation_and_drop_of_a_collection_share_one_system_key() -> None:
    b = bucket({"s": ["c"]})
    create = events(b)[-1]
    b.drop_collection("s", "c")
    drop = events(b)[-1]
    assert create.doc_key == drop.doc_key
    assert create.doc_key[0] == SYSTEM_COLLECTION_ID
    assert drop.deleted
    assert not create.deleted


def test_drop_deduplicates_the_creation_in_an_open_checkpoint() -> None:
    b = bucket({"s": ["c"]})
    b.drop_collection("s", "c")
    cp = b.vbucket(0).checkpoints[-1]
    live = [e for e in cp.entries if e is not None]
    assert [(e.seqno, e.kind.value) for e in live] == [(1, "system_event"), (3, "system_event")]
    assert isinstance(live[-1], SystemEventItem)
    assert live[-1].event is E.END_COLLECTION


def test_drop_does_not_deduplicate_a_creation_in_a_closed_checkpoint() -> None:
    b = bucket({"s": ["c"]})
    b.checkpoint()
    b.drop_collection("s", "c")
    seqnos = [e.seqno for cp in b.vbucket(0).checkpoints for e in cp.entries if e is not None]
    assert seqnos == [1, 2, 3]


def test_events_persist_to_disk_and_drops_purge_like_tombstones() -> None:
    b = bucket({"s": ["c"]})
    b.create_collection("s", "d")
    b.drop_collection("s", "d")
    b.persist()
    disk = b.vbucket(0).disk_snapshot(0)
    assert [it.seqno for it in disk.items] == [1, 2, 4]  # d's creation was superseded
    assert b.purge() == 4  # the drop of d, in each vbucket
    disk = b.vbucket(0).disk_snapshot(0)
    assert [it.seqno for it in disk.items] == [1, 2]
    assert b.vbucket(0).purge_seqno == 4


def test_system_event_wire_is_the_v0_or_v1_frame_with_opaque_zero() -> None:
    b = bucket({"s": ["c", {"name": "t", "maxTTL": 72000}]})
    scope, plain, with_ttl = events(b)
    msg = decode(scope.wire)
    assert isinstance(msg, SystemEvent)
    assert (msg.event, msg.version, msg.key, msg.by_seqno, msg.opaque) == (
        E.CREATE_SCOPE,
        0,
        b"s",
        1,
        0,
    )
    plain_msg, ttl_msg = decode(plain.wire), decode(with_ttl.wire)
    assert isinstance(plain_msg, SystemEvent)
    assert isinstance(ttl_msg, SystemEvent)
    assert (plain_msg.version, plain_msg.data().collection_id) == (0, 8)  # type: ignore[union-attr]
    assert ttl_msg.version == 1
    assert ttl_msg.data().max_ttl == 72000  # type: ignore[union-attr]


def test_drop_events_have_an_empty_key() -> None:
    b = bucket({"s": ["c"]})
    b.drop_scope("s")
    for e in events(b)[-2:]:
        msg = decode(e.wire)
        assert isinstance(msg, SystemEvent)
        assert msg.key == b""
    assert [decode(e.wire).event for e in events(b)[-2:]] == [  # type: ignore[attr-defined]
        E.END_COLLECTION,
        E.DROP_SCOPE,
    ]


def test_modify_is_seqno_advanced_without_flatbuffers_and_v2_with_them() -> None:
    b = bucket({"s": ["c"]})
    b.modify_collection("s", "c", max_ttl=30)
    modify = events(b)[-1]
    assert modify.frame(flatbuffers=False) is None
    advanced = decode(modify.wire)
    assert isinstance(advanced, SeqnoAdvanced)
    assert advanced.by_seqno == modify.seqno
    fb = decode(modify.frame(flatbuffers=True) or b"")
    assert isinstance(fb, SystemEvent)
    assert (fb.event, fb.version, fb.key) == (E.MODIFY_COLLECTION, 2, b"c")
    data = fb.data()
    assert (data.collection_id, data.max_ttl, data.manifest_uid) == (8, 30, 3)  # type: ignore[union-attr]


def test_legacy_high_seqnos_per_collection_count_their_events_and_items() -> None:
    b = bucket({"s": ["c"]}, vbuckets=1)
    b.set("k", "{}", collection_id=8)
    b.set("j", "{}")
    assert b.collection_high_seqnos(8) == [(0, 3)]
    assert b.collection_high_seqnos(0) == [(0, 4)]
    b.create_collection("s", "d")
    assert b.collection_high_seqnos(9) == [(0, 5)]
    with pytest.raises(ModelError):
        b.collection_high_seqnos(42)


# -- failover, restart, flush, rollback ------------------------------------------------------


def test_failover_that_loses_a_creation_writes_it_again_on_the_new_branch() -> None:
    b = bucket({"s": ["c"]}, vbuckets=1)
    b.set("k", "{}", collection_id=8)
    b.persist()  # up to 3
    b.create_collection("s", "d")  # seqno 4, unpersisted
    b.failover(lose_unpersisted=True)
    vb = b.vbucket(0)
    assert summary(b) == [
        (1, E.CREATE_SCOPE, 8, 1),
        (2, E.BEGIN_COLLECTION, 8, 2),
        (4, E.BEGIN_COLLECTION, 9, 3),
    ]
    assert vb.failover.entries[0][1] == 3  # the new branch starts at 3
    b.set("x", "{}", collection_id=9)  # the collection is usable at once
    assert vb.high_seqno == 5


def test_failover_that_loses_a_drop_drops_again() -> None:
    b = bucket({"s": ["c"]}, vbuckets=1)
    b.persist()
    b.drop_collection("s", "c")
    b.failover(lose_unpersisted=True)
    state = VBucketManifest.replay(e.as_manifest_event() for e in events(b))
    assert 8 not in state.collections
    assert state.uid == 3
    assert summary(b)[-1] == (3, E.END_COLLECTION, 8, 3)


def test_failover_keeping_everything_writes_no_event() -> None:
    b = bucket({"s": ["c"]}, vbuckets=1)
    b.failover(lose_unpersisted=False)
    assert b.vbucket(0).high_seqno == 2


def test_restart_and_flush_rewrite_the_manifest_events() -> None:
    b = bucket({"s": ["c"]}, vbuckets=2)
    b.restart()  # nothing persisted: everything lost, then written again
    assert [e.seqno for e in events(b, 1)] == [1, 2]
    b.flush()
    assert [(e.seqno, e.event) for e in events(b, 0)] == [
        (1, E.CREATE_SCOPE),
        (2, E.BEGIN_COLLECTION),
    ]
    assert events(b, 0)[-1].manifest_uid == 2


def test_flush_after_dropping_default_ends_it_in_every_vbucket() -> None:
    b = bucket(vbuckets=1)
    b.drop_collection("_default", "_default")
    b.flush()
    assert summary(b) == [(1, E.END_COLLECTION, 0, 1)]


def test_consumer_past_a_lost_system_event_must_roll_back() -> None:
    b = bucket({"s": ["c"]}, vbuckets=1)
    b.persist()
    uuid = b.vbucket(0).failover.newest_uuid
    b.create_collection("s", "d")  # seqno 3, a consumer read it
    b.failover(lose_unpersisted=True)
    vb = b.vbucket(0)
    rollback, seqno, _ = needs_rollback(
        start_seqno=3,
        high_seqno=vb.high_seqno,
        vbucket_uuid=uuid,
        snap_start_seqno=3,
        snap_end_seqno=3,
        purge_seqno=vb.purge_seqno,
        failover_entries=vb.failover.entries,
        strict_vbuuid=False,
        ignore_purged_tombstones=False,
        client_purge_seqno=0,
        collections_high_seqno=None,
    )
    assert (rollback, seqno) == (True, 2)


def test_vbucket_manifest_catch_up_stamps_the_last_event_only() -> None:
    m = Manifest()
    for change in (m.plan_create_scope("s"),):
        m.apply(change)
    m.apply(m.plan_create_collection("s", "a"))
    m.apply(m.plan_create_collection("s", "b"))
    caught = VBucketManifest().catch_up(m)
    assert [(e.event, e.manifest_uid) for e in caught] == [
        (E.CREATE_SCOPE, 0),
        (E.BEGIN_COLLECTION, 0),
        (E.BEGIN_COLLECTION, 3),
    ]


# -- flush of a collection ------------------------------------------------------------------


def test_flush_collection_writes_its_begin_event_again_with_the_flush_uid() -> None:
    b = bucket({"s": ["c"]}, vbuckets=1)
    b.set("k", "{}", collection_id=8)
    b.set("d", "{}")
    b.flush_collection("s", "c")
    flush = events(b)[-1]
    assert (flush.seqno, flush.event, flush.manifest_uid, flush.flush_uid) == (
        5,
        E.BEGIN_COLLECTION,
        3,
        3,
    )
    assert flush.doc_key == events(b)[1].doc_key  # dedups the creation in the checkpoint
    assert list(b.oracle()) == [(0, b"d")]
    with pytest.raises(ModelError):
        b.delete("k", collection_id=8)
    b.set("k", "{}", collection_id=8)  # the collection takes writes again
    assert (8, b"k") in b.oracle()


def test_flush_event_frames_v1_and_v2() -> None:
    b = bucket({"s": [{"name": "c", "maxTTL": 9}]}, vbuckets=1)
    b.flush_collection("s", "c")
    flush = events(b)[-1]
    legacy = decode(flush.wire)
    assert isinstance(legacy, SystemEvent)
    assert (legacy.event, legacy.version, legacy.key) == (E.BEGIN_COLLECTION, 1, b"c")
    fb = decode(flush.frame(flatbuffers=True) or b"")
    assert isinstance(fb, SystemEvent)
    assert fb.data().flush_uid == 3  # type: ignore[union-attr]


def test_failover_that_loses_a_flush_flushes_again() -> None:
    b = bucket({"s": ["c"]}, vbuckets=1)
    b.set("k", "{}", collection_id=8)
    b.persist()
    b.flush_collection("s", "c")
    b.failover(lose_unpersisted=True)
    assert (8, b"k") not in b.oracle()
    assert summary(b)[-1] == (4, E.BEGIN_COLLECTION, 8, 3)
    assert events(b)[-1].flush_uid == 3


def test_flushed_documents_stay_gone_after_a_restart() -> None:
    b = bucket({"s": ["c"]}, vbuckets=1)
    b.set("k", "{}", collection_id=8)
    b.flush_collection("s", "c")
    b.persist()
    b.restart()
    assert (8, b"k") not in b.oracle()
