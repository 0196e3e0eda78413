"""The cold tier: a bulk-loaded corpus kept in columns, as a data node keeps it on disk.

A real node after a bulk load has flushed its checkpoints to disk and expelled them, and
keeps about 56 bytes of metadata per item in memory beside key and value (kv_engine
``docs/Durability.md`` and ``StoredValue``: the hash table's stored values). mockdcp
kept a Python object per item (a slotted ``Item``, two bytes objects for its frame, a
hash-table entry, checkpoint and on-disk entries): about 520 bytes beyond key and value.
A ``ColdSegment`` holds a vbucket's bulk-loaded documents without any object per item:

* ``buf``: one buffer (bytes, or the anonymous memory map a bulk load wrote: slicing
  either gives bytes), each item's canonical frame (``Item.wire``: the DCP_MUTATION
  header and extras, or a tombstone's V1 DCP_DELETION ones, the LEB128 collection
  prefix, key, value) one after the other in seqno order; ``starts`` (int64, one more
  than the items) their offsets. The items' seqnos are consecutive (``first_seqno`` +
  slot); CAS, rev seqno, flags, expiry and datatype are read from the frame when an
  item is needed;
* ``cids`` (uint32) and ``tags`` (uint8, ``Item.tag``: which slots are tombstones,
  deletions or expiries) beside them, for stream filters and value forms, and
  ``delete_times`` (uint32) when the segment holds tombstones (a V1 deletion carries
  none; V2 deletions and expirations do);
* a key index: ``hashes`` (a 64-bit hash of (collection, key), sorted) and ``order``
  (the slot of each), searched with ``numpy.searchsorted`` and checked against the key
  bytes in ``buf`` (two keys with one hash are told apart there);
* ``later``: the slots an item later in the segment replaced (the same key loaded twice)
  and the seqno of the replacing item, so a cut below that seqno brings them back.

The segment never changes once loaded; each copy of the vbucket (the active, a replica,
a moved copy) holds a ``ColdView`` of it: how far it holds the segment (``upto``: a
truncate cuts it) and which slots are still its newest persisted version of their key
(``alive``, one byte a slot). A slot dies when a newer version of its key is persisted
(the hot tier's item replaces it on disk), when a truncate cuts below it, or, for a
tombstone, when a purge reaches it; it comes back when a truncate cuts that newer
version away (a purged tombstone stays purged).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import mmap
import struct
from array import array
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, overload

import numpy as np

from mockdcp.model._item import (
    TAG_COLLECTION,
    TAG_EMPTY,
    TAG_EXPIRATION,
    TAG_TOMBSTONE,
    Item,
    ItemKind,
)
from mockdcp.protocol import collection_prefix

if TYPE_CHECKING:
    from typing import TypeAlias

    from numpy.typing import NDArray

    #: ``ColdView.frames``: heads, tails, tags, collection ids and canonical sizes
    ColdFrames: TypeAlias = tuple[
        "ColdPieces", "ColdPieces", bytes, NDArray[np.uint32], NDArray[np.int64]
    ]
    #: a column of offsets and a number of bytes to add to each, added on first use
    Shifted: TypeAlias = tuple[NDArray[np.int64], int]

#: the header and DCP_MUTATION extras of a frame (``MUTATION_FRAME``)
HEAD = 55
#: the header and extras of a tombstone's frame (a V1 DCP_DELETION: by seqno, rev seqno,
#: no meta; kv_engine docs/dcp/documentation/commands/deletion.md), whatever its kind
DELETION_HEAD = 42
#: the frame's header fields, big-endian, as numpy lays them out (``MUTATION_FRAME``)
HEAD_DTYPE = np.dtype(
    [
        ("magic", "u1"),
        ("opcode", "u1"),
        ("keylen", ">u2"),
        ("extlen", "u1"),
        ("datatype", "u1"),
        ("vbucket", ">u2"),
        ("bodylen", ">u4"),
        ("opaque", ">u4"),
        ("cas", ">u8"),
        ("seqno", ">u8"),
        ("rev", ">u8"),
        ("flags", ">u4"),
        ("expiry", ">u4"),
        ("lock", ">u4"),
        ("nmeta", ">u2"),
        ("nru", "u1"),
    ]
)
assert HEAD_DTYPE.itemsize == HEAD


#: a tombstone's header and extras (a V1 DCP_DELETION), as numpy lays them out
DELETION_DTYPE = np.dtype([*HEAD_DTYPE.descr[:11], ("nmeta", ">u2")])
assert DELETION_DTYPE.itemsize == 42


def head_dtype(with_prefix: bool, deletion: bool = False) -> np.dtype[np.void]:
    """``HEAD_DTYPE`` (``DELETION_DTYPE`` for tombstones), with a one-byte collection
    prefix (``prefix``) after it when ``with_prefix``: a bulk load frames a batch whose
    collection ids are all below 128 with one piece fewer a frame."""
    return _HEADS[with_prefix, deletion]


_HEADS = {
    (prefix, deletion): np.dtype(
        [*(DELETION_DTYPE if deletion else HEAD_DTYPE).descr, *([("prefix", "u1")] * prefix)]
    )
    for prefix in (False, True)
    for deletion in (False, True)
}


#: what holds a segment's frames: bytes, or the memory map a bulk load wrote them to
#: (slicing either gives bytes)
FrameBuffer = bytes | mmap.mmap
#: the fields of a frame's head an item needs (``MUTATION_FRAME`` without magic and the
#: lengths that follow from the slot)
_FIELDS = struct.Struct(">2xHxBHIIQQQII")
#: a tombstone's (no flags, no expiry: the deletion's extras end with the rev seqno)
_DELETION_FIELDS = struct.Struct(">2xHxBHIIQQQ")
#: the byte offset of the rev seqno in a frame (a mutation's or a tombstone's)
REV_AT = 32
#: the byte offset of a mutation's expiry in its frame (``_FIELDS``)
_EXPIRY_AT = 44


def head_lengths(tags: NDArray[np.uint8]) -> NDArray[np.int64]:
    """The length of each frame's header and extras, from its tag: a tombstone's is a
    deletion's."""
    out: NDArray[np.int64] = np.where(tags & TAG_TOMBSTONE, DELETION_HEAD, HEAD).astype(np.int64)
    return out


