"""One vbucket as a data node keeps it: hash table, checkpoints, disk, failover table.

Sources: kv_engine ``dcp/active_stream.cc`` (snapshots from memory and disk, cursor
dropping), ``failover-table.cc`` (failover table), ``docs/dcp/documentation/rollback.md``
(purge seqno). The bucket (``_bucket.py``) validates arguments and calls these methods;
everything here assumes valid input.

State:

* ``items``: (collection, key) → newest version, tombstones included (the hash table);
* ``checkpoints``: the in-memory history streams read through cursors (last one open);
* ``disk``: (collection, key) → newest *persisted* version, tombstones until purged, and
  ``disk_seqnos`` (an ``array``: slices copy no objects) with ``disk_heads``,
  ``disk_tails``, ``disk_tags`` and ``disk_cids`` beside it: the same items' seqnos,
  frames (in two pieces, ``Item``), tags and collection ids in seqno order, for backfills;
* ``high_seqno`` ≥ ``persisted_seqno`` ≥ ``purge_seqno``;
* durable writes (kv_engine ``durability_monitor``, docs/dcp/documentation/commands/
  prepare.md, commit.md, abort.md): a prepare (``DurableItem``) takes a seqno and
  waits in ``pending`` (one per key); its commit (``CommittedItem``) and its abort take
  their own seqnos. ``max_visible_seqno`` is the highest seqno of a committed (visible)
  item, ``high_completed_seqno`` the seqno of the last prepare committed or aborted.
  Prepares and aborts are in their own key namespace (``DurableItem.doc_key``): in the
  checkpoints (a second one of a key in the open checkpoint opens a new one, kv_engine
  ``Checkpoint::queueDirty`` answering FailureDuplicateItem) and on disk, where a
  prepare leaves once its commit is persisted (the disk as compaction leaves it: kv_engine
  purges completed prepares). Restart and failover keep the prepares their cut keeps,
  pending unless it keeps their commit or abort too, and lose the others (kv_engine
  warmup reloads the persisted prepares, a promoted replica keeps those it received);
* ``generation`` changes whenever the vbucket's history is cut (restart, failover, flush)
  or its state changes; a stream that sees a new generation ends (kv_engine
  ``ActiveStream::setDead``).
"""

from __future__ import annotations

import bisect
from array import array
from itertools import compress
from operator import add, attrgetter, not_
from typing import TYPE_CHECKING, Protocol

import attrs

from mockdcp.model._checkpoint import Checkpoint, Cursor
from mockdcp.model._failover import FailoverTable
from mockdcp.model._item import (
    SYSTEM_COLLECTION_ID,
    TAG_COLLECTION,
    TAG_DURABLE,
    TAG_EMPTY,
    CommittedItem,
    DurableItem,
    Item,
    ItemKind,
    SystemEventItem,
)
from mockdcp.protocol import MUTATION_FRAME, SystemEventType, VBucketState, collection_prefix
from mockdcp.util import ModelError

if TYPE_CHECKING:
    import random
    from collections.abc import Iterator, Sequence

    from mockdcp.model._cold import ColdSegment, ColdView


class SeqnoLookup(Protocol):
    """seqno → item (a mapping, or ``_DiskLookup``)."""

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
    #: the items' collection ids (an ``array("I")``), beside ``tags``
    cids: Sequence[int] = ()
    #: the items' canonical frame sizes (``Item.size``, an ``array("I")``)
    sizes: Sequence[int] = ()
    #: the snapshot's own seqno → item lookup: a history snapshot's (older revisions
    #: are not in ``VBucket.disk_by_seqno``), or one with cold slots (``_DiskLookup``);
    #: ``None``: ``VBucket.disk_by_seqno`` has them all
    versions: SeqnoLookup | None = None

    def items_at(self, by_seqno: SeqnoLookup, indices: Sequence[int]) -> list[Item]:
        """The items of frames ``indices``, looked up in ``versions`` or else in
        ``VBucket.disk_by_seqno`` (read at once: a later persist may replace them)."""
        lookup = by_seqno if self.versions is None else self.versions
        return [lookup[self.seqnos[i]] for i in indices]


_SEQNO = attrgetter("seqno")
_HEAD, _TAIL = attrgetter("head"), attrgetter("tail")
_CID, _TAG = attrgetter("collection_id"), attrgetter("tag")


class _DiskLookup:
    """seqno → on-disk item of a vbucket, cold slots included (``VBucket.disk_item``):
    the ``versions`` of a snapshot with cold items, read at once."""

    __slots__ = ("_vb",)

    def __init__(self, vb: VBucket) -> None:
        self._vb = vb

    def __getitem__(self, seqno: int) -> Item:
        return self._vb.disk_item(seqno)


@attrs.frozen
class _SeqnoIndex:
    """seqno → item of a history snapshot: its seqnos (ascending) beside its items, looked
    up by bisection (a dictionary of a million revisions cost about 0.1 s a backfill)."""

    seqnos: Sequence[int]
    items: Sequence[Item]

    def __getitem__(self, seqno: int, /) -> Item:
        k = bisect.bisect_left(self.seqnos, seqno)
        if k == len(self.seqnos) or self.seqnos[k] != seqno:
            raise KeyError(seqno)
        return self.items[k]


