"""The checkpoints of one vbucket and the cursors reading them.

Sources: kv_engine ``checkpoint_manager.cc`` (``registerCursorBySeqno``, closing a
checkpoint by item count or memory, expelling closed checkpoints no cursor pins,
``addNewCheckpoint``), ``dcp/active_stream.cc`` (``handleSlowStream``: a dropped
cursor). The checkpoints themselves and the cursor's read are ``_checkpoint``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mockdcp.model._checkpoint import Checkpoint, Cursor
from mockdcp.model._item import TAG_COLLECTION, TAG_EMPTY, Item, ItemKind
from mockdcp.protocol import MUTATION_FRAME, collection_prefix

if TYPE_CHECKING:
    from collections.abc import Sequence

#: a bulk load's row: key, collection, value, datatype, flags, expiry, CAS
Row = tuple[bytes, int, bytes, int, int, int, int]


class CheckpointManager:
    """The open checkpoint (last) and the closed ones streams may still read, with the
    cursors registered in them. ``historical``: checkpoints are made historical (the
    bucket retains history)."""

    def __init__(self, vbid: int, *, max_items: int, max_bytes: int, historical: bool) -> None:
        self.vbid = vbid
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.historical = historical
        self._ids = 0
        self.cursors: dict[str, Cursor] = {}
        self.checkpoints: list[Checkpoint] = []

    def reset(self, start: int) -> None:
        """Drop every cursor and checkpoint; one empty open checkpoint from ``start``
        (its id continues the vbucket's)."""
        for cursor in self.cursors.values():
            cursor.dropped = True
        self.cursors = {}
        self.checkpoints = [self._new(start)]

    def _new(self, start: int) -> Checkpoint:
        self._ids += 1
        return Checkpoint(self._ids, start, historical=self.historical)

    @property
    def open(self) -> Checkpoint:
        """The open checkpoint."""
        return self.checkpoints[-1]

    def register_cursor(self, name: str, after_seqno: int, high_seqno: int) -> Cursor | None:
        """A cursor reading every seqno after ``after_seqno``, or ``None`` when the
        checkpoints no longer hold all of them (the stream must backfill first)."""
        first = self.checkpoints[0]
        if after_seqno + 1 < first.start_seqno or after_seqno > high_seqno:
            return None
        for cp in self.checkpoints:
            if cp.start_seqno <= after_seqno + 1 <= max(cp.end_seqno + 1, cp.start_seqno):
                index = _index_after(cp, after_seqno)
                cursor = Cursor(name, self.vbid, lambda: self.checkpoints, cp, index, after_seqno)
                self.cursors[name] = cursor
                return cursor
        return None

    def drop_cursor(self, name: str | None, persisted: int) -> list[str]:
        """Drop one cursor, or all (kv_engine ``handleSlowStream``); dropped cursors stop
        pinning."""
        names = [name] if name is not None else list(self.cursors)
        dropped = []
        for n in names:
            cursor = self.cursors.pop(n, None)
            if cursor is not None:
                cursor.dropped = True
                dropped.append(n)
        if dropped:
            self.expel(persisted)
        return dropped

    def remove_cursor(self, name: str, persisted: int) -> None:
        if self.cursors.pop(name, None) is not None:
            self.expel(persisted)

    def close(self, high_seqno: int, persisted: int) -> None:
        """Close the open checkpoint (if it holds anything) and open a new one."""
        cp = self.checkpoints[-1]
        if not cp.entries:
            return
        cp.close()
        self.checkpoints.append(self._new(high_seqno + 1))
        self.expel(persisted)

    def append(self, item: Item, persisted: int) -> None:
        """Add ``item`` to the open checkpoint, closing it once it is full."""
        cp = self.checkpoints[-1]
        cp.append(item)
        if cp.item_count >= self.max_items or cp.bytes >= self.max_bytes:
            self.close(item.seqno, persisted)

    def expel(self, persisted: int) -> None:
        """Drop closed checkpoints wholly persisted and not pinned by a live cursor."""
        pinned = {id(c.checkpoint) for c in self.cursors.values()}
        while len(self.checkpoints) > 1:
            cp = self.checkpoints[0]
            if cp.open or cp.end_seqno > persisted or id(cp) in pinned:
                break
            self.checkpoints.pop(0)

    def append_rows(
        self,
        rows: Sequence[Row],
        seqno: int,
        items: dict[tuple[int, bytes], Item],
        log: list[Item],
        collection_high: dict[int, int],
        persisted: int,
    ) -> int:
        """Write mutations ``rows`` after ``seqno`` as ``append`` would one by one, the
        hash table ``items``, the write ``log`` and ``collection_high`` kept beside (the
        vbucket has checked the open checkpoint keeps no visible frames apart and no row
        is of a history collection); the last seqno written. See the module docstring."""
        log_append = log.append
        vbid = self.vbid
        max_items, max_bytes = self.max_items, self.max_bytes
        head_of, mutation, new = MUTATION_FRAME.pack, ItemKind.MUTATION, Item.__new__
        cp = self.checkpoints[-1]
        (index, entries, in_index, entries_append, heads_append, tails_append,
         tags_append, ends_append, cids_append) = _appenders(cp)  # fmt: skip
        total = cp.ends[-1] if cp.ends else 0
        room_bytes = max_bytes - cp.bytes
        room_items = max_items - len(index)
        position = len(entries)
        for key, cid, value, dt, flags, expiry, cas in rows:
            doc_key = (cid, key)
            seqno += 1
            item = new(Item)
            old = items.setdefault(doc_key, item)
            if old is not item:
                items[doc_key] = item
                rev = old.rev_seqno + 1
            else:
                rev = 1
            # a key in the default collection is framed without its one-byte prefix,
            # which a collection-aware stream puts back (``Item.head``); the frame's
            # size counts it either way
            if cid:
                prefix = collection_prefix(cid)
                klen = len(prefix) + len(key)
            else:
                klen = len(key) + 1
            vlen = len(value)
            body = 31 + klen + vlen
            head = head_of(0x80, 0x57, klen, 31, dt, vbid, body, 0, cas,
                           seqno, rev, flags, expiry, 0, 0, 0)  # fmt: skip
            tail = key + value
            tag = dt & 7
            if cid:
                head += prefix
                tag |= TAG_COLLECTION
            if not vlen:
                tag |= TAG_EMPTY
            item.key = key
            item.collection_id = cid
            item.vbucket = vbid
            item.seqno = seqno
            item.rev_seqno = rev
            item.cas = cas
            item.flags = flags
            item.expiry = expiry
            item.datatype = dt
            item.kind = mutation
            item.delete_time = 0
            item.forms = None
            item.tag = tag
            item.head = head
            item.tail = tail
            log_append(item)
            collection_high[cid] = seqno
            if in_index(doc_key, position) != position:  # de-duplication: the general path
                cp.bytes = max_bytes - room_bytes
                cp.append(item)
                room_bytes = max_bytes - cp.bytes
                room_items = max_items - len(index)
                total = cp.ends[-1]
            else:
                entries_append(item)
                heads_append(head)
                tails_append(tail)
                tags_append(tag)
                cids_append(cid)
                size = 24 + body
                total += size
                ends_append(total)
                room_bytes -= size
                room_items -= 1
            position += 1
            if room_items <= 0 or room_bytes <= 0:  # as ``append`` closes it
                cp.end_seqno, cp.bytes = seqno, max_bytes - room_bytes
                self.close(seqno, persisted)
                cp = self.checkpoints[-1]
                (index, entries, in_index, entries_append, heads_append, tails_append,
                 tags_append, ends_append, cids_append) = _appenders(cp)  # fmt: skip
                total, room_bytes, room_items, position = 0, max_bytes, max_items, 0
        if rows:
            cp.end_seqno, cp.bytes = seqno, max_bytes - room_bytes
        return seqno


def _appenders(cp: Checkpoint) -> tuple[Any, ...]:
    """The open checkpoint's index and entries, and the bound methods ``append_rows``
    fills it with: ``index.setdefault``, then ``append`` of entries, heads, tails,
    tags, ends and cids."""
    index, entries = cp.index, cp.entries
    return (index, entries, index.setdefault, entries.append, cp.heads.append,
            cp.tails.append, cp.tags.append, cp.ends.append, cp.cids.append)  # fmt: skip


def _index_after(cp: Checkpoint, seqno: int) -> int:
    """Index of the first entry of ``cp`` whose seqno is above ``seqno``."""
    entries = cp.entries
    lo, hi = 0, len(entries)
    while lo < hi:  # binary search skipping None slots by looking right
        mid = (lo + hi) // 2
        j = mid
        while j < hi and entries[j] is None:
            j += 1
        if j == hi:
            hi = mid
            continue
        item = entries[j]
        assert item is not None
        if item.seqno <= seqno:
            lo = j + 1
        else:
            hi = mid
    return lo
