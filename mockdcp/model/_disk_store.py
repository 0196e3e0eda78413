"""The disk of one vbucket: what is persisted, as a backfill reads it.

Sources: kv_engine ``kvstore/`` (the by-key and by-seqno indexes of a couchstore or
magma file), ``dcp/backfill_by_seqno_disk.cc`` (a backfill's scan and its snapshot's
high completed, max visible and purge seqnos), ``docs/dcp/documentation/rollback.md``
(purge seqno), ``ep_bucket.cc`` (compaction drops completed prepares). The cold tier
(``_cold``: a bulk-loaded corpus kept in columns, or an on-disk one) is a backing of
the same disk: its slots are on-disk items until a newer version of their key is
persisted.

State: ``by_key``, (collection, key) → newest *persisted* version, tombstones until
purged, prepares and aborts in their own key namespace (``DurableItem.doc_key``);
``by_seqno`` the same items by seqno; ``columns`` their frames in seqno order
(``FrameColumns``); ``persisted_seqno`` ≥ ``purge_seqno``.
"""

from __future__ import annotations

import math
from array import array
from operator import itemgetter
from typing import TYPE_CHECKING, Protocol, cast

import attrs

from mockdcp.model._frame_columns import FrameColumns
from mockdcp.model._item import (
    SYSTEM_COLLECTION_ID,
    TAG_SYSTEM,
    CommittedItem,
    DurableItem,
    Item,
    ItemKind,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model._checkpoint_manager import Row
    from mockdcp.model._cold import ColdSegment, ColdView


#: a ``Row``'s (collection, key)
_DOC_OF_ROW = itemgetter(1, 0)


class SeqnoLookup(Protocol):
    """seqno → item (a mapping, or ``DiskStore`` with cold slots)."""

    def __getitem__(self, seqno: int, /) -> Item: ...


@attrs.frozen
class DiskSnapshot:
    """A backfill's read of the on-disk view (kv_engine ``dcp/backfill_by_seqno_disk.cc``).

    Either the items, or (``frames=True``) only their seqnos and frames (in two pieces): a
    producer streaming canonical frames never touches the item objects, which are
    scattered in memory (reading them cost about 0.7 µs an item in ``mockdcp bench
    --from-disk``).
    """

    start_seqno: int
    end_seqno: int
    items: tuple[Item, ...]
    high_completed_seqno: int
    max_visible_seqno: int
    purge_seqno: int
    seqnos: Sequence[int] = ()
    #: the items' ``Item.head``, ``Item.tail`` and ``Item.tag`` beside ``seqnos``
    #: (lists, or lazy pieces of the cold tier: ``_cold.ColdPieces``)
    heads: Sequence[bytes] = attrs.field(factory=list)
    tails: Sequence[bytes] = attrs.field(factory=list)
    tags: bytes = b""
    #: the items' collection ids (an ``array("I")``, or the cold tier's uint32 column
    #: when it is read alone), beside ``tags``
    cids: Sequence[int] = ()
    #: the items' canonical frame sizes (``Item.size``: an ``array("I")``, or an int64
    #: numpy array when the cold tier is read alone)
    sizes: Sequence[int] = ()
    #: the snapshot's own seqno → item lookup: a history snapshot's (older revisions
    #: are not in ``DiskStore.by_seqno``), or one with cold slots (the ``DiskStore``);
    #: ``None``: ``DiskStore.by_seqno`` has them all
    versions: SeqnoLookup | None = None

    def items_at(self, by_seqno: SeqnoLookup, indices: Sequence[int]) -> list[Item]:
        """The items of frames ``indices``, looked up in ``versions`` or else in
        ``by_seqno`` (the disk's; read at once: a later persist may replace them)."""
        lookup = by_seqno if self.versions is None else self.versions
        return [lookup[self.seqnos[i]] for i in indices]


class DiskStore:
    """See the module docstring."""

    def __init__(self, seqno: int = 0) -> None:
        self.reset(seqno)

    #: persisted writes fold into the cold tier (``_compaction``): set by the bucket of a
    #: couchbase bucket, cleared by a cluster with replicas or nodes to add
    compacts = False

    def reset(self, seqno: int) -> None:
        """Empty, everything up to ``seqno`` persisted."""
        self.persisted_seqno = seqno
        self.purge_seqno = 0
        #: the max visible and high completed seqnos of what is persisted
        self.persisted_visible_seqno = seqno
        self.persisted_completed_seqno = 0
        self.by_key: dict[tuple[int, bytes], Item] = {}
        self.by_seqno: dict[int, Item] = {}
        self.columns = FrameColumns()
        #: the bulk-loaded documents kept in columns (``_cold``; None: none)
        self.cold: ColdView | None = None
        #: compaction folds the write log after this seqno (``_compaction.compact``)
        self.fold_after = 0

    def __getitem__(self, seqno: int) -> Item:
        """The on-disk item at ``seqno`` (hot, or a cold slot's)."""
        cold = self.cold
        if cold is not None and cold.segment.first_seqno <= seqno <= cold.upto:
            return cold.segment.item(seqno - cold.segment.first_seqno)
        return self.by_seqno[seqno]

    def holds_documents(self) -> bool:
        """Is a document (or a tombstone, a prepare, a cold tier) on disk?"""
        return self.cold is not None or any(cid != SYSTEM_COLLECTION_ID for cid, _ in self.by_key)

    # -- writing ---------------------------------------------------------------------

    def persist(self, written: list[Item], upto: int, *, durable: bool) -> None:
        """``written`` (the write log from the persisted seqno to ``upto``) joins the
        disk, newest per key; ``durable``: the vbucket has had durable writes (a
        commit's prepare leaves the disk, as compaction purges it)."""
        if durable or not self._put_new(written):
            for item in written:
                self.put(item)
                if isinstance(item, CommittedItem):
                    self._drop_completed_prepare(item)
        for item in reversed(written):
            if not isinstance(item, DurableItem):
                self.persisted_visible_seqno = item.seqno
                break
        for item in reversed(written if durable else ()):
            if isinstance(item, CommittedItem) or (
                isinstance(item, DurableItem) and item.kind is ItemKind.ABORT
            ):
                self.persisted_completed_seqno = item.prepared_seqno
                break
        self.persisted_seqno = max(self.persisted_seqno, upto)

    def put(self, item: Item) -> None:
        """``item`` is the key's persisted version (replacing the one before)."""
        if self.cold is not None:
            self.kill_cold((item,))
        old = self.by_key.get(item.doc_key)
        if old is not None:
            del self.by_seqno[old.seqno]
            self.columns.remove(old.seqno)
        self.by_key[item.doc_key] = item
        self.by_seqno[item.seqno] = item
        self.columns.insert(item)

    def _put_new(self, written: list[Item]) -> bool:
        """``put`` for each of ``written`` in one go, when none of their keys is on
        disk yet or twice among them and they follow the disk's seqnos (a vbucket
        persisting new documents: a bulk load); False, changing nothing, otherwise.
        About a third of the time of one ``put`` an item."""
        keys = [it.doc_key for it in written]
        if not keys or written[0].seqno <= self.columns.last_seqno():
            return False
        unique = set(keys)
        if len(unique) != len(keys) or not self.by_key.keys().isdisjoint(unique):
            return False
        if self.cold is not None:  # a new version of a cold key replaces its slot
            self.kill_cold(written)
        self.by_key.update(zip(keys, written, strict=True))
        self.by_seqno.update(zip([it.seqno for it in written], written, strict=True))
        self.columns.extend(written, exact=True)
        return True

    def _drop_completed_prepare(self, commit: CommittedItem) -> None:
        """The committed prepare leaves the disk (as compaction purges it)."""
        old = self.by_key.get((-1 - commit.collection_id, commit.key))
        if old is not None and old.seqno == commit.prepared_seqno:
            del self.by_key[old.doc_key]
            del self.by_seqno[old.seqno]
            self.columns.remove(old.seqno)

    def cold_may_hold(self, rows: Sequence[Row]) -> bool:
        """May the cold tier hold a key of ``rows`` (a bulk write's: ``ColdView.candidates``)?"""
        return self.cold is not None and bool(self.cold.candidates(list(map(_DOC_OF_ROW, rows))))

    def kill_cold(self, written: Sequence[Item]) -> None:
        """The cold slots of keys ``written`` (persisted now) has a newer version of
        leave the disk."""
        cold = self.cold
        assert cold is not None
        upto = cold.upto
        docs = [  # not a system event nor a prepare or abort (``TAG_DURABLE``)
            (item.collection_id, item.key)
            for item in written
            if item.seqno > upto and not item.tag & TAG_SYSTEM
        ]
        for cid, key in cold.candidates(docs):
            cold.kill(cid, key)

    def purge(self, upto: int) -> tuple[list[Item], int]:
        """Remove on-disk tombstones at or below ``upto``: the hot ones removed, and how
        many of the cold tier's."""
        gone = [it for it in self.by_key.values() if it.deleted and it.seqno <= upto]
        purged = 0
        if self.cold is not None:  # the cold tier's tombstones (a loaded corpus's)
            purged, top = self.cold.purge(upto)
            self.purge_seqno = max(self.purge_seqno, top)
        for it in gone:
            del self.by_key[it.doc_key]
            del self.by_seqno[it.seqno]
            self.purge_seqno = max(self.purge_seqno, it.seqno)
        if gone:
            self.columns.rebuild(self.by_seqno)
        return gone, purged

    def purge_bound(self, before: float) -> int | None:
        """The seqno compaction purges up to for the tombstones deleted before
        ``before`` (``persistent_metadata_purge_age`` ago: kv_engine
        ``compaction_config.h`` ``purge_before_ts``): below the first younger tombstone
        on disk, at most the persisted seqno; None when no tombstone that old is on
        disk (``mockdcp.model._timers``)."""
        young, oldest = math.inf, math.inf
        for item in self.by_key.values():
            if item.deleted:
                if item.delete_time < before:
                    oldest = min(oldest, item.seqno)
                else:
                    young = min(young, item.seqno)
        if self.cold is not None:
            old_seqno, young_seqno = self.cold.tombstones_by_age(before)
            oldest, young = min(oldest, old_seqno), min(young, young_seqno)
        upto = min(young - 1, self.persisted_seqno)
        return None if oldest > upto else int(upto)

    def fold(self, view: ColdView, docs: Sequence[tuple[int, bytes]], run: Sequence[Item]) -> None:
        """Compaction moved ``run`` (the write log after the cold tier, up to the end of
        ``view``, which holds it all) into the cold tier ``view``: the disk's versions
        among them (of keys ``docs``) leave the hot disk (``_compaction``)."""
        by_key = self.by_key
        for doc in docs:
            del by_key[doc]
        # a dict keeps its table when emptied: copies are their size
        self.by_key = dict(by_key)
        self.by_seqno = {
            s: it for s, it in self.by_seqno.items() if s < run[0].seqno or s > view.upto
        }
        self.columns.cut(run[0].seqno, view.upto)
        self.cold = view

    def load_cold(self, segment: ColdSegment, upto: int | None, purged: int = 0) -> ColdView:
        """The cold tier is ``segment`` up to ``upto`` (default all of it)."""
        from mockdcp.model._cold import ColdView

        upto = segment.last_seqno if upto is None else upto
        self.cold = view = ColdView(segment, upto, purged=purged)
        return view

    def release_pages(self) -> None:
        """A backfill has read what it wanted of the disk: the pages of the on-disk
        files it mapped go back to the kernel's page cache (``DiskSegment``), so a
        corpus larger than memory streamed a vbucket after another keeps one vbucket's
        pages resident, not all of them."""
        if self.cold is not None:
            self.cold.segment.release_pages()

    # -- reading ---------------------------------------------------------------------

    def snapshot(self, after_seqno: int, *, frames: bool = False) -> DiskSnapshot:
        """The newest persisted version of each key written after ``after_seqno``: the
        items, or with ``frames`` their seqnos and frames only."""
        cols = self.columns
        i = cols.after(after_seqno)
        if self.cold is not None and self.cold.upto > after_seqno:
            return self._cold_snapshot(after_seqno, i, frames=frames)
        if not frames:
            items = tuple(map(self.by_seqno.__getitem__, cols.seqnos[i:]))
            return self._snapshot(after_seqno + 1, items)
        return self._snapshot(
            after_seqno + 1,
            (),
            cols.seqnos[i:],
            cols.heads[i:],
            cols.tails[i:],
            bytes(cols.tags[i:]),
            cols.cids[i:],
            cols.sizes[i:],
        )

    def _snapshot(self, start: int, items: tuple[Item, ...], *frames: object) -> DiskSnapshot:
        """A snapshot from ``start`` to the persisted seqno, with the disk's seqnos."""
        return DiskSnapshot(
            start,
            self.persisted_seqno,
            items,
            self.persisted_completed_seqno,
            self.persisted_visible_seqno,
            self.purge_seqno,
            *frames,  # type: ignore[arg-type]
        )

    def _cold_snapshot(self, after_seqno: int, i: int, *, frames: bool) -> DiskSnapshot:
        """``snapshot`` when cold slots are among the items: the hot disk's items below
        the cold tier's seqnos, the cold tier's alive slots (their frames read from its
        buffer, no item object), the hot disk's items above."""
        cold = self.cold
        assert cold is not None
        seg, cols = cold.segment, self.columns
        hot = cols.seqnos
        read_seqnos, (heads, tails, tags, cids, sizes) = cold.read(after_seqno)
        if frames and i == len(hot):
            # the cold tier's alone (a loaded vbucket's usual read, once a stream): its
            # columns as they are (collection ids uint32, sizes int64), not copied into
            # arrays; a read of a vbucket of ten documents was half numpy's calls
            return DiskSnapshot(
                after_seqno + 1,
                self.persisted_seqno,
                (),
                self.persisted_completed_seqno,
                self.persisted_visible_seqno,
                self.purge_seqno,
                read_seqnos,
                heads,
                tails,
                tags,
                cast("Sequence[int]", cids),  # (numpy columns read as sequences of ints)
                cast("Sequence[int]", sizes),
                self,
            )
        j = max(i, cols.after(seg.first_seqno - 1))
        seqnos = _spliced("q", hot[i:j], read_seqnos.tobytes(), hot[j:])
        if not frames:
            return self._snapshot(after_seqno + 1, tuple(map(self.__getitem__, seqnos)))
        return self._snapshot(
            after_seqno + 1,
            (),
            seqnos,
            cold.joined(cols.heads[i:j], heads, cols.heads[j:]),
            cold.joined(cols.tails[i:j], tails, cols.tails[j:]),
            bytes(cols.tags[i:j]) + tags + bytes(cols.tags[j:]),
            _spliced(
                "I", cols.cids[i:j], cids.astype("uint32", copy=False).tobytes(), cols.cids[j:]
            ),
            _spliced(
                "I", cols.sizes[i:j], sizes.astype("uint32", copy=False).tobytes(), cols.sizes[j:]
            ),
            self,
        )


def _spliced(
    typecode: str, below: Sequence[int], middle: bytes, above: Sequence[int]
) -> array[int]:
    """An ``array`` of ``below``, the items ``middle`` holds (their bytes), ``above``: the
    hot disk's column around the cold tier's (``middle`` alone when the hot disk has
    nothing there, a loaded vbucket's usual read)."""
    if not below and not above:
        return array(typecode, middle)
    out = array(typecode, below)
    out.frombytes(middle)
    out.extend(above)
    return out