class HistoryColumns:
    """The persisted part of a history-retaining vbucket's write log, in columns: each
    item's seqno, frame pieces (``Item.head``, ``Item.tail``), tag, collection id and
    frame size, in log order. ``VBucket.persist`` extends them as it persists, so a
    history backfill slices them instead of reading a million item objects (a cache
    miss each: building those columns per backfill cost about 0.6 µs an item). Magma
    keeps its history on disk in the form it streams it from."""

    __slots__ = ("cids", "heads", "seqnos", "sizes", "tags", "tails")

    def __init__(self) -> None:
        self.seqnos = array("q")
        self.heads: list[bytes] = []
        self.tails: list[bytes] = []
        self.tags = bytearray()
        self.cids = array("I")
        self.sizes = array("I")

    def extend(self, items: Sequence[Item]) -> None:
        """Append ``items`` (the next ones of the log), each column with C loops."""
        heads, tails = list(map(_HEAD, items)), list(map(_TAIL, items))
        cids = array("I", map(_CID, items))
        self.seqnos.extend(map(_SEQNO, items))
        self.heads += heads
        self.tails += tails
        self.tags += bytes(map(_TAG, items))
        self.cids += cids
        # ``Item.size``: head, tail, and the default collection's prefix byte
        self.sizes.extend(map(add, map(len, heads), map(add, map(len, tails), map(not_, cids))))


