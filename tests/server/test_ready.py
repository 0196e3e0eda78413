"""Ready means ready: connections wait for the initial data; a load yields to trio."""

from __future__ import annotations

import mmap
import os

import pytest
import trio
import trio.lowlevel
import trio.testing

from mockdcp.data import _dataset
from mockdcp.data._dataset import (
    _LITERALS,
    _SPAN_S,
    _START,
    _TEMPLATE,
    BLOCK,
    CHUNK_BLOCKS,
    JSON,
    DocumentGenerator,
    _Pools,
    early_worker,
    faker_documents,
    load_documents,
    persist_all,
)
from mockdcp.model import Bucket
from mockdcp.producer import Node
from mockdcp.protocol import FrameReader, Noop
from mockdcp.server._kv import KvService, Wakeups


def bucket() -> Bucket:
    return Bucket("default", 16, seed=1, clock=lambda: 1_700_000_000.0)


def stored(b: Bucket) -> int:
    return sum(1 for vb in b.vbuckets for _ in vb.hash_table())


async def test_a_connection_accepted_while_held_is_answered_after_release() -> None:
    wakeups = Wakeups()
    kv = KvService(Node(bucket=bucket(), users={"u": "p"}, wake=wakeups.wake), wakeups)
    kv.hold()
    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(kv.handle, server)
        await client.send_all(Noop(opaque=9).encode())
        with trio.move_on_after(0.2):
            data = await client.receive_some()
            raise AssertionError(f"answered while held: {data!r}")
        kv.release()
        reader = FrameReader()
        with trio.fail_after(5):
            while (frame := reader.next_frame()) is None:
                reader.feed(await client.receive_some())
        assert frame.opaque == 9
        nursery.cancel_scope.cancel()


async def test_a_load_yields_to_other_tasks_between_blocks() -> None:
    b = bucket()
    seen: list[int] = []
    done = [0]
    total = 5 * BLOCK + 17
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            while True:
                seen.append(done[-1])  # how far the load had got when this task ran
                await trio.lowlevel.checkpoint()

        nursery.start_soon(watch)
        await trio.lowlevel.checkpoint()
        loaded = await load_documents(b, total, seed=3, progress=lambda n, _: done.append(n))
        assert loaded == total
        nursery.cancel_scope.cancel()
    assert stored(b) == total
    assert any(0 < n < total for n in seen)


async def test_loaded_documents_are_the_generated_ones_whatever_the_blocks() -> None:
    b = bucket()
    progress: list[int] = []
    await load_documents(b, 2 * BLOCK + 5, seed=3, progress=lambda done, _: progress.append(done))
    assert progress == sorted(set(progress))
    assert progress[-1] == 2 * BLOCK + 5
    docs = dict(faker_documents(2 * BLOCK + 5, 3))
    held = {it.key.decode(): it.value for vb in b.vbuckets for it in vb.all_items()}
    assert held == docs
    assert all(it.datatype == 1 for vb in b.vbuckets for it in vb.all_items())


def test_the_same_seed_gives_the_same_bytes_and_another_seed_others() -> None:
    keys, values = DocumentGenerator(7).block(1)
    assert (keys, values) == DocumentGenerator(7).block(1)
    assert values != DocumentGenerator(8).block(1)[1]
    assert keys[0] == b"user::%06d" % BLOCK


def _templated_block(seed: int, number: int) -> tuple[list[bytes], list[bytes]]:
    """The documents of a block as one ``_TEMPLATE %`` a document writes them (the
    generator's first form, whose bytes it must keep)."""
    import numpy as np

    pools = _Pools(seed)
    cut = [len(s) for s in _LITERALS]
    first = [v[: len(v) - cut[2]] for v in pools.first]
    last = [v[: len(v) - cut[3]] for v in pools.last]
    fmail = [v[: len(v) - cut[4]] for v in pools.first_mail]
    domain = [v[: len(v) - cut[7]] for v in pools.domain]
    city = [v[: len(v) - cut[8]] for v in pools.city]
    country = [v[: len(v) - cut[9]] for v in pools.country]
    rng = np.random.default_rng([seed, number])
    draws = [rng.integers(0, n, BLOCK).tolist() for n in (256, 256, 16, 128, 64)]
    mail_n, score = rng.integers(1, 100, BLOCK).tolist(), rng.integers(0, 1001, BLOCK).tolist()
    active = np.where(rng.random(BLOCK) < 0.8, "true", "false").tolist()
    seconds = rng.integers(0, _SPAN_S, BLOCK).astype("timedelta64[s]")
    joined = np.datetime_as_string(np.datetime64(_START) + seconds).tolist()
    ids = range(number * BLOCK, (number + 1) * BLOCK)
    values = [
        _TEMPLATE
        % (
            i, first[f], last[la], fmail[f], pools.last_mail[la], mail_n[j], domain[d],
            city[c], country[co], joined[j].encode(), score[j], active[j].encode(),
        )
        for j, (i, f, la, d, c, co) in enumerate(zip(ids, *draws, strict=True))
    ]  # fmt: skip
    return [b"user::%06d" % i for i in ids], values


