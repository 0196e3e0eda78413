"""The seeded data set ``mockdcp serve`` loads into its default bucket: user profiles.

Faker draws the names, cities, countries and mail domains once (pools of 16 to 256
values, seeded: 65,536 names); each block of ``BLOCK`` documents then combines them with
numpy draws seeded by (seed, block number), formatted in one ``bytes %`` per document.
The same seed gives the same bytes, whatever size the batches are loaded in. Faker and
numpy are imported here, lazily, so the server is listening before it loads.

``load_documents`` writes them into an empty bucket's cold tier (``Bucket.cold_load``:
persisted, in columns, as a warmed-up data node holds a bulk-loaded corpus), or into a
bucket that holds documents with ``Bucket.set_many_steps``, and yields to trio between
steps, so a large load never blocks the event loop for more than a few milliseconds; a
large one is drawn in a worker process meanwhile (``write_chunks``).
"""

from __future__ import annotations

import functools
import gc
import itertools
import json
import os
import re
import struct
import sys
from contextlib import aclosing, asynccontextmanager, suppress
from operator import itemgetter
from typing import TYPE_CHECKING, Any, BinaryIO

from mockdcp.data._faker import draw_pools
from mockdcp.util import ModelError, release_freed_memory

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Iterator

    from trio import MemorySendChannel, Process
    from trio.abc import ReceiveStream

    from mockdcp.model import Bucket, ColdLoad

#: documents drawn, formatted and written in one go (about 3-4 ms on this project's VM)
BLOCK = 1024

# fixed bounds: relative ones ("-5y", "now") would make the data depend on today's date
_START = "2020-01-01T00:00:00"
_SPAN_S = 5 * 365 * 24 * 3600

