"""A cold segment whose frames and columns are files: a corpus larger than memory served
as the bucket's disk (``mockdcp serve --corpus DIR --on-disk``).

A data node keeps one data file per vbucket and reads a backfill from it (kv_engine
``docs/BackfillManager.md``: a backfill scans the vbucket's file by seqno); it holds in
memory only the hash table's metadata of resident items. ``DiskSegment`` is a
``ColdSegment`` (``_cold``: the model's rules and the producer's reads are the cold
tier's) whose ``buf`` is a read-only memory map of the vbucket's frame file and whose
columns and key index are memory-mapped ``.npy`` arrays: pages are read from the file
when a get or a backfill touches them, and the kernel may drop them again (they are file
pages, not the process's own memory). The files are written once by the importer
(``mockdcp.data``); this module only reads what it is given.

The key index of an in-memory segment hashes keys with Python's ``hash`` (seeded per
process); a persisted index needs a hash that is the same in every process:
``stable_key_hash``, 64-bit FNV-1a over the key bytes (``stable_key_hashes`` in bulk,
with numpy), mixed with the collection id as ``key_hash`` mixes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mockdcp.model._cold import ColdSegment

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from mockdcp.model._bucket import Bucket
    from mockdcp.model._cold import FrameBuffer
    from mockdcp.model._item import Item
    from mockdcp.model._oracle import Oracle

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = 0xFFFFFFFFFFFFFFFF
_GOLDEN = 0x9E3779B97F4A7C15
_SIGNED = 1 << 63


def stable_key_hash(collection_id: int, key: bytes) -> int:
    """The persisted index's hash of (collection, key), as a signed 64-bit integer:
    FNV-1a 64 of the key (http://www.isthe.com/chongo/tech/comp/fnv/), xor the
    collection id times the 64-bit golden ratio."""
    h = _FNV_OFFSET
    for byte in key:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    h ^= (collection_id * _GOLDEN) & _MASK
    return h - (1 << 64) if h >= _SIGNED else h


def stable_key_hashes(
    data: NDArray[np.uint8],
    starts: NDArray[np.int64],
    lengths: NDArray[np.int64],
    cids: NDArray[np.uint32],
) -> NDArray[np.int64]:
    """``stable_key_hash`` of every key (``data[starts[i]:starts[i] + lengths[i]]``),
    one numpy pass a byte position."""
    h = np.full(len(starts), _FNV_OFFSET, np.uint64)
    prime = np.uint64(_FNV_PRIME)
    for j in range(int(lengths.max()) if len(lengths) else 0):
        at = np.flatnonzero(lengths > j)
        h[at] = (h[at] ^ data[starts[at] + j].astype(np.uint64)) * prime
    with np.errstate(over="ignore"):
        h ^= cids.astype(np.uint64) * np.uint64(_GOLDEN)
    out: NDArray[np.int64] = h.view(np.int64)
    return out


def _crc_table() -> NDArray[np.uint32]:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1).astype(
            np.uint32
        )
    return table


_CRC = _crc_table()


def crc32_keys(
    data: NDArray[np.uint8], starts: NDArray[np.int64], lengths: NDArray[np.int64]
) -> NDArray[np.uint32]:
    """``zlib.crc32`` of every key, one numpy pass a byte position (the vbucket of a key
    is ``crc32 >> 16 & 0x7FFF`` modulo the vbuckets, libcouchbase ``vbucket_map``)."""
    crc = np.full(len(starts), 0xFFFFFFFF, np.uint32)
    for j in range(int(lengths.max()) if len(lengths) else 0):
        at = np.flatnonzero(lengths > j)
        c = crc[at]
        crc[at] = _CRC[(c ^ data[starts[at] + j]) & 0xFF] ^ (c >> 8)
    out: NDArray[np.uint32] = crc ^ np.uint32(0xFFFFFFFF)
    return out


class DiskSegment(ColdSegment):
    """A ``ColdSegment`` read from files (see the module docstring): one version of each
    key (the importer compacted them), so no slot is replaced by a later one; the last
    slot of each collection is given, not computed from the whole column at start."""

    __slots__ = ("collection_last",)

    hash_of = staticmethod(stable_key_hash)
    file_backed = True

    def __init__(  # the in-memory constructor sorts and scans: not for files
        self,
        vbid: int,
        first_seqno: int,
        buf: FrameBuffer,
        starts: NDArray[np.int64],
        cids: NDArray[np.uint32],
        tags: NDArray[np.uint8],
        hashes: NDArray[np.int64],
        order: NDArray[np.int32] | None = None,
        collection_last: dict[int, int] | None = None,
    ) -> None:
        """``hashes`` sorted with ``order`` their slots (as ``ColdSegment`` keeps them;
        ``order`` None: ``hashes`` are by slot, sorted here); ``collection_last``: the
        last slot of each collection (None: computed)."""
        self.vbid = vbid
        self.first_seqno = first_seqno
        self.count = len(cids)
        self.buf = buf
        self.starts = starts
        self.cids = cids
        self.tags = tags
        self.delete_times = None  # the importer keeps no tombstone (purged)
        if order is None:
            order = np.argsort(hashes, kind="stable").astype(np.int32)
            hashes = hashes[order]
        self.order = order
        self.hashes = hashes
        empty = np.zeros(0, np.int64)
        self.later, self.later_seqnos = empty, empty.copy()
        if collection_last is None:
            collection_last = dict(zip(*ColdSegment.last_slots(self, self.count), strict=True))
        self.collection_last = collection_last

    def release_pages(self) -> None:
        """Give back the pages of the segment's files this process has mapped (its
        frames and columns; ``MADV_DONTNEED``): a backfill that read the whole vbucket
        leaves them in the kernel's page cache, not among the process's resident pages,
        and the next read maps them again from there. Harmless to a read in progress
        elsewhere: a file's pages come back from the file."""
        import mmap

        maps = [self.buf] + [
            getattr(a, "_mmap", None)
            for a in (self.starts, self.cids, self.tags, self.hashes, self.order)
        ]
        for m in maps:
            if isinstance(m, mmap.mmap) and not m.closed and len(m):
                m.madvise(mmap.MADV_DONTNEED)

    def last_slots(self, held: int) -> tuple[list[int], list[int]]:
        if held == self.count:
            return list(self.collection_last), list(self.collection_last.values())
        return super().last_slots(held)


