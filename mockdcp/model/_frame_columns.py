"""The frame columns: items' seqnos, frames, tags, collection ids and sizes, in seqno order.

A backfill slices these columns instead of reading item objects, which are scattered in
memory (a cache miss each: about 0.6 µs an item in ``mockdcp bench --from-disk``).
kv_engine's ``kvstore/`` keeps the by-seqno index a disk backfill scans
(``backfill_by_seqno_disk.cc``); Magma keeps its history in the form it streams it
from. ``FrameColumns`` is the one place that edits the six parallel columns: the disk's
by-seqno view (``DiskStore``) and the retained history (``HistoryLog``) each own one.
"""

from __future__ import annotations

import bisect
from array import array
from operator import add, attrgetter, not_
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from mockdcp.model._item import Item

_SEQNO = attrgetter("seqno")
_HEAD, _TAIL = attrgetter("head"), attrgetter("tail")
_CID, _TAG = attrgetter("collection_id"), attrgetter("tag")
_SIZE = attrgetter("size")


class FrameColumns:
    """Each item's seqno, frame pieces (``Item.head``, ``Item.tail``), tag, collection
    id and canonical frame size (``Item.size``), in ascending seqno order."""

    __slots__ = ("cids", "heads", "seqnos", "sizes", "tags", "tails")

    def __init__(self) -> None:
        self.seqnos = array("q")
        self.heads: list[bytes] = []
        self.tails: list[bytes] = []
        self.tags = bytearray()
        self.cids = array("I")
        self.sizes = array("I")

    def __len__(self) -> int:
        return len(self.seqnos)

    def extend(self, items: Sequence[Item], *, exact: bool = False) -> None:
        """Append ``items`` (seqnos above the last one's), each column with C loops;
        ``exact``: their sizes read from each item (``Item.size``), not counted from
        the pieces."""
        heads, tails = list(map(_HEAD, items)), list(map(_TAIL, items))
        cids = array("I", map(_CID, items))
        self.seqnos.extend(map(_SEQNO, items))
        self.heads += heads
        self.tails += tails
        self.tags += bytes(map(_TAG, items))
        self.cids += cids
        if exact:
            self.sizes.extend(map(_SIZE, items))
            return
        # ``Item.size``: head, tail, and the default collection's prefix byte
        self.sizes.extend(map(add, map(len, heads), map(add, map(len, tails), map(not_, cids))))

    def insert(self, item: Item) -> None:
        """Put ``item`` in its seqno's place (appended when it is the highest)."""
        if not self.seqnos or item.seqno > self.seqnos[-1]:
            self.seqnos.append(item.seqno)
            self.heads.append(item.head)
            self.tails.append(item.tail)
            self.tags.append(item.tag)
            self.cids.append(item.collection_id)
            self.sizes.append(item.size)
            return
        j = bisect.bisect_left(self.seqnos, item.seqno)
        self.seqnos.insert(j, item.seqno)
        self.heads.insert(j, item.head)
        self.tails.insert(j, item.tail)
        self.tags.insert(j, item.tag)
        self.cids.insert(j, item.collection_id)
        self.sizes.insert(j, item.size)

    def remove(self, seqno: int) -> None:
        """Take out the frame at ``seqno`` (which is held)."""
        j = bisect.bisect_left(self.seqnos, seqno)
        del self.seqnos[j]
        del self.heads[j]
        del self.tails[j]
        del self.tags[j]
        del self.cids[j]
        del self.sizes[j]

    def cut(self, low: int, high: int) -> None:
        """Take out every frame whose seqno is in ``low..high`` (the items compaction
        moved into the cold tier: ``_compaction``)."""
        i, j = bisect.bisect_left(self.seqnos, low), bisect.bisect_right(self.seqnos, high)
        if i < j:
            del self.seqnos[i:j], self.heads[i:j], self.tails[i:j]
            del self.tags[i:j], self.cids[i:j], self.sizes[i:j]

    def rebuild(self, by_seqno: Mapping[int, Item]) -> None:
        """Hold exactly the items of ``by_seqno`` (after a purge took many out)."""
        seqnos = array("q", sorted(by_seqno))
        self.seqnos = seqnos
        self.heads = [by_seqno[seqno].head for seqno in seqnos]
        self.tails = [by_seqno[seqno].tail for seqno in seqnos]
        self.tags = bytearray(by_seqno[seqno].tag for seqno in seqnos)
        self.cids = array("I", (by_seqno[seqno].collection_id for seqno in seqnos))
        self.sizes = array("I", (by_seqno[seqno].size for seqno in seqnos))

    def after(self, seqno: int) -> int:
        """The index of the first frame above ``seqno``."""
        return bisect.bisect_right(self.seqnos, seqno)

    def last_seqno(self) -> int:
        """The highest seqno held (0 when empty)."""
        return self.seqnos[-1] if self.seqnos else 0