_TEMPLATE = (
    b'{"type":"user","id":%d,"name":"%s %s","email":"%s.%s%d@%s","city":"%s",'
    b'"country":"%s","joined":"%s","score":%d,"active":%s}'
)
JSON = 0x01
#: a document's pieces (``DocumentGenerator.joined_block``) come from tables, each entry
#: with the template's text up to the next field: ``_TEMPLATE`` cut at its fields
_LITERALS = re.split(rb"%[ds]", _TEMPLATE)
_DAY_S = 24 * 3600
_DAYS = -(-_SPAN_S // _DAY_S)


def _suffixed(entries: Iterable[bytes], suffix: bytes) -> list[bytes]:
    return [entry + suffix for entry in entries]


#: 0..999 (then 000..999, the low digits of an id of 1000 or more) with the text after
#: an id; 0..1000 with the text after a mail's number and after the score; the
#: booleans with the document's end and the newline between two documents
_ID_LOW = _suffixed(
    [b"%d" % i for i in range(1000)] + [b"%03d" % i for i in range(1000)], _LITERALS[1]
)
_MAIL_NUMBER = _suffixed((b"%d" % i for i in range(1001)), _LITERALS[6])
_SCORE = _suffixed((b"%d" % i for i in range(1001)), _LITERALS[11])
_ACTIVE = _suffixed((b"false", b"true"), _LITERALS[12] + b"\n")
_LAST_ACTIVE = _suffixed((b"false", b"true"), _LITERALS[12])  # a block's last document
#: a key's low three digits, with the newline between two keys
_KEY_LOW = [b"%03d\n" % i for i in range(1000)]
_TABLES: list[tuple[list[bytes], list[bytes], list[bytes]]] = []


def _times() -> tuple[list[bytes], list[bytes], list[bytes]]:
    """The days of the span (``YYYY-MM-DD`` and the ``T``), the hours (``HH:``) and the
    seconds of an hour (``MM:SS`` and the text after the date): a date is one of each,
    as ``numpy.datetime_as_string`` writes it (small tables: a table of the 86,400
    times of a day, 5 MB of objects, was read out of cache). Made once per process."""
    if not _TABLES:
        import numpy as np

        days = np.datetime64(_START[:10]) + np.arange(_DAYS).astype("timedelta64[D]")
        day_text = np.datetime_as_string(days).astype("S").tolist()
        hours = [b"%02d:" % h for h in range(24)]
        minutes = [b"%02d:%02d" % divmod(s, 60) for s in range(3600)]
        _TABLES.append((_suffixed(day_text, b"T"), hours, _suffixed(minutes, _LITERALS[10])))
    return _TABLES[0]


def _escaped(text: str) -> bytes:
    """``text`` as the inside of a JSON string."""
    return json.dumps(text, ensure_ascii=False)[1:-1].encode()


def _local_part(text: str) -> bytes:
    """``text`` as the letters of a mail address: lower case ASCII letters only."""
    return "".join(c for c in text.lower() if "a" <= c <= "z").encode() or b"user"


class _Pools:
    """What Faker draws once per seed."""

    def __init__(self, seed: int) -> None:
        pools = draw_pools(
            seed,
            {
                "first": (lambda fake: fake.first_name(), 256),
                "last": (lambda fake: fake.last_name(), 256),
                "domain": (lambda fake: fake.free_email_domain(), 16),
                "city": (lambda fake: fake.city(), 128),
                "country": (lambda fake: fake.country(), 64),
            },
        )
        first = [_escaped(n) for n in pools["first"]]
        last = [_escaped(n) for n in pools["last"]]
        # each with the template's text up to the next field (``_LITERALS``)
        self.first = _suffixed(first, _LITERALS[2])
        self.last = _suffixed(last, _LITERALS[3])
        self.first_mail = _suffixed((_local_part(n) for n in pools["first"]), _LITERALS[4])
        self.last_mail = [_local_part(n) for n in pools["last"]]  # the number follows
        assert not _LITERALS[5]
        self.domain = _suffixed((_escaped(d) for d in pools["domain"]), _LITERALS[7])
        self.city = _suffixed((_escaped(c) for c in pools["city"]), _LITERALS[8])
        self.country = _suffixed((_escaped(c) for c in pools["country"]), _LITERALS[9])


#: Faker pools a process keeps (``pools``); each costs about 0.1 s to draw
POOLS_KEPT = 8


@functools.lru_cache(maxsize=POOLS_KEPT)
def pools(seed: int) -> _Pools:
    """The pools of ``seed``, drawn once per process (read only: shared by every
    generator of that seed)."""
    return _Pools(seed)


class DocumentGenerator:
    """User-profile documents ``user::NNNNNN``, reproducible for a seed: Faker's pools
    of ``pool_seed`` (default: ``seed``; drawn once per process, ``pools``) combined
    with numpy draws seeded by ``seed``."""

    def __init__(self, seed: int = 0, *, pool_seed: int | None = None, block: int = BLOCK) -> None:
        if not 2 <= block <= BLOCK:
            raise ValueError(f"a block holds 2..{BLOCK} documents, not {block}")
        self.seed = seed
        #: documents drawn in one go (``BLOCK``; a generator of fewer draws other bytes)
        self.block_size = block
        self._pools = pools(seed if pool_seed is None else pool_seed)

    def block(self, number: int) -> tuple[list[bytes], list[bytes]]:
        """The keys and JSON bodies of documents ``number * block_size`` up to the next
        block."""
        keys, values = self.joined_block(number)
        return keys.split(b"\n"), values.split(b"\n")

    def joined_block(self, number: int) -> tuple[bytes, bytes]:
        """``block(number)``'s keys and bodies, each joined by a newline (neither holds
        one: JSON escapes it in strings). Each field is drawn for the whole block with
        numpy and gathered from a table (``itemgetter``, in C) whose entries carry the
        template's text up to the next field; one ``bytes.join`` of the pieces makes
        the bodies: no Python-level step a document (``_TEMPLATE %`` a document, the
        same bytes, cost two to three times as much)."""
        import numpy as np

        p, size = self._pools, self.block_size
        days, hours, minutes = _times()
        rng = np.random.default_rng([self.seed, number])
        # the draws in this order: the same seed gives the same documents
        first_i = rng.integers(0, len(p.first), size).tolist()
        last_i = rng.integers(0, len(p.last), size).tolist()
        domain_i = rng.integers(0, len(p.domain), size).tolist()
        city_i = rng.integers(0, len(p.city), size).tolist()
        country_i = rng.integers(0, len(p.country), size).tolist()
        mail_n = rng.integers(1, 100, size).tolist()
        score = rng.integers(0, 1001, size).tolist()
        active = (rng.random(size) < 0.8).tolist()
        seconds = rng.integers(0, _SPAN_S, size)
        # an id is its thousands (none below 1000) and its low three digits (padded
        # from 1000 on); a key is "user::" and both, padded to six digits
        first_id = number * size
        ids = np.arange(first_id, first_id + size)
        high, low = np.divmod(ids, 1000)
        low_i = (low + np.where(high > 0, 1000, 0)).tolist()
        top = int(high[0])
        high_i = (high - top).tolist()
        highs = range(top, top + 3)
        id_high = [_LITERALS[0] + (b"%d" % h if h else b"") for h in highs]
        key_high = [b"user::%03d" % h for h in highs]
        first = itemgetter(*first_i)
        last = itemgetter(*last_i)
        high_of = itemgetter(*high_i)
        columns = (
            high_of(id_high),
            itemgetter(*low_i)(_ID_LOW),
            first(p.first),
            last(p.last),
            first(p.first_mail),
            last(p.last_mail),
            itemgetter(*mail_n)(_MAIL_NUMBER),
            itemgetter(*domain_i)(p.domain),
            itemgetter(*city_i)(p.city),
            itemgetter(*country_i)(p.country),
            itemgetter(*(seconds // _DAY_S).tolist())(days),
            itemgetter(*(seconds % _DAY_S // 3600).tolist())(hours),
            itemgetter(*(seconds % 3600).tolist())(minutes),
            itemgetter(*score)(_SCORE),
            itemgetter(*active)(_ACTIVE),
        )
        width = len(columns)
        pieces: list[bytes] = [b""] * (width * size)
        for at, column in enumerate(columns):
            pieces[at::width] = column
        pieces[-1] = _LAST_ACTIVE[active[-1]]  # no newline after the last one
        values = b"".join(pieces)
        key_pieces: list[bytes] = [b""] * (2 * size)
        key_pieces[0::2] = high_of(key_high)
        key_pieces[1::2] = itemgetter(*low.tolist())(_KEY_LOW)
        key_pieces[-1] = key_pieces[-1][:-1]
        keys = b"".join(key_pieces)
        return keys, values

    def documents(self, count: int) -> Iterator[tuple[list[bytes], list[bytes]]]:
        """``count`` documents, a block (or the last part of one) at a time."""
        size = self.block_size
        for number in range(-(-count // size)):
            keys, values = self.block(number)
            left = count - number * size
            if left < size:
                keys, values = keys[:left], values[:left]
            yield keys, values

    def joined_documents(self, count: int) -> Iterator[tuple[int, bytes, bytes]]:
        """``count`` documents a block at a time, as ``joined_block`` gives them: how
        many, their keys and their bodies, each joined by a newline."""
        size = self.block_size
        for number in range(-(-count // size)):
            keys, values = self.joined_block(number)
            left = count - number * size
            if left < size:
                keys = b"\n".join(keys.split(b"\n")[:left])
                values = b"\n".join(values.split(b"\n")[:left])
            yield min(left, size), keys, values


def faker_documents(
    count: int, seed: int = 0, *, pool_seed: int | None = None, block: int = BLOCK
) -> Iterator[tuple[str, bytes]]:
    """``count`` (key, JSON body) pairs of user profiles, reproducible for a seed (and
    ``pool_seed`` and ``block``, as ``DocumentGenerator`` takes them)."""
    generator = DocumentGenerator(seed, pool_seed=pool_seed, block=block)
    for keys, values in generator.documents(count):
        for key, value in zip(keys, values, strict=True):
            yield key.decode(), value


# -- generation in a worker process ------------------------------------------------------
#
# A large load draws its documents in a second process (``python mockdcp/data/_dataset.py``),
# on the machine's other core, while the server's process writes them into the model:
# drawing costs about 1.5 µs a document, writing about 3.5, one after the other 5. The
# worker writes chunks of ``CHUNK_BLOCKS`` blocks to its stdout, each a header
# ``_CHUNK`` (the number of documents, the sizes of the two parts that follow), the keys
# and the bodies, each joined by a newline, which neither holds (JSON escapes it in
# strings), so ``bytes.split`` cuts them apart again in C.

#: blocks the worker sends in one go: the task reading its pipe cuts a chunk's 2,048
#: documents apart in one step of trio's (about 1.5 ms; chunks of 8 blocks held the
#: event loop about 7 ms, a block a chunk loaded 5 % slower for no shorter stall)
CHUNK_BLOCKS = 2
#: documents from which ``load_documents`` draws in a worker (below, the worker's start,
#: about half a second, costs more than drawing in the server's process)
WORKER_MIN = 100_000
_CHUNK = struct.Struct("<III")
#: documents given to one ``Bucket.set_many_steps``: about 32 a vbucket, so that its
#: steps write each vbucket's rows in one go (a third faster than 8 a vbucket; 64 a
#: vbucket loaded 269k documents/s end to end in ``mockdcp bench``, 32 loaded 294k/s)
LOAD_BATCH = 32 * BLOCK
#: rows ``ColdLoad.add`` frames between two yields to trio (about 1.5 µs a row), and
#: at least ``COLD_STEP_PER_VBUCKET`` a vbucket: each add costs some µs a vbucket it
#: touches (1024 vbuckets, 500,000 documents: 1.76 s of CPU in adds of 2,048 rows, 1.02 s
#: in adds of 16,384)
COLD_STEP = 2048
COLD_STEP_PER_VBUCKET = 8
#: rows ``Bucket.set_many_steps`` validates or writes between two yields to trio
#: (about 0.3 and 1.3 ms alone, up to 3 ms while the worker draws on the other core).
#: With these chunks, the longest stall of the event loop during a load in ``mockdcp
#: bench`` fell from about 12 ms (1,024 rows, chunks of 8 blocks) to 4 ms, at the same
#: load rate (medians of 5 runs of a million documents)
STEP_ROWS = 512
#: the worker's pipe: a chunk's keys and bodies (about 2 MB) in a few reads
_PIPE_BYTES = 1 << 20
#: chunks read from the worker and not yet loaded (the worker draws ahead by up to
#: about 20 MB: it draws at twice the pace the loader writes)
_AHEAD = 32

_Chunk = tuple[list[bytes], list[bytes]]


def write_chunks(count: int, seed: int, out: BinaryIO) -> None:
    """The worker's side: ``count`` documents, chunk by chunk, to ``out``."""
    blocks = DocumentGenerator(seed).joined_documents(count)
    while chunk := list(itertools.islice(blocks, CHUNK_BLOCKS)):
        keys_data = b"\n".join(keys for _, keys, _ in chunk)
        values_data = b"\n".join(values for _, _, values in chunk)
        out.write(_CHUNK.pack(sum(n for n, _, _ in chunk), len(keys_data), len(values_data)))
        out.write(keys_data)
        out.write(values_data)
    out.flush()


def document_chunks(count: int, seed: int) -> Iterator[_Chunk]:
    """``count`` documents' keys and bodies, ``CHUNK_BLOCKS`` blocks at a time."""
    keys: list[bytes] = []
    values: list[bytes] = []
    for block_keys, block_values in DocumentGenerator(seed).documents(count):
        keys += block_keys
        values += block_values
        if len(values) >= CHUNK_BLOCKS * BLOCK:
            yield keys, values
            keys, values = [], []
    if values:
        yield keys, values


async def _start_worker(count: int, seed: int) -> Process | None:
    """A worker process drawing ``count`` documents, or None if none can be started."""
    import subprocess

    import trio

    # run as a script, not ``-m``: the package (the server) is not imported there
    command = [sys.executable, __file__, str(count), str(seed)]
    try:
        return await trio.lowlevel.open_process(command, stdout=subprocess.PIPE)
    except OSError:
        return None


@asynccontextmanager
async def early_worker(count: int, seed: int) -> AsyncIterator[Process | None]:
    """A worker drawing ``count`` documents started now, before the server it loads
    (for ``load_documents(worker=...)``: its start, about half a second, overlaps the
    server's), or None below ``WORKER_MIN`` documents. Killed on exit if still running."""
    process = await _start_worker(count, seed) if count >= WORKER_MIN else None
    try:
        yield process
    finally:
        if process is not None:
            await _stop(process)


async def _stop(process: Process) -> None:
    import trio

    if process.returncode is None:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


async def _worker_chunks(
    count: int, seed: int, process: Process | None = None
) -> AsyncGenerator[_Chunk, None]:
    """The keys and bodies of ``count`` documents drawn by a worker process (``process``,
    or one started now; here if none can be)."""
    if process is None:
        process = await _start_worker(count, seed)
    if process is None:
        async for chunk in _local_chunks(count, seed):
            yield chunk
        return
    try:
        assert process.stdout is not None
        buffer = bytearray()
        done = 0
        while done < count:
            header = await _receive(process.stdout, buffer, _CHUNK.size, done)
            n, keys_size, values_size = _CHUNK.unpack(header)
            keys = (await _receive(process.stdout, buffer, keys_size, done)).split(b"\n")
            values = (await _receive(process.stdout, buffer, values_size, done)).split(b"\n")
            if not len(keys) == len(values) == n:
                raise RuntimeError(f"the document worker sent a bad chunk of {n} documents")
            done += n
            yield keys, values
        if await process.wait() != 0:
            raise RuntimeError(f"the document worker failed ({process.returncode})")
    finally:
        await _stop(process)


async def _receive(stream: ReceiveStream, buffer: bytearray, size: int, done: int) -> bytes:
    """The next ``size`` bytes of ``stream``, read through ``buffer``."""
    while len(buffer) < size:
        data = await stream.receive_some(max(size - len(buffer), _PIPE_BYTES))
        if not data:
            raise RuntimeError(f"the document worker stopped after {done} documents")
        buffer += data
    with memoryview(buffer) as view:
        wanted = bytes(view[:size])
    del buffer[:size]
    return wanted


async def _local_chunks(count: int, seed: int) -> AsyncGenerator[_Chunk, None]:
    """The keys and bodies of ``count`` documents drawn here, a block (about 2 ms of
    drawing) at a time."""
    for chunk in DocumentGenerator(seed).documents(count):
        yield chunk


async def _produce(chunks: AsyncGenerator[_Chunk, None], send: MemorySendChannel[_Chunk]) -> None:
    """Move ``chunks`` into ``send`` as they come: the worker's pipe is read whenever
    the loader yields, so the worker draws ahead instead of waiting for the loader to
    want its next batch (``_AHEAD``)."""
    import trio

    async with send, aclosing(chunks):
        async for chunk in chunks:
            await send.send(chunk)
            await trio.lowlevel.checkpoint()


async def _batches(chunks: AsyncIterator[_Chunk]) -> AsyncIterator[_Chunk]:
    """``chunks`` joined into batches of ``LOAD_BATCH`` documents (the last one less)."""
    keys: list[bytes] = []
    values: list[bytes] = []
    async for chunk_keys, chunk_values in chunks:
        keys += chunk_keys
        values += chunk_values
        if len(keys) >= LOAD_BATCH:
            yield keys, values
            keys, values = [], []
    if keys:
        yield keys, values


async def load_documents(
    bucket: Bucket,
    count: int,
    seed: int = 0,
    progress: Callable[[int, int], Any] | None = None,
    *,
    worker: bool | Process | None = None,
    persist: bool = True,
) -> int:
    """Load ``count`` generated documents into ``bucket``, yielding to trio every
    ``STEP_ROWS`` rows or so; ``progress(done, count)`` after each step. Returns
    ``count``. ``worker``: draw them in a worker process (default: from ``WORKER_MIN``
    documents on; a process: the one ``early_worker`` started); the bytes are the
    same either way.

    A running flusher is held during the load (persisting each vbucket after each step
    would cost more than writing). ``persist``: then every vbucket is persisted and the
    flusher released before this returns; without it the flusher stays held, and the
    caller runs ``persist_all`` (which releases it) when it likes: ``mockdcp serve``
    does so after its ready line, as a data node persists what it has acknowledged.

    The loaded objects are moved out of the cyclic garbage collector's reach
    (``gc.freeze``, which moves lists, O(1)) after each chunk: they live as long as the
    server, and a full collection walking millions of them would stall streaming.
    """
    use_worker: bool | Process = count >= WORKER_MIN if worker is None else worker
    flusher = bucket.flusher
    holding = flusher.enabled and not flusher.paused
    if holding:
        flusher.pause()
    try:
        done = await _load(bucket, count, seed, progress, use_worker)
    except BaseException:
        if holding:
            flusher.resume()
        raise
    if holding and persist:
        await persist_all(bucket)
    return done


async def persist_all(bucket: Bucket, rows_per_step: int = 2 * STEP_ROWS) -> None:
    """Persist every vbucket of ``bucket``, yielding to trio every ``rows_per_step``
    rows or so (a vbucket persisting new documents costs about 0.7 µs a row), then
    release its flusher if it was held (``load_documents``)."""
    import trio

    try:
        rows = 0
        for vb in bucket.vbuckets:
            rows += vb.high_seqno - vb.persisted_seqno
            bucket.persist(vb.vbid)
            if rows >= rows_per_step:
                rows = 0
                await trio.lowlevel.checkpoint()
    finally:
        if bucket.flusher.paused:
            bucket.flusher.resume()


async def _load(
    bucket: Bucket,
    count: int,
    seed: int,
    progress: Callable[[int, int], Any] | None,
    use_worker: bool | Process,
) -> int:
    import trio

    done = 0
    cold = _cold_load(bucket)
    # The cyclic collector is off for a large load (each batch is frozen once written):
    # it would walk the batch's rows, and every item made, again and again meanwhile
    # (a tenth of the load's time). A small load leaves it alone: with it off, a server
    # of 2,000 documents peaked 30 MiB higher under 200 consumers afterwards
    # (tests/bench/test_many_consumers.py), for no gain worth having.
    collecting = gc.isenabled()
    if use_worker is not False:
        gc.disable()
    try:
        chunks: AsyncGenerator[_Chunk, None]
        if use_worker is False:
            chunks = _local_chunks(count, seed)
        else:
            chunks = _worker_chunks(count, seed, None if use_worker is True else use_worker)
        send, receive = trio.open_memory_channel[_Chunk](_AHEAD)
        async with trio.open_nursery() as nursery, receive:
            nursery.start_soon(_produce, chunks, send)
            async for keys, values in _batches(receive):
                if cold is not None:
                    done = await _add_cold(cold, keys, values, done, count, progress)
                    continue
                steps = bucket.set_many_steps(keys, values, datatypes=JSON, rows_per_step=STEP_ROWS)
                await trio.lowlevel.checkpoint()
                for written in steps:
                    done += written
                    if progress is not None and written:
                        progress(done, count)
                    await trio.lowlevel.checkpoint()
                del keys, values, steps
                gc.freeze()
        if cold is not None:
            for _ in cold.finish_steps():
                await trio.lowlevel.checkpoint()
    finally:
        if collecting:
            gc.enable()
    if cold is not None:
        # the batches' holes go back to the system; glibc's malloc_trim walks the heap
        # (about 50 ms after a million documents over 1024 vbuckets): in a thread, the
        # event loop going on meanwhile
        await trio.to_thread.run_sync(release_freed_memory)
    return done


async def _add_cold(
    cold: ColdLoad,
    keys: list[bytes],
    values: list[bytes],
    done: int,
    count: int,
    progress: Callable[[int, int], Any] | None,
) -> int:
    """A batch into the cold load, ``COLD_STEP`` rows between two yields to trio."""
    import trio

    step = max(COLD_STEP, COLD_STEP_PER_VBUCKET * len(cold.bucket.vbuckets))
    for at in range(0, len(keys), step):
        done += cold.add(keys[at : at + step], values[at : at + step], datatypes=JSON)
        if progress is not None:
            progress(done, count)
        await trio.lowlevel.checkpoint()
    return done


def _cold_load(bucket: Bucket) -> ColdLoad | None:
    """A cold load into ``bucket`` if it holds no document yet (a generated corpus is
    then its persisted disk, as a warmed-up node holds one: ``Bucket.cold_load``);
    ``None``: the documents go through ``set_many`` into memory."""
    try:
        return bucket.cold_load()
    except ModelError:
        return None


def main(argv: list[str]) -> int:
    """``python mockdcp/data/_dataset.py COUNT SEED``: the worker (``write_chunks``)."""
    count, seed = int(argv[0]), int(argv[1])
    # The lowest priority: on a machine with fewer free cores than runnable processes
    # the kernel would otherwise take the server's core from its event loop for a
    # time slice (several ms) to let the worker draw; drawing ahead needs no more
    # than the leftovers (it runs at twice the pace the server writes).
    with suppress(AttributeError, OSError):
        os.nice(19)
    try:  # Linux: a larger pipe, fewer wake-ups of the reader
        import fcntl

        fcntl.fcntl(sys.stdout.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass
    write_chunks(count, seed, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    del sys.path[0]  # this file's directory: its modules are not top-level ones
    raise SystemExit(main(sys.argv[1:]))
