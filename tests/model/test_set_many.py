from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings, strategies as st

from mockdcp import ModelError
from mockdcp.model import Bucket, Item

if TYPE_CHECKING:
    from mockdcp.model._checkpoint import Checkpoint

CLOCK = 1_700_000_000.0


def bucket(max_items: int = 10_000, max_bytes: int = 10 * 1024 * 1024) -> Bucket:
    return Bucket(
        "default",
        4,
        seed=9,
        clock=lambda: CLOCK,
        checkpoint_max_items=max_items,
        checkpoint_max_bytes=max_bytes,
        collections={"inventory": ["hotel", "air"]},  # ids 8 and 9
    )


def item_state(item: Item) -> tuple[Any, ...]:
    return (
        item.key,
        item.collection_id,
        item.vbucket,
        item.seqno,
        item.rev_seqno,
        item.cas,
        item.flags,
        item.expiry,
        item.datatype,
        item.kind,
        item.delete_time,
        item.tag,
        item.head,
        item.tail,
        item.wire,
    )


def checkpoint_state(cp: Checkpoint) -> tuple[Any, ...]:
    return (
        cp.start_seqno,
        cp.end_seqno,
        cp.open,
        [None if e is None else e.seqno for e in cp.entries],
        cp.heads,
        cp.tails,
        bytes(cp.tags),
        list(cp.ends),
        cp.bytes,
        cp.last_hole,
        dict(cp.index),
    )


def model_state(b: Bucket) -> list[Any]:
    return [
        (
            vb.high_seqno,
            sorted((k, item_state(it)) for k, it in vb.items.items()),
            [item_state(it) for it in vb.log],
            [checkpoint_state(cp) for cp in vb.checkpoints],
        )
        for vb in b.vbuckets
    ]


rows = st.lists(
    st.tuples(
        st.sampled_from([b"a", b"b", b"c", b"user::1", b"user::2", b"k" * 250]),
        st.sampled_from([b"", b'{"a":1}', b"raw bytes", b"x" * 300]),
        st.sampled_from([0, 8, 9]),
        st.integers(0, 0xFFFFFFFF),
        st.integers(0, 0xFFFFFFFF),
        st.sampled_from([0, 1]),
    ),
    max_size=60,
)


@settings(deadline=None)
@given(
    st.lists(rows, max_size=4),
    st.integers(1, 8),
    st.sampled_from([200, 1000, 10**7]),
)
def test_set_many_writes_the_model_and_frames_of_set_item_by_item(
    batches: list[list[tuple[bytes, bytes, int, int, int, int]]], max_items: int, max_bytes: int
) -> None:
    one, many = bucket(max_items, max_bytes), bucket(max_items, max_bytes)
    for batch in batches:
        for key, value, cid, flags, expiry, dt in batch:
            one.set(key, value, collection_id=cid, flags=flags, expiry=expiry, datatype=dt)
        written = many.set_many(
            [r[0] for r in batch],
            [r[1] for r in batch],
            collection_ids=[r[2] for r in batch],
            flags=[r[3] for r in batch],
            expiry=[r[4] for r in batch],
            datatypes=[r[5] for r in batch],
        )
        assert written == len(batch)
        assert model_state(many) == model_state(one)
    one.persist()
    many.persist()
    assert [vb.store.columns.heads for vb in many.vbuckets] == [
        vb.store.columns.heads for vb in one.vbuckets
    ]
    assert [vb.store.columns.tails for vb in many.vbuckets] == [
        vb.store.columns.tails for vb in one.vbuckets
    ]
    assert [vb.store.columns.tags for vb in many.vbuckets] == [
        vb.store.columns.tags for vb in one.vbuckets
    ]


def test_set_many_guesses_datatypes_and_takes_one_value_for_every_row() -> None:
    b = bucket()
    b.set_many([b"j", b"r"], [b'{"x":1}', b"not json"], flags=7, expiry=9, datatypes=[None, None])
    j, r = b.vbucket(b.vbucket_of("j")).get(b"j"), b.vbucket(b.vbucket_of("r")).get(b"r")
    assert j is not None
    assert r is not None
    assert (j.datatype, r.datatype) == (1, 0)
    assert (j.flags, j.expiry, r.flags, r.expiry) == (7, 9, 7, 9)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keys": [b"a", b""]}, "row 1: key"),
        ({"keys": [b"a", "b" * 251]}, "row 1: key"),
        ({"keys": [b"a", 3]}, "row 1: key"),
        ({"values": [b"v", 5]}, "row 1: value"),
        ({"values": [b"v"]}, "values has 1 entries"),
        ({"flags": [0, -1]}, "row 1: flags"),
        ({"expiry": [0, 2**32]}, "row 1: expiry"),
        ({"collection_ids": [0, "x"]}, "row 1: collection_id"),
        ({"collection_ids": [0, 77]}, "row 1: collection_id: unknown collection"),
        ({"datatypes": [1, 8]}, "row 1: datatype"),
        ({"datatypes": [1, 2]}, "row 1: value"),  # SNAPPY, not a snappy value
        ({"datatypes": [4, 0]}, "row 0: value"),  # XATTR, no xattr section
        ({"flags": [0, 1, 2]}, "flags has 3 entries"),
    ],
)
def test_set_many_validates_the_whole_batch_before_writing(
    kwargs: dict[str, Any], message: str
) -> None:
    b = bucket()
    before = model_state(b)
    args: dict[str, Any] = {"keys": [b"a", b"b"], "values": [b"v", b"w"], **kwargs}
    with pytest.raises(ModelError, match=message):
        b.set_many(args.pop("keys"), args.pop("values"), **args)
    assert model_state(b) == before


