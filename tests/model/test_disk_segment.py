"""``DiskSegment`` (a cold segment read from files) against the in-memory cold tier: a
bucket whose segments are memory maps of files answers every rule as the bucket whose
segments are bytes, through any sequence of later steps (the rules of
``tests/model/test_cold.py``, whose strategies and state this reuses)."""

from __future__ import annotations

import mmap
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from mockdcp.model import Bucket, DiskSegment, crc32_keys, stable_key_hash, stable_key_hashes

from .test_cold import CIDS, KEYS, bucket, loaded, ops, rows, same_through_steps, state

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from mockdcp.model._cold import ColdSegment


def on_disk(cold: Bucket, directory: Path) -> Bucket:
    """A bucket holding ``cold``'s segments as files: the frames memory-mapped, the
    columns saved and loaded as read-only maps, the index by the stable hash."""
    b = bucket()
    for vb in cold.vbuckets:
        if vb.cold is None:
            continue
        seg: ColdSegment = vb.cold.segment
        frames = directory / f"{vb.vbid}.frames"
        frames.write_bytes(bytes(seg.buf))
        arrays = {}
        for name in ("starts", "cids", "tags"):
            np.save(directory / f"{vb.vbid}.{name}.npy", getattr(seg, name))
            arrays[name] = np.load(directory / f"{vb.vbid}.{name}.npy", mmap_mode="r")
        hashes = np.array(
            [stable_key_hash(int(seg.cids[s]), seg.key_at(s)) for s in range(seg.count)],
            np.int64,
        )
        with frames.open("rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        disk = DiskSegment(
            vb.vbid, seg.first_seqno, buf, arrays["starts"], arrays["cids"], arrays["tags"], hashes
        )
        b.vbuckets[vb.vbid].load_cold(disk)
    b.advance_cas(cold.reserve_cas(0) - 1)
    b.persist()  # as ``loaded`` persists the in-memory one
    return b


def unique(batch: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The last row of each (key, collection): an on-disk segment holds one version."""
    last = {(r[0], r[2]): i for i, r in enumerate(batch)}
    return [r for i, r in enumerate(batch) if last[(r[0], r[2])] == i]


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(rows, ops)
def test_a_bucket_on_disk_answers_every_rule_as_the_in_memory_cold_tier(
    tmp_path_factory: pytest.TempPathFactory,
    batch: list[tuple[Any, ...]],
    steps: list[tuple[Any, ...]],
) -> None:
    batch = unique(batch)
    memory = loaded(batch, cold=True)
    disk = on_disk(memory, tmp_path_factory.mktemp("disk"))
    assert state(disk) == state(memory)
    same_through_steps(memory, disk, steps)


@given(st.lists(st.binary(min_size=1, max_size=250), max_size=50), st.sampled_from(CIDS))
def test_the_bulk_hashes_are_the_scalar_ones_and_zlib_crc32(keys: list[bytes], cid: int) -> None:
    data = np.frombuffer(b"".join(keys), np.uint8)
    lengths = np.array([len(k) for k in keys], np.int64)
    starts = np.cumsum(lengths) - lengths
    cids = np.full(len(keys), cid, np.uint32)
    assert stable_key_hashes(data, starts, lengths, cids).tolist() == [
        stable_key_hash(cid, k) for k in keys
    ]
    assert crc32_keys(data, starts, lengths).tolist() == [zlib.crc32(k) for k in keys]


def test_the_stable_hash_does_not_depend_on_the_process() -> None:
    # FNV-1a 64 of b"a" is 0xaf63dc4c8601ec8c; collection 0 leaves it as it is
    assert stable_key_hash(0, b"a") == 0xAF63DC4C8601EC8C - (1 << 64)
    assert stable_key_hash(8, b"a") != stable_key_hash(0, b"a")
    assert len({stable_key_hash(0, k) for k in KEYS}) == len(KEYS)


def test_a_backfill_joins_the_same_frames_from_the_file_as_from_memory(tmp_path: Path) -> None:
    batch = [(b"key%d" % i, b"v" * (i % 700), CIDS[i % 3], i, 0, i % 2) for i in range(3000)]
    memory = loaded(batch, cold=True)
    disk = on_disk(memory, tmp_path)
    for vbm, vbd in zip(memory.vbuckets, disk.vbuckets, strict=True):
        assert vbm.cold is not None
        assert vbd.cold is not None
        a = vbm.cold.frames(vbm.cold.live_slots())
        b = vbd.cold.frames(vbd.cold.live_slots())
        for lo, hi in ((0, len(a[0])), (5, 300)):
            ha, hb, ta, tb = a[0][lo:hi], b[0][lo:hi], a[1][lo:hi], b[1][lo:hi]
            assert hb.joined_frames() == ha.joined_frames()
            assert hb.joined_with(tb) == ha.joined_with(ta)
