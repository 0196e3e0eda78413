"""A batch's frames are lent by its checkpoint (``FrameSpan``), not copied at every
read: de-duplication copies the spans over the entry it empties first, so a batch keeps
the frames it read; the checkpoint forgets the spans of batches gone."""

from __future__ import annotations

import gc

from hypothesis import given, settings, strategies as st

from mockdcp.model import Bucket
from mockdcp.model._checkpoint import _LENT_LIMIT, FrameSpan


def bucket() -> Bucket:
    return Bucket("default", 1, seed=2, clock=lambda: 1_700_000_000.0)


def test_a_batch_lends_its_frames_and_keeps_them_when_deduplication_empties_one() -> None:
    b = bucket()
    for key in ("a", "b", "c"):
        b.set(key, b"{}", datatype=1)
    cursor = b.vbucket(0).register_cursor("t", 0)
    assert cursor is not None
    batch = cursor.next_batch()
    assert batch is not None
    read = [(it.head, it.tail) for it in batch.items]
    cp = b.vbucket(0).checkpoints[-1]
    heads, tails = batch.heads, batch.tails
    assert isinstance(heads, FrameSpan)
    assert isinstance(tails, FrameSpan)
    assert heads.frames is cp.heads
    assert tails.frames is cp.tails
    b.set("b", b'{"v":2}', datatype=1)  # empties entry 1 of the checkpoint
    assert cp.heads[1] == b""
    assert cp.tails[1] == b""
    assert heads.frames is not cp.heads  # copied before
    assert list(zip(batch.heads, batch.tails, strict=True)) == read
    assert heads[1:] == [h for h, _ in read[1:]]
    assert heads[-1] == read[-1][0]


def test_a_span_away_from_the_emptied_entry_stays_lent() -> None:
    b = bucket()
    b.set("a", b"{}", datatype=1)
    cursor = b.vbucket(0).register_cursor("t", 0)
    assert cursor is not None
    assert cursor.next_batch() is not None
    b.set("b", b"{}", datatype=1)
    batch = cursor.next_batch()
    assert batch is not None
    b.set("a", b'{"v":2}', datatype=1)  # entry 0: not in the batch (entry 1)
    cp = b.vbucket(0).checkpoints[-1]
    assert isinstance(batch.heads, FrameSpan)
    assert batch.heads.frames is cp.heads


def test_the_checkpoint_forgets_the_spans_of_batches_gone() -> None:
    b = bucket()
    cursor = b.vbucket(0).register_cursor("t", 0)
    assert cursor is not None
    for i in range(10 * _LENT_LIMIT):
        b.set(f"k{i}", b"{}", datatype=1)
        assert cursor.next_batch() is not None  # dropped at once
    gc.collect()
    cp = b.vbucket(0).checkpoints[-1]
    assert cp.open
    assert len(cp.lent) <= _LENT_LIMIT + 2


def test_a_closed_checkpoint_lends_without_keeping_track() -> None:
    b = bucket()
    b.set("a", b"{}", datatype=1)
    b.vbucket(0).close_checkpoint()
    cursor = b.vbucket(0).register_cursor("t", 0)
    assert cursor is not None
    batch = cursor.next_batch()
    assert batch is not None
    assert batch.heads == [batch.items[0].head]
    assert not b.vbucket(0).checkpoints[0].lent


@settings(deadline=None, max_examples=200)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("set"), st.integers(0, 4)),
            st.tuples(st.just("many"), st.lists(st.integers(0, 4), min_size=1, max_size=4)),
            st.tuples(st.sampled_from(["read", "close"]), st.just(0)),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_every_batch_keeps_the_frames_it_read_whatever_is_written_after(
    ops: list[tuple[str, object]],
) -> None:
    b = bucket()
    cursor = b.vbucket(0).register_cursor("t", 0)
    assert cursor is not None
    kept = []  # every batch read, with the frames of its items when read
    for n, (kind, arg) in enumerate([*ops, ("read", 0)]):
        value = b'{"n":%d}' % n
        if kind == "set":
            b.set(f"k{arg}", value, datatype=1)
        elif kind == "many":
            assert isinstance(arg, list)
            b.set_many([f"k{k}".encode() for k in arg], [value] * len(arg), datatypes=1)
        elif kind == "close":
            b.vbucket(0).close_checkpoint()
        else:
            while (batch := cursor.next_batch()) is not None:
                kept.append((batch, [(it.head, it.tail) for it in batch.items]))
    for batch, read in kept:
        assert list(zip(batch.heads, batch.tails, strict=True)) == read


def test_a_span_takes_the_frames_at_positions_of_its_own() -> None:
    frames = [b"a", b"b", b"c", b"d", b"e"]
    span = FrameSpan(frames, 2, 5)
    assert span.take([0, 2]) == [b"c", b"e"]
    assert FrameSpan(frames, 0, 2).take([1]) == [b"b"]
    assert span[1:] == [b"d", b"e"]
    assert span[-1] == b"e"
    assert list(span) == [b"c", b"d", b"e"]
    assert span == [b"c", b"d", b"e"]
    assert span != [b"a", b"b", b"c"]