def test_generated_documents_are_the_templated_ones_at_every_id_width() -> None:
    for seed in (0, 7):
        for number in (0, 1, 97, 976, 977, 9765, 20000):  # ids of 1 to 8 digits
            assert DocumentGenerator(seed).block(number) == _templated_block(seed, number)


def test_joined_documents_cut_the_last_block_at_count() -> None:
    blocks = list(DocumentGenerator(5).joined_documents(BLOCK + 7))
    assert [n for n, _, _ in blocks] == [BLOCK, 7]
    keys, values = DocumentGenerator(5).block(1)
    assert blocks[1][1:] == (b"\n".join(keys[:7]), b"\n".join(values[:7]))


async def test_a_worker_process_draws_the_same_documents() -> None:
    here, there = bucket(), bucket()
    await load_documents(here, 3 * BLOCK + 9, seed=4, worker=False)
    await load_documents(there, 3 * BLOCK + 9, seed=4, worker=True)

    def frames(b: Bucket) -> list[list[bytes]]:
        return [list(vb.disk_snapshot(0, frames=True).tails) for vb in b.vbuckets]

    assert frames(there) == frames(here)
    assert stored(there) == 3 * BLOCK + 9


def _validated_load(count: int, seed: int, vbuckets: int) -> Bucket:
    """``count`` documents of ``seed`` loaded cold through ``ColdLoad.add`` (validated,
    framed by the model), the reference for the frames the generator makes."""
    b = Bucket("default", vbuckets, seed=1, clock=lambda: 1_700_000_000.0)
    load = b.cold_load()
    for keys, values in DocumentGenerator(seed).documents(count):
        load.add(keys, values, datatypes=JSON)
    load.finish()
    return b


def _same_segments(b: Bucket, reference: Bucket) -> None:
    for vb, ref in zip(b.vbuckets, reference.vbuckets, strict=True):
        assert vb.cold is not None
        assert ref.cold is not None
        seg, want = vb.cold.segment, ref.cold.segment
        assert bytes(seg.buf) == bytes(want.buf), vb.vbid  # frames: CAS, seqnos too
        for column in ("starts", "cids", "tags", "hashes", "order"):
            assert (getattr(seg, column) == getattr(want, column)).all(), column


async def test_generated_frames_are_those_the_validated_cold_load_makes() -> None:
    """``load_documents`` frames the documents it draws itself (in workers or here) and
    skips validating them: the frames, columns and key index are those ``ColdLoad.add``
    makes of the same documents."""
    count = 2 * CHUNK_BLOCKS * BLOCK + 77  # chunks of both workers and a short one
    reference = _validated_load(count, 6, 64)
    for worker in (False, True):
        b = Bucket("default", 64, seed=1, clock=lambda: 1_700_000_000.0)
        assert await load_documents(b, count, seed=6, worker=worker) == count
        _same_segments(b, reference)


@pytest.mark.full
async def test_a_hundred_thousand_generated_documents_stream_the_bytes_of_the_validated_load() -> (
    None
):
    """A load of 100,000 documents in workers over 1024 vbuckets: the bytes a stream
    reads from each vbucket are those of the documents loaded through ``ColdLoad.add``."""
    count = 100_000
    reference = _validated_load(count, 0, 1024)
    b = Bucket("default", 1024, seed=1, clock=lambda: 1_700_000_000.0)
    await load_documents(b, count, seed=0, worker=True)
    _same_segments(b, reference)

    def frames(b: Bucket) -> list[list[bytes]]:
        return [list(vb.disk_snapshot(0, frames=True).tails) for vb in b.vbuckets]

    assert frames(b) == frames(reference)


