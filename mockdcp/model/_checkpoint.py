"""Checkpoints and cursors: the in-memory part of a vbucket that streams read.

Sources: kv_engine ``checkpoint_manager.cc`` (cursor registration), ``checkpoint.cc``
(de-duplication inside the open checkpoint), ``dcp/active_stream.cc`` (cursor dropping).

Invariants:

* a checkpoint's ``entries`` are in seqno order; de-duplication in the *open* checkpoint
  replaces the older entry by ``None`` and appends the new one, so a cursor's position
  (checkpoint, index) stays valid and a cursor that had not read the old version never
  sees it;
* ``heads``, ``tails``, ``tags`` and ``cids`` run parallel to ``entries``: each item's
  frame in two pieces (``b""`` where the entry is ``None``), its ``Item.tag`` and its
  collection id (a stream's collection filter selects frames by it). A cursor hands a
  batch's frames to the producer without touching the item objects, which are
  scattered in memory (a cache miss each; see docs/performance.md);
* once a prepare or an abort (``TAG_DURABLE``) is appended, ``visible`` keeps the same
  pieces without them (``VisibleFrames``): what a stream of a connection without sync
  writes sends of a run, sliced as the whole is, instead of taken frame by frame;
* a batch's frames are lent, not copied (``FrameSpan``): de-duplication copies the
  spans of the entry it empties first, so a batch read keeps the frames it read;
* checkpoints cover consecutive seqno ranges; the last one is open;
* every seqno above the persisted seqno is in some checkpoint (only checkpoints wholly at
  or below the persisted seqno, and not pinned by a live cursor, are expelled), so a
  stream that has read the disk up to the persisted seqno can always continue in memory.
"""

from __future__ import annotations

import weakref
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, overload

import attrs

from mockdcp.model._item import TAG_DURABLE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from mockdcp.model._item import Item


#: spans ``Checkpoint.lent`` keeps before it forgets those of batches gone
_LENT_LIMIT = 64


