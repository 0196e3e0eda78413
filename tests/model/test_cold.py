"""The cold tier (``mockdcp.model._cold``) against the object path: a bucket whose
documents were bulk-loaded cold and one whose documents were written by ``set_many``
and persisted (checkpoints expelled, as a warm-up leaves them) must answer every rule
the same, through any sequence of later steps."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mockdcp import ModelError
from mockdcp.model import Bucket, Item, _cold
from mockdcp.model._replication import attach, catch_up, is_prefix, new_replica

if TYPE_CHECKING:
    from mockdcp.model._vbucket import VBucket

CLOCK = 1_700_000_000.0
VBUCKETS = 4
KEYS = [b"a", b"b", b"c", b"user::1", b"user::2", b"k" * 250, b"z"]
CIDS = [0, 8, 9]


def bucket(storage: str = "couchstore") -> Bucket:
    return Bucket(
        "default",
        VBUCKETS,
        seed=9,
        clock=lambda: CLOCK,
        collections={"inventory": ["hotel", "air"]},  # ids 8 and 9
        storage=storage,
    )


def item_state(item: Item) -> tuple[Any, ...]:
    return (
        type(item).__name__,
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
        item.value,
    )


def vbucket_state(vb: VBucket) -> tuple[Any, ...]:
    frames = vb.disk_snapshot(0, frames=True)
    items = vb.disk_snapshot(0)
    half = vb.disk_snapshot(vb.persisted_seqno // 2, frames=True)
    return (
        vb.high_seqno,
        vb.persisted_seqno,
        vb.purge_seqno,
        vb.max_visible_seqno,
        vb.persisted_visible_seqno,
        sorted(vb.collection_high.items()),
        vb.failover.entries,
        vb.generation,
        [item_state(it) for it in vb.all_items()],
        [(k, cid, _state(vb.get(k, cid))) for k in KEYS for cid in CIDS],
        [item_state(it) for it in items.items],
        (items.start_seqno, items.end_seqno, items.max_visible_seqno, items.purge_seqno),
        list(frames.seqnos),
        list(frames.heads),
        list(frames.tails),
        frames.tags,
        list(frames.cids),
        list(frames.sizes),
        [item_state(it) for it in frames.items_at(vb.disk_by_seqno, range(len(frames.seqnos)))],
        (list(half.seqnos), list(half.heads), list(half.tails)),
        [vb.visible_upto(s) for s in range(vb.high_seqno + 1)],
    )


def _state(item: Item | None) -> tuple[Any, ...] | None:
    return None if item is None else item_state(item)


def state(b: Bucket) -> list[Any]:
    return [vbucket_state(vb) for vb in b.vbuckets] + [b.oracle().rows()]


rows = st.lists(
    st.tuples(
        st.sampled_from(KEYS),
        st.sampled_from([b"", b'{"a":1}', b"raw bytes", b"x" * 300]),
        st.sampled_from(CIDS),
        st.integers(0, 0xFFFFFFFF),
        st.integers(0, 0xFFFFFFFF),
        st.sampled_from([0, 1]),
    ),
    max_size=40,
)

keys = st.sampled_from(KEYS)
cids = st.sampled_from(CIDS)
vbs = st.one_of(st.none(), st.integers(0, VBUCKETS - 1))
ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), keys, cids, st.integers(0, 9)),
        st.tuples(st.just("set"), keys, cids, st.integers(0, 9)),
        st.tuples(st.just("delete"), keys, cids),
        st.tuples(st.just("expire"), keys, cids),
        st.tuples(st.just("touch"), keys, cids),
        st.tuples(st.just("sync"), keys, cids, st.sampled_from(["commit", "abort", "pending"])),
        st.tuples(st.just("commit"), keys, cids),
        st.tuples(st.just("checkpoint"), vbs),
        st.tuples(st.just("persist"), vbs),
        st.tuples(st.just("persist_upto"), st.integers(0, VBUCKETS - 1), st.integers(0, 60)),
        st.tuples(st.just("purge"), vbs),
        st.tuples(st.just("restart"), vbs),
        st.tuples(st.just("failover"), st.integers(0, VBUCKETS - 1), st.integers(0, 60)),
        st.tuples(st.just("flush_collection"), st.sampled_from(["hotel", "air"])),
        st.tuples(st.just("drop_collection"), st.sampled_from(["hotel", "air"])),
        st.tuples(st.just("set_many"), rows),
    ),
    max_size=25,
)


def apply(b: Bucket, op: tuple[Any, ...]) -> None:
    kind = op[0]
    try:
        if kind == "set":
            b.set(op[1], b"v%d" % op[3], collection_id=op[2])
        elif kind in ("delete", "expire", "touch"):
            kw: dict[str, Any] = {"collection_id": op[2]}
            if kind == "touch":
                b.touch(op[1], 77, **kw)
            else:
                getattr(b, kind)(op[1], **kw)
        elif kind == "sync":
            b.sync_write(op[1], b"d", collection_id=op[2], outcome=op[3])
        elif kind == "commit":
            b.commit(op[1], collection_id=op[2])
        elif kind in ("checkpoint", "persist", "purge", "restart"):
            getattr(b, kind)(op[1])
        elif kind == "persist_upto":
            b.persist(op[1], upto=min(op[2], b.vbucket(op[1]).high_seqno))
        elif kind == "failover":
            b.failover(op[1], lose_after=min(op[2], b.vbucket(op[1]).high_seqno))
        elif kind in ("flush_collection", "drop_collection"):
            getattr(b, kind)("inventory", op[1])
        elif kind == "set_many":
            batch = op[1]
            b.set_many(
                [r[0] for r in batch],
                [r[1] for r in batch],
                collection_ids=[r[2] for r in batch],
                flags=[r[3] for r in batch],
                expiry=[r[4] for r in batch],
                datatypes=[r[5] for r in batch],
            )
    except ModelError as exc:
        raise _Refused(str(exc)) from None


class _Refused(Exception):
    pass


def same_through_steps(first: Bucket, second: Bucket, steps: list[tuple[Any, ...]]) -> None:
    """Each step applied to both buckets: both refuse it alike, or both end in the same
    state."""
    for op in steps:
        refused: list[str | None] = []
        for b in (first, second):
            try:
                apply(b, op)
                refused.append(None)
            except _Refused as exc:
                refused.append(str(exc))
        assert refused[0] == refused[1], op
        assert state(second) == state(first), op


def loaded(batch: list[tuple[bytes, bytes, int, int, int, int]], *, cold: bool) -> Bucket:
    """A bucket holding ``batch``: loaded cold, or by ``set_many`` then persisted with
    its checkpoints expelled (what the cold tier stands for)."""
    b = bucket()
    columns: dict[str, Any] = {
        "collection_ids": [r[2] for r in batch],
        "flags": [r[3] for r in batch],
        "expiry": [r[4] for r in batch],
        "datatypes": [r[5] for r in batch],
    }
    ks, vs = [r[0] for r in batch], [r[1] for r in batch]
    if cold:
        b.load_cold(ks, vs, **columns)
    else:
        b.set_many(ks, vs, **columns)
        b.checkpoint()
    b.persist()
    return b


#: the two "answers every rule" properties draw the quick profile's 50 examples in the
#: fast tier and 300 in the full tier (before, 300 in the fast tier: 3.5-4 s of CPU each,
#: 12-17 s under the fast tier's load)
EVERY_RULE_QUICK = settings(
    deadline=None, max_examples=50, suppress_health_check=[HealthCheck.too_slow]
)
EVERY_RULE = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])


def answers_every_rule_item_by_item(
    batch: list[tuple[bytes, bytes, int, int, int, int]], steps: list[tuple[Any, ...]]
) -> None:
    hot, cold = loaded(batch, cold=False), loaded(batch, cold=True)
    assert state(cold) == state(hot)
    same_through_steps(hot, cold, steps)


@EVERY_RULE_QUICK
@given(rows, ops)
def test_a_cold_loaded_bucket_answers_every_rule_as_one_loaded_item_by_item_quick(
    batch: list[tuple[bytes, bytes, int, int, int, int]], steps: list[tuple[Any, ...]]
) -> None:
    answers_every_rule_item_by_item(batch, steps)


@pytest.mark.slow
@pytest.mark.full
@EVERY_RULE
@given(rows, ops)
def test_a_cold_loaded_bucket_answers_every_rule_as_one_loaded_item_by_item(
    batch: list[tuple[bytes, bytes, int, int, int, int]], steps: list[tuple[Any, ...]]
) -> None:
    answers_every_rule_item_by_item(batch, steps)


#: a corpus: writes, deletes and expiries in order (a removal of a key not live there
#: stops the load, the rows before it kept)
corpus = st.lists(
    st.one_of(
        st.tuples(st.just("set"), rows.filter(bool)),
        st.tuples(
            st.sampled_from(["delete", "expire"]),
            st.lists(st.tuples(keys, cids), min_size=1, max_size=4),
        ),
    ),
    max_size=6,
)


def loaded_corpus(runs: list[tuple[Any, ...]], *, cold: bool) -> tuple[Bucket, str | None]:
    """A bucket holding the corpus ``runs`` (see ``loaded``), and the refusal that
    stopped it: loaded cold (``ColdLoad.add`` and ``remove``), or by ``set_many``,
    ``delete`` and ``expire`` row by row, then persisted with its checkpoints
    expelled."""
    b = bucket()
    refused = None
    load = b.cold_load() if cold else None
    try:
        for op, batch in runs:
            if op == "set":
                columns: dict[str, Any] = {
                    "collection_ids": [r[2] for r in batch],
                    "flags": [r[3] for r in batch],
                    "expiry": [r[4] for r in batch],
                    "datatypes": [r[5] for r in batch],
                }
                write = b.set_many if load is None else load.add
                write([r[0] for r in batch], [r[1] for r in batch], **columns)
            elif load is not None:
                load.remove(
                    [k for k, _ in batch],
                    collection_ids=[c for _, c in batch],
                    expiration=op == "expire",
                )
            else:
                for key, cid in batch:
                    getattr(b, op)(key, collection_id=cid)
        if load is not None:
            load.finish()
    except ModelError as exc:
        refused = str(exc).split(": key: ")[-1]
    if load is None:
        b.checkpoint()
    b.persist()
    return b, refused


def answers_every_rule_row_by_row(
    runs: list[tuple[Any, ...]], steps: list[tuple[Any, ...]]
) -> None:
    (hot, refused_hot), (cold, refused_cold) = (
        loaded_corpus(runs, cold=False),
        loaded_corpus(runs, cold=True),
    )
    assert refused_cold == refused_hot
    assert state(cold) == state(hot)
    same_through_steps(hot, cold, steps)


@EVERY_RULE_QUICK
@given(corpus, ops)
def test_a_corpus_with_deletes_loaded_cold_answers_every_rule_as_one_loaded_row_by_row_quick(
    runs: list[tuple[Any, ...]], steps: list[tuple[Any, ...]]
) -> None:
    answers_every_rule_row_by_row(runs, steps)


@pytest.mark.slow
@pytest.mark.full
@EVERY_RULE
@given(corpus, ops)
def test_a_corpus_with_deletes_loaded_cold_answers_every_rule_as_one_loaded_row_by_row(
    runs: list[tuple[Any, ...]], steps: list[tuple[Any, ...]]
) -> None:
    answers_every_rule_row_by_row(runs, steps)


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(corpus, ops, st.integers(0, 60))
def test_a_replica_of_a_cold_vbucket_holds_what_a_replica_of_a_hot_one_holds(
    runs: list[tuple[Any, ...]],
    steps: list[tuple[Any, ...]],
    upto: int,
) -> None:
    """(A corpus with tombstones: a replica takes the cold tier's, and purges its own.)"""
    (hot, _), (cold, _) = loaded_corpus(runs, cold=False), loaded_corpus(runs, cold=True)
    for op in steps:
        for b in (hot, cold):
            with contextlib.suppress(_Refused):
                apply(b, op)
    for vbid in range(VBUCKETS):
        copies = []
        for b in (hot, cold):
            active = b.vbucket(vbid)
            replica = new_replica(active, b.rng)
            attach(replica, active)
            catch_up(replica, active, upto=min(upto, active.high_seqno))
            assert is_prefix(replica, active)
            replica.persist(replica.high_seqno)
            first = vbucket_state(replica)
            catch_up(replica, active)
            replica.persist(replica.high_seqno)
            copies.append((first, vbucket_state(replica), is_prefix(replica, active)))
        assert copies[0] == copies[1]


def test_a_cold_load_into_a_bucket_holding_documents_is_refused() -> None:
    b = bucket()
    b.set("a", "1")
    with pytest.raises(ModelError, match="already holds documents"):
        b.load_cold([b"x"], [b"y"])


def test_a_cold_load_written_over_before_it_finishes_installs_nothing() -> None:
    b = bucket()
    load = b.cold_load()
    load.add([b"x"], [b"y"])
    b.set("a", "1")
    with pytest.raises(ModelError, match="written during the cold load"):
        load.finish()
    assert all(vb.cold is None for vb in b.vbuckets)


def test_a_cold_batch_with_a_bad_row_names_it_and_stages_nothing() -> None:
    b = bucket()
    load = b.cold_load()
    with pytest.raises(ModelError, match="row 1: key"):
        load.add([b"x", b""], [b"y", b"z"])
    assert load.count == 0
    assert load.finish() == 0


def test_a_framed_batch_that_does_not_fit_the_bucket_is_refused_and_stages_nothing() -> None:
    import numpy as np

    b = bucket()
    load = b.cold_load()
    counts = np.array([1, 0, 0, 0, 0], np.uint32)  # five vbuckets, the bucket has four
    one = np.zeros(1, np.uint32)
    with pytest.raises(ModelError, match="does not fit 4 vbuckets"):
        load.add_frames(bytearray(60), [b"x"], counts, one, one + 60)
    with pytest.raises(ModelError, match="of 61 bytes has 60"):
        load.add_frames(bytearray(60), [b"x"], counts[:4], one, one + 61)
    assert load.count == 0
    assert load.finish() == 0


@pytest.mark.parametrize("cold", [False, True])
def test_a_purged_tombstone_of_a_cold_key_keeps_it_gone_after_a_restart(cold: bool) -> None:
    b = loaded([(b"a", b"1", 0, 0, 0, 0), (b"b", b"2", 0, 0, 0, 0)], cold=cold)
    vb = b.vbucket(b.vbucket_of("a"))
    b.delete("a")
    b.persist()
    assert b.purge() == 1
    b.restart()
    assert vb.get(b"a") is None
    assert [it.key for it in vb.disk_snapshot(0).items if not it.system].count(b"a") == 0


@pytest.mark.parametrize("cold", [False, True])
def test_a_failover_below_a_write_over_a_cold_key_brings_the_cold_version_back(
    cold: bool,
) -> None:
    b = loaded([(b"a", b"1", 0, 0, 0, 0), (b"a", b"2", 0, 0, 0, 0)], cold=cold)
    vb = b.vbucket(b.vbucket_of("a"))
    loaded_at = vb.high_seqno
    b.set("a", "3")
    b.persist()
    b.failover(vb.vbid, lose_after=loaded_at)
    item = vb.get(b"a")
    assert item is not None
    assert (item.value, item.rev_seqno, item.seqno) == (b"2", 2, loaded_at)
    b.failover(vb.vbid, lose_after=loaded_at - 1)
    item = vb.get(b"a")
    assert item is not None
    assert (item.value, item.rev_seqno) == (b"1", 1)
    assert [it.seqno for it in vb.disk_snapshot(0).items if not it.system] == [loaded_at - 1]


@pytest.mark.parametrize("legacy", [False, True])
def test_backfilling_a_bulk_loaded_segment_twice_reads_the_same_frames(legacy: bool) -> None:
    """A bulk load's frames live in an anonymous memory map: a backfill copies them out
    and leaves them there (giving pages back, as a file-backed segment does, would
    discard them: the second backfill would read zeros)."""
    b = bucket()
    keys = [b"k%05d" % i for i in range(3000)]
    b.load_cold(keys, [b'{"v":%d}' % i for i in range(3000)], datatypes=[1] * 3000)
    reads = []
    for _ in range(2):
        for vb in b.vbuckets:
            assert vb.cold is not None
            heads, tails, *_ = vb.cold.frames(vb.cold.live_slots())
            assert not heads.release
            reads.append(bytes(heads.joined_with(tails) if legacy else heads.joined_frames()))
    half = len(reads) // 2
    assert reads[:half] == reads[half:]
    assert all(read.count(b"k0") for read in reads[:half])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MADV_POPULATE_WRITE: Linux")
def test_a_cold_load_makes_its_buffers_resident_ahead_of_the_frames_and_no_further() -> None:
    """``ColdLoad`` (``_LoadBuffers.write``) makes each vbucket's pages resident
    ``POPULATE_AHEAD`` bytes at a time (one ``madvise`` rather than a fault a page);
    ``finish`` cuts the buffer to the frames, so no page made ahead stays."""
    from mockdcp.model import _loader

    b = bucket()
    load = b.cold_load()
    load.add([b"k%d" % i for i in range(400)], [b"v" * 500] * 400)
    assert _loader._populating == [True]  # the kernel took it
    frames = load._frames
    for vbid, used in enumerate(frames.used):
        assert used > 0
        assert used <= frames.populated[vbid] < used + _loader.POPULATE_AHEAD
        assert frames.populated[vbid] % _loader.POPULATE_AHEAD == 0
    sizes = list(frames.used)
    load.finish()
    for vb, size in zip(b.vbuckets, sizes, strict=True):
        assert vb.cold is not None
        assert len(vb.cold.segment.buf) == size


def test_finish_gathers_no_collection_or_row_column_a_load_does_not_need() -> None:
    """A cold load of default-collection documents that removes nothing gathers only
    the sizes, tags and hashes in vbucket order (``finish_steps``; the collection ids
    are zeros, the rows in the load are read only for removals): two concatenations
    fewer; a load with collections and removals gathers all five."""
    import numpy as np

    calls: list[int] = []
    concatenate = np.concatenate

    def counted(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - numpy's own
        calls.append(1)
        return concatenate(*args, **kwargs)

    plain, mixed = bucket(), bucket()
    load = plain.cold_load()
    load.add([b"a", b"b", b"c"], [b"1", b"2", b"3"])
    load.add([b"d"], [b"4"])
    other = mixed.cold_load()
    other.add([b"a", b"b"], [b"1", b"2"], collection_ids=[0, 8])
    other.remove([b"a"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(np, "concatenate", counted)
        load.finish()
        plain_calls = len(calls)
        calls.clear()
        other.finish()
    assert plain_calls == 1 + 3  # the vbucket order, then three columns
    assert len(calls) == 1 + 5

    def docs(b: Bucket) -> list[tuple[int, bytes]]:  # the system events' keys left out
        return sorted(doc for vb in b.vbuckets for doc, _ in vb.hash_table() if doc[0] != 1)

    assert docs(plain) == [
        (0, b"a"), (0, b"b"), (0, b"c"), (0, b"d")
    ]  # fmt: skip
    assert all(vb.cold is None or not vb.cold.segment.cids.any() for vb in plain.vbuckets)
    assert docs(mixed) == [(0, b"a"), (8, b"b")]  # a's tombstone, b in collection 8


@given(
    st.lists(st.integers(0, 700), min_size=1, max_size=120),
    st.lists(st.integers(0, 3), min_size=1, max_size=120),
    st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_copying_pieces_equals_slicing_and_joining_them(
    sizes: list[int], gaps: list[int], mapped: bool
) -> None:
    """``copy_pieces`` copies each piece as a fixed-width element, writing past the ends
    of narrower pieces: what it gives must be the slices joined, whatever the widths
    (a piece far wider than the rest, empty ones), the gaps between pieces and how near
    the last lies to the end of the buffer (bytes, or a bulk load's memory map)."""
    import mmap

    import numpy as np

    from mockdcp.model._cold import copy_pieces

    firsts, lasts, at = [], [], 0
    for i, size in enumerate(sizes):
        at += gaps[i % len(gaps)]
        firsts.append(at)
        lasts.append(at + size)
        at += size
    data = bytes((i * 7 + 3) % 251 for i in range(at + gaps[0]))
    buf: bytes | mmap.mmap = data
    if mapped and data:
        buf = mmap.mmap(-1, len(data))
        buf[:] = data
    # a piece a frame: more than the pieces ``copy_pieces`` slices as they are
    for reps in (1, 40):
        f = np.array(firsts * reps, np.int64)
        g = np.array(lasts * reps, np.int64)
        expected = b"".join(data[a:b] for a, b in zip(f.tolist(), g.tolist(), strict=True))
        assert copy_pieces(buf, f, g) == expected


def test_pieces_are_sliced_and_joined_on_a_numpy_that_assigns_out_of_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``copy_pieces``'s overlapping elements need numpy to assign in index order, which
    its documentation does not promise: this numpy is checked once, and pieces are
    sliced and joined on one that does not."""
    import numpy as np

    from mockdcp.model import _cold

    assert _cold._assigns_in_order()  # this numpy: the elements' path is tested above
    buf = bytes(range(256)) * 8
    firsts = np.arange(0, 1600, 40, dtype=np.int64)
    lasts = firsts + np.arange(len(firsts), dtype=np.int64) % 37
    expected = b"".join(buf[a:b] for a, b in zip(firsts.tolist(), lasts.tolist(), strict=True))
    monkeypatch.setattr(_cold, "_assigns_in_order", lambda: False)
    monkeypatch.setattr(np, "ndarray", None)  # no element is made: only slices
    assert _cold.copy_pieces(buf, firsts, lasts) == expected


def test_a_legacy_read_of_a_bulk_loaded_segment_is_the_items_frames_without_prefixes() -> None:
    """``joined_with`` over a whole vbucket's cold frames (a backfill's read: thousands
    of frames in a row, values of many lengths and a few far longer) gives each item's
    frame as a legacy stream sends it: the collection prefix left out (the lengths are
    patched later, by the encoder)."""
    b = bucket()
    keys = [b"k%05d" % i for i in range(2000)]
    values = [b"v" * (i % 300 if i % 97 else 5000 + i) for i in range(2000)]
    b.load_cold(keys, values, datatypes=[0] * 2000)
    for vb in b.vbuckets:
        cold = vb.cold
        assert cold is not None
        slots = cold.live_slots()
        heads, tails, *_ = cold.frames(slots)
        items = [cold.segment.item(s) for s in slots.tolist()]
        assert bytes(heads.joined_with(tails)) == b"".join(it.head + it.tail for it in items)
        # every other frame: pieces that are not in a row
        heads, tails, *_ = cold.frames(slots[::2])
        odd = b"".join(it.head + it.tail for it in items[::2])
        assert bytes(heads.joined_with(tails)) == odd


@pytest.mark.parametrize("count", [1, 2, 7, _cold._FEW_PIECES - 1])
def test_a_few_frames_read_are_the_items_frames_in_a_row_or_not(count: int) -> None:
    """Fewer frames than ``_FEW_PIECES`` are sliced and joined (no numpy gather): the
    same bytes as the items', the frames one after the other in the buffer or not."""
    b = Bucket("default", 1, seed=9, clock=lambda: CLOCK)
    keys = [b"k%05d" % i for i in range(2 * count)]
    b.load_cold(keys, [b"v" * (3 + 11 * i) for i in range(2 * count)], datatypes=[0] * len(keys))
    cold = b.vbucket(0).cold
    assert cold is not None
    every = cold.live_slots()
    for slots in (every[:count], every[::2][:count]):
        heads, tails, *_ = cold.frames(slots)
        items = [cold.segment.item(s) for s in slots.tolist()]
        assert bytes(heads.joined_with(tails)) == b"".join(it.head + it.tail for it in items)
        prefix = b"\x00"  # the default collection's, between head and tail
        assert bytes(heads.joined_frames()) == b"".join(it.head + prefix + it.tail for it in items)


def test_a_whole_slice_of_cold_pieces_is_those_pieces_and_a_part_is_its_own() -> None:
    """An encoder slices the frames it sends at once (``pieces[0:len]``): the pieces
    themselves, not a copy of their columns; a part, or every other piece, is new."""
    b = Bucket("default", 1, seed=9, clock=lambda: CLOCK)
    keys = [b"k%05d" % i for i in range(12)]
    b.load_cold(keys, [b"v" * (3 + i) for i in range(12)], datatypes=[0] * len(keys))
    cold = b.vbucket(0).cold
    assert cold is not None
    heads, tails, *_ = cold.frames(cold.live_slots())
    assert heads[0:12] is heads
    assert heads[:] is heads
    assert tails[0:12] is tails
    part, every_other, short = heads[2:7], heads[::2], heads[0:11]
    assert part is not heads
    assert list(part) == list(heads)[2:7]
    assert every_other is not heads
    assert list(every_other) == list(heads)[::2]
    assert short is not heads
    assert len(short) == 11


def test_a_run_of_slots_is_read_as_one_slice_and_a_run_with_a_gap_is_not() -> None:
    """``ColdView.frames`` marks the pieces of a run of slots ``adjacent`` (each frame
    ends where the next begins: ``joined_frames`` copies them as one slice); slots with
    a gap (a newer version persisted elsewhere) and every other slot are not, and a
    slice of adjacent pieces stays adjacent unless it steps. Either way the bytes are
    the items' frames."""
    import numpy as np

    b = Bucket("default", 1, seed=9, clock=lambda: CLOCK)
    keys = [b"k%05d" % i for i in range(300)]
    b.load_cold(keys, [b"v" * (3 + i % 50) for i in range(300)], datatypes=[0] * 300)
    cold = b.vbucket(0).cold
    assert cold is not None
    every = cold.live_slots()
    gap = np.concatenate([every[:100], every[101:]])
    prefix = b"\x00"
    for slots, adjacent in (
        (every, True),
        (every[40:200], True),
        (gap, False),
        (every[::2], False),
    ):
        heads, tails, *_ = cold.frames(slots)
        assert heads.adjacent is adjacent
        assert tails.adjacent is adjacent
        items = [cold.segment.item(s) for s in slots.tolist()]
        assert bytes(heads.joined_frames()) == b"".join(it.head + prefix + it.tail for it in items)
        assert bytes(heads.joined_with(tails)) == b"".join(it.head + it.tail for it in items)
        assert heads[3:70].adjacent is adjacent
        assert not heads[3:70:2].adjacent
        part = items[3:70]
        assert bytes(heads[3:70].joined_frames()) == b"".join(
            it.head + prefix + it.tail for it in part
        )


def test_a_read_after_a_seqno_is_the_live_slots_above_it_whether_all_live_or_not() -> None:
    """``ColdView.read`` (a backfill's read of the cold tier) gives the seqnos and
    frames of the alive slots above the seqno: read as one run when every slot from
    there on is alive, through the slots otherwise (a newer version persisted
    elsewhere killed one), with the same bytes either way."""

    b = Bucket("default", 1, seed=9, clock=lambda: CLOCK)
    keys = [b"k%05d" % i for i in range(120)]
    b.load_cold(keys, [b"v" * (5 + i % 30) for i in range(120)], datatypes=[0] * 120)
    cold = b.vbucket(0).cold
    assert cold is not None
    first = cold.segment.first_seqno

    def expected(after: int) -> tuple[list[int], bytes]:
        slots = cold.live_slots(after)
        heads, *_ = cold.frames(slots)
        return (slots + first).tolist(), bytes(heads.joined_frames())

    for killed in (None, 60):
        if killed is not None:
            cold.kill(0, keys[killed])
        for after in (0, first - 1, first + 10, first + 59, first + 60, first + 119, first + 500):
            seqnos, (heads, tails, tags, cids, sizes) = cold.read(after)
            assert (seqnos.tolist(), bytes(heads.joined_frames())) == expected(after)
            assert len(heads) == len(tails) == len(tags) == len(cids) == len(sizes)
            if len(seqnos):  # a run unless the killed slot lies between live ones
                assert heads.adjacent is (killed is None or after >= first + killed - 1)
            assert all(s > after for s in seqnos)


def test_a_short_read_is_kept_and_given_again_until_a_slot_leaves() -> None:
    """Every stream of a loaded vbucket reads its cold tier from the same seqno: a read
    of a run of at most ``_KEPT_READ`` slots is kept and handed out again (the same
    objects), and forgotten when a slot leaves the view, by a newer version persisted
    (``kill``), a flushed collection (``kill_collection``) or a compaction's carried-over
    liveness (``retain``); a longer read is made anew each time."""
    import numpy as np

    from mockdcp.model._cold import _KEPT_READ

    b = Bucket("default", 1, seed=9, clock=lambda: CLOCK)
    keys = [b"k%05d" % i for i in range(40)]
    b.load_cold(keys, [b"v" * 9] * 40, datatypes=[0] * 40)
    cold = b.vbucket(0).cold
    assert cold is not None
    first = cold.segment.first_seqno
    _, frames = cold.read(0)
    assert cold.read(0)[1] is frames
    assert cold.read(first + 5)[1] is not frames  # another seqno: another read, kept instead
    _, frames = cold.read(0)
    cold.kill(0, keys[3])
    again = cold.read(0)
    assert again[1] is not frames
    assert first + 3 not in again[0].tolist()
    assert len(again[1][0]) == 39
    cold.read(first + 10)
    cold.retain(np.array([False], np.bool_), 12)
    assert first + 12 not in cold.read(first + 10)[0].tolist()
    cold.kill_collection(0)
    assert len(cold.read(first + 10)[0]) == 0

    many = Bucket("default", 1, seed=9, clock=lambda: CLOCK)
    count = _KEPT_READ + 1
    many.load_cold([b"k%05d" % i for i in range(count)], [b"v"] * count, datatypes=[0] * count)
    long_view = many.vbucket(0).cold
    assert long_view is not None
    assert long_view.read(0)[1] is not long_view.read(0)[1]
    assert long_view.read(0)[0] == long_view.read(0)[0]


def test_a_plain_read_makes_where_heads_end_and_tails_start_only_when_asked() -> None:
    """A read of live documents of the default collection (``_pieces``): each head is
    ``HEAD`` bytes, so where heads end and tails start are made on first use, and a
    collection-aware copy (``joined_frames``) never asks; asked, they are the columns
    an eager read makes (a head, the prefix byte, the tail)."""
    import numpy as np

    from mockdcp.model._cold import HEAD

    b = Bucket("default", 1, seed=9, clock=lambda: CLOCK)
    keys = [b"k%05d" % i for i in range(30)]
    b.load_cold(keys, [b"v" * (3 + i) for i in range(30)], datatypes=[0] * 30)
    cold = b.vbucket(0).cold
    assert cold is not None
    _, (heads, tails, *_) = cold.read(0)
    heads.joined_frames()
    assert isinstance(heads._stops, tuple)
    assert isinstance(tails._starts, tuple)
    assert len(tails) == len(heads) == 30
    starts = cold.segment.starts[:30]
    assert np.array_equal(heads.stops, starts + HEAD)
    assert np.array_equal(tails.starts, starts + HEAD + 1)
    items = [cold.segment.item(s) for s in range(30)]
    assert list(heads) == [it.head for it in items]
    assert list(tails) == [it.tail for it in items]
