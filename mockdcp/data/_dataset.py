"""The seeded data set ``mockdcp serve`` loads into its default bucket: user profiles.

Faker draws the names, cities, countries and mail domains once (pools of 16 to 256
values, seeded: 65,536 names); each block of ``BLOCK`` documents then combines them with
numpy draws seeded by (seed, block number), formatted in one ``bytes %`` per document.
The same seed gives the same bytes, whatever size the batches are loaded in. Faker and
numpy are imported here, lazily, so the server is listening before it loads.

``load_documents`` writes them into an empty bucket's cold tier (``Bucket.cold_load``:
persisted, in columns, as a warmed-up data node holds a bulk-loaded corpus), framed as
the cold tier holds them (``DocumentGenerator.framed``, ``ColdLoad.add_frames``), or into
a bucket that holds documents with ``Bucket.set_many_steps``, and yields to trio between
chunks, so a large load never blocks the event loop for more than a few milliseconds; a
large one is drawn and framed in worker processes meanwhile (``write_chunks``).
"""

from __future__ import annotations

import functools
import gc
import json
import mmap
import os
import re
import struct
import sys
import time
import zlib
from contextlib import aclosing, asynccontextmanager, suppress
from operator import itemgetter
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

import attrs

from mockdcp.data._faker import cached_pools
from mockdcp.util import ModelError, release_freed_memory

if TYPE_CHECKING:
    from collections.abc import (
        AsyncIterator,
        Callable,
        Iterable,
        Iterator,
        Sequence,
    )

    import numpy as np
    from numpy.typing import NDArray
    from trio import MemorySendChannel, Process

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
#: a key's low three digits, with the newline between two keys, and alone
_KEY_LOW = [b"%03d\n" % i for i in range(1000)]
_KEY_DIGITS = [b"%03d" % i for i in range(1000)]
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


def _pick(table: Sequence[bytes], at: NDArray[np.int64]) -> Sequence[bytes]:
    """``table``'s entries at ``at``, gathered in C (``itemgetter``; a tuple)."""
    if len(at) == 1:
        return (table[int(at[0])],)
    return itemgetter(*at.tolist())(table) if len(at) else ()


T = TypeVar("T")

#: (what was made, the table's identity) -> the table and what was made of it (``_kept``)
_KEPT: dict[tuple[str, int], tuple[Sequence[bytes], Any]] = {}


def _kept(make: Callable[[Sequence[bytes]], T], table: Sequence[bytes]) -> T:
    """``make(table)``, made once per table and kept (the tables of the module and the
    pools, which live as long as the process; a table is known by its identity)."""
    key = (make.__name__, id(table))
    kept = _KEPT.get(key)
    if kept is not None and kept[0] is table:
        made: T = kept[1]
        return made
    made = make(table)
    _KEPT[key] = (table, made)
    return made


def _table(table: Sequence[bytes]) -> tuple[NDArray[np.object_], NDArray[np.int64]]:
    """``table``'s entries as a numpy array of objects (numpy gathers them, in C,
    without a Python object a row) and the length of each (kept: ``_kept``)."""
    return _kept(_as_objects, table)


def _as_objects(table: Sequence[bytes]) -> tuple[NDArray[np.object_], NDArray[np.int64]]:
    import numpy as np

    entries = np.empty(len(table), object)
    entries[:] = table
    return entries, np.fromiter(map(len, table), np.int64, len(table))


@attrs.frozen
class FramedChunk:
    """Documents framed for ``ColdLoad.add_frames`` (``DocumentGenerator.framed``):
    how many of each vbucket, each frame's row in the chunk, each frame's size, the
    rows' keys (in the order drawn) joined by a newline and the frames, grouped by
    vbucket."""

    counts: NDArray[np.uint32]
    order: NDArray[np.uint32]
    sizes: NDArray[np.uint32]
    keys: bytes
    frames: bytes | bytearray | memoryview
    #: the buffers ``frames`` (a view of one of them) goes back to once installed
    pool: _Buffers | _Ring | None = None

    def __len__(self) -> int:
        return len(self.order)

    def done(self) -> None:
        """The frames are installed (copied out): their buffer goes back to its pool,
        for the next chunk read (``_Buffers``); the chunk's frames are not read again."""
        frames = self.frames
        if self.pool is not None and isinstance(frames, memoryview):
            buffer = frames.obj
            frames.release()
            assert isinstance(buffer, bytearray | mmap.mmap)
            self.pool.give_back(buffer)