def test_set_many_refuses_a_batch_with_a_row_for_a_replica_vbucket() -> None:
    b = bucket()
    b.set_vbucket_state(b.vbucket_of("b"), 2)
    before = model_state(b)
    with pytest.raises(ModelError, match="row 1: key: vbucket"):
        b.set_many([b"a", b"b"], [b"1", b"2"])
    assert model_state(b) == before


def test_set_many_of_no_rows_writes_nothing() -> None:
    b = bucket()
    told: list[int] = []
    b.feed.subscribe(lambda change: told.extend(change.vbuckets))
    before = [vb.high_seqno for vb in b.vbuckets]
    assert b.set_many([], []) == 0  # was a ValueError from the collection check
    assert [vb.high_seqno for vb in b.vbuckets] == before
    assert told == []


def test_set_many_tells_each_vbucket_written_once() -> None:
    b = bucket()
    told: list[int] = []
    b.feed.subscribe(lambda change: told.extend(change.vbuckets))
    keys = [f"k{i}".encode() for i in range(40)]
    b.set_many(keys, [b"v"] * 40)
    assert told == sorted({b.vbucket_of(k) for k in keys})


@settings(deadline=None)
@given(rows, st.integers(1, 40))
def test_set_many_steps_write_what_set_many_writes_whole_vbuckets_at_a_time(
    batch: list[tuple[bytes, bytes, int, int, int, int]], rows_per_step: int
) -> None:
    one, steps = bucket(3), bucket(3)
    columns: dict[str, Any] = {
        "collection_ids": [r[2] for r in batch],
        "flags": [r[3] for r in batch],
        "expiry": [r[4] for r in batch],
        "datatypes": [r[5] for r in batch],
    }
    keys, values = [r[0] for r in batch], [r[1] for r in batch]
    one.set_many(keys, values, **columns)
    told: list[int] = []
    steps.feed.subscribe(lambda change: told.extend(change.vbuckets))
    written = list(steps.set_many_steps(keys, values, rows_per_step=rows_per_step, **columns))
    assert sum(written) == len(batch)
    assert model_state(steps) == model_state(one)
    assert told == sorted({steps.vbucket_of(k) for k in keys})
    validating = -(-len(batch) // rows_per_step) - 1 if batch else 0
    assert written[:validating] == [0] * validating
    assert all(n >= rows_per_step for n in written[validating:-1])


def test_set_many_steps_check_the_columns_when_called() -> None:
    b = bucket()
    with pytest.raises(ModelError, match="flags has 1 entries"):
        b.set_many_steps([b"a", b"b"], [b"1", b"2"], flags=[0])


def test_set_many_steps_validate_every_row_before_writing_any() -> None:
    b = bucket()
    before = model_state(b)
    keys = [b"k%d" % i for i in range(10)] + [b""]
    steps = b.set_many_steps(keys, [b"v"] * 11, rows_per_step=4)
    assert next(steps) == 0
    assert next(steps) == 0
    with pytest.raises(ModelError, match="row 10: key"):
        next(steps)
    assert model_state(b) == before


def test_a_step_refuses_a_vbucket_no_longer_active_and_keeps_the_steps_before() -> None:
    b = bucket()
    keys = [f"k{i}".encode() for i in range(40)]
    steps = b.set_many_steps(keys, [b"v"] * 40, rows_per_step=1)
    while next(steps) == 0:  # validating
        pass
    last_vb = max(b.vbucket_of(k) for k in keys)
    b.set_vbucket_state(last_vb, 2)
    with pytest.raises(ModelError, match=f"vbucket {last_vb} is replica"):
        list(steps)
    stored = {key for vb in b.vbuckets for cid, key in vb.items if cid == 0}
    assert stored == {k for k in keys if b.vbucket_of(k) < last_vb}