class VBucket:
    """See the module docstring."""

    def __init__(
        self,
        vbid: int,
        rng: random.Random,
        *,
        max_failover_entries: int,
        checkpoint_max_items: int,
        checkpoint_max_bytes: int,
        retains_history: bool = False,
    ) -> None:
        self.vbid = vbid
        #: the bucket retains history (Magma with a retention): checkpoints are
        #: historical, the disk keeps every revision of ``history_collections`` from
        #: ``history_start_seqno`` on
        self.retains_history = retains_history
        #: the collections with ``history: true`` (the bucket keeps this current)
        self.history_collections: frozenset[int] = frozenset()
        self.state = VBucketState.ACTIVE
        self.failover = FailoverTable(rng, max_failover_entries)
        self.checkpoint_max_items = checkpoint_max_items
        self.checkpoint_max_bytes = checkpoint_max_bytes
        self.generation = 0
        #: False while the node holding this copy is down (``Cluster.node_down``): it
        #: takes no writes until the node is up again
        self.online = True
        self._checkpoint_ids = 0
        self._reset(0)

    def _reset(self, seqno: int) -> None:
        """Empty memory and disk; history starts after ``seqno``."""
        self.high_seqno = seqno
        self.persisted_seqno = seqno
        self.purge_seqno = 0
        #: the first seqno of the retained history (0: none; kv_engine's
        #: ``history_start_seqno`` vbucket stat, ``MagmaKVStore::getHistoryStartSeqno``)
        self.history_start_seqno = seqno + 1 if self.retains_history else 0
        #: bytes of frames from the history start to the persisted seqno
        self.history_bytes = 0
        self.items: dict[tuple[int, bytes], Item] = {}
        self.disk: dict[tuple[int, bytes], Item] = {}
        self.disk_seqnos = array("q")
        self.disk_heads: list[bytes] = []
        self.disk_tails: list[bytes] = []
        self.disk_tags = bytearray()
        self.disk_cids = array("I")
        #: each item's canonical frame size (``Item.size``): a backfill's end offsets
        self.disk_sizes = array("I")
        self.disk_by_seqno: dict[int, Item] = {}
        self.cursors: dict[str, Cursor] = {}
        #: every write in seqno order, never de-duplicated: what a replica that had
        #: everything up to a seqno holds (restart and failover rebuild from it)
        self.log: list[Item] = []
        #: the persisted part of ``log`` in columns, while history is retained
        self.history_columns = HistoryColumns()
        #: the system events of ``log`` (the vbucket's own manifest history)
        self.system_events: list[SystemEventItem] = []
        #: collection id -> the highest seqno of an item or event of that collection
        self.collection_high: dict[int, int] = {}
        #: (collection, key) -> its prepare waiting for a commit or an abort
        self.pending: dict[tuple[int, bytes], DurableItem] = {}
        #: prepares and aborts written since the last reset
        self.durable_writes = 0
        #: the highest seqno of a visible (committed) item, and of one persisted
        self.visible_seqno = seqno
        self.persisted_visible_seqno = seqno
        #: the seqno of the last prepare completed (committed or aborted), and of the
        #: last one whose completion is persisted
        self.high_completed_seqno = 0
        self.persisted_completed_seqno = 0
        self.checkpoints: list[Checkpoint] = [self._new_checkpoint(seqno + 1)]
        #: the bulk-loaded documents kept in columns (``_cold``; None: none)
        self.cold: ColdView | None = None

    def _new_checkpoint(self, start: int) -> Checkpoint:
        self._checkpoint_ids += 1
        return Checkpoint(self._checkpoint_ids, start, historical=self.retains_history)

    # -- reading ---------------------------------------------------------------------

    @property
    def max_visible_seqno(self) -> int:
        """The highest seqno of a committed (visible) item: the high seqno unless
        prepares or aborts came after it."""
        return self.visible_seqno

    @property
    def manifest_uid(self) -> int:
        """The manifest uid the vbucket's last system event carries (0 before any)."""
        return self.system_events[-1].manifest_uid if self.system_events else 0

    def get(self, key: bytes, collection_id: int = 0) -> Item | None:
        """The key's newest version (tombstones included): the hash table's, else the
        cold tier's (an item made from its slot)."""
        item = self.items.get((collection_id, key))
        if item is None and self.cold is not None:
            return self.cold.get(collection_id, key)
        return item

    def all_items(self) -> Iterator[Item]:
        """Newest version of every key (tombstones included), in seqno order."""
        return iter(sorted((it for _, it in self.hash_table()), key=_SEQNO))

    def hash_table(self) -> Iterator[tuple[tuple[int, bytes], Item]]:
        """(collection, key) → newest version of every key: the hash table, then the
        cold tier's slots no hot version shadows (their items made one by one)."""
        yield from self.items.items()
        if self.cold is not None:
            items = self.items
            for item in self.cold.items():
                key = (item.collection_id, item.key)
                if key not in items:
                    yield key, item

    def visible_upto(self, seqno: int) -> int:
        """The highest seqno at or below ``seqno`` of a visible item (neither a prepare
        nor an abort); 0 if none."""
        log = self.log
        i = bisect.bisect_right(log, seqno, key=_SEQNO)
        while i and log[i - 1].tag == TAG_DURABLE:
            i -= 1
        found = log[i - 1].seqno if i else 0
        cold = self.cold
        if cold is not None and found < cold.segment.first_seqno <= seqno:
            return min(seqno, cold.upto)
        return found

    def disk_item(self, seqno: int) -> Item:
        """The on-disk item at ``seqno`` (hot, or a cold slot's)."""
        cold = self.cold
        if cold is not None and cold.segment.first_seqno <= seqno <= cold.upto:
            return cold.segment.item(seqno - cold.segment.first_seqno)
        return self.disk_by_seqno[seqno]

    def register_cursor(self, name: str, after_seqno: int) -> Cursor | None:
        """A cursor reading every seqno after ``after_seqno``, or ``None`` when the
        checkpoints no longer hold all of them (the stream must backfill first)."""
        first = self.checkpoints[0]
        if after_seqno + 1 < first.start_seqno or after_seqno > self.high_seqno:
            return None
        for cp in self.checkpoints:
            if cp.start_seqno <= after_seqno + 1 <= max(cp.end_seqno + 1, cp.start_seqno):
                index = self._index_after(cp, after_seqno)
                cursor = Cursor(name, self.vbid, lambda: self.checkpoints, cp, index, after_seqno)
                self.cursors[name] = cursor
                return cursor
        return None

    @staticmethod
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

    def drop_cursor(self, name: str | None = None) -> list[str]:
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
            self._expel()
        return dropped

    def remove_cursor(self, name: str) -> None:
        if self.cursors.pop(name, None) is not None:
            self._expel()

    def backfill_read(self) -> None:
        """A backfill has read what it wanted of the disk: the pages of the on-disk
        files it mapped go back to the kernel's page cache (``DiskSegment``), so a
        corpus larger than memory streamed a vbucket after another keeps one vbucket's
        pages resident, not all of them."""
        if self.cold is not None:
            self.cold.segment.release_pages()

    def disk_snapshot(self, after_seqno: int, *, frames: bool = False) -> DiskSnapshot:
        """The newest persisted version of each key written after ``after_seqno``: the
        items, or with ``frames`` their seqnos and frames only."""
        i = bisect.bisect_right(self.disk_seqnos, after_seqno)
        end = self.persisted_seqno
        if self.cold is not None and self.cold.upto > after_seqno:
            return self._cold_snapshot(after_seqno, i, frames=frames)
        if frames:
            seqnos, heads, tails = self.disk_seqnos[i:], self.disk_heads[i:], self.disk_tails[i:]
            tags = bytes(self.disk_tags[i:])
            cids, sizes = self.disk_cids[i:], self.disk_sizes[i:]
            return DiskSnapshot(
                after_seqno + 1,
                end,
                (),
                self.persisted_completed_seqno,
                self.persisted_visible_seqno,
                self.purge_seqno,
                seqnos,
                heads,
                tails,
                tags,
                cids,
                sizes,
            )
        by = self.disk_by_seqno
        items = tuple(map(by.__getitem__, self.disk_seqnos[i:]))
        return DiskSnapshot(
            after_seqno + 1,
            end,
            items,
            self.persisted_completed_seqno,
            self.persisted_visible_seqno,
            self.purge_seqno,
        )

    def _cold_snapshot(self, after_seqno: int, i: int, *, frames: bool) -> DiskSnapshot:
        """``disk_snapshot`` when cold slots are among the items: the hot disk's items
        below the cold tier's seqnos, the cold tier's alive slots (their frames read
        from its buffer, no item object), the hot disk's items above."""
        from mockdcp.model._cold import joined_pieces

        cold = self.cold
        assert cold is not None
        seg = cold.segment
        hot = self.disk_seqnos
        j = bisect.bisect_left(hot, seg.first_seqno, lo=i)
        slots = cold.live_slots(after_seqno)
        heads, tails, tags, cids, sizes = cold.frames(slots)
        seqnos = array("q", hot[i:j])
        seqnos.frombytes((slots + seg.first_seqno).astype("int64").tobytes())
        seqnos.extend(hot[j:])
        lookup = _DiskLookup(self)
        if not frames:
            items = tuple(map(lookup.__getitem__, seqnos))
            return DiskSnapshot(
                after_seqno + 1,
                self.persisted_seqno,
                items,
                self.persisted_completed_seqno,
                self.persisted_visible_seqno,
                self.purge_seqno,
            )
        all_cids = array("I", self.disk_cids[i:j])
        all_cids.frombytes(cids.astype("uint32").tobytes())
        all_cids.extend(self.disk_cids[j:])
        all_sizes = array("I", self.disk_sizes[i:j])
        all_sizes.frombytes(sizes.astype("uint32").tobytes())
        all_sizes.extend(self.disk_sizes[j:])
        return DiskSnapshot(
            after_seqno + 1,
            self.persisted_seqno,
            (),
            self.persisted_completed_seqno,
            self.persisted_visible_seqno,
            self.purge_seqno,
            seqnos,
            joined_pieces(self.disk_heads[i:j], heads, self.disk_heads[j:]),
            joined_pieces(self.disk_tails[i:j], tails, self.disk_tails[j:]),
            bytes(self.disk_tags[i:j]) + tags + bytes(self.disk_tags[j:]),
            all_cids,
            all_sizes,
            lookup,
        )

    def history_snapshot(self, after_seqno: int) -> DiskSnapshot:
        """The persisted history after ``after_seqno`` (from the history start at the
        earliest), frames only: every revision of the history collections' keys, the
        newest version of every other key (kv_engine ``backfill_disk_to_stream.cc``,
        a scan with ``SnapshotSource::HeadAllVersions``)."""
        first = max(after_seqno + 1, self.history_start_seqno)
        end = self.persisted_seqno
        log, disk, hist = self.log, self.disk_by_seqno, self.history_collections
        i = bisect.bisect_left(log, first, key=_SEQNO)
        j = bisect.bisect_right(log, end, key=_SEQNO)
        cols = self.history_columns
        if len(cols.seqnos) == j:
            # the persisted log as its columns hold it: every revision of the history
            # collections, the newest on disk of anything else (a system event, a key
            # of a collection without history); no item object is read
            seqnos, cids, items = cols.seqnos[i:j], cols.cids[i:j], log[i:j]
            heads, tails, tags, sizes = (
                cols.heads[i:j],
                cols.tails[i:j],
                cols.tags[i:j],
                cols.sizes[i:j],
            )
            if not hist.issuperset(cids):
                # a few entries outside the history collections (system events, keys of
                # collections without history): only the newest on disk of each stays
                others = [k for k, c in enumerate(cids) if c not in hist]
                drop = {k for k in others if disk.get(seqnos[k]) is not items[k]}
                if drop:
                    keep = [k not in drop for k in range(len(cids))]
                    seqnos, cids = (
                        array("q", compress(seqnos, keep)),
                        array("I", compress(cids, keep)),
                    )
                    heads, tails = list(compress(heads, keep)), list(compress(tails, keep))
                    tags, sizes = bytearray(compress(tags, keep)), array("I", compress(sizes, keep))
                    items = list(compress(items, keep))
        else:  # columns not kept as far (not expected): read the items
            chosen = [it for it in log[i:j] if it.collection_id in hist or disk.get(it.seqno) is it]
            read = HistoryColumns()
            read.extend(chosen)
            seqnos, heads, tails, tags = read.seqnos, read.heads, read.tails, read.tags
            cids, sizes, items = read.cids, read.sizes, chosen
        return DiskSnapshot(
            first,
            end,
            (),
            self.persisted_completed_seqno,
            self.persisted_visible_seqno,
            self.purge_seqno,
            seqnos,
            heads,
            tails,
            bytes(tags),
            cids,
            sizes,
            _SeqnoIndex(seqnos, items),
        )

    def purge_history(self, upto: int) -> None:
        """History at or below ``upto`` is gone (magma's retention compacted it): the
        history start moves above it and older revisions leave the disk."""
        start = self.history_start_seqno
        if upto < start:
            return
        log = self.log
        i = bisect.bisect_left(log, start, key=_SEQNO)
        j = bisect.bisect_right(log, upto, key=_SEQNO)
        self.history_bytes -= sum(it.size for it in log[i:j])
        self.history_start_seqno = upto + 1

    def retention_cut(self, now: float, max_bytes: int, max_seconds: int) -> int:
        """The seqno history must be purged up to for the retention (bytes of this
        vbucket's share, seconds on the bucket's clock; 0 = no limit) to hold; the
        history start - 1 when nothing needs to go. Revisions written before ``now -
        max_seconds`` (their CAS is their write time) and the oldest revisions while the
        history holds more than ``max_bytes`` go."""
        log = self.log
        i = bisect.bisect_left(log, self.history_start_seqno, key=_SEQNO)
        j = bisect.bisect_right(log, self.persisted_seqno, key=_SEQNO)
        held, oldest = self.history_bytes, (now - max_seconds) * 1e9
        cut = self.history_start_seqno - 1
        while i < j and ((max_bytes and held > max_bytes) or (max_seconds and log[i].cas < oldest)):
            held -= log[i].size
            cut = log[i].seqno
            i += 1
        return cut

    def live(self, key: bytes, collection_id: int) -> Item:
        """The live document ``key`` of the collection, or ``ModelError`` if there is
        none (never written, deleted, or purged)."""
        old = self.get(key, collection_id)
        if old is None or old.deleted:
            raise ModelError(f"no live document {key!r} in vbucket {self.vbid}")
        return old

    def check_writable(self) -> None:
        """``ModelError`` unless the vbucket is active (only an active vbucket takes
        writes; a replica's come by replication) and its node is up."""
        if self.state is not VBucketState.ACTIVE:
            state = self.state.name.lower()
            raise ModelError(f"vbucket {self.vbid} is {state}: writes need active")
        if not self.online:
            raise ModelError(f"vbucket {self.vbid} is on a node that is down")

    def check_persist(self, upto: int) -> None:
        """``ModelError`` unless ``upto`` is between the persisted and the high seqno."""
        if not self.persisted_seqno <= upto <= self.high_seqno:
            raise ModelError(
                f"vbucket {self.vbid}: persist upto {upto} is outside "
                f"[{self.persisted_seqno}, {self.high_seqno}]"
            )

    def check_purge(self, upto: int) -> None:
        """``ModelError`` unless ``upto`` is persisted: only tombstones on disk purge."""
        if not 0 <= upto <= self.persisted_seqno:
            raise ModelError(
                f"vbucket {self.vbid}: only persisted tombstones can be purged "
                f"(upto {upto} > persisted {self.persisted_seqno})"
            )

    def check_history(self, seqno: int) -> None:
        """``ModelError`` unless history can be cut at ``seqno`` (0..high seqno)."""
        if not 0 <= seqno <= self.high_seqno:
            raise ModelError(
                f"vbucket {self.vbid}: lose_after {seqno} beyond high seqno {self.high_seqno}"
            )

    # -- writing (the bucket has validated) ---------------------------------------------

    def mutate(self, cas: int, **fields: object) -> Item:
        """Write an item of ``fields`` (key, collection_id, value, ... as ``Item`` takes
        them) at the next seqno, its rev seqno one above the key's last (1 for a new
        key), with ``cas``; returns it."""
        old = self.get(fields["key"], fields["collection_id"])  # type: ignore[arg-type]
        item = Item(
            vbucket=self.vbid,
            seqno=self.high_seqno + 1,
            rev_seqno=(old.rev_seqno + 1) if old is not None else 1,
            cas=cas,
            **fields,  # type: ignore[arg-type]
        )
        self.write(item)
        return item

    def keeps_history_of(self, collection_id: int) -> bool:
        """Items of this collection are never de-duplicated (kv_engine
        ``CanDeduplicate::No``)."""
        return self.retains_history and collection_id in self.history_collections

    def write(self, item: Item) -> None:
        """Append ``item`` (any kind: a replica copies its active's log through here)."""
        if item.tag == TAG_DURABLE:
            assert isinstance(item, DurableItem)
            self._write_durable(item)
            self._replay_durability(item)
            return
        if type(item) is CommittedItem:
            self._replay_durability(item)
        if self.keeps_history_of(item.collection_id) and item.doc_key in self.checkpoints[-1].index:
            # kv_engine ``Checkpoint::queueDirty`` answers FailureDuplicateItem for a
            # key that may not be de-duplicated: the checkpoint closes and the new
            # revision opens the next one (``checkpoint.cc``)
            self.close_checkpoint()
        self.high_seqno = self.visible_seqno = item.seqno
        self.collection_high[item.collection_id] = item.seqno
        self.items[item.doc_key] = item
        self.log.append(item)
        cp = self.checkpoints[-1]
        cp.append(item)
        if cp.item_count >= self.checkpoint_max_items or cp.bytes >= self.checkpoint_max_bytes:
            self.close_checkpoint()

    def write_rows(self, rows: Sequence[tuple[bytes, int, bytes, int, int, int, int]]) -> None:
        """Write mutations (key, collection, value, datatype, flags, expiry, CAS) in
        order, as ``write`` would one by one (the bucket has validated them): the bulk
        load's inner loop, with the frame, the item and the checkpoint's bookkeeping
        inlined for keys new to the open checkpoint.

        About 2 µs a row on this project's VM; each dictionary is probed once for a key
        it does not hold (``setdefault`` both looks up and inserts), and the item's
        slots are stored one statement each (a tuple assignment builds a tuple)."""
        if (
            self.cold is not None
            or self.checkpoints[-1].visible is not None
            or (
                self.retains_history and not self.history_collections.isdisjoint(r[1] for r in rows)
            )
        ):
            # revisions of a history collection must not be de-duplicated, a key may
            # have its last version in the cold tier, and a checkpoint with prepares
            # keeps its visible frames apart (``Checkpoint.append``): the general path,
            # one write a row
            for key, cid, value, dt, flags, expiry, cas in rows:
                self.mutate(
                    cas,
                    key=key,
                    collection_id=cid,
                    value=value,
                    datatype=dt,
                    flags=flags,
                    expiry=expiry,
                )
            return
        items, log_append, collection_high = self.items, self.log.append, self.collection_high
        vbid, seqno = self.vbid, self.high_seqno
        max_items, max_bytes = self.checkpoint_max_items, self.checkpoint_max_bytes
        head_of, mutation, new = MUTATION_FRAME.pack, ItemKind.MUTATION, Item.__new__
        cp = self.checkpoints[-1]
        index, entries, heads, tails = cp.index, cp.entries, cp.heads, cp.tails
        in_index, entries_append = index.setdefault, entries.append
        heads_append, tails_append = heads.append, tails.append
        tags_append, ends_append, cids_append = cp.tags.append, cp.ends.append, cp.cids.append
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
            if room_items <= 0 or room_bytes <= 0:  # as ``write`` closes it
                cp.end_seqno, cp.bytes, self.high_seqno = seqno, max_bytes - room_bytes, seqno
                self.visible_seqno = seqno
                self.close_checkpoint()
                cp = self.checkpoints[-1]
                index, entries, heads, tails = cp.index, cp.entries, cp.heads, cp.tails
                in_index, entries_append = index.setdefault, entries.append
                heads_append, tails_append = heads.append, tails.append
                tags_append, ends_append = cp.tags.append, cp.ends.append
                cids_append = cp.cids.append
                total, room_bytes, room_items, position = 0, max_bytes, max_items, 0
        if rows:
            cp.end_seqno, cp.bytes, self.high_seqno = seqno, max_bytes - room_bytes, seqno
            self.visible_seqno = seqno

    def prepare(
        self, cas: int, *, level: int, deleted: bool = False, **fields: object
    ) -> DurableItem:
        """A durable write's prepare of ``fields`` (key, collection_id, value, flags,
        expiry, datatype) at the next seqno, pending until committed or aborted; its rev
        seqno one above the committed document's (the bucket has checked that the key
        has no prepare pending)."""
        key, cid = fields["key"], fields["collection_id"]
        old = self.get(key, cid)  # type: ignore[arg-type]
        item = DurableItem(
            kind=ItemKind.PREPARE,
            vbucket=self.vbid,
            seqno=self.high_seqno + 1,
            rev_seqno=(old.rev_seqno + 1) if old is not None else 1,
            cas=cas,
            level=level,
            deleted=deleted,
            **fields,  # type: ignore[arg-type]
        )
        self._write_durable(item)
        self.pending[(item.collection_id, item.key)] = item
        return item

    def commit(self, key: bytes, collection_id: int) -> CommittedItem:
        """Commit the key's pending prepare: its document becomes visible at the next
        seqno (a mutation, or a tombstone for a prepared deletion), with the prepare's
        CAS and rev seqno (kv_engine ``VBucket::commit``)."""
        prepare = self.pending.pop((collection_id, key))
        kind = ItemKind.DELETION if prepare.prepared_deleted else ItemKind.MUTATION
        item = CommittedItem(
            prepared_seqno=prepare.seqno,
            key=key,
            collection_id=collection_id,
            vbucket=self.vbid,
            seqno=self.high_seqno + 1,
            rev_seqno=prepare.rev_seqno,
            cas=prepare.cas,
            flags=prepare.flags,
            expiry=prepare.expiry,
            datatype=prepare.datatype,
            value=prepare.body,
            kind=kind,
        )
        self.write(item)
        self.high_completed_seqno = prepare.seqno
        return item

    def abort(self, key: bytes, collection_id: int, cas: int) -> DurableItem:
        """Abort the key's pending prepare: an abort at the next seqno discards it."""
        prepare = self.pending.pop((collection_id, key))
        item = DurableItem(
            kind=ItemKind.ABORT,
            key=key,
            collection_id=collection_id,
            vbucket=self.vbid,
            seqno=self.high_seqno + 1,
            rev_seqno=prepare.rev_seqno,
            cas=cas,
            prepared_seqno=prepare.seqno,
        )
        self._write_durable(item)
        self.high_completed_seqno = prepare.seqno
        return item

    def _write_durable(self, item: DurableItem) -> None:
        """Append a prepare or an abort: it takes a seqno and counts towards its
        collection's high seqno, but not the max visible seqno; a prepare or abort of
        the same key already in the open checkpoint closes it first."""
        if item.doc_key in self.checkpoints[-1].index:
            self.close_checkpoint()
        self.high_seqno = item.seqno
        self.durable_writes += 1
        self.collection_high[item.collection_id] = item.seqno
        self.log.append(item)
        cp = self.checkpoints[-1]
        cp.append(item)
        if cp.item_count >= self.checkpoint_max_items or cp.bytes >= self.checkpoint_max_bytes:
            self.close_checkpoint()

    def write_system_event(self, event: SystemEventItem) -> None:
        """Write a manifest change's event like any item; it counts towards the high
        seqno of the collection it is about."""
        self.write(event)
        self.system_events.append(event)
        cid = event.event_collection_id
        if cid is not None:
            self.collection_high[cid] = event.seqno
        if event.flush_uid and event.event is SystemEventType.BEGIN_COLLECTION:
            # a flush: the collection's documents so far are gone from the hash table (a
            # consumer forgets them when it reads the event; the disk keeps them until
            # compaction, as kv_engine's logically deleted items)
            for key in [k for k in self.items if k[0] == cid]:
                del self.items[key]
            if self.cold is not None and cid is not None:
                self.cold.flushed.add(cid)

    def holds_documents(self) -> bool:
        """Has the vbucket a document (or a tombstone, a prepare, a cold tier)?"""
        return (
            self.cold is not None
            or bool(self.pending)
            or any(cid != SYSTEM_COLLECTION_ID for cid, _ in self.items)
            or any(cid != SYSTEM_COLLECTION_ID for cid, _ in self.disk)
        )

    def load_cold(self, segment: ColdSegment, upto: int | None = None) -> None:
        """Take ``segment`` (up to seqno ``upto``, default all of it) as the vbucket's
        persisted documents, as a warm-up after a bulk load leaves a node: everything
        before is persisted, the segment's seqnos follow the high seqno, the checkpoints
        hold nothing of it and start after it; stream cursors are dropped (their streams
        backfill, kv_engine ``ActiveStream::handleSlowStream``). The bucket (or the
        replication stream) has checked that the vbucket holds no document and that the
        segment starts after its high seqno (or that it holds the segment up to its high
        seqno, and takes more of it)."""
        from mockdcp.model._cold import ColdView

        held = self.cold
        # a copy a rollback cut inside the segment takes the rest of it
        assert segment.first_seqno == self.high_seqno + 1 or (
            held is not None and held.segment is segment and held.upto == self.high_seqno
        )
        self.persist(self.high_seqno)
        for cursor in self.cursors.values():
            cursor.dropped = True
        self.cursors = {}
        self.cold = view = ColdView(segment, segment.last_seqno if upto is None else upto)
        self.high_seqno = self.persisted_seqno = view.upto
        self._cold_counts()
        self.persisted_visible_seqno = self.visible_seqno
        self.checkpoints = [self._new_checkpoint(view.upto + 1)]
        if self.history_start_seqno:
            self.history_start_seqno = view.upto + 1

    def _cold_counts(self) -> None:
        """The cold tier's part of the visible seqno and the collections' high seqnos."""
        cold = self.cold
        assert cold is not None
        seg = cold.segment
        held = cold.upto - seg.first_seqno + 1
        self.visible_seqno = max(self.visible_seqno, cold.upto)
        high = self.collection_high
        for cid, last in zip(*seg.last_slots(held), strict=True):
            seqno = seg.first_seqno + last
            high[cid] = max(high.get(cid, 0), seqno)

    def close_checkpoint(self) -> None:
        """Close the open checkpoint (if it holds anything) and open a new one."""
        cp = self.checkpoints[-1]
        if not cp.entries:
            return
        cp.close()
        self.checkpoints.append(self._new_checkpoint(self.high_seqno + 1))
        self._expel()

    def persist(self, upto: int) -> None:
        """Writes up to ``upto`` join the on-disk view (newest per key).

        Read from the write log, not the checkpoints: de-duplication in the open
        checkpoint may already have removed a version that is the newest one at
        ``upto`` (set A, set B, set A; persist up to B must keep the first A).
        """
        log = self.log
        i = bisect.bisect_right(log, self.persisted_seqno, key=_SEQNO)
        j = bisect.bisect_right(log, upto, key=_SEQNO)
        written = log[i:j]
        if not self._to_disk_new(written):
            for item in written:
                self._to_disk(item)
                if isinstance(item, CommittedItem):
                    self._drop_completed_prepare(item)
        for item in reversed(written):
            if not isinstance(item, DurableItem):
                self.persisted_visible_seqno = item.seqno
                break
        for item in reversed(written if self.durable_writes else ()):
            if isinstance(item, CommittedItem) or (
                isinstance(item, DurableItem) and item.kind is ItemKind.ABORT
            ):
                self.persisted_completed_seqno = item.prepared_seqno
                break
        if self.history_start_seqno:
            self.history_columns.extend(written)
            if written:
                self.history_bytes += sum(self.history_columns.sizes[-len(written) :])
        self.persisted_seqno = max(self.persisted_seqno, upto)
        self._expel()

    def _drop_completed_prepare(self, commit: CommittedItem) -> None:
        """The committed prepare leaves the disk (as compaction purges it)."""
        old = self.disk.get((-1 - commit.collection_id, commit.key))
        if old is not None and old.seqno == commit.prepared_seqno:
            del self.disk[old.doc_key]
            del self.disk_by_seqno[old.seqno]
            j = bisect.bisect_left(self.disk_seqnos, old.seqno)
            del self.disk_seqnos[j]
            del self.disk_heads[j]
            del self.disk_tails[j]
            del self.disk_tags[j]
            del self.disk_cids[j]
            del self.disk_sizes[j]

    def _to_disk_new(self, written: list[Item]) -> bool:
        """``_to_disk`` for each of ``written`` in one go, when none of their keys is on
        disk yet or twice among them and they follow the disk's seqnos (a vbucket
        persisting new documents: a bulk load); False, changing nothing, otherwise.
        About a third of the time of one ``_to_disk`` a item."""
        if self.durable_writes:  # commits drop their prepares: the general path
            return False
        keys = [it.doc_key for it in written]
        seqnos = [it.seqno for it in written]
        if not keys or (self.disk_seqnos and seqnos[0] <= self.disk_seqnos[-1]):
            return False
        unique = set(keys)
        if len(unique) != len(keys) or not self.disk.keys().isdisjoint(unique):
            return False
        if self.cold is not None:  # a new version of a cold key replaces its slot
            self._kill_cold(written)
        self.disk.update(zip(keys, written, strict=True))
        self.disk_by_seqno.update(zip(seqnos, written, strict=True))
        self.disk_seqnos.extend(seqnos)
        self.disk_heads += [it.head for it in written]
        self.disk_tails += [it.tail for it in written]
        self.disk_tags += bytes([it.tag for it in written])
        self.disk_cids.extend([it.collection_id for it in written])
        self.disk_sizes.extend([it.size for it in written])
        return True

    def _kill_cold(self, written: Sequence[Item]) -> None:
        """The cold slots of keys ``written`` (persisted now) has a newer version of
        leave the disk."""
        cold = self.cold
        assert cold is not None
        for item in written:
            if item.seqno > cold.upto and item.tag != TAG_DURABLE and not item.system:
                cold.kill(item.collection_id, item.key)

    def _to_disk(self, item: Item) -> None:
        if self.cold is not None:
            self._kill_cold((item,))
        old = self.disk.get(item.doc_key)
        if old is not None:
            del self.disk_by_seqno[old.seqno]
            j = bisect.bisect_left(self.disk_seqnos, old.seqno)
            del self.disk_seqnos[j]
            del self.disk_heads[j]
            del self.disk_tails[j]
            del self.disk_tags[j]
            del self.disk_cids[j]
            del self.disk_sizes[j]
        self.disk[item.doc_key] = item
        self.disk_by_seqno[item.seqno] = item
        if not self.disk_seqnos or item.seqno > self.disk_seqnos[-1]:
            self.disk_seqnos.append(item.seqno)
            self.disk_heads.append(item.head)
            self.disk_tails.append(item.tail)
            self.disk_tags.append(item.tag)
            self.disk_cids.append(item.collection_id)
            self.disk_sizes.append(item.size)
        else:
            j = bisect.bisect_left(self.disk_seqnos, item.seqno)
            self.disk_seqnos.insert(j, item.seqno)
            self.disk_heads.insert(j, item.head)
            self.disk_tails.insert(j, item.tail)
            self.disk_tags.insert(j, item.tag)
            self.disk_cids.insert(j, item.collection_id)
            self.disk_sizes.insert(j, item.size)

    def _expel(self) -> None:
        """Drop closed checkpoints wholly persisted and not pinned by a live cursor."""
        pinned = {id(c.checkpoint) for c in self.cursors.values()}
        while len(self.checkpoints) > 1:
            cp = self.checkpoints[0]
            if cp.open or cp.end_seqno > self.persisted_seqno or id(cp) in pinned:
                break
            self.checkpoints.pop(0)

    def purge(self, upto: int) -> int:
        """Remove on-disk tombstones at or below ``upto``; return how many."""
        gone = [it for it in self.disk.values() if it.deleted and it.seqno <= upto]
        purged = 0
        if self.cold is not None:  # the cold tier's tombstones (a loaded corpus's)
            purged, top = self.cold.purge(upto)
            self.purge_seqno = max(self.purge_seqno, top)
        for it in gone:
            del self.disk[it.doc_key]
            del self.disk_by_seqno[it.seqno]
            if self.items.get(it.doc_key) is it:
                del self.items[it.doc_key]
            self.purge_seqno = max(self.purge_seqno, it.seqno)
        if gone:
            by = self.disk_by_seqno
            self.disk_seqnos = array("q", sorted(by))
            self.disk_heads = [by[seqno].head for seqno in self.disk_seqnos]
            self.disk_tails = [by[seqno].tail for seqno in self.disk_seqnos]
            self.disk_tags = bytearray(by[seqno].tag for seqno in self.disk_seqnos)
            self.disk_cids = array("I", (by[seqno].collection_id for seqno in self.disk_seqnos))
            self.disk_sizes = array("I", (by[seqno].size for seqno in self.disk_seqnos))
        return len(gone) + purged

    def truncate(self, seqno: int) -> None:
        """Cut history after ``seqno`` (restart or failover): the vbucket holds what it
        held at ``seqno`` (purged tombstones stay purged), all of it on disk, and memory
        starts again after it. Streams see a new generation; cursors are dropped."""
        purge, history_start, cold = self.purge_seqno, self.history_start_seqno, self.cold
        cut = bisect.bisect_right(self.log, seqno, key=_SEQNO)
        log = self.log[:cut]
        latest: dict[tuple[int, bytes], Item] = {}
        begins: dict[int, int] = {}  # collection -> seqno of its last begin (create, flush)
        for item in log:
            if isinstance(item, SystemEventItem) and item.event is SystemEventType.BEGIN_COLLECTION:
                begins[item.event_collection_id or 0] = item.seqno
            latest[item.doc_key] = item
        self.generation += 1
        for cursor in self.cursors.values():
            cursor.dropped = True
        self._reset(seqno)
        self.purge_seqno = purge
        self.log = log
        if cold is not None and seqno >= cold.segment.first_seqno:
            # the cold tier as far as the cut keeps it, its slots alive again unless a
            # kept newer version replaced them or a kept flush emptied their collection
            from mockdcp.model._cold import ColdView

            self.cold = view = ColdView(cold.segment, min(seqno, cold.upto), purged=purge)
            self._kill_cold(list(latest.values()))
            for cid, begin in begins.items():
                if begin > view.upto:
                    view.kill_collection(cid)
        if history_start:  # what is kept of the history stays history (none of it cold)
            self.history_columns.extend(log)  # all of it on disk now
            self.history_start_seqno = min(history_start, seqno + 1)
            self.history_bytes = sum(it.size for it in log if it.seqno >= history_start)
        for item in log:
            if isinstance(item, SystemEventItem):
                self.system_events.append(item)
                if item.event_collection_id is not None:
                    self.collection_high[item.event_collection_id] = item.seqno
            else:
                self.collection_high[item.collection_id] = item.seqno
            self._replay_durability(item)
            self.durable_writes += isinstance(item, DurableItem)
        if self.cold is not None:
            self._cold_counts()
        self.persisted_visible_seqno = self.visible_seqno
        self.persisted_completed_seqno = self.high_completed_seqno
        for item in sorted(latest.values(), key=lambda it: it.seqno):
            if item.deleted and item.seqno <= purge:
                continue
            if item.seqno < begins.get(item.collection_id, 0):
                continue  # flushed
            if isinstance(item, DurableItem):
                if (
                    item.kind is ItemKind.ABORT
                    or self.pending.get((item.collection_id, item.key)) is item
                ):
                    self._to_disk(item)  # completed prepares are not kept
                continue
            self.items[item.doc_key] = item
            self._to_disk(item)

    def _replay_durability(self, item: Item) -> None:
        """What ``item`` of a kept log does to the pending prepares, the max visible and
        the high completed seqno (``truncate``)."""
        if isinstance(item, DurableItem):
            if item.kind is ItemKind.PREPARE:
                self.pending[(item.collection_id, item.key)] = item
            else:
                self.pending.pop((item.collection_id, item.key), None)
                self.high_completed_seqno = item.prepared_seqno
            return
        self.visible_seqno = item.seqno
        if isinstance(item, CommittedItem):
            self.pending.pop((item.collection_id, item.key), None)
            self.high_completed_seqno = item.prepared_seqno

    # -- lifecycle (restart, failover, state, flush) ---------------------------------------

    def warmup(self) -> None:
        """An unclean restart: everything above the persisted seqno is lost, then warmup
        adds a failover entry at the persisted seqno if active (kv_engine
        ``vbucket_loader.cc``)."""
        self.truncate(self.persisted_seqno)
        if self.state is VBucketState.ACTIVE:
            self.failover.add_entry(self.high_seqno)

    def take_over(self, seqno: int) -> None:
        """A copy that had everything up to ``seqno`` becomes the active: history after
        it is cut and a failover entry opens a new branch there (kv_engine
        ``failover-table.cc``)."""
        self.truncate(seqno)
        self.state = VBucketState.ACTIVE
        self.failover.add_entry(self.high_seqno)

    def set_state(self, state: VBucketState, *, transfer: bool = False) -> bool:
        """Move to ``state``; False if already there. Streams see a new generation
        (they end STATE_CHANGED); becoming active from another state is a promotion and
        adds a failover entry, unless it ends a takeover (``transfer``): the history
        moves to this copy unchanged, uuid and all (kv_engine ``kv_bucket.cc``,
        ``KVBucket::continueToActive`` and ``TransferVB``)."""
        if state is self.state:
            return False
        self.state = state
        self.generation += 1
        if state is VBucketState.ACTIVE and not transfer:
            self.failover.add_entry(self.high_seqno)
        return True

    def flush(self) -> None:
        """Bucket flush: emptied, seqnos from 0 again, a new failover table with one
        entry at 0 (kv_engine recreates the vbuckets); cursors dropped."""
        self.generation += 1
        for cursor in self.cursors.values():
            cursor.dropped = True
        self._reset(0)
        self.failover.entries = []
        self.failover.add_entry(0)


def high_seqnos(vbuckets: Sequence[VBucket], state: int | None = None) -> list[tuple[int, int]]:
    """(vbucket, high seqno) of ``vbuckets`` for GET_ALL_VB_SEQNOS: those in ``state``,
    every live one for 0/None (kv_engine ``getAllVBucketSequenceNumbers``);
    ``ModelError`` for a state that is none."""
    if state not in (None, 0) and state not in set(VBucketState):
        raise ModelError(f"no vbucket state {state}")
    return [
        (vb.vbid, vb.high_seqno)
        for vb in vbuckets
        if (state in (None, 0) and vb.state is not VBucketState.DEAD) or vb.state == state
    ]


def collection_high_seqnos(
    vbuckets: Sequence[VBucket], collection_id: int, state: int | None = None
) -> list[tuple[int, int]]:
    """(vbucket, high seqno of the collection) of ``vbuckets`` in ``state`` (as
    ``high_seqnos``): the seqno of its newest item or system event, 0 if none."""
    return [
        (vbid, vbuckets[vbid].collection_high.get(collection_id, 0))
        for vbid, _ in high_seqnos(vbuckets, state)
    ]
