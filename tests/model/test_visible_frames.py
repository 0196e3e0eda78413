"""A checkpoint's frames without prepares and aborts (``VisibleFrames``,
``MemoryBatch.visible``): what a connection without sync writes is sent of a batch,
equal to the batch's frames with the durable ones taken out one by one."""

from __future__ import annotations

from itertools import accumulate

from hypothesis import given, settings, strategies as st

from mockdcp.model import TAG_DURABLE, Bucket, MemoryBatch

#: writes to one vbucket (a plain set, a set_many run, a sync write of a key, a closed
#: checkpoint) and reads of what is new (``read``), as a stream reads between writes
ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.integers(0, 5)),
        st.tuples(st.just("many"), st.lists(st.integers(0, 5), min_size=1, max_size=4)),
        st.tuples(st.sampled_from(["commit", "abort", "pending"]), st.integers(0, 5)),
        st.tuples(st.sampled_from(["close", "read"]), st.just(0)),
    ),
    min_size=1,
    max_size=40,
)


def write(b: Bucket, kind: str, arg: object, pending: set[object]) -> None:
    if kind == "set":
        b.set(f"k{arg}", b'{"v":1}', datatype=1)
    elif kind == "many":
        assert isinstance(arg, list)
        b.set_many([f"k{k}".encode() for k in arg], [b"{}"] * len(arg), datatypes=1)
    elif kind == "close":
        b.vbucket(0).close_checkpoint()
    elif arg not in pending:
        b.sync_write(f"s{arg}", b'{"d":1}', datatype=1, outcome=kind)
        if kind == "pending":
            pending.add(arg)


def check(batch: MemoryBatch) -> bool:
    """The batch's visible frames (if the checkpoint keeps them) are its frames without
    prepares and aborts, their end offsets the running sizes of those; True if kept."""
    shown = batch.visible()
    if shown is None:
        return False
    heads, tails, ends, base = shown
    keep = [t != TAG_DURABLE for t in batch.tags]
    assert heads == [h for h, k in zip(batch.heads, keep, strict=True) if k]
    assert tails == [t for t, k in zip(batch.tails, keep, strict=True) if k]
    sizes = [e - s for e, s in zip(batch.ends, [batch.base, *batch.ends[:-1]], strict=True)]
    kept_sizes = [size for size, k in zip(sizes, keep, strict=True) if k]
    assert [e - base for e in ends] == list(accumulate(kept_sizes))
    return True


@settings(deadline=None, max_examples=300)
@given(ops_strategy)
def test_visible_frames_of_a_batch_are_its_frames_without_prepares_and_aborts(
    ops: list[tuple[str, object]],
) -> None:
    b = Bucket("default", 1, seed=2, clock=lambda: 1_700_000_000.0)
    cursor = b.vbucket(0).register_cursor("t", 0)
    assert cursor is not None
    pending: set[object] = set()
    for kind, arg in [*ops, ("read", 0)]:
        if kind == "read":
            while (batch := cursor.next_batch()) is not None:
                check(batch)
        else:
            write(b, kind, arg, pending)


def test_a_batch_after_a_hole_slices_the_visible_frames_where_its_entries_are() -> None:
    b = Bucket("default", 1, seed=2, clock=lambda: 1_700_000_000.0)
    cursor = b.vbucket(0).register_cursor("t", 0)
    assert cursor is not None
    b.set("k1", b"{}", datatype=1)
    b.sync_write("s1", b"{}", datatype=1, outcome="commit")
    first = cursor.next_batch()
    assert first is not None
    assert check(first)
    b.set("k2", b"{}", datatype=1)
    b.set("k1", b'{"v":2}', datatype=1)  # a hole where the first k1 was
    later = cursor.next_batch()
    assert later is not None
    assert check(later)
    assert later.visible() is not None


def test_a_checkpoint_keeps_no_visible_frames_until_it_holds_a_prepare() -> None:
    b = Bucket("default", 1, seed=2, clock=lambda: 1_700_000_000.0)
    for kind, arg in [("set", 1), ("many", [2, 3])]:
        write(b, kind, arg, set())
    cp = b.vbucket(0).checkpoints[-1]
    assert cp.visible is None
    b.sync_write("s1", b"{}", datatype=1, outcome="commit")
    assert cp.visible is not None
    assert len(cp.visible.heads) == len(cp.heads) - 1  # the commit, not the prepare


def test_a_batch_copies_its_pieces_when_read_unless_its_checkpoint_keeps_visible_frames() -> None:
    b = Bucket("default", 1, seed=2, clock=lambda: 1_700_000_000.0)
    cursor = b.vbucket(0).register_cursor("t", 0)
    assert cursor is not None
    b.set("k1", b"{}", datatype=1)
    plain = cursor.next_batch()
    assert plain is not None
    assert plain.pieces is not None  # copied as read
    b.sync_write("s1", b"{}", datatype=1, outcome="commit")
    b.set("k2", b"{}", datatype=1)
    batch = cursor.next_batch()
    assert batch is not None
    assert batch.pieces is None  # a stream without sync writes reads visible() instead
    assert batch.visible() is not None
    assert batch.pieces is None
    cp = b.vbucket(0).checkpoints[-1]
    assert (batch.heads, batch.tails) == (cp.heads[1:], cp.tails[1:])  # asked: copied
    assert batch.pieces is not None