class Checkpoint:
    """A run of consecutive seqnos; only the open one de-duplicates."""

    __slots__ = (
        "bytes",
        "cids",
        "end_seqno",
        "ends",
        "entries",
        "heads",
        "historical",
        "id",
        "index",
        "last_hole",
        "lent",
        "lent_limit",
        "open",
        "start_seqno",
        "tags",
        "tails",
        "visible",
    )

    def __init__(self, ident: int, start_seqno: int, *, historical: bool = False) -> None:
        self.id = ident
        #: made while the bucket retains history (kv_engine ``CheckpointHistorical``): a
        #: change-streams connection's markers of it are flagged History. Whatever the
        #: collections written: kv_engine ``CheckpointManager::addNewCheckpoint`` takes
        #: it from ``isHistoryRetentionEnabled()`` (the bucket's retention bytes or
        #: seconds) alone, and ``CDCActiveStreamTest`` in ``dcp_stream_test.cc`` shows a
        #: retention of 0 on Magma streaming plain markers
        self.historical = historical
        #: snapshot start: the first seqno that belongs to this checkpoint
        self.start_seqno = start_seqno
        #: last seqno written into it (start - 1 while empty)
        self.end_seqno = start_seqno - 1
        self.entries: list[Item | None] = []
        self.heads: list[bytes] = []
        self.tails: list[bytes] = []
        self.tags = bytearray()
        self.cids = array("I")
        #: running total of frame bytes as appended (replaced entries included): the
        #: end offsets of the frames of a batch without holes, read without a loop
        self.ends = array("q")
        #: the highest index de-duplication emptied (a hole in ``entries``, ``heads``,
        #: ``tails``), or -1: a batch that starts above it has no holes, and its ends
        #: are a slice
        self.last_hole = -1
        self.index: dict[tuple[int, bytes], int] = {}
        self.open = True
        self.bytes = 0
        #: the frames without prepares and aborts, once it holds one (None before)
        self.visible: VisibleFrames | None = None
        #: the spans of ``heads`` and ``tails`` lent to batches while open (weakly)
        self.lent: list[weakref.ref[FrameSpan]] = []
        #: ``lent`` forgets the spans of batches gone when it grows past this
        self.lent_limit = _LENT_LIMIT

    def append(self, item: Item) -> None:
        """Add ``item``; in the open checkpoint an older version of its key is removed."""
        key = item.doc_key
        old = self.index.get(key)
        if old is not None:
            prev = self.entries[old]
            if self.lent:
                self._keep_lent(old)
            self.entries[old] = None
            self.heads[old] = self.tails[old] = b""
            self.last_hole = max(self.last_hole, old)
            if prev is not None:
                self.bytes -= prev.size
        at = len(self.entries)
        self.index[key] = at
        self.entries.append(item)
        self.heads.append(item.head)
        self.tails.append(item.tail)
        self.tags.append(item.tag)
        self.cids.append(item.collection_id)
        size = item.size
        self.ends.append((self.ends[-1] if self.ends else 0) + size)
        self.end_seqno = item.seqno
        self.bytes += size
        visible = self.visible
        if item.tag == TAG_DURABLE:
            if visible is None:
                visible = self.visible = VisibleFrames(self.heads, self.tails, self.ends, at)
            visible.durable.append(at)
        elif visible is not None:
            visible.heads.append(item.head)
            visible.tails.append(item.tail)
            visible.ends.append((visible.ends[-1] if visible.ends else 0) + size)

    def _keep_lent(self, index: int) -> None:
        """The spans lent over entry ``index`` copy their frames before it is emptied;
        the spans of batches gone are forgotten."""
        alive = []
        for ref in self.lent:
            span = ref()
            if span is None or not span.lends_from(self):
                continue
            if span.start <= index < span.end:
                span.keep()
            else:
                alive.append(ref)
        self.lent = alive

    def lend(self, start: int, end: int) -> tuple[FrameSpan, FrameSpan]:
        """Heads and tails ``start:end`` (no holes), lent: an open checkpoint copies
        them only if de-duplication empties one (``_keep_lent``); a closed one never
        changes."""
        spans = FrameSpan(self.heads, start, end), FrameSpan(self.tails, start, end)
        if self.open:
            lent = self.lent
            lent += (weakref.ref(spans[0]), weakref.ref(spans[1]))
            if len(lent) > self.lent_limit:
                self.lent = lent = [ref for ref in lent if ref() is not None]
                self.lent_limit = max(_LENT_LIMIT, 2 * len(lent))
        return spans

    def close(self) -> None:
        self.open = False
        self.index = {}
        self.lent = []

    @property
    def item_count(self) -> int:
        return len(self.index) if self.open else sum(e is not None for e in self.entries)


class VisibleFrames:
    """A checkpoint's frames without its prepares and aborts (``TAG_DURABLE``): the
    heads, tails and running end offsets of the others, kept as they are appended from
    the first prepare or abort on (kv_engine ``ActiveStream::processItems``: a
    connection without sync writes is never sent one). ``durable``: the checkpoint
    indices of the prepares and aborts, so entry ``i`` is visible frame ``i - (those
    before i)``. Holes (de-duplication) are not copied: a batch with holes is read
    frame by frame (``MemoryBatch.visible`` gives None), and one without lies wholly
    between them."""

    __slots__ = ("durable", "ends", "heads", "tails")

    def __init__(
        self, heads: list[bytes], tails: list[bytes], ends: Sequence[int], count: int
    ) -> None:
        self.heads = heads[:count]
        self.tails = tails[:count]
        self.ends = array("q", ends[:count])
        self.durable: list[int] = []

    def position(self, index: int) -> int:
        """The visible frame of checkpoint entry ``index`` (or of the first visible
        entry after it)."""
        return index - bisect_left(self.durable, index)