#: a multiplier spreading collection ids over the hash (the 64-bit golden ratio)
_SPREAD = np.uint64(0x9E3779B97F4A7C15)
_SIGNED = 1 << 63


def key_hash(collection_id: int, key: bytes) -> int:
    """The index's hash of (collection, key): ``hash(key)`` mixed with the collection,
    as a signed 64-bit integer (``key_hashes`` in bulk; the process's hash seed, so an
    index lives in one process)."""
    mixed = (hash(key) ^ (collection_id * 0x9E3779B97F4A7C15)) & 0xFFFFFFFFFFFFFFFF
    return mixed - (1 << 64) if mixed >= _SIGNED else mixed


def key_hashes(keys: Sequence[bytes], cids: NDArray[np.uint32]) -> NDArray[np.int64]:
    """``key_hash`` of every (collection, key), with numpy for the mixing."""
    hashed = np.fromiter(map(hash, keys), np.int64, len(keys)).view(np.uint64)
    with np.errstate(over="ignore"):
        mixed = hashed ^ (cids.astype(np.uint64) * _SPREAD)
    out: NDArray[np.int64] = mixed.view(np.int64)
    return out


class ColdSegment:
    """One vbucket's bulk-loaded documents (see the module docstring); immutable."""

    __slots__ = (
        "buf",
        "cids",
        "count",
        "delete_times",
        "first_seqno",
        "hashes",
        "later",
        "later_seqnos",
        "order",
        "starts",
        "tags",
        "vbid",
    )

    #: the key index's hash (a persisted index needs another: ``_disk_segment``)
    hash_of = staticmethod(key_hash)
    #: the frames: bytes, an anonymous map (a bulk load's), or a read-only map of a file
    buf: FrameBuffer
    #: ``buf`` maps a file (``_disk_segment``): a backfill gives back the pages it read
    #: (never an anonymous map's: ``MADV_DONTNEED`` would discard its frames)
    file_backed = False

    def __init__(
        self,
        vbid: int,
        first_seqno: int,
        buf: FrameBuffer,
        starts: NDArray[np.int64],
        cids: NDArray[np.uint32],
        tags: NDArray[np.uint8],
        hashes: NDArray[np.int64],
        delete_times: NDArray[np.uint32] | None = None,
    ) -> None:
        self.vbid = vbid
        self.first_seqno = first_seqno
        self.count = len(cids)
        self.buf = buf
        self.starts = starts
        self.cids = cids
        self.tags = tags
        #: each slot's delete time (its tombstone's; None: the segment holds none)
        self.delete_times = delete_times
        order = np.argsort(hashes, kind="stable").astype(np.int32)
        self.order = order
        self.hashes = hashes[order]
        #: slots a later slot of the same key replaced, and the replacing seqnos
        self.later, self.later_seqnos = self._replaced()

    @property
    def last_seqno(self) -> int:
        return self.first_seqno + self.count - 1

    def nbytes(self) -> int:
        """The segment's bytes: frames, offsets, columns, index."""
        arrays = (self.starts, self.cids, self.tags, self.hashes, self.order, self.later)
        times = 0 if self.delete_times is None else self.delete_times.nbytes
        return len(self.buf) + sum(a.nbytes for a in arrays) + self.later_seqnos.nbytes + times

    def key_value_bytes(self) -> int:
        """The bytes of the segment's keys and values (its frames less their headers
        and collection prefixes)."""
        prefixes = sum(len(collection_prefix(int(c))) for c in self.cids.tolist())
        return int(self.starts[-1]) - int(head_lengths(self.tags).sum()) - prefixes

    def _replaced(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The slots whose key a later slot loaded again (equal hashes are neighbours in
        the index; their keys are compared), with the seqno of the next version."""
        h = self.hashes
        same = np.flatnonzero(h[1:] == h[:-1])
        if not len(same):
            empty = np.zeros(0, np.int64)
            return empty, empty.copy()
        later: dict[int, int] = {}
        for group in _runs(same):
            slots = sorted(int(s) for s in self.order[group[0] : group[-1] + 2])
            by_key: dict[tuple[int, bytes], int] = {}
            for slot in slots:
                doc = (int(self.cids[slot]), self.key_at(slot))
                previous = by_key.get(doc)
                if previous is not None:
                    later[previous] = self.first_seqno + slot
                by_key[doc] = slot
        keys = np.array(sorted(later), np.int64)
        seqnos = np.array([later[int(s)] for s in keys], np.int64)
        return keys, seqnos

    # -- one slot -------------------------------------------------------------------------

    def head_at(self, slot: int) -> int:
        """The length of the slot's header and extras."""
        return DELETION_HEAD if int(self.tags[slot]) & TAG_TOMBSTONE else HEAD

    def release_pages(self) -> None:
        """Give back the pages of mapped files (``DiskSegment``); nothing to do for a
        segment in memory."""

    def key_at(self, slot: int) -> bytes:
        start = int(self.starts[slot])
        klen = self.buf[start + 2] << 8 | self.buf[start + 3]
        plen = len(collection_prefix(int(self.cids[slot])))
        start += self.head_at(slot)
        return self.buf[start + plen : start + klen]

    def slots_of(self, collection_id: int, key: bytes) -> Iterator[int]:
        """The slots holding ``key`` of the collection, oldest first."""
        h = self.hash_of(collection_id, key)
        i = int(np.searchsorted(self.hashes, h))
        found = []
        while i < self.count and int(self.hashes[i]) == h:
            slot = int(self.order[i])
            if int(self.cids[slot]) == collection_id and self.key_at(slot) == key:
                found.append(slot)
            i += 1
        return iter(sorted(found))

    def item(self, slot: int) -> Item:
        """The slot as an ``Item`` (a new object: made only when a rule needs one)."""
        buf, start, end = self.buf, int(self.starts[slot]), int(self.starts[slot + 1])
        tag = int(self.tags[slot])
        head = HEAD
        kind, delete_time = ItemKind.MUTATION, 0
        if tag & TAG_TOMBSTONE:
            head = DELETION_HEAD
            kind = ItemKind.EXPIRATION if tag & TAG_EXPIRATION else ItemKind.DELETION
            assert self.delete_times is not None
            delete_time = int(self.delete_times[slot])
            klen, dt, vbid, _body, _opaque, cas, seqno, rev = _DELETION_FIELDS.unpack_from(
                buf, start
            )
            flags = expiry = 0
        else:
            klen, dt, vbid, _body, _opaque, cas, seqno, rev, flags, expiry = _FIELDS.unpack_from(
                buf, start
            )
        cid = int(self.cids[slot])
        plen = len(collection_prefix(cid))
        item = Item.__new__(Item)
        item.key = buf[start + head + plen : start + head + klen]
        item.collection_id = cid
        item.vbucket = vbid
        item.seqno = seqno
        item.rev_seqno = rev
        item.cas = cas
        item.flags = flags
        item.expiry = expiry
        item.datatype = dt
        item.kind = kind
        item.delete_time = delete_time
        item.forms = None
        item.tag = tag
        item.head = buf[start : start + head + (plen if cid else 0)]
        item.tail = buf[start + head + plen : end]
        return item

    def last_slots(self, held: int) -> tuple[list[int], list[int]]:
        """The collections of the first ``held`` slots and the last slot of each."""
        cids = self.cids[:held]
        # the last slot of each collection: unique over the reversed column
        found, back = np.unique(cids[::-1], return_index=True)
        return found.tolist(), (held - 1 - back).tolist()

    # -- views ------------------------------------------------------------------------------

    def alive_upto(self, upto: int) -> NDArray[np.bool_]:
        """Each slot's liveness for a copy holding the segment up to seqno ``upto``: at or
        below it, and not replaced by a later slot at or below it."""
        alive = np.zeros(self.count, np.bool_)
        alive[: max(0, min(self.count, upto - self.first_seqno + 1))] = True
        if len(self.later):
            alive[self.later[self.later_seqnos <= upto]] = False
        return alive


def _runs(positions: NDArray[np.intp]) -> list[list[int]]:
    """``positions`` (sorted) in runs of consecutive values."""
    runs: list[list[int]] = []
    for p in positions.tolist():
        if runs and runs[-1][-1] == p - 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


#: the most slots a read ``ColdView`` keeps has (41 bytes a slot: its seqno, its head's
#: end, its tail's start, its size, its offset and its tag, and about a kilobyte a read:
#: at most 12 MB over 1,024 vbuckets, 5 MB for ``serve --docs 100000``); a longer
#: read's numpy calls are a small part of its stream's cost
_KEPT_READ = 256

#: the tag bytes without TAG_TOMBSTONE, and those without TAG_COLLECTION: what
#: ``bytes.translate`` deletes to find a tombstone, or a document outside ``_default``,
#: among a read's tags in one C loop
_LIVE = bytes(t for t in range(256) if not t & TAG_TOMBSTONE)
_DEFAULT = bytes(t for t in range(256) if not t & TAG_COLLECTION)
#: the tags of live frames of the default collection (``_pieces``: a head of ``HEAD``)
_PLAIN = bytes(t for t in range(256) if not t & (TAG_TOMBSTONE | TAG_COLLECTION))


class ColdView:
    """One copy's hold on a ``ColdSegment``: the slots it holds (``upto``), which are
    its newest persisted version of their key (``alive``), and the collections flushed
    since (their slots stay on disk, out of the hash table, as kv_engine's logically
    deleted items until compaction)."""

    __slots__ = ("_kept", "_whole", "alive", "flushed", "segment", "upto")

    def __init__(self, segment: ColdSegment, upto: int, purged: int = 0) -> None:
        self.segment = segment
        self.upto = min(upto, segment.last_seqno)
        #: changed by this class's methods alone: each forgets the kept read (``read``)
        #: and that every slot is alive (``_whole``: ``_changed``)
        self.alive = segment.alive_upto(self.upto)
        #: every slot is alive (a loaded vbucket's view until its first change): a read
        #: need not count them (``read``)
        self._whole = bool(self.alive.all())
        self.flushed: set[int] = set()
        #: the last short read of a run (``read``): its after_seqno, seqnos and frames
        self._kept: tuple[int, array[int], ColdFrames] | None = None
        if purged:  # a copy cut back (truncate) keeps purged tombstones purged
            self.purge(purged)

    def purge(self, upto: int) -> tuple[int, int]:
        """The alive tombstones at or below seqno ``upto`` leave (compaction purged
        them, as ``VBucket.purge`` does the hot disk's); returns how many, and the
        highest seqno purged (0 if none)."""
        seg = self.segment
        held = max(0, min(self.upto, upto) - seg.first_seqno + 1)
        tombs = np.flatnonzero(self.alive[:held] & ((seg.tags[:held] & TAG_TOMBSTONE) != 0))
        if not len(tombs):
            return 0, 0
        self.alive[tombs] = False
        self._changed()
        return len(tombs), seg.first_seqno + int(tombs[-1])

    def _changed(self) -> None:
        """A slot left the view: the kept read and ``_whole`` no longer hold."""
        self._kept, self._whole = None, False

    def tombstones_by_age(self, before: float) -> tuple[float, float]:
        """The lowest seqno of an alive tombstone deleted before ``before``, and of one
        deleted at or after it (``inf`` for none): compaction's purge by age."""
        seg = self.segment
        if seg.delete_times is None:
            return math.inf, math.inf
        held = max(0, self.upto - seg.first_seqno + 1)
        tombs = np.flatnonzero(self.alive[:held] & ((seg.tags[:held] & TAG_TOMBSTONE) != 0))
        old = seg.delete_times[tombs] < before
        first_old, first_young = np.flatnonzero(old), np.flatnonzero(~old)
        return (
            seg.first_seqno + int(tombs[first_old[0]]) if len(first_old) else math.inf,
            seg.first_seqno + int(tombs[first_young[0]]) if len(first_young) else math.inf,
        )

    def find(self, collection_id: int, key: bytes) -> int:
        """The slot of the key's live version in this copy, or -1."""
        for slot in self.segment.slots_of(collection_id, key):
            if self.alive[slot]:
                return slot
        return -1

    def get(self, collection_id: int, key: bytes) -> Item | None:
        """The key's version in the hash table's view: alive, its collection not
        flushed since."""
        if collection_id in self.flushed:
            return None
        slot = self.find(collection_id, key)
        return None if slot < 0 else self.segment.item(slot)

    def kill(self, collection_id: int, key: bytes) -> None:
        """A newer version of the key is persisted: its slot leaves the disk."""
        slot = self.find(collection_id, key)
        if slot >= 0:
            self.alive[slot] = False
            self._changed()

    def candidates(self, docs: Sequence[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """The (collection, key) pairs of ``docs`` the segment may hold: those whose
        index hash it has, found for a batch at once with numpy (a key per lookup cost
        about 3 µs a write in ``mockdcp bench``); all of them for a segment whose index
        has another hash (``_disk_segment``) or a short batch."""
        seg = self.segment
        if len(docs) < 16 or seg.hash_of is not key_hash or not seg.count:
            return list(docs)
        hashes = key_hashes([k for _, k in docs], np.fromiter((c for c, _ in docs), np.uint32))
        at = np.minimum(np.searchsorted(seg.hashes, hashes), seg.count - 1)
        hits: list[int] = np.flatnonzero(seg.hashes[at] == hashes).tolist()
        return [docs[i] for i in hits]

    def kill_collection(self, collection_id: int) -> None:
        self.alive[self.segment.cids == collection_id] = False
        self._changed()

    def retain(self, alive: NDArray[np.bool_], first: int = 0) -> None:
        """Only the slots from ``first`` on that ``alive`` says are alive stay so (a
        compaction's view, its slots' liveness carried over from the view before)."""
        self.alive[first : first + len(alive)] &= alive
        self._changed()

    @staticmethod
    def joined(below: Sequence[bytes], cold: ColdPieces, above: Sequence[bytes]) -> Sequence[bytes]:
        """``joined_pieces``, for a reader that has the view and not this module (the
        disk store, which imports it lazily: an import statement a backfill cost 2 µs)."""
        return joined_pieces(below, cold, above)

    def live_slots(self, after_seqno: int = 0) -> NDArray[np.intp]:
        """The alive slots above seqno ``after_seqno``, in seqno order."""
        first = max(0, after_seqno - self.segment.first_seqno + 1)
        out: NDArray[np.intp] = np.flatnonzero(self.alive[first:]) + first
        return out

    def expiring(self, by: float) -> list[Item]:
        """The hash table's view of the alive documents (tombstones left out, flushed
        collections too) whose expiry is set and at or before ``by``, in seqno order:
        the expiry pager's read of the cold tier, the expiries read from the frames at
        once rather than an item made per slot."""
        seg = self.segment
        slots = self.live_slots()
        slots = slots[(seg.tags[slots] & TAG_TOMBSTONE) == 0]
        if self.flushed:
            slots = slots[~np.isin(seg.cids[slots], np.array(sorted(self.flushed), np.uint32))]
        if not len(slots):
            return []
        raw = np.frombuffer(seg.buf, np.uint8)
        at = seg.starts[slots] + _EXPIRY_AT
        expiry = np.zeros(len(slots), np.uint64)
        for i in range(4):  # big-endian uint32
            expiry = (expiry << np.uint64(8)) | raw[at + i].astype(np.uint64)
        due = slots[(expiry > 0) & (expiry <= by)]
        return [seg.item(s) for s in due.tolist()]

    def items(self) -> Iterator[Item]:
        """The hash table's view of the alive slots (not flushed), in seqno order."""
        seg = self.segment
        slots = self.live_slots()
        if self.flushed:
            keep = ~np.isin(seg.cids[slots], np.array(sorted(self.flushed), np.uint32))
            slots = slots[keep]
        return (seg.item(s) for s in slots.tolist())

    def read(self, after_seqno: int) -> tuple[array[int], ColdFrames]:
        """A backfill's read of the cold tier after ``after_seqno``: the seqnos of its
        alive slots and their ``frames``. When every slot from there on is alive (a
        loaded vbucket's usual read) they are a run, read as the columns' slices without
        the slots' array (``live_slots``) made first: a stream of a vbucket of a few
        documents pays for each numpy call it makes (about a microsecond each, most of
        its read's cost). A run of at most ``_KEPT_READ`` slots is kept, and the next
        read from the same seqno is given it again until a slot leaves (every stream of
        a loaded vbucket reads it from 0: 25 of the µs a stream of a hundred documents
        cost over the default 1,024 vbuckets, each vbucket's columns read from memory,
        not the cache; nothing in a read is changed by its readers)."""
        kept = self._kept
        if kept is not None and kept[0] == after_seqno:
            return kept[1], kept[2]
        seg = self.segment
        first = max(0, after_seqno - seg.first_seqno + 1)
        count = max(0, seg.count - first)
        if not self._whole:  # (every slot alive: nothing to slice or count)
            alive = self.alive[first:]
            if np.count_nonzero(alive) != count:  # (``all()``: 0.64 against 0.23 µs)
                slots = np.flatnonzero(alive) + first
                seqnos = (slots + seg.first_seqno).astype(np.int64, copy=False)
                return array("q", seqnos.tobytes()), self.frames(slots)
        low = seg.first_seqno + first
        frames = self._run(first, count)
        # (numpy's range and its bytes: 0.7 µs for a hundred, ``array`` of a range 4.8)
        run = array("q", np.arange(low, low + count, dtype=np.int64).tobytes())
        if count <= _KEPT_READ:
            self._kept = (after_seqno, run, frames)
        return run, frames

    def frames(self, slots: NDArray[np.intp]) -> ColdFrames:
        """The frames of ``slots`` in two pieces (``Item.head``, ``Item.tail``: lazy,
        ``ColdPieces``), their tags, collection ids and canonical sizes: a backfill's
        read, without an item object and without a copy of a frame."""
        count = len(slots)
        if count and int(slots[-1]) - int(slots[0]) == count - 1:
            # one run of slots (no newer version or deletion among them: usually): the
            # columns' slices, no gather (a few frames' read paid a microsecond a gather)
            return self._run(int(slots[0]), count)
        seg = self.segment
        return self._pieces(
            seg.starts[slots], seg.starts[slots + 1], seg.cids[slots], seg.tags[slots], False
        )

    def _run(self, first: int, count: int) -> ColdFrames:
        """``frames`` of the run of ``count`` slots from ``first``: each frame ends where
        the next begins (``ColdPieces.adjacent``)."""
        seg = self.segment
        starts = seg.starts
        if first == 0 and count == seg.count:  # the whole segment: its columns as they are
            return self._pieces(starts[:-1], starts[1:], seg.cids, seg.tags, bool(count))
        return self._pieces(
            starts[first : first + count],
            starts[first + 1 : first + count + 1],
            seg.cids[first : first + count],
            seg.tags[first : first + count],
            bool(count),
        )

    def _pieces(
        self,
        starts: NDArray[np.int64],
        ends: NDArray[np.int64],
        cids: NDArray[np.uint32],
        tags: NDArray[np.uint8],
        adjacent: bool,
    ) -> ColdFrames:
        """``frames`` of the frames between ``starts`` and ``ends`` (their columns)."""
        seg = self.segment
        tag_bytes = tags.tobytes()
        cut: NDArray[np.int64] | Shifted
        resume: NDArray[np.int64] | Shifted
        if not tag_bytes.translate(None, _PLAIN):
            # all live, all in _default: head, prefix, tail, each head as long; where
            # they end is left to the first that asks (a collection-aware stream copies
            # whole frames: its first read of a vbucket of ten documents was a third
            # numpy calls that made columns it never read)
            cut, resume = (starts, HEAD), (starts, HEAD + 1)
        else:
            heads = starts + (head_lengths(tags) if tag_bytes.translate(None, _LIVE) else HEAD)
            if not tag_bytes.translate(None, _DEFAULT):  # all in _default: head, prefix, tail
                cut = heads
                resume = cut + 1
            else:
                plens = np.array([len(collection_prefix(int(c))) for c in cids.tolist()], np.int64)
                cut = heads + np.where(cids != 0, plens, 0)
                resume = heads + plens
        sizes = ends - starts  # (int64: what a backfill sums to its frames' ends)
        release = seg.file_backed
        return (
            ColdPieces(seg.buf, starts, cut, ends, release=release, adjacent=adjacent),
            ColdPieces(seg.buf, resume, ends, ends, release=release, adjacent=adjacent),
            tag_bytes,
            cids,
            sizes,
        )


def _summed(column: NDArray[np.int64] | Shifted) -> NDArray[np.int64]:
    """A ``ColdPieces`` column as it is, or a ``Shifted`` one's sum."""
    return column[0] + column[1] if isinstance(column, tuple) else column


class ColdPieces(Sequence[bytes]):
    """The heads (or tails) of cold frames, read from the segment's buffer only when
    iterated or indexed: a backfill of a million cold items keeps no copy of them, and
    an encoder copies a chunk of them at a time (``frames``). ``starts``/``stops``
    bound each piece in ``buf``; ``frame_ends`` is where each whole canonical frame ends
    (the frame of head ``i`` is ``buf[heads.starts[i]:heads.frame_ends[i]]``).
    ``adjacent``: each frame ends where the next begins (a run of slots, ``frames``),
    so the whole frames are one slice of ``buf``."""

    __slots__ = ("_offsets", "_starts", "_stops", "adjacent", "buf", "frame_ends", "release")

    def __init__(
        self,
        buf: FrameBuffer,
        starts: NDArray[np.int64] | Shifted,
        stops: NDArray[np.int64] | Shifted,
        frame_ends: NDArray[np.int64],
        *,
        release: bool = False,
        adjacent: bool = False,
    ) -> None:
        self.buf = buf
        #: ``starts`` and ``stops``: a column, or one to add a number of bytes to, made
        #: on first use (``Shifted``)
        self._starts = starts
        self._stops = stops
        self.frame_ends = frame_ends
        #: ``buf`` maps a file: pages copied out are given back (``_release_pages``)
        self.release = release
        self.adjacent = adjacent
        self._offsets: array[int] | None = None

    @property
    def starts(self) -> NDArray[np.int64]:
        """Where each piece starts in ``buf``."""
        self._starts = starts = _summed(self._starts)
        return starts

    @property
    def stops(self) -> NDArray[np.int64]:
        """Where each piece ends in ``buf``."""
        self._stops = stops = _summed(self._stops)
        return stops

    def __len__(self) -> int:
        return len(self.frame_ends)

    def frame_offsets(self) -> array[int]:
        """Where each whole frame ends in ``joined_frames``: an ``array("q")``, made once
        (the pieces of a read ``ColdView`` keeps serve every stream of their vbucket)."""
        offsets = self._offsets
        if offsets is None:
            if self.adjacent and len(self.frame_ends):
                low = int(self.starts[0])  # (0 for a loaded segment's first read)
                ends = self.frame_ends - low if low else self.frame_ends
            else:
                ends = np.cumsum(self.frame_ends - self.starts)
            offsets = self._offsets = array("q", ends.tobytes())
        return offsets

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> ColdPieces: ...

    def __getitem__(self, index: int | slice) -> bytes | ColdPieces:
        if isinstance(index, slice):
            stop, whole = index.stop, len(self.frame_ends)
            if not index.start and index.step is None and (stop is None or stop >= whole):
                return self  # the whole (an encoder's piece of a short backfill)
            return ColdPieces(
                self.buf,
                self.starts[index],
                self.stops[index],
                self.frame_ends[index],
                release=self.release,
                adjacent=self.adjacent and index.step in (None, 1),
            )
        return self.buf[int(self.starts[index]) : int(self.stops[index])]

    def take(self, positions: Sequence[int]) -> ColdPieces:
        """The pieces at ``positions``, still lazy."""
        at = np.asarray(positions, np.int64)
        return ColdPieces(
            self.buf, self.starts[at], self.stops[at], self.frame_ends[at], release=self.release
        )

    def joined_frames(self) -> bytearray:
        """The whole canonical frames these heads begin, one after the other: one copy
        of each run of frames that lie one after the other in the buffer (of them all
        at once for ``adjacent`` frames: a backfill of a vbucket's hundred cold frames
        took 11.5 µs with the runs found by numpy, 3 µs as one slice)."""
        starts, ends = self.starts, self.frame_ends
        count = len(starts)
        if not count:
            return bytearray()
        if self.adjacent:
            low, high = int(starts[0]), int(ends[-1])
            return joined_slices(self.buf, [low], [high], release=self.release)
        if count < _FEW_PIECES:  # a slice a frame: numpy's calls would cost more
            return joined_slices(self.buf, starts.tolist(), ends.tolist(), release=self.release)
        breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
        lows = np.empty(len(breaks) + 1, np.int64)
        lows[0], lows[1:] = starts[0], starts[breaks]
        highs = np.empty(len(breaks) + 1, np.int64)
        highs[:-1], highs[-1] = ends[breaks - 1], ends[-1]
        view = memoryview(self.buf)
        out = bytearray().join(
            [view[a:b] for a, b in zip(lows.tolist(), highs.tolist(), strict=True)]
        )
        view.release()
        if self.release:
            _release_pages(self.buf, int(lows[0]), int(highs[-1]))
        return out

    def joined_with(self, tails: ColdPieces) -> bytearray:
        """These heads and ``tails`` one after the other (head, tail, head, ...): a
        legacy stream's frames, the collection prefix between them left out. A tail and
        the next head that lie one after the other in the buffer are one piece, so a
        frame costs one piece (half of cutting heads and tails apart), and the pieces are
        copied by ``copy_pieces``."""
        count = len(self.frame_ends)
        if not count:
            return bytearray()
        if count < _FEW_PIECES:  # a slice a piece: numpy's calls would cost more
            return self._few_joined_with(tails)
        if self.adjacent or (self.frame_ends[:-1] == self.starts[1:]).all():
            # the frames lie one after the other (a backfill's read, usually): the
            # pieces are the first head, then each tail with the next head
            firsts = np.empty(count + 1, np.int64)
            firsts[0], firsts[1:] = self.starts[0], tails.starts
            lasts = np.empty(count + 1, np.int64)
            lasts[:-1], lasts[-1] = self.stops, tails.stops[-1]
        else:
            lows = np.empty(2 * count, np.int64)
            lows[0::2], lows[1::2] = self.starts, tails.starts
            highs = np.empty(2 * count, np.int64)
            highs[0::2], highs[1::2] = self.stops, tails.stops
            breaks = np.flatnonzero(highs[:-1] != lows[1:]) + 1
            firsts = np.empty(len(breaks) + 1, np.int64)
            firsts[0], firsts[1:] = lows[0], lows[breaks]
            lasts = np.empty(len(breaks) + 1, np.int64)
            lasts[:-1], lasts[-1] = highs[breaks - 1], highs[-1]
        out = copy_pieces(self.buf, firsts, lasts)
        if self.release:
            _release_pages(self.buf, int(firsts[0]), int(lasts[-1]))
        return out

    def _few_joined_with(self, tails: ColdPieces) -> bytearray:
        """``joined_with`` for a few frames: the pieces sliced (views, copied once, by
        the join); frames one after the other in the buffer are a piece less each, as
        ``joined_with`` cuts them."""
        stops, tail_starts = self.stops.tolist(), tails.starts.tolist()
        if self.adjacent or self.frame_ends[:-1].tolist() == self.starts[1:].tolist():
            # one after the other: the first head, then each tail with the next head
            lows = [int(self.starts[0]), *tail_starts]
            highs = [*stops, int(tails.stops[-1])]
        else:
            starts, tail_stops = self.starts.tolist(), tails.stops.tolist()
            lows = [x for pair in zip(starts, tail_starts, strict=True) for x in pair]
            highs = [x for pair in zip(stops, tail_stops, strict=True) for x in pair]
        return joined_slices(self.buf, lows, highs, release=self.release)

    def __iter__(self) -> Iterator[bytes]:
        buf = self.buf
        pieces = [buf[a:b] for a, b in zip(self.starts.tolist(), self.stops.tolist(), strict=True)]
        return iter(pieces)


#: the bytes of the elements ``copy_pieces`` gathers at once: an array this small comes
#: from the allocator's heap and stays in the cache; one of a piece's 256 KiB was a new
#: memory map each time, whose pages faulted in again
_GATHER_BYTES = 64 * 1024


#: fewer pieces than this are sliced and joined: the numpy calls of ``copy_pieces``
#: cost more than they save (a piece a legacy frame of about 250 bytes, read from
#: 1,024 vbuckets' buffers, not the cache: 15.7 against 15.4 µs at 96 pieces, 16.6
#: against 20.0 at 128, 22.9 against 34.9 at 256; ``joined_with``'s numpy set-up comes
#: on top: 34 against 21 µs for a vbucket's hundred)
_FEW_PIECES = 128


@functools.cache
def _assigns_in_order() -> bool:
    """numpy assigns a one-dimensional integer index to overlapping elements in index
    order, the last write winning (what ``copy_pieces`` relies on: numpy's documentation
    does not promise it, so it is checked once on this numpy; if not, pieces are sliced
    and joined)."""
    out = bytearray(4)
    target = np.ndarray((3,), "V2", buffer=out, strides=(1,))
    target[np.array([0, 1, 2])] = np.array([b"ab", b"cd", b"ef"], "V2")
    del target
    return bytes(out) == b"acef"


def joined_slices(
    buf: FrameBuffer, lows: list[int], highs: list[int], *, release: bool = False
) -> bytearray:
    """``buf[lows[i]:highs[i]]`` one after the other, in one buffer: views sliced and
    joined, each piece copied once (a few pieces, or a numpy that ``copy_pieces``
    cannot rely on); ``release``: then the pages between the first and the last are
    given back (``_release_pages``)."""
    view = memoryview(buf)
    try:
        if len(lows) == 1:
            out = bytearray(view[lows[0] : highs[0]])
        else:
            out = bytearray().join([view[a:b] for a, b in zip(lows, highs, strict=True)])
    finally:
        view.release()
    if release and lows:
        _release_pages(buf, lows[0], highs[-1])
    return out


def copy_pieces(buf: FrameBuffer, firsts: NDArray[np.int64], lasts: NDArray[np.int64]) -> bytearray:
    """``buf[firsts[i]:lasts[i]]`` one after the other, in one buffer.

    Slicing each piece and joining the slices cost about 115 ns a piece, 200 ns in
    ``mockdcp serve`` (a ``bytes`` object made and freed each; a legacy stream's frames
    are a piece each). Here every piece is copied as one fixed-width numpy element
    (``V<width>``, the widest piece's width, a view with a stride of one byte over
    ``buf`` and over the output, as ``ItemEncoder._move_sid`` reads headers): the pieces
    gathered from ``buf`` and assigned to their places, 64 KiB of elements at a time, in
    piece order, about 25 ns a piece (80 ns in ``mockdcp serve``, its frames read from
    memory, not the cache). An element wider than its piece writes past the piece's
    end, into the place of a later piece, which its own assignment (later: numpy assigns
    a one-dimensional integer index in order) overwrites; past the last piece into spare
    room cut off at the end. Pieces much wider than the rest (a large value among small ones), and
    pieces too near the end of ``buf`` for a whole element, are sliced in afterwards,
    over what the elements wrote past their ends."""
    count = len(firsts)
    if count < _FEW_PIECES or not _assigns_in_order():
        return joined_slices(buf, firsts.tolist(), lasts.tolist())
    sizes = lasts - firsts
    places = np.empty(count, np.int64)
    places[0] = 0
    np.cumsum(sizes[:-1], out=places[1:])
    total = int(places[-1] + sizes[-1])
    if not total:
        return bytearray()
    # the element's width: the widest piece, unless it is far wider than the mean (a
    # piece wider than the width is sliced in, not copied as an element)
    widest = int(sizes.max())
    width = min(widest, 2 * total // count + 256)
    some_wide = widest > width or int(firsts.max()) > len(buf) - width
    narrow_places, narrow_firsts = places, firsts
    if some_wide:
        wide = (sizes > width) | (firsts > len(buf) - width)
        narrow_places, narrow_firsts = places[~wide], firsts[~wide]
    out = bytearray(total + width)
    source = np.ndarray((len(buf) - width + 1,), f"V{width}", buffer=buf, strides=(1,))
    target = np.ndarray((len(out) - width + 1,), f"V{width}", buffer=out, strides=(1,))
    step = max(1, _GATHER_BYTES // width)
    for at in range(0, len(narrow_firsts), step):  # in order: see above
        target[narrow_places[at : at + step]] = source[narrow_firsts[at : at + step]]
    del source, target  # the buffers' exports end: ``out`` may be resized
    if some_wide:
        view = memoryview(buf)
        for at in np.flatnonzero(wide).tolist():
            place, first = int(places[at]), int(firsts[at])
            out[place : place + int(sizes[at])] = view[first : int(lasts[at])]
        view.release()
    del out[total:]
    return out


def _release_pages(buf: FrameBuffer, low: int, high: int) -> None:
    """A memory-mapped file's pages between ``low`` and ``high``, once copied, are
    unmapped (``MADV_DONTNEED``): a backfill over a file larger than memory keeps the
    kernel's page cache, not the process's resident pages (``_disk_segment``)."""
    if isinstance(buf, bytes):
        return
    import mmap

    page = mmap.PAGESIZE
    low -= low % page
    buf.madvise(mmap.MADV_DONTNEED, low, max(0, min(high, len(buf)) - low))


class ChainedPieces(Sequence[bytes]):
    """Pieces of a disk snapshot in parts (the hot disk's lists below and above the
    cold tier's ``ColdPieces``), read as one sequence; a slice within one part is that
    part's slice (still lazy for the cold part)."""

    __slots__ = ("bounds", "parts")

    def __init__(self, parts: Sequence[Sequence[bytes]]) -> None:
        self.parts = [p for p in parts if len(p)]
        bounds = [0]
        for part in self.parts:
            bounds.append(bounds[-1] + len(part))
        self.bounds = bounds

    def __len__(self) -> int:
        return self.bounds[-1]

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        bounds = self.bounds
        if not isinstance(index, slice):
            if index < 0:
                index += bounds[-1]
            k = bisect.bisect_right(bounds, index) - 1
            return self.parts[k][index - bounds[k]]
        start, stop, step = index.indices(bounds[-1])
        assert step == 1
        cut: list[Sequence[bytes]] = []
        for k, part in enumerate(self.parts):
            lo, hi = max(start, bounds[k]), min(stop, bounds[k + 1])
            if lo < hi:
                cut.append(part[lo - bounds[k] : hi - bounds[k]])
        return cut[0] if len(cut) == 1 else ChainedPieces(cut)

    def take(self, positions: Sequence[int]) -> list[bytes]:
        return list(map(self.__getitem__, positions))

    def __iter__(self) -> Iterator[bytes]:
        return itertools.chain.from_iterable(self.parts)


def joined_pieces(
    below: Sequence[bytes], cold: ColdPieces, above: Sequence[bytes]
) -> Sequence[bytes]:
    """``below``, ``cold`` and ``above`` as one sequence (the cold pieces themselves
    when the others are empty)."""
    if not below and not above:
        return cold
    return ChainedPieces((below, cold, above))


def build_tags(
    datatypes: NDArray[np.uint8], cids: NDArray[np.uint32], vlens: NDArray[np.int64]
) -> NDArray[np.uint8]:
    """``Item.tag`` of mutations with these datatypes, collections and value lengths."""
    tags = (datatypes & 7).astype(np.uint8)
    tags |= np.where(cids != 0, TAG_COLLECTION, 0).astype(np.uint8)
    tags |= np.where(vlens == 0, TAG_EMPTY, 0).astype(np.uint8)
    return tags
