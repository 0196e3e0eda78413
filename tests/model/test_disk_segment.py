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


def mapped_kb(path: Path) -> int:
    """Kilobytes of ``path`` this process has mapped resident (``/proc/self/smaps``)."""
    total, counting = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5:  # a mapping's first line
                counting = len(head) > 5 and head[5] == str(path)
            elif counting and line.startswith("Rss:"):
                total += int(head[1])
    return total


def test_a_finished_backfill_gives_its_mapped_pages_back_and_the_next_reads_the_same(
    tmp_path: Path,
) -> None:
    from mockdcp.producer import DcpSettings, Stream, StreamRequestDecision
    from mockdcp.producer._encoder import ItemEncoder
    from mockdcp.protocol import Mutation, Status
    from tests.producer._session import decode_all, stream_bytes

    batch = [(b"key%d" % i, b"v" * 2000, 0, i, 0, 1) for i in range(4000)]
    disk = on_disk(loaded(batch, cold=True), tmp_path)
    vb = next(v for v in disk.vbuckets if v.cold is not None and v.cold.segment.count > 500)
    assert vb.cold is not None
    count = vb.cold.segment.count
    frames = tmp_path / f"{vb.vbid}.frames"
    request = StreamRequestDecision(status=Status.SUCCESS, start_seqno=0, end_seqno=2**64 - 1)
    sent = []
    for n in range(2):
        stream = Stream(
            vb=vb,
            opaque=1,
            request=request,
            encoder=ItemEncoder(DcpSettings()),
            cursor_name=f"c{n}",
            sync_writes=False,
            sync_replication=False,
        )
        assert stream.refill()  # the marker and a first piece: the backfill reads
        assert mapped_kb(frames) > 0
        sent.append(stream_bytes(stream))
        assert stream.state.value == "in_memory"
        assert mapped_kb(frames) == 0  # given back once the backfill was read
        stream.close()
    assert sent[0] == sent[1]
    mutations = [m for m in decode_all(sent[0]) if isinstance(m, Mutation)]
    assert len(mutations) == count