async def test_workers_started_for_another_bucket_are_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Workers ``early_worker`` started for 1024 vbuckets (``serve``'s default) are not
    used for a bucket of 16 (their frames would name other vbuckets): they are stopped
    and the load starts its own (``WORKER_MIN`` lowered: the test's load is smaller)."""
    count = 100_000
    monkeypatch.setattr(_dataset, "WORKER_MIN", count)
    b = bucket()
    async with early_worker(count, 4) as workers:
        assert workers is not None
        assert workers.vbuckets == 1024
        await load_documents(b, count, seed=4, worker=workers)
        assert all(process.returncode is not None for process in workers.processes)
    _same_segments(b, _validated_load(count, 4, 16))


async def test_a_load_with_a_flusher_persists_everything_and_releases_it() -> None:
    b = bucket()
    b.flusher.interval = 0.005
    await load_documents(b, BLOCK + 3, seed=2)
    assert all(vb.persisted_seqno == vb.high_seqno for vb in b.vbuckets)
    assert not b.flusher.paused


async def test_a_load_persisted_later_holds_the_flusher_until_persist_all() -> None:
    b = bucket()  # holding documents already: the load goes to memory (set_many)
    b.flusher.interval = 0.005
    for vb in range(16):
        b.set(f"old{vb}", "1", vbucket=vb)
    await load_documents(b, BLOCK + 3, seed=2, persist=False)
    assert b.flusher.paused
    assert all(vb.persisted_seqno == 0 for vb in b.vbuckets)
    await persist_all(b)
    assert all(vb.persisted_seqno == vb.high_seqno for vb in b.vbuckets)
    assert not b.flusher.paused


async def test_a_load_into_an_empty_bucket_is_its_persisted_disk_in_no_checkpoint() -> None:
    """A warmed-up node holds a bulk-loaded corpus on disk: the load lands in the cold
    tier, persisted, and streams read it by backfill."""
    b = bucket()
    await load_documents(b, BLOCK + 3, seed=2, persist=False)
    assert stored(b) == BLOCK + 3
    assert all(vb.cold is not None for vb in b.vbuckets)
    assert all(vb.persisted_seqno == vb.high_seqno for vb in b.vbuckets)
    assert all(not vb.checkpoints[-1].tails for vb in b.vbuckets)
    assert all(not vb.items for vb in b.vbuckets)


def test_a_small_block_draws_only_what_is_asked_and_replays() -> None:
    """The ``generate`` step draws 64 documents at a time (a step writes a few): each
    a user profile whose id is its key's, the same for the same seed at any count."""
    import json

    import pytest

    small = DocumentGenerator(4, pool_seed=0, block=64)
    keys, values = small.block(16)  # ids 1024..1087: a thousands digit
    assert len(keys) == len(values) == 64
    assert keys[0] == b"user::001024"
    for key, value in zip(keys, values, strict=True):
        assert json.loads(value)["id"] == int(key[6:])
    docs = list(faker_documents(70, 4, pool_seed=0, block=64))
    assert docs == list(faker_documents(70, 4, pool_seed=0, block=64))
    assert docs[:3] == list(faker_documents(3, 4, pool_seed=0, block=64))
    assert docs != list(faker_documents(70, 5, pool_seed=0, block=64))
    with pytest.raises(ValueError, match=r"2\.\.1024"):
        DocumentGenerator(4, block=1)


def test_key_vbuckets_are_those_of_the_keys_at_every_id_width() -> None:
    """``key_vbuckets`` (the keys' CRC32 with numpy, from their ids) gives the vbucket
    ``vbucket_ids`` gives the keys themselves, across the six and seven digit ids."""
    import numpy as np

    from mockdcp.data._dataset import key_vbuckets
    from mockdcp.model import vbucket_ids

    ids = np.concatenate(
        [
            np.arange(0, 2000),
            np.arange(999_000, 1_001_000),
            np.arange(9_999_900, 10_000_100),
            np.random.default_rng(3).integers(0, 10**9, 2000),
        ]
    )
    keys = [b"user::%03d%03d" % divmod(int(i), 1000) for i in ids]
    for vbuckets in (1024, 64, 7):
        assert (key_vbuckets(ids, vbuckets) == vbucket_ids(keys, vbuckets)).all()


def test_framed_chunks_keep_the_bytes_of_the_generator_before_its_fixed_width_parts() -> None:
    """``DocumentGenerator.framed`` writes each frame's start (header, key, the value's
    id) and date with numpy (``_keys``, ``_starts``, ``_dates``): every column of its chunks
    is the bytes 56a8cb9 made (one piece a field, gathered and joined), for chunks of
    one id width and chunks across powers of ten (ids 0..2047: four widths; 99,999,
    999,999 and 9,999,999 to the next), short ones, two seeds and two numbers of
    vbuckets. A digest of them all, made with 56a8cb9."""
    import hashlib

    digest = hashlib.sha256()
    for seed in (0, 7):
        generator = DocumentGenerator(seed)
        for first, blocks, count in (
            (0, 2, 2 * BLOCK),
            (0, CHUNK_BLOCKS, CHUNK_BLOCKS * BLOCK),
            (97, 1, 10**9),
            (976, 2, 10**9),
            (976, CHUNK_BLOCKS, 977 * BLOCK + 5),
            (9765, 3, 10**9),
            (20000, CHUNK_BLOCKS, 10**9),
            (97656, 1, 10**9),
        ):
            for vbuckets in (1024, 64):
                chunk = generator.framed(first, blocks, count, vbuckets)
                for part in (
                    chunk.counts.tobytes(),
                    chunk.order.tobytes(),
                    chunk.sizes.tobytes(),
                    chunk.keys,
                    bytes(chunk.frames),
                ):
                    digest.update(len(part).to_bytes(8, "little"))
                    digest.update(part)
    assert digest.hexdigest() == (
        "bf8edc3407c0e51a0d963410db93c4026219f39d6f1d7b222ad7fe98ba70ab1d"
    )


def test_a_chunk_buffer_is_used_again_once_its_chunk_is_installed() -> None:
    """A worker's chunk is read into a buffer of the load's pool (``_Buffers``), which
    ``FramedChunk.done`` gives back for the next chunk: no new buffer a chunk."""
    import numpy as np

    from mockdcp.data._dataset import FramedChunk, _Buffers

    pool = _Buffers()
    buffer = pool.take(1000)
    assert len(buffer) >= 1000
    frames = memoryview(buffer)[:1000]
    empty = np.zeros(0, np.uint32)
    chunk = FramedChunk(empty, empty, empty, b"", frames, pool)
    chunk.done()
    with pytest.raises(ValueError, match="released"):
        len(frames)
    assert pool.take(1100) is buffer  # an eighth larger than the first asked
    assert pool.take(10) is not buffer
    pool.give_back(buffer)
    assert len(pool.take(2000)) >= 2000  # too small: a new one
    assert not pool.free


async def test_a_load_from_workers_reads_its_chunks_into_a_few_buffers() -> None:
    """The chunks of a load drawn in workers go through buffers used again: with a
    chunk read ahead a worker, a buffer for each chunk read or installed at once, not
    one a chunk."""
    from mockdcp.data import _dataset

    made: list[int] = []
    take = _dataset._Buffers.take

    def counted(self: _dataset._Buffers, size: int) -> bytearray:
        buffer = take(self, size)
        if all(buffer is not b for b in self.free) and id(buffer) not in made:
            made.append(id(buffer))
        return buffer

    count = 8 * CHUNK_BLOCKS * BLOCK
    b = Bucket("default", 64, seed=1, clock=lambda: 1_700_000_000.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_dataset._Buffers, "take", counted)
        patch.setattr(_dataset, "_AHEAD", 1)
        patch.setattr(_dataset, "RINGS", False)  # the frames through the pipe
        assert await load_documents(b, count, seed=2, worker=True) == count
    assert stored(b) == count
    assert 0 < len(made) <= 2 * (1 + 1) + 1  # per worker: one queued, one being read


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="a ring is a memory file: Linux")
async def test_workers_write_their_frames_to_rings_the_server_reads_in_place() -> None:
    """With rings (``_Ring``), no chunk's frames go through the pipe (no buffer is
    taken for them) and each chunk installed gives its room back to its worker: with
    rings of about two chunks, each worker writes over the start of its ring again and
    again, waiting for the server, and the load holds the frames a load drawn here
    makes."""
    from mockdcp.data import _dataset

    given: list[int] = []
    give_back = _dataset._Ring.give_back

    def counted(self: _dataset._Ring, buffer: bytearray | mmap.mmap) -> None:
        given.append(id(self))
        give_back(self, buffer)

    def no_buffer(self: _dataset._Buffers, size: int) -> bytearray:
        raise AssertionError("a chunk's frames came through the pipe")

    count = 8 * CHUNK_BLOCKS * BLOCK
    b = Bucket("default", 64, seed=1, clock=lambda: 1_700_000_000.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_dataset._Ring, "give_back", counted)
        patch.setattr(_dataset._Ring, "SIZE", 10 << 20)  # a chunk: about 4 MB
        patch.setattr(_dataset._Buffers, "take", no_buffer)
        assert await load_documents(b, count, seed=2, worker=True) == count
    assert len(given) == 8
    assert len(set(given)) == 2  # a ring a worker
    here = Bucket("default", 64, seed=1, clock=lambda: 1_700_000_000.0)
    await load_documents(here, count, seed=2, worker=False)
    _same_segments(b, here)


async def test_workers_without_a_ring_send_their_frames_through_the_pipe() -> None:
    """A system that will not make a memory file (``memfd_create`` failing: a limit on
    descriptors) loads through the pipe, not in the server's process."""
    from mockdcp.data import _dataset

    def refused(name: str, flags: int = 0) -> int:
        raise OSError(24, "Too many open files")

    count = 2 * CHUNK_BLOCKS * BLOCK + 5
    b = Bucket("default", 64, seed=1, clock=lambda: 1_700_000_000.0)
    spent = _dataset.LoadPhases()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "memfd_create", refused, raising=False)
        assert await load_documents(b, count, seed=2, worker=True, phases=spent) == count
    assert spent.cpu["frame"] > 0
    assert "phase_frame_s" not in spent.figures()  # a worker's (CPU seconds only)
    here = Bucket("default", 64, seed=1, clock=lambda: 1_700_000_000.0)
    await load_documents(here, count, seed=2, worker=False)
    _same_segments(b, here)