def on_disk_changes(
    bucket: Bucket,
) -> tuple[Oracle, list[tuple[str, str, bytes]], list[tuple[str, str]]]:
    """What a bucket over an on-disk corpus holds beside the corpus's final state: the
    live documents written since start (an ``Oracle``); the corpus's keys that are gone
    (deleted, expired, cut by a rollback; their tombstones maybe purged since) as
    (scope, collection, key); and the collections whose corpus documents still count
    (live, never flushed since start). The corpus's oracle in those collections, less
    the gone keys, with the live documents over it, is the bucket's oracle: the cold
    tier holds the corpus's final state, one slot a key."""
    from mockdcp.model._oracle import Oracle

    manifest = bucket.manifest
    live_collections = manifest.collections
    live: dict[tuple[int, bytes], Item] = {}
    gone_keys: list[tuple[str, str, bytes]] = []
    flushed: set[int] = set()
    for vb in bucket.vbuckets:
        hot = {k: it for k, it in vb.items.items() if k[0] in live_collections}
        live.update({k: it for k, it in hot.items() if not it.deleted})
        cold = vb.cold
        if cold is None:
            continue
        flushed.update(cold.flushed)
        seg = cold.segment
        for slot in np.flatnonzero(~cold.alive).tolist():
            cid = int(seg.cids[slot])
            key = seg.key_at(slot)
            item = hot.get((cid, key))
            if cid in live_collections and (item is None or item.deleted):
                gone_keys.append((*manifest.name_of(cid), key))
    names = {cid: manifest.name_of(cid) for cid, _ in live}
    kept = sorted(manifest.name_of(c) for c in live_collections if c not in flushed)
    return Oracle(live, names), gone_keys, kept