class FrameSpan(Sequence[bytes]):
    """Entries ``start:end`` of a checkpoint's ``heads`` or ``tails``, read in place
    until the checkpoint would empty one of them (``keep``: then a copy of its own).

    A copy at every read made a list a batch of young references: each young
    collection of the cyclic collector while streams held them visited every
    reference, a cache miss each (about 10 ms a collection at 300,000 items in flight,
    docs/performance.md, "A cluster against one node"). Slices are lists (the
    encoder's pieces, short-lived)."""

    __slots__ = ("__weakref__", "end", "frames", "start")

    def __init__(self, frames: list[bytes], start: int, end: int) -> None:
        self.frames = frames
        self.start = start
        self.end = end

    def lends_from(self, checkpoint: Checkpoint) -> bool:
        return self.frames is checkpoint.heads or self.frames is checkpoint.tails

    def keep(self) -> None:
        """Copy the span's frames: its checkpoint is about to change one."""
        self.frames = self.frames[self.start : self.end]
        self.start, self.end = 0, len(self.frames)

    def __len__(self) -> int:
        return self.end - self.start

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        count = self.end - self.start
        if isinstance(index, slice):
            a, b, step = index.indices(count)
            if step != 1:
                return self.frames[self.start : self.end][index]
            return self.frames[self.start + a : self.start + max(a, b)]
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError("FrameSpan index out of range")
        return self.frames[self.start + index]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.frames[self.start : self.end])

    def take(self, positions: Iterable[int]) -> list[bytes]:
        """The frames at ``positions`` (a stream filter's choice), in C loops."""
        start = self.start
        at = map(start.__add__, positions) if start else positions
        return list(map(self.frames.__getitem__, at))

    def __eq__(self, other: object) -> bool:
        """Equal to a list of the same frames (the copy it stands for), or a span
        of them."""
        if isinstance(other, FrameSpan):
            other = list(other)
        return isinstance(other, list) and self.frames[self.start : self.end] == other

    __hash__ = None  # type: ignore[assignment]  # mutable, as the list it stands for


@attrs.frozen
class MemoryBatch:
    """What a cursor read in one go: entries ``start:end`` of one checkpoint.

    ``heads``, ``tails``, ``tags`` and ``ends`` are taken when the batch is read (holes
    left out): the items' frames in two pieces (``Item.head``, ``Item.tail``: lent,
    ``FrameSpan``), their tags, and each canonical frame's end offset in their
    concatenation plus ``base``. A producer may encode them piece by piece while the
    vbucket is written (de-duplication never takes an item out of a batch already
    read). In a checkpoint
    that keeps ``VisibleFrames`` the pieces are copied when first asked for, which must
    be before the vbucket is next written, as ``items``: a stream without sync writes
    reads ``visible`` instead, and a copy it does not use costs a reference taken and
    dropped on every frame, scattered in memory.

    ``items`` is a view of the checkpoint, valid until the vbucket is next written: read
    it at once. A copy would touch every item object, scattered in memory (a cache miss
    each); the fast path never needs them.
    """

    checkpoint: Checkpoint
    start: int
    end: int
    #: (heads, tails), or None until asked for (``heads``)
    pieces: tuple[Sequence[bytes], Sequence[bytes]] | None
    tags: bytes
    ends: Sequence[int]
    base: int
    first_seqno: int
    last_seqno: int
    checkpoint_start_seqno: int
    checkpoint_end_seqno: int
    #: the cursor entered this checkpoint by crossing a boundary with this batch
    starts_checkpoint: bool
    #: each frame's collection id (an ``array("I")``), beside ``tags``
    cids: Sequence[int] = ()
    #: de-duplication emptied entries of ``start:end`` (left out of the pieces)
    holes: bool = False

    @property
    def heads(self) -> Sequence[bytes]:
        return self._pieces()[0]

    @property
    def tails(self) -> Sequence[bytes]:
        return self._pieces()[1]

    def _pieces(self) -> tuple[Sequence[bytes], Sequence[bytes]]:
        pieces = self.pieces
        if pieces is None:  # no holes (they are left out when read)
            cp, start, end = self.checkpoint, self.start, self.end
            pieces = (cp.heads[start:end], cp.tails[start:end])
            object.__setattr__(self, "pieces", pieces)  # a cache, once
        return pieces

    @property
    def items(self) -> list[Item]:
        return [e for e in self.checkpoint.entries[self.start : self.end] if e is not None]

    def visible(self) -> tuple[list[bytes], list[bytes], Sequence[int], int] | None:
        """The batch's frames without prepares and aborts, sliced from the checkpoint's
        ``VisibleFrames`` (heads, tails, end offsets, base): None when it keeps none, or
        the batch has holes (read at once, as ``items``)."""
        cp = self.checkpoint
        vis = cp.visible
        if vis is None or self.holes:
            return None
        a, b = vis.position(self.start), vis.position(self.end)
        base = vis.ends[a - 1] if a else 0
        return vis.heads[a:b], vis.tails[a:b], vis.ends[a:b], base

    def items_at(self, indices: Sequence[int]) -> list[Item]:
        """The items of frames ``indices`` (positions in ``heads``); valid, like
        ``items``, until the vbucket is next written."""
        entries = self.checkpoint.entries
        if not self.holes:
            found = [entries[self.start + i] for i in indices]
        else:
            live = self.items
            found = [live[i] for i in indices]
        assert all(it is not None for it in found)
        return found  # type: ignore[return-value]