class _Buffers:
    """The buffers a load reads its workers' chunks into, each used again once its
    chunk is installed (``FramedChunk.done``): a new ``bytearray`` a chunk (about 4 MB)
    was zeroed before the pipe was read into it, and read from memory out of cache
    (at 10M documents, about half a second of the server's time)."""

    def __init__(self) -> None:
        self.free: list[bytearray] = []

    def take(self, size: int) -> bytearray:
        """A free buffer of at least ``size`` bytes (a new one, an eighth larger, if
        none is: chunks differ in size by a few percent)."""
        while self.free:
            buffer = self.free.pop()
            if len(buffer) >= size:
                return buffer
        return bytearray(size + size // 8)

    def give_back(self, buffer: bytearray | mmap.mmap) -> None:
        assert isinstance(buffer, bytearray)
        self.free.append(buffer)


class _Ring:
    """The shared memory a worker writes its chunks' frames to (``write_chunks``),
    mapped by the server too, which reads a chunk's frames there in place (through
    the pipe, each chunk's frames were copied twice more, into the pipe and out of
    it: about 1.2 CPU seconds of 10M documents' load); the pipe carries the rest of
    each chunk and where its frames are. The worker writes each chunk after the last
    one, or from the start when it would not fit before the end, once the chunks
    there are installed: ``give_back`` tells it so, a byte a chunk on its stdin (the
    chunks of a worker are installed in the order written). Linux (``memfd_create``)."""

    #: bytes of a ring: a chunk is about 4.3 MB, so about seven at once (``_AHEAD``
    #: queued, one being installed, one being written)
    SIZE = 32 << 20

    def __init__(self) -> None:
        self.fd = os.memfd_create("mockdcp-chunks")
        try:
            os.ftruncate(self.fd, self.SIZE)
            self.map = mmap.mmap(self.fd, self.SIZE)
        except BaseException:
            os.close(self.fd)
            raise
        #: the worker's stdin (once it is started)
        self.acks: int | None = None

    def started(self, acks: int) -> None:
        """The worker is started, its stdin ``acks``: the memory file is its now
        (the map stays)."""
        self.acks = acks
        os.close(self.fd)
        self.fd = -1

    def give_back(self, buffer: bytearray | mmap.mmap) -> None:
        """A chunk is installed: its place in the ring is free for the worker."""
        if self.acks is not None:
            with suppress(OSError):  # a worker stopped already needs no more room
                os.write(self.acks, b"\x01")

    def close(self) -> None:
        """Unmap the ring (the worker's mapping keeps it until that one exits)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        with suppress(BufferError):  # a chunk not installed still holds a view of it
            self.map.close()


@attrs.define
class LoadPhases:
    """Where a load of generated documents spends its time (``load_documents(phases=
    ...)``; ``mockdcp bench docs --json``): seconds and CPU seconds of each phase,
    summed over the chunks. The server's: ``wait`` (for the next chunk: its seconds
    are the load's idle time), ``pipe`` (reading chunks: the CPU of the reads),
    ``keys`` (a chunk's keys split), ``chunks`` (``ColdLoad.add_frames``: CAS and
    seqnos scattered, each vbucket's run copied, the key hashes and tags),
    ``gather`` (``finish``'s columns put in vbucket order), ``index`` (a segment a
    vbucket: the key index sorted), ``install``, ``trim`` (freed memory given back);
    the workers' (CPU seconds, both summed): ``draw`` (the seeded numpy draws),
    ``frame`` (gathered from the tables, headers, one join a chunk), ``write`` (to
    the pipe). A load drawn here has ``draw`` and ``frame`` in the server's time."""

    wall: dict[str, float] = attrs.field(factory=dict)
    cpu: dict[str, float] = attrs.field(factory=dict)

    def add(self, phase: str, wall: float | None, cpu: float) -> None:
        """Seconds (None: a worker's phase, CPU seconds only) and CPU seconds more."""
        if wall is not None:
            self.wall[phase] = self.wall.get(phase, 0.0) + wall
        self.cpu[phase] = self.cpu.get(phase, 0.0) + cpu

    def figures(self) -> dict[str, float]:
        """``phase_NAME_s`` and ``phase_NAME_cpu_s`` of each phase (the workers' have
        only CPU seconds)."""
        out: dict[str, float] = {}
        for phase, cpu in self.cpu.items():
            if phase in self.wall:
                out[f"phase_{phase}_s"] = round(self.wall[phase], 3)
            out[f"phase_{phase}_cpu_s"] = round(cpu, 3)
        return out


class _Timer:
    """Seconds and CPU seconds since the last ``lap`` (or its making)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self, phases: LoadPhases | None, phase: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        if phases is not None:
            phases.add(phase, wall - self.wall, cpu - self.cpu)
        self.wall, self.cpu = wall, cpu


#: the Faker providers of the documents' pools: name -> (provider, values)
POOLS = {
    "first": ("first_name", 256),
    "last": ("last_name", 256),
    "domain": ("free_email_domain", 16),
    "city": ("city", 128),
    "country": ("country", 64),
}


class _Pools:
    """What Faker draws once per seed (kept on disk: ``cached_pools``)."""

    def __init__(self, seed: int) -> None:
        pools = cached_pools(seed, POOLS)
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
        self._pairs: tuple[list[bytes], list[bytes]] | None = None

    def pairs(self) -> tuple[list[bytes], list[bytes]]:
        """Tables of two fields side by side: a mail's number and domain (entry
        ``number * len(domain) + domain``), score and active (``score * 2 + active``,
        the value's end). Made once (the framed chunks gather from them:
        ``DocumentGenerator.framed``). City and country stay apart: as one table of
        8,192 entries they were gathered slower (out of cache) than as two."""
        if self._pairs is None:
            self._pairs = (
                [number + domain for number in _MAIL_NUMBER for domain in self.domain],
                [score + active for score in _SCORE for active in _LAST_ACTIVE],
            )
        return self._pairs


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
        #: CPU seconds ``framed`` spent drawing (``LoadPhases``)
        self.draw_cpu_s = 0.0
        self._pools = pools(seed if pool_seed is None else pool_seed)

    def block(self, number: int) -> tuple[list[bytes], list[bytes]]:
        """The keys and JSON bodies of documents ``number * block_size`` up to the next
        block."""
        keys, values = self.joined_block(number)
        return keys.split(b"\n"), values.split(b"\n")

    def _draw(self, number: int) -> tuple[NDArray[np.int64], ...]:
        """Block ``number``'s draws, in the order they are drawn (the same seed gives the
        same documents): the first and last name, domain, city and country (indices in
        the pools), the mail's number, the score, active (0 or 1) and the seconds since
        ``_START`` the user joined."""
        import numpy as np

        p, size = self._pools, self.block_size
        rng = np.random.default_rng([self.seed, number])
        return (
            rng.integers(0, len(p.first), size),
            rng.integers(0, len(p.last), size),
            rng.integers(0, len(p.domain), size),
            rng.integers(0, len(p.city), size),
            rng.integers(0, len(p.country), size),
            rng.integers(1, 100, size),
            rng.integers(0, 1001, size),
            (rng.random(size) < 0.8).astype(np.int64),
            rng.integers(0, _SPAN_S, size),
        )

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
        draws = self._draw(number)
        first_i, last_i, domain_i, city_i, country_i, mail_n, score = (
            column.tolist() for column in draws[:7]
        )
        active = draws[7].tolist()
        seconds = draws[8]
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

    def framed(self, first_block: int, blocks: int, count: int, vbuckets: int) -> FramedChunk:
        """The documents of ``blocks`` blocks from ``first_block`` on (those below
        ``count``) as the frames of a cold load into ``vbuckets`` vbuckets
        (``ColdLoad.add_frames``), grouped by vbucket: the same bytes as ``block``'s,
        in the frame ``ColdLoad.add`` makes of them. The draws are put in vbucket order
        (numpy) before they are gathered from the tables, each value's length is the
        sum of its pieces' (numpy, from the tables' lengths), and one ``bytes.join``
        makes every frame: its start (header, collection prefix, key and the value up
        to the name: ``_keys``, ``_starts``), the value's pieces gathered from the tables and
        its date (``_dates``)."""
        import numpy as np

        from mockdcp.model import HEAD

        p, size = self._pools, self.block_size
        first_id = first_block * size
        n = max(0, min(blocks * size, count - first_id))
        numbers = range(first_block, first_block + -(-n // size))
        began = time.process_time()
        drawn = zip(*map(self._draw, numbers), strict=True)
        draws = [np.concatenate(column)[:n] for column in drawn]
        self.draw_cpu_s += time.process_time() - began
        ids = np.arange(first_id, first_id + n)
        keys, runs = _keys(ids)
        vb = np.concatenate([_vbuckets_of(rows[:, _DIGITS_AT:-1], vbuckets) for *_, rows in runs])
        order = np.argsort(vb.astype(np.int16), kind="stable")
        counts = np.bincount(vb, minlength=vbuckets).astype(np.uint32)
        first_i, last_i, domain_i, city_i, country_i, mail_n, score, active, seconds = (
            column[order] for column in draws
        )
        # fields side by side in the template, drawn from small tables, are one table's
        # entry (``_Pools.pairs``): fewer pieces to gather and join
        mail_domain, score_active = p.pairs()
        fields = (
            (p.first, first_i),
            (p.last, last_i),
            (p.first_mail, first_i),
            (p.last_mail, last_i),
            (mail_domain, mail_n * len(p.domain) + domain_i),
            (p.city, city_i),
            (p.country, country_i),
        )
        # each frame's fixed-width parts are written with numpy (``_starts``): the
        # header, key and the value up to its name; the date; one piece each. Every
        # column goes into the list joined by a list's slice assignment (a column
        # gathered into an array of objects of the frames' pieces, read out whole,
        # cost about a tenth more)
        width = 3 + len(fields)
        joined = [b""] * (n * width)
        lengths = np.zeros(n, np.int64)
        columns = [*range(1, len(fields) + 1), width - 1]  # the score last, after the date
        for column, (table, picked) in zip(
            columns, (*fields, (score_active, score * 2 + active)), strict=True
        ):
            entries, entry_lengths = _table(table)
            joined[column::width] = entries[picked].tolist()
            lengths += entry_lengths[picked]
        dates, date_length = _dates(seconds)
        lengths += date_length
        starts, klens, id_lengths = _starts(runs, order, vb[order], lengths)
        joined[0::width], joined[width - 2 :: width] = starts, dates
        del starts, dates
        # the value's length so far lacks its start (its id); a frame: head, key (with
        # the collection's prefix) and value
        sizes = HEAD + klens + id_lengths + lengths
        return FramedChunk(
            counts, order.astype(np.uint32), sizes.astype(np.uint32), keys, b"".join(joined)
        )


def _fixed(table: Sequence[bytes]) -> NDArray[np.uint8]:
    """The entries of ``table``, all of one length, as the rows of a numpy array of
    bytes (kept: ``_kept``)."""
    return _kept(_as_rows, table)


def _as_rows(table: Sequence[bytes]) -> NDArray[np.uint8]:
    import numpy as np

    return np.frombuffer(b"".join(table), np.uint8).reshape(len(table), -1)


def _rows(table: NDArray[np.uint8], at: NDArray[np.int64]) -> NDArray[np.uint8]:
    """``table``'s rows at ``at`` (``numpy.take`` along the rows: indexing an array of
    rows with an array took about four times as long)."""
    import numpy as np

    out: NDArray[np.uint8] = np.take(table, at, axis=0)
    return out


def _dates(seconds: NDArray[np.int64]) -> tuple[list[bytes], int]:
    """The ``joined`` date of each document (seconds since ``_START``) with the
    template's text after it, and their common length: ``YYYY-MM-DDT``, ``HH:`` and
    ``MM:SS`` rows (``_times``' tables, each of one width) gathered side by side with
    numpy and read out as one ``bytes`` a document (three pieces to gather and join
    before)."""
    import numpy as np

    days, hours, minutes = map(_fixed, _times())
    day, hour, minute = seconds // _DAY_S, seconds % _DAY_S // 3600, seconds % 3600
    a, b = days.shape[1], days.shape[1] + hours.shape[1]
    out = np.empty((len(seconds), b + minutes.shape[1]), np.uint8)
    out[:, :a], out[:, a:b] = _rows(days, day), _rows(hours, hour)
    out[:, b:] = _rows(minutes, minute)
    dates: list[bytes] = out.view(f"V{out.shape[1]}").ravel().tolist()
    return dates, out.shape[1]


#: the key's text before the id (its digits: ``_digit_rows``)
_KEY_PREFIX = b"user::"
#: where a key's digits begin in the rows of ``_keys``
_DIGITS_AT = len(_KEY_PREFIX)
#: a run of ids of one width (``_keys``): its first row, the width, the keys' rows
_Run = tuple[int, int, "NDArray[np.uint8]"]


def _digit_rows(ids: NDArray[np.int64], wide: int) -> NDArray[np.uint8]:
    """The decimal digits of ``ids``, ``wide`` of them (zero padded), as the rows of a
    byte array: three at a time from a table (``_KEY_DIGITS``), lowest first."""
    import numpy as np

    three = _fixed(_KEY_DIGITS)
    rows = np.empty((len(ids), wide), np.uint8)
    picked, place = ids, wide
    while place:
        picked, low = np.divmod(picked, 1000)
        step = min(3, place)
        rows[:, place - step : place] = _rows(three, low)[:, 3 - step :]
        place -= step
    return rows


def _keys(ids: NDArray[np.int64]) -> tuple[bytes, list[_Run]]:
    """The keys of ``ids`` (ascending) joined by a newline, and for each run of ids of
    one width (ids ascend: one run in every chunk but one that crosses a power of
    ten) its first row, that width and its keys, each with a newline, as the rows of
    a byte array (``_starts`` and ``_vbuckets_of`` read them)."""
    import numpy as np

    n = len(ids)
    digits = _widths(ids)
    prefix = np.frombuffer(_KEY_PREFIX, np.uint8)
    runs: list[_Run] = []
    bounds = (np.flatnonzero(np.diff(digits)) + 1).tolist()
    for a, b in zip([0, *bounds], [*bounds, n], strict=True):
        key_wide = max(int(digits[a]), 6)
        rows = np.empty((b - a, _DIGITS_AT + key_wide + 1), np.uint8)
        rows[:, :_DIGITS_AT], rows[:, -1] = prefix, ord("\n")
        rows[:, _DIGITS_AT:-1] = _digit_rows(ids[a:b], key_wide)
        runs.append((a, int(digits[a]), rows))
    return b"".join(rows.tobytes() for *_, rows in runs)[:-1], runs


def _widths(ids: NDArray[np.int64]) -> NDArray[np.int64]:
    """How many decimal digits each of ``ids`` has."""
    import numpy as np

    digits = np.ones(len(ids), np.int64)
    power = 10
    while len(ids) and int(ids.max()) >= power:
        digits += ids >= power
        power *= 10
    return digits


def _starts(
    runs: list[_Run],
    order: NDArray[np.int64],
    vbs: NDArray[np.int64],
    lengths: NDArray[np.int64],
) -> tuple[list[bytes], NDArray[np.int64], NDArray[np.int64]]:
    """Each document's frame up to its value's name, in vbucket order (``order``: the
    row of each; ``vbs``: its vbucket; ``lengths``: the rest of its value's length,
    for the header): header (``head_dtype``, the default collection's prefix), key
    (``runs``: ``_keys``') and the value's start, written with numpy as the rows of a
    byte array for each run of ids of one width, then read out as one ``bytes`` a
    document. Returns them, and the length of each key (with the prefix) and of each
    value's start, in vbucket order.

    Replaces four pieces a document gathered from tables and joined (the key's
    thousands and low digits, the value's id in two), and the keys' own join."""
    import numpy as np

    from mockdcp.model import HEAD, head_dtype

    n = len(order)
    key_ends = np.empty(n, np.int64)
    digits = np.empty(n, np.int64)
    for a, wide, rows in runs:
        key_ends[a : a + len(rows)] = rows.shape[1] - 1
        digits[a : a + len(rows)] = wide  # the value's id: the key's digits, unpadded
    klens = (key_ends + 1)[order]  # with the collection's prefix
    id_lengths = (len(_LITERALS[0]) + digits + len(_LITERALS[1]))[order]
    head = np.zeros(n, head_dtype(True))  # the default collection: prefix 0
    head["magic"], head["opcode"], head["extlen"] = 0x80, 0x57, HEAD - 24
    head["keylen"], head["datatype"], head["vbucket"] = klens, JSON, vbs
    head["bodylen"] = HEAD - 24 + klens + id_lengths + lengths
    head["rev"] = 1  # CAS and seqno: written by ``ColdLoad.add_frames``
    heads = head.view(np.uint8).reshape(n, HEAD + 1)
    id_before, id_after = (np.frombuffer(text, np.uint8) for text in _LITERALS[:2])
    starts: Any = None  # one run: a list; more: an array of objects, filled a run at a time
    for a, wide, keyed in runs:
        b, key_end = a + len(keyed), keyed.shape[1] - 1
        if a == 0 and b == n:
            at, where = order, None
        else:
            where = np.flatnonzero((order >= a) & (order < b))
            at = order[where] - a
        stop = HEAD + 1 + key_end
        rows = np.empty((len(at), stop + len(id_before) + wide + len(id_after)), np.uint8)
        rows[:, : HEAD + 1] = heads if where is None else _rows(heads, where)
        rows[:, HEAD + 1 : stop] = _rows(keyed, at)[:, :key_end]
        rows[:, stop : stop + len(id_before)] = id_before
        value_id = stop + len(id_before)
        rows[:, value_id : value_id + wide] = rows[:, stop - wide : stop]
        rows[:, value_id + wide :] = id_after
        made = rows.view(f"V{rows.shape[1]}").ravel().tolist()
        if where is None:
            starts = made
        else:
            if starts is None:
                starts = np.empty(n, object)
            starts[where] = made
    if not isinstance(starts, list):
        starts = [] if starts is None else starts.tolist()
    return starts, klens, id_lengths


_CRC_TABLE: list[NDArray[np.uint32]] = []


def key_vbuckets(ids: NDArray[np.int64], vbuckets: int) -> NDArray[np.int64]:
    """The vbucket of each document's key (``user::`` and its id, six digits at least):
    ``vbucket_ids`` of the keys, computed with numpy from their digits
    (``_vbuckets_of``), for every key of a width at once, rather than ``zlib.crc32`` a
    key (a chunk's keys split and read one by one: about a twelfth of a worker's
    time). ``framed`` computes them from the keys it writes (``_keys``)."""
    import numpy as np

    widths = np.maximum(_widths(ids), 6)
    out = np.empty(len(ids), np.int64)
    for wide in np.unique(widths).tolist():
        at = np.flatnonzero(widths == wide)
        out[at] = _vbuckets_of(_digit_rows(ids[at], wide), vbuckets)
    return out


def _vbuckets_of(digit_rows: NDArray[np.uint8], vbuckets: int) -> NDArray[np.int64]:
    """``vbucket_ids`` of the keys ``user::`` and each row's digits: their CRC32
    (zlib's: the reflected polynomial 0xEDB88320, a byte a table lookup) computed with
    numpy from the register after the prefix, a digit (a column) at a time."""
    import numpy as np

    if not _CRC_TABLE:
        table = np.arange(256, dtype=np.uint32)
        for _ in range(8):
            table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1)
        _CRC_TABLE.append(table.astype(np.uint32))
    table = _CRC_TABLE[0]
    register = np.full(len(digit_rows), zlib.crc32(_KEY_PREFIX) ^ 0xFFFFFFFF, np.uint32)
    for place in range(digit_rows.shape[1]):
        register = table[(register ^ digit_rows[:, place]) & 0xFF] ^ (register >> 8)
    crcs = register ^ np.uint32(0xFFFFFFFF)
    out: NDArray[np.int64] = ((crcs.astype(np.int64) >> 16) & 0x7FFF) % vbuckets
    return out


def faker_documents(
    count: int, seed: int = 0, *, pool_seed: int | None = None, block: int = BLOCK
) -> Iterator[tuple[str, bytes]]:
    """``count`` (key, JSON body) pairs of user profiles, reproducible for a seed (and
    ``pool_seed`` and ``block``, as ``DocumentGenerator`` takes them)."""
    generator = DocumentGenerator(seed, pool_seed=pool_seed, block=block)
    for keys, values in generator.documents(count):
        for key, value in zip(keys, values, strict=True):
            yield key.decode(), value


# -- generation in worker processes ----------------------------------------------------
#
# A large load draws and frames its documents in worker processes (``python
# mockdcp/data/_dataset.py``), on the machine's other core, while the server's process
# installs them in the model: each worker draws every ``WORKERS``-th chunk of
# ``CHUNK_BLOCKS`` blocks and frames it for the cold tier (``DocumentGenerator.framed``:
# the frames grouped by vbucket); the server reads the chunks in turn, writes their CAS
# and seqnos and copies each vbucket's run of frames into that vbucket's buffer
# (``ColdLoad.add_frames``). A chunk on the pipe is a header ``_CHUNK`` (the number of
# documents, of vbuckets, the sizes of the keys and of the frames), the counts a
# vbucket, the rows and the sizes (uint32 each), the keys joined by a newline and the
# frames, or, where the worker writes its frames to a ring of shared memory (``_Ring``),
# where in the ring they are (``_AT``); after the last chunk, a trailer: a header of no
# documents and no vbuckets, and the worker's CPU seconds (``_TIMES``).

#: blocks a chunk holds: a chunk's frames go to each vbucket in one copy, and a copy
#: a vbucket costs about a µs whatever its size (16 blocks: 16 documents a vbucket of
#: 1024); the server installs a chunk in one step of trio's (about 6 ms). 16 rather
#: than 8: about 8 % less CPU a document both framing and installing (a chunk's fixed
#: costs, a copy a vbucket); at 32 the worker's arrays of objects no longer fit its
#: cache and framing cost more
CHUNK_BLOCKS = 16
#: documents from which ``load_documents`` draws in workers (below, a worker's start,
#: about half a second, costs more than drawing in the server's process). ``serve
#: --docs N`` to its ready line on a quiet 2-core machine, medians: 100,000 documents
#: 0.81 s in the server's process against 0.92 s with workers (64 vbuckets: 0.66
#: against 0.81), 200,000 0.97 against 1.01, 250,000 1.19 against 1.12, 300,000 1.24
#: against 1.15, 500,000 1.60 against 1.31; the peak resident no higher in-process
WORKER_MIN = 250_000
#: the worker processes a large load starts: drawing and framing cost about twice what
#: installing does, so two of them keep the server's process busy
WORKERS = 2
#: the workers' niceness: the server's event loop keeps its core when it has work (a
#: wake-up preempts a worker), yet the workers, which now do two thirds of the load's
#: work, are not starved by other processes of a busy machine as at the lowest
#: priority (19: 2M documents loaded in 19-22 s on a loaded 2-core machine, 15-19 s at 5)
WORKER_NICE = 5
_CHUNK = struct.Struct("<IIII")
#: where in its ring a worker wrote a chunk's frames (``_Ring``), after the chunk's keys
_AT = struct.Struct("<Q")
#: whether workers write their frames to shared memory (``_Ring``) where the system has
#: it, rather than to the pipe
RINGS = True
#: a worker's trailer: its CPU seconds drawing, framing and writing (``write_chunks``)
_TIMES = struct.Struct("<ddd")
#: documents given to one ``Bucket.set_many_steps`` (a bucket that holds documents
#: already: no cold load): about 32 a vbucket, so that its steps write each vbucket's
#: rows in one go (a third faster than 8 a vbucket)
LOAD_BATCH = 32 * BLOCK
#: rows ``Bucket.set_many_steps`` validates or writes between two yields to trio
#: (about 0.3 and 1.3 ms alone, up to 3 ms while the worker draws on the other core).
STEP_ROWS = 512
#: the worker's pipe: a chunk (about 4 MB) in a few reads
_PIPE_BYTES = 1 << 20
#: chunks read from each worker and not yet installed (a worker draws ahead by up to
#: about 16 MB)
_AHEAD = 4

_Chunk = tuple[list[bytes], list[bytes]]


#: blocks a chunk drawn in the server's process holds (a load below ``WORKER_MIN``): a
#: step of trio's a chunk, drawn and installed in about 5 ms
LOCAL_CHUNK_BLOCKS = 2


def _chunk_count(count: int, blocks: int = CHUNK_BLOCKS) -> int:
    return -(-count // (blocks * BLOCK))


def write_chunks(
    count: int,
    seed: int,
    vbuckets: int,
    out: BinaryIO,
    worker: int = 0,
    workers: int = 1,
    ring: _RingWriter | None = None,
) -> None:
    """A worker's side: chunks ``worker``, ``worker + workers``, ... of ``count``
    documents framed for ``vbuckets`` vbuckets, to ``out``, their frames to ``ring``
    if given (``_Ring``)."""
    generator = DocumentGenerator(seed)
    framing = writing = 0.0
    for number in range(worker, _chunk_count(count), workers):
        began = time.process_time()
        chunk = generator.framed(number * CHUNK_BLOCKS, CHUNK_BLOCKS, count, vbuckets)
        framed = time.process_time()
        out.write(_CHUNK.pack(len(chunk), vbuckets, len(chunk.keys), len(chunk.frames)))
        out.write(chunk.counts.tobytes())
        out.write(chunk.order.tobytes())
        out.write(chunk.sizes.tobytes())
        out.write(chunk.keys)
        if ring is None:
            out.write(chunk.frames)
        else:
            out.write(_AT.pack(ring.place(chunk.frames)))
            out.flush()  # the server reads it now, not with the next chunk
        framing += framed - began
        writing += time.process_time() - framed
    # the trailer: no documents, no vbuckets, and the worker's CPU seconds (``LoadPhases``)
    draw = generator.draw_cpu_s
    out.write(_CHUNK.pack(0, 0, _TIMES.size, 0) + _TIMES.pack(draw, framing - draw, writing))
    out.flush()


class _RingWriter:
    """A worker's side of its ``_Ring``: where each chunk's frames go, after the last
    chunk's or from the start, once the server has installed the chunks there (a byte
    on ``acks`` a chunk installed, in the order written)."""

    def __init__(self, ring: mmap.mmap, acks: int) -> None:
        self.ring = ring
        self.acks = acks
        #: the chunks written and not yet installed: (start, end) each, oldest first
        self.held: list[tuple[int, int]] = []
        self.end = 0

    def place(self, frames: bytes | bytearray | memoryview) -> int:
        """Write ``frames`` to the ring, waiting for room; returns where."""
        size = len(frames)
        if size > len(self.ring):
            raise RuntimeError(f"a chunk of {size} bytes does not fit a ring of {len(self.ring)}")
        at = self.end if self.end + size <= len(self.ring) else 0
        while self.held and any(a < at + size and at < b for a, b in self.held):
            freed = os.read(self.acks, len(self.held))
            if not freed:
                raise RuntimeError("the server stopped installing chunks")
            del self.held[: len(freed)]
        self.ring[at : at + size] = frames
        self.held.append((at, at + size))
        self.end = at + size
        return at


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


def rows_of(chunk: FramedChunk) -> _Chunk:
    """A framed chunk's keys and bodies again, in the order they were drawn (for a
    load that goes through ``Bucket.set_many_steps``)."""
    import numpy as np

    from mockdcp.model import HEAD

    if not len(chunk):
        return [], []
    keys = chunk.keys.split(b"\n")
    klens = np.fromiter(map(len, keys), np.int64, len(keys))[chunk.order]
    ends = np.cumsum(chunk.sizes, dtype=np.int64)
    firsts = ends - chunk.sizes + HEAD + 1 + klens
    frames = bytes(chunk.frames)
    values = [frames[a:b] for a, b in zip(firsts.tolist(), ends.tolist(), strict=True)]
    back = np.argsort(chunk.order, kind="stable")
    return keys, list(_pick(values, back))


@attrs.define
class Workers:
    """Worker processes drawing ``count`` documents of ``seed`` framed for
    ``vbuckets`` vbuckets (``early_worker``), chunk ``i`` from ``processes[i %
    len(processes)]``."""

    count: int
    seed: int
    vbuckets: int
    processes: list[Process]
    #: the shared memory each writes its frames to (``_Ring``; None: the pipe)
    rings: list[_Ring | None] = attrs.field(factory=list)

    def fits(self, count: int, seed: int, vbuckets: int) -> bool:
        return (self.count, self.seed, self.vbuckets) == (count, seed, vbuckets)

    async def stop(self) -> None:
        """Kill the processes still running, and unmap the rings."""
        for process in self.processes:
            await _stop(process)
        for ring in self.rings:
            if ring is not None:
                ring.close()


async def _start_workers(count: int, seed: int, vbuckets: int) -> Workers | None:
    """Worker processes drawing ``count`` documents, or None if none can be started;
    each writes its frames to a ``_Ring`` where the system has them (``RINGS``)."""
    import subprocess

    import trio

    workers = WORKERS if (os.cpu_count() or 1) > 1 else 1
    started = Workers(count, seed, vbuckets, [])
    try:
        for index in range(min(workers, _chunk_count(count))):
            ring = _ring()
            started.rings.append(ring)
            # run as a script, not ``-m``: the package's server is not imported there
            command = [sys.executable, __file__, str(count), str(seed), str(vbuckets)]
            command += [str(index), str(workers), str(-1 if ring is None else ring.fd)]
            if ring is None:
                process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE)
            else:
                process = await trio.lowlevel.open_process(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(ring.fd,)
                )
                assert isinstance(process.stdin, trio.lowlevel.FdStream)
                ring.started(process.stdin.fileno())
            started.processes.append(process)
    except OSError:
        await started.stop()
        return None
    return started


def _ring() -> _Ring | None:
    """A ring for a worker's frames, or None (the pipe) where the system has no memory
    files or will not make one (``RINGS`` off, a limit on descriptors)."""
    if not RINGS or not hasattr(os, "memfd_create"):
        return None
    try:
        return _Ring()
    except OSError:
        return None


@asynccontextmanager
async def early_worker(
    count: int, seed: int, vbuckets: int = 1024
) -> AsyncIterator[Workers | None]:
    """Workers drawing ``count`` documents for a bucket of ``vbuckets`` vbuckets,
    started now, before the server they load (for ``load_documents(worker=...)``:
    their start, about half a second, overlaps the server's), or None below
    ``WORKER_MIN`` documents. Killed on exit if still running."""
    workers = await _start_workers(count, seed, vbuckets) if count >= WORKER_MIN else None
    try:
        yield workers
    finally:
        if workers is not None:
            await workers.stop()


async def _stop(process: Process) -> None:
    import trio

    if process.returncode is None:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


async def _read_worker(
    process: Process,
    send: MemorySendChannel[FramedChunk],
    pool: _Buffers | _Ring,
    phases: LoadPhases | None = None,
) -> None:
    """Move the chunks ``process`` writes into ``send`` as they come (the worker draws
    ahead instead of waiting for the loader to want its next chunk: ``_AHEAD``), each
    chunk's frames read into a buffer of ``pool``; the worker's trailer (its CPU
    seconds) into ``phases``."""
    import numpy as np
    from trio.lowlevel import FdStream

    assert isinstance(process.stdout, FdStream)
    fd, done = process.stdout.fileno(), 0
    async with send:
        while header := await _receive(fd, _CHUNK.size, done, phases, at_end=True):
            n, vbuckets, keys_size, frames_size = _CHUNK.unpack(header)
            if not n and not vbuckets:  # the trailer
                times = _TIMES.unpack(await _receive(fd, keys_size, done, phases))
                if phases is not None:
                    for phase, cpu in zip(("draw", "frame", "write"), times, strict=True):
                        phases.add(phase, None, cpu)
                continue
            columns = await _receive(fd, 4 * (vbuckets + 2 * n), done, phases)
            keys = await _receive(fd, keys_size, done, phases)
            if isinstance(pool, _Ring):  # where in the ring the worker wrote them
                (at,) = _AT.unpack(await _receive(fd, _AT.size, done, phases))
                frames = memoryview(pool.map)[at : at + frames_size]
            else:
                frames = memoryview(pool.take(frames_size))[:frames_size]
                await _receive(fd, frames_size, done, phases, into=frames)
            counts = np.frombuffer(columns, np.uint32, vbuckets)
            order = np.frombuffer(columns, np.uint32, n, 4 * vbuckets)
            sizes = np.frombuffer(columns, np.uint32, n, 4 * (vbuckets + n))
            done += n
            await send.send(FramedChunk(counts, order, sizes, bytes(keys), frames, pool))
    if await process.wait() != 0:
        raise RuntimeError(f"the document worker failed ({process.returncode})")


async def _receive(
    fd: int,
    size: int,
    done: int,
    phases: LoadPhases | None = None,
    *,
    at_end: bool = False,
    into: memoryview | None = None,
) -> bytearray:
    """The next ``size`` bytes of the pipe ``fd`` (non-blocking, as trio opened it),
    read straight into the buffer returned, or into ``into`` (a chunk's frames are
    copied once, by the kernel); empty at the pipe's end if ``at_end`` allows it
    there. The reads' time goes to ``phases`` (``pipe``)."""
    import trio

    wanted = bytearray(size) if into is None else bytearray()
    got = 0
    with memoryview(wanted) if into is None else into[:size] as view:
        while got < size:
            timer = _Timer()
            try:
                read = os.readv(fd, [view[got:]])
            except BlockingIOError:
                timer.lap(phases, "pipe")
                await trio.lowlevel.wait_readable(fd)
                continue
            if not read:
                if at_end and not got:
                    return bytearray()
                raise RuntimeError(f"the document worker stopped after {done} documents")
            got += read
            timer.lap(phases, "pipe")
    return wanted


async def load_documents(
    bucket: Bucket,
    count: int,
    seed: int = 0,
    progress: Callable[[int, int], Any] | None = None,
    *,
    worker: bool | Workers | None = None,
    persist: bool = True,
    phases: LoadPhases | None = None,
) -> int:
    """Load ``count`` generated documents into ``bucket``, yielding to trio after each
    chunk or step; ``progress(done, count)`` after each. Returns ``count``.
    ``worker``: draw them in worker processes (default: from ``WORKER_MIN`` documents
    on; ``Workers``: those ``early_worker`` started, used if they draw for this count,
    seed and number of vbuckets); the bytes are the same either way. ``phases``: where
    a cold load's time went is added to it.

    A running flusher is held during the load (persisting each vbucket after each step
    would cost more than writing). ``persist``: then every vbucket is persisted and the
    flusher released before this returns; without it the flusher stays held, and the
    caller runs ``persist_all`` (which releases it) when it likes: ``mockdcp serve``
    does so after its ready line, as a data node persists what it has acknowledged.

    A bucket that holds documents already takes them through ``Bucket.set_many_steps``,
    whose loaded objects are moved out of the cyclic garbage collector's reach
    (``gc.freeze``, which moves lists, O(1)) after each batch: they live as long as the
    server, and a full collection walking millions of them would stall streaming.
    """
    flusher = bucket.flusher
    holding = flusher.enabled and not flusher.paused
    if holding:
        flusher.pause()
    try:
        done = await _load(bucket, count, seed, progress, worker, phases)
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


async def _chunks(
    count: int,
    seed: int,
    vbuckets: int,
    worker: bool | Workers | None,
    phases: LoadPhases | None = None,
) -> AsyncIterator[FramedChunk]:
    """The framed chunks of ``count`` documents in order: from workers (``worker``'s,
    or started now; drawn here if none can be) or drawn here; the time drawing here,
    reading the pipe and waiting for the workers to ``phases``."""
    import trio

    workers = None
    if isinstance(worker, Workers):
        if worker.fits(count, seed, vbuckets):
            workers = worker
        else:  # started for another bucket: not these documents' frames
            await worker.stop()
    if workers is None and (worker is True or (worker is None and count >= WORKER_MIN)):
        workers = await _start_workers(count, seed, vbuckets)
    if workers is None:
        generator, blocks = DocumentGenerator(seed), LOCAL_CHUNK_BLOCKS
        for number in range(_chunk_count(count, blocks)):
            timer = _Timer()
            chunk = generator.framed(number * blocks, blocks, count, vbuckets)
            timer.lap(phases, "frame")
            yield chunk
            await trio.lowlevel.checkpoint()
        if phases is not None:  # the draws were the framing's first part
            phases.add("draw", generator.draw_cpu_s, generator.draw_cpu_s)
            phases.add("frame", -generator.draw_cpu_s, -generator.draw_cpu_s)
        return
    processes = workers.processes
    try:
        async with trio.open_nursery() as nursery:
            receives = []
            pool = _Buffers()
            for process, ring in zip(processes, workers.rings, strict=True):
                send, receive = trio.open_memory_channel[FramedChunk](_AHEAD)
                nursery.start_soon(_read_worker, process, send, ring or pool, phases)
                receives.append(receive)
            for number in range(_chunk_count(count)):
                timer = _Timer()
                try:
                    chunk = await receives[number % len(processes)].receive()
                except trio.EndOfChannel:
                    raise RuntimeError(f"the document workers stopped at chunk {number}") from None
                timer.lap(phases, "wait")
                yield chunk
    finally:
        await workers.stop()


async def _load(
    bucket: Bucket,
    count: int,
    seed: int,
    progress: Callable[[int, int], Any] | None,
    worker: bool | Workers | None,
    phases: LoadPhases | None = None,
) -> int:
    import trio

    done = 0
    cold = _cold_load(bucket)
    # The cyclic collector is off for a large load: it would walk the batches' rows,
    # and every item made, again and again meanwhile (a tenth of the load's time). A
    # small load leaves it alone: with it off, a server of 2,000 documents peaked 30
    # MiB higher under 200 consumers afterwards (tests/bench/test_many_consumers.py).
    collecting = gc.isenabled()
    if count >= WORKER_MIN or worker:
        gc.disable()
    try:
        chunks = _chunks(count, seed, len(bucket.vbuckets), worker, phases)
        async with aclosing(chunks):  # type: ignore[type-var]
            if cold is not None:
                async for chunk in chunks:
                    timer = _Timer()
                    keys = chunk.keys.split(b"\n") if len(chunk) else []
                    frames = chunk.frames
                    if isinstance(frames, bytes):
                        frames = bytearray(frames)
                    timer.lap(phases, "keys")
                    done += cold.add_frames(frames, keys, chunk.counts, chunk.order, chunk.sizes)
                    del keys, frames
                    chunk.done()
                    del chunk
                    timer.lap(phases, "chunks")
                    if progress is not None:
                        progress(done, count)
                    await trio.lowlevel.checkpoint()
            else:
                async for keys, values in _batches(chunks):
                    steps = bucket.set_many_steps(
                        keys, values, datatypes=JSON, rows_per_step=STEP_ROWS
                    )
                    await trio.lowlevel.checkpoint()
                    for written in steps:
                        done += written
                        if progress is not None and written:
                            progress(done, count)
                        await trio.lowlevel.checkpoint()
                    del keys, values, steps
                    gc.freeze()
        if cold is not None:
            timer = _Timer()
            for step in cold.finish_steps():  # -1: the columns; a vbucket id: its segment
                timer.lap(phases, "gather" if step < 0 else "index")
                await trio.lowlevel.checkpoint()
                timer = _Timer()
            timer.lap(phases, "install")
    finally:
        if collecting:
            gc.enable()
    if cold is not None:
        # the batches' holes go back to the system; glibc's malloc_trim walks the heap
        # (about 50 ms after a million documents over 1024 vbuckets): in a thread, the
        # event loop going on meanwhile
        timer = _Timer()
        await trio.to_thread.run_sync(release_freed_memory)
        timer.lap(phases, "trim")
    return done


async def _batches(chunks: AsyncIterator[FramedChunk]) -> AsyncIterator[_Chunk]:
    """``chunks``' rows joined into batches of ``LOAD_BATCH`` documents (the last one
    less), in the order they were drawn."""
    keys: list[bytes] = []
    values: list[bytes] = []
    async for chunk in chunks:
        chunk_keys, chunk_values = rows_of(chunk)
        chunk.done()
        keys += chunk_keys
        values += chunk_values
        if len(keys) >= LOAD_BATCH:
            yield keys, values
            keys, values = [], []
    if keys:
        yield keys, values


def _cold_load(bucket: Bucket) -> ColdLoad | None:
    """A cold load into ``bucket`` if it holds no document yet (a generated corpus is
    then its persisted disk, as a warmed-up node holds one: ``Bucket.cold_load``);
    ``None``: the documents go through ``set_many`` into memory."""
    try:
        return bucket.cold_load()
    except ModelError:
        return None


def main(argv: list[str]) -> int:
    """``python mockdcp/data/_dataset.py COUNT SEED VBUCKETS WORKER WORKERS RING``: a
    worker (``write_chunks``), its frames to the memory file ``RING`` (a descriptor;
    -1: to the pipe), told on stdin when it has room again (``_RingWriter``)."""
    count, seed, vbuckets, worker, workers, ring_fd = map(int, argv)
    # A lower priority than the server's (``WORKER_NICE``)
    with suppress(AttributeError, OSError):
        os.nice(WORKER_NICE)
    # a chunk's objects die with it and hold no cycles: the cyclic collector would only
    # walk them (about a tenth of a worker's time)
    gc.disable()
    try:  # Linux: a larger pipe, fewer wake-ups of the reader
        import fcntl

        fcntl.fcntl(sys.stdout.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass
    ring = None
    if ring_fd >= 0:
        ring = _RingWriter(mmap.mmap(ring_fd, 0), sys.stdin.fileno())
        os.close(ring_fd)
    write_chunks(count, seed, vbuckets, sys.stdout.buffer, worker, workers, ring)
    return 0


if __name__ == "__main__":
    del sys.path[0]  # this file's directory: its modules are not top-level ones
    raise SystemExit(main(sys.argv[1:]))