def test_a_ring_writer_writes_after_the_last_chunk_or_from_the_start_once_free() -> None:
    """A worker's side of its ring (``_RingWriter``): a chunk goes after the last
    one, or from the start when it does not fit before the end, once the chunks
    there are installed (a byte each on the worker's stdin); a chunk larger than the
    ring, or a server that stops installing, is an error, not a wait forever."""
    from mockdcp.data._dataset import _RingWriter

    ring = mmap.mmap(-1, 100)
    read, write = os.pipe()
    writer = _RingWriter(ring, read)
    assert writer.place(b"a" * 40) == 0
    assert writer.place(b"b" * 40) == 40
    os.write(write, b"\x01")  # the first chunk is installed
    assert writer.place(b"c" * 30) == 0  # 20 bytes left at the end: from the start
    assert ring[:80] == b"c" * 30 + b"a" * 10 + b"b" * 40
    assert writer.held == [(40, 80), (0, 30)]
    with pytest.raises(RuntimeError, match="does not fit a ring of 100"):
        writer.place(b"x" * 101)
    os.close(write)
    with pytest.raises(RuntimeError, match="stopped installing"):
        writer.place(b"d" * 40)  # 30..70: the second chunk's, never given back
    os.close(read)


async def test_a_load_from_workers_tells_where_its_time_went() -> None:
    """``load_documents(phases=...)``: the server's phases (waiting for and reading
    chunks, installing them, the index), and the workers' CPU seconds drawing, framing
    and writing, which each worker sends after its last chunk."""
    from mockdcp.data._dataset import LoadPhases

    spent = LoadPhases()
    count = 2 * CHUNK_BLOCKS * BLOCK + 5
    b = Bucket("default", 64, seed=1, clock=lambda: 1_700_000_000.0)
    assert await load_documents(b, count, seed=2, worker=True, phases=spent) == count
    figures = spent.figures()
    # (the pipe's reads: a few hundred kB a chunk, its frames in a ring, so maybe 0.0)
    for phase in ("draw", "frame", "write", "chunks", "index"):
        assert figures[f"phase_{phase}_cpu_s"] > 0, phase
    for phase in ("wait", "pipe", "keys", "chunks", "gather", "index", "install", "trim"):
        assert f"phase_{phase}_s" in figures, phase
    assert "phase_draw_s" not in figures  # a worker's: CPU seconds only