class Cursor:
    """A stream's read position in the checkpoints of one vbucket."""

    def __init__(
        self,
        name: str,
        vbucket: int,
        checkpoints: Callable[[], list[Checkpoint]],
        checkpoint: Checkpoint,
        index: int,
        last_read_seqno: int,
    ) -> None:
        self.name = name
        self.vbucket = vbucket
        self.dropped = False
        self.last_read_seqno = last_read_seqno
        self._checkpoints = checkpoints
        self.checkpoint = checkpoint
        self.index = index
        self._entered = False

    def next_batch(self) -> MemoryBatch | None:
        """The unread items of the current checkpoint, moving on to the next one when
        this one is closed and read. ``None`` when nothing new; never spans checkpoints."""
        if self.dropped:
            return None
        while True:
            cp = self.checkpoint
            entries = cp.entries
            start, end = self.index, len(entries)
            if start < end:
                self.index = end
                first = _first_live(entries, start, end)
                if first is not None:
                    last = _last_live(entries, start, end)
                    starts = self._entered
                    self._entered = False
                    self.last_read_seqno = last.seqno
                    tags = bytes(cp.tags[start:end])
                    cids = cp.cids[start:end]
                    ends: Sequence[int]
                    holes = cp.last_hole >= start
                    pieces: tuple[Sequence[bytes], Sequence[bytes]] | None = None
                    if holes:  # leave them out, count the ends
                        heads = cp.heads[start:end]
                        live = [e for e in cp.entries[start:end] if e is not None]
                        cids = array("I", (c for h, c in zip(heads, cids, strict=True) if h))
                        tags = bytes(t for h, t in zip(heads, tags, strict=True) if h)
                        kept = [
                            (h, t) for h, t in zip(heads, cp.tails[start:end], strict=True) if h
                        ]
                        pieces = ([h for h, _ in kept], [t for _, t in kept])
                        ends, base = list(accumulate(e.size for e in live)), 0
                    else:  # the running totals are the end offsets
                        if cp.visible is None:  # lent now (see ``MemoryBatch``)
                            pieces = cp.lend(start, end)
                        ends, base = cp.ends[start:end], cp.ends[start - 1] if start else 0
                    return MemoryBatch(
                        cp,
                        start,
                        end,
                        pieces,
                        tags,
                        ends,
                        base,
                        first.seqno,
                        last.seqno,
                        cp.start_seqno,
                        cp.end_seqno,
                        starts,
                        cids,
                        holes,
                    )
            if cp.open:
                return None
            following = self._next_checkpoint(cp)
            if following is None:
                return None
            self.checkpoint, self.index, self._entered = following, 0, True

    def _next_checkpoint(self, cp: Checkpoint) -> Checkpoint | None:
        cps = self._checkpoints()
        for i, c in enumerate(cps):
            if c is cp:
                return cps[i + 1] if i + 1 < len(cps) else None
        return None


def _first_live(entries: list[Item | None], start: int, end: int) -> Item | None:
    for i in range(start, end):
        item = entries[i]
        if item is not None:
            return item
    return None


def _last_live(entries: list[Item | None], start: int, end: int) -> Item:
    for i in range(end - 1, start - 1, -1):
        item = entries[i]
        if item is not None:
            return item
    raise AssertionError("called only when the range holds a live item")
