"""Checkpoints and cursors: the in-memory part of a vbucket that streams read.

Sources: producer.md §4.1 (cursor registration), §4.3 (de-duplication inside the open
checkpoint), §5 (cursor dropping); kv_engine ``checkpoint.cc`` / ``checkpoint_manager.cc``.

Invariants:

* a checkpoint's ``entries`` are in seqno order; de-duplication in the *open* checkpoint
  replaces the older entry by ``None`` and appends the new one, so a cursor's position
  (checkpoint, index) stays valid and a cursor that had not read the old version never
  sees it;
* checkpoints cover consecutive seqno ranges; the last one is open;
* every seqno above the persisted seqno is in some checkpoint (only checkpoints wholly at
  or below the persisted seqno, and not pinned by a live cursor, are expelled), so a
  stream that has read the disk up to the persisted seqno can always continue in memory.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from mockdcp.model._item import Item


class Checkpoint:
    """A run of consecutive seqnos; only the open one de-duplicates."""

    __slots__ = ("bytes", "end_seqno", "entries", "id", "index", "open", "start_seqno")

    def __init__(self, ident: int, start_seqno: int) -> None:
        self.id = ident
        #: snapshot start: the first seqno that belongs to this checkpoint
        self.start_seqno = start_seqno
        #: last seqno written into it (start - 1 while empty)
        self.end_seqno = start_seqno - 1
        self.entries: list[Item | None] = []
        self.index: dict[tuple[int, bytes], int] = {}
        self.open = True
        self.bytes = 0

    def append(self, item: Item) -> None:
        """Add ``item``; in the open checkpoint an older version of its key is removed."""
        key = item.doc_key
        old = self.index.get(key)
        if old is not None:
            prev = self.entries[old]
            self.entries[old] = None
            if prev is not None:
                self.bytes -= len(prev.wire)
        self.index[key] = len(self.entries)
        self.entries.append(item)
        self.end_seqno = item.seqno
        self.bytes += len(item.wire)

    def close(self) -> None:
        self.open = False
        self.index = {}

    @property
    def item_count(self) -> int:
        return len(self.index) if self.open else sum(e is not None for e in self.entries)


@attrs.frozen
class MemoryBatch:
    """What a cursor read in one go: items of one checkpoint, in seqno order."""

    items: tuple[Item, ...]
    checkpoint_start_seqno: int
    checkpoint_end_seqno: int
    #: the cursor entered this checkpoint by crossing a boundary with this batch
    starts_checkpoint: bool


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
            if self.index < len(entries):
                chunk = entries[self.index :]
                self.index = len(entries)
                items = tuple(filter(None, chunk))  # Items are always truthy
                if items:
                    starts = self._entered
                    self._entered = False
                    self.last_read_seqno = items[-1].seqno
                    return MemoryBatch(items, cp.start_seqno, cp.end_seqno, starts)
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
