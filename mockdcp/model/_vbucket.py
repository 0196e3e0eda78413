"""One vbucket as a data node keeps it, composed of parts with one job each.

Sources: kv_engine ``vbucket.h`` / ``ep_vb.h`` (a vbucket of a persistent bucket
composing the parts below), ``failover-table.cc`` (failover table),
``docs/dcp/documentation/rollback.md`` (purge seqno). The bucket (``_bucket.py``)
validates arguments and calls these methods; everything here assumes valid input.

Parts (an ephemeral vbucket would compose a sequence list instead of the disk):

* ``items``: (collection, key) → newest version, tombstones included (the hash table),
  and ``log``: every write in seqno order, never de-duplicated (what a replica that had
  everything up to a seqno holds: restart and failover rebuild from it);
* ``checkpoint_manager`` (``CheckpointManager``): the in-memory history streams read
  through cursors (``checkpoints``, last one open);
* ``store`` (``DiskStore``): the persisted view, its by-seqno frame columns, the purge
  seqno and the cold tier (``disk``, ``disk_by_seqno``, ``persisted_seqno``, ...);
* ``history`` (``HistoryLog``): the retained history of a Magma bucket;
* ``durability`` (``DurabilityMonitor``): prepares pending, the max visible and high
  completed seqnos. Restart and failover keep the prepares their cut keeps, pending
  unless it keeps their commit or abort too, and lose the others (kv_engine warmup
  reloads the persisted prepares, a promoted replica keeps those it received);
* ``high_seqno`` ≥ ``persisted_seqno`` ≥ ``purge_seqno``;
* ``generation`` counts the cuts of the vbucket's history (restart, failover, flush) and
  its state changes: a stamp for caches of what the vbucket holds (the timers' quiet
  vbuckets). Streams learn of a cut from the bucket's change feed (``_changes``: the
  vbucket reset), and end (kv_engine ``ActiveStream::setDead``).
"""

from __future__ import annotations

import bisect
from operator import attrgetter
from typing import TYPE_CHECKING

from mockdcp.model._checkpoint_manager import CheckpointManager
from mockdcp.model._disk_store import DiskSnapshot, DiskStore
from mockdcp.model._durability import DurabilityMonitor, visible_upto
from mockdcp.model._failover import FailoverTable
from mockdcp.model._history_log import HistoryLog
from mockdcp.model._item import (
    SYSTEM_COLLECTION_ID,
    TAG_DURABLE,
    CommittedItem,
    DurableItem,
    Item,
    SystemEventItem,
)
from mockdcp.model._parts import Part
from mockdcp.model._restore import load_cold, truncate
from mockdcp.model._vbucket_checks import VBucketChecks
from mockdcp.protocol import SystemEventType, VBucketState
from mockdcp.util import ModelError

if TYPE_CHECKING:
    import random
    from collections.abc import Iterator, Sequence

    from mockdcp.model._checkpoint import Checkpoint, Cursor
    from mockdcp.model._checkpoint_manager import Row
    from mockdcp.model._cold import ColdSegment, ColdView
    from mockdcp.model._frame_columns import FrameColumns

__all__ = ["DiskSnapshot", "VBucket", "collection_high_seqnos", "high_seqnos"]

_SEQNO = attrgetter("seqno")

#: ``VBucket.dropped_collections`` of a vbucket without system events
_NONE_DROPPED: frozenset[int] = frozenset()


def _dropped(events: list[SystemEventItem]) -> frozenset[int]:
    """The collections ``events`` end (``VBucket.dropped_collections``; asked each
    backfill: without events, no set is made)."""
    if not events:
        return _NONE_DROPPED
    return frozenset(
        e.event_collection_id
        for e in events
        if e.event is SystemEventType.END_COLLECTION and e.event_collection_id is not None
    )


class VBucket(VBucketChecks):
    """See the module docstring."""

    checkpoints: Part[list[Checkpoint]] = Part("checkpoint_manager")
    cursors: Part[dict[str, Cursor]] = Part("checkpoint_manager")
    checkpoint_max_items: Part[int] = Part("checkpoint_manager", "max_items")
    checkpoint_max_bytes: Part[int] = Part("checkpoint_manager", "max_bytes")
    disk: Part[dict[tuple[int, bytes], Item]] = Part("store", "by_key")
    disk_by_seqno: Part[dict[int, Item]] = Part("store", "by_seqno")
    persisted_seqno: Part[int] = Part("store")
    purge_seqno: Part[int] = Part("store")
    persisted_visible_seqno: Part[int] = Part("store")
    persisted_completed_seqno: Part[int] = Part("store")
    cold: Part[ColdView | None] = Part("store")
    retains_history: Part[bool] = Part("history", "retains")
    history_collections: Part[frozenset[int]] = Part("history", "collections")
    history_start_seqno: Part[int] = Part("history", "start_seqno")
    history_bytes: Part[int] = Part("history", "bytes")
    history_columns: Part[FrameColumns] = Part("history", "columns")
    pending: Part[dict[tuple[int, bytes], DurableItem]] = Part("durability")
    durable_writes: Part[int] = Part("durability")
    max_visible_seqno: Part[int] = Part("durability", "visible_seqno")
    high_completed_seqno: Part[int] = Part("durability")

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
        self.state = VBucketState.ACTIVE
        self.failover = FailoverTable(rng, max_failover_entries)
        self.generation = 0
        #: False while the node holding this copy is down (``Cluster.node_down``): it
        #: takes no writes until the node is up again
        self.online = True
        self.checkpoint_manager = CheckpointManager(
            vbid,
            max_items=checkpoint_max_items,
            max_bytes=checkpoint_max_bytes,
            historical=retains_history,
        )
        self.store = DiskStore()
        self.history = HistoryLog(retains=retains_history)
        self.durability = DurabilityMonitor(vbid)
        self.reset(0)

    def reset(self, seqno: int) -> None:
        """Empty memory and disk; history starts after ``seqno``; cursors dropped."""
        self.high_seqno = seqno
        self.store.reset(seqno)
        self.history.reset(seqno)
        self.durability.reset(seqno)
        self.items: dict[tuple[int, bytes], Item] = {}
        self.log: list[Item] = []
        #: the system events of ``log`` (the vbucket's own manifest history)
        self.system_events: list[SystemEventItem] = []
        #: collection id -> the highest seqno of an item or event of that collection
        self.collection_high: dict[int, int] = {}
        self.checkpoint_manager.reset(seqno + 1)

    # -- reading ---------------------------------------------------------------------

    @property
    def manifest_uid(self) -> int:
        """The manifest uid the vbucket's last system event carries (0 before any)."""
        return self.system_events[-1].manifest_uid if self.system_events else 0

    def get(self, key: bytes, collection_id: int = 0) -> Item | None:
        """The key's newest version (tombstones included): the hash table's, else the
        cold tier's (an item made from its slot)."""
        item = self.items.get((collection_id, key))
        cold = self.store.cold
        if item is None and cold is not None:
            return cold.get(collection_id, key)
        return item

    def all_items(self) -> Iterator[Item]:
        """Newest version of every key (tombstones included), in seqno order."""
        return iter(sorted((it for _, it in self.hash_table()), key=_SEQNO))

    def hash_table(self) -> Iterator[tuple[tuple[int, bytes], Item]]:
        """(collection, key) → newest version of every key: the hash table, then the
        cold tier's slots no hot version shadows (their items made one by one)."""
        yield from self.items.items()
        if self.store.cold is not None:
            items = self.items
            for item in self.store.cold.items():
                key = (item.collection_id, item.key)
                if key not in items:
                    yield key, item

    def visible_upto(self, seqno: int) -> int:
        """The highest seqno at or below ``seqno`` of a visible item (neither a prepare
        nor an abort), the cold tier's included; 0 if none."""
        return visible_upto(self.log, seqno, self.store.cold)

    def register_cursor(self, name: str, after_seqno: int) -> Cursor | None:
        """A cursor reading every seqno after ``after_seqno``, or ``None`` when the
        checkpoints no longer hold all of them (the stream must backfill first)."""
        return self.checkpoint_manager.register_cursor(name, after_seqno, self.high_seqno)

    def drop_cursor(self, name: str | None = None) -> list[str]:
        """Drop one cursor, or all (kv_engine ``handleSlowStream``)."""
        return self.checkpoint_manager.drop_cursor(name, self.store.persisted_seqno)

    def remove_cursor(self, name: str) -> None:
        self.checkpoint_manager.remove_cursor(name, self.store.persisted_seqno)

    def backfill_read(self) -> None:
        """A backfill has read what it wanted of the disk (``DiskStore.release_pages``)."""
        self.store.release_pages()

    def disk_snapshot(self, after_seqno: int, *, frames: bool = False) -> DiskSnapshot:
        """The newest persisted version of each key written after ``after_seqno``: the
        items, or with ``frames`` their seqnos and frames only."""
        return self.store.snapshot(after_seqno, frames=frames)

    def history_snapshot(self, after_seqno: int) -> DiskSnapshot:
        """The persisted history after ``after_seqno`` (``HistoryLog.snapshot``)."""
        return self.history.snapshot(after_seqno, self.log, self.store)

    def dropped_collections(self) -> frozenset[int]:
        """Collections dropped in this vbucket: a disk backfill skips their documents."""
        return _dropped(self.system_events)

    def live(self, key: bytes, collection_id: int) -> Item:
        """The live document ``key`` of the collection, or ``ModelError`` if there is
        none (never written, deleted, or purged)."""
        old = self.get(key, collection_id)
        if old is None or old.deleted:
            raise ModelError(f"no live document {key!r} in vbucket {self.vbid}")
        return old

    def holds_documents(self) -> bool:
        """Has the vbucket a document (or a tombstone, a prepare, a cold tier)?"""
        return (
            bool(self.durability.pending)
            or any(cid != SYSTEM_COLLECTION_ID for cid, _ in self.items)
            or self.store.holds_documents()
        )

    # -- writing (the bucket has validated) ---------------------------------------------

    def mutate(self, cas: int, **fields: object) -> Item:
        """Write an item of ``fields`` (as ``Item`` takes them) with ``cas`` at the next
        seqno, its rev seqno one above the key's last (1 for a new key); returns it."""
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

    def write(self, item: Item) -> None:
        """Append ``item`` (any kind: a replica copies its active's log through here)."""
        if item.tag == TAG_DURABLE:
            assert isinstance(item, DurableItem)
            self._write_durable(item)
            return
        if type(item) is CommittedItem:
            self.durability.replay(item)
        if self.history.keeps(item.collection_id) and item.doc_key in self.checkpoints[-1].index:
            # kv_engine ``Checkpoint::queueDirty`` answers FailureDuplicateItem for a
            # key that may not be de-duplicated: the checkpoint closes and the new
            # revision opens the next one (``checkpoint.cc``)
            self.close_checkpoint()
        self.high_seqno = self.durability.visible_seqno = item.seqno
        self.collection_high[item.collection_id] = item.seqno
        self.items[item.doc_key] = item
        self.log.append(item)
        self.checkpoint_manager.append(item, self.store.persisted_seqno)

    def write_rows(self, rows: Sequence[Row]) -> None:
        """Write mutations (key, collection, value, datatype, flags, expiry, CAS) in
        order, as ``write`` would one by one (the bucket has validated them): in bulk
        (``CheckpointManager.append_rows``) unless a revision of a history collection
        must not be de-duplicated, a key may have its last version in the cold tier, or
        the open checkpoint keeps its visible frames apart (``Checkpoint.append``)."""
        history = self.history
        if (
            self.store.cold_may_hold(rows)
            or self.checkpoints[-1].visible is not None
            or (history.retains and not history.collections.isdisjoint(r[1] for r in rows))
        ):
            for key, cid, value, dt, flags, expiry, cas in rows:
                self.mutate(cas, key=key, collection_id=cid, value=value, datatype=dt,
                            flags=flags, expiry=expiry)  # fmt: skip
            return
        seqno = self.checkpoint_manager.append_rows(
            rows,
            self.high_seqno,
            self.items,
            self.log,
            self.collection_high,
            self.store.persisted_seqno,
        )
        self.high_seqno = self.durability.visible_seqno = seqno

    def prepare(
        self, cas: int, *, level: int, deleted: bool = False, **fields: object
    ) -> DurableItem:
        """A durable write's prepare of ``fields`` at the next seqno, pending until
        committed or aborted (``DurabilityMonitor.prepare``)."""
        old = self.get(fields["key"], fields["collection_id"])  # type: ignore[arg-type]
        item = self.durability.prepare(self.high_seqno + 1, old, cas, level, deleted, fields)
        self._write_durable(item)
        return item

    def commit(self, key: bytes, collection_id: int) -> CommittedItem:
        """Commit the key's pending prepare (``DurabilityMonitor.commit``)."""
        item = self.durability.commit(key, collection_id, self.high_seqno + 1)
        self.write(item)
        return item

    def abort(self, key: bytes, collection_id: int, cas: int) -> DurableItem:
        """Abort the key's pending prepare: an abort at the next seqno discards it."""
        item = self.durability.abort(key, collection_id, self.high_seqno + 1, cas)
        self._write_durable(item)
        return item

    def _write_durable(self, item: DurableItem) -> None:
        """Append a prepare or an abort: it takes a seqno and counts towards its
        collection's high seqno, but not the max visible seqno; a prepare or abort of
        the same key already in the open checkpoint closes it first."""
        if item.doc_key in self.checkpoints[-1].index:
            self.close_checkpoint()
        self.high_seqno = item.seqno
        self.durability.prepared(item)
        self.collection_high[item.collection_id] = item.seqno
        self.log.append(item)
        self.checkpoint_manager.append(item, self.store.persisted_seqno)

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
            if self.store.cold is not None and cid is not None:
                self.store.cold.flushed.add(cid)

    # -- memory and disk -----------------------------------------------------------------

    def close_checkpoint(self) -> None:
        """Close the open checkpoint (if it holds anything) and open a new one."""
        self.checkpoint_manager.close(self.high_seqno, self.store.persisted_seqno)

    def persist(self, upto: int) -> None:
        """Writes up to ``upto`` join the on-disk view (newest per key).

        Read from the write log, not the checkpoints: de-duplication in the open
        checkpoint may already have removed a version that is the newest one at
        ``upto`` (set A, set B, set A; persist up to B must keep the first A).
        """
        log = self.log
        i = bisect.bisect_right(log, self.store.persisted_seqno, key=_SEQNO)
        written = log[i : bisect.bisect_right(log, upto, key=_SEQNO)]
        self.store.persist(written, upto, durable=bool(self.durability.durable_writes))
        self.history.persisted(written)
        self.checkpoint_manager.expel(self.store.persisted_seqno)

    def purge(self, upto: int) -> int:
        """Remove on-disk tombstones at or below ``upto``; return how many."""
        gone, cold = self.store.purge(upto)
        for it in gone:
            if self.items.get(it.doc_key) is it:
                del self.items[it.doc_key]
        return len(gone) + cold

    def purge_history(self, upto: int) -> None:
        """History at or below ``upto`` is gone (``HistoryLog.purge``)."""
        self.history.purge(upto, self.log)

    def retention_cut(self, now: float, max_bytes: int, max_seconds: int) -> int:
        """The seqno history must be purged up to for the retention to hold
        (``HistoryLog.retention_cut``)."""
        persisted = self.store.persisted_seqno
        return self.history.retention_cut(self.log, persisted, now, max_bytes, max_seconds)

    def load_cold(self, segment: ColdSegment, upto: int | None = None) -> None:
        """Take ``segment`` (up to seqno ``upto``, default all of it) as the vbucket's
        persisted documents (``_restore.load_cold``)."""
        load_cold(self, segment, upto)

    # -- lifecycle (restart, failover, state, flush) -------------------------------------

    def truncate(self, seqno: int) -> None:
        """Cut history after ``seqno`` (restart or failover): the vbucket holds what it
        held at ``seqno`` (purged tombstones stay purged), all of it on disk, and memory
        starts again after it. Cursors are dropped; the bucket publishes the reset."""
        self.generation += 1
        truncate(self, seqno)

    def warmup(self) -> None:
        """An unclean restart: everything above the persisted seqno is lost, then warmup
        adds a failover entry at the persisted seqno if active (kv_engine
        ``vbucket_loader.cc``)."""
        self.truncate(self.store.persisted_seqno)
        if self.state is VBucketState.ACTIVE:
            self.failover.add_entry(self.high_seqno)

    def cut_branch(self, seqno: int) -> None:
        """A copy that had everything up to ``seqno`` becomes the active: history is cut
        after it, a failover entry opens a branch there (kv_engine ``failover-table.cc``)."""
        self.truncate(seqno)
        self.state = VBucketState.ACTIVE
        self.failover.add_entry(self.high_seqno)

    def set_state(self, state: VBucketState, *, transfer: bool = False) -> bool:
        """Move to ``state`` (False if already there; streams end STATE_CHANGED);
        becoming active is a promotion with a failover entry, unless it ends a takeover
        (``transfer``: the history moves unchanged, kv_engine ``kv_bucket.cc``,
        ``KVBucket::continueToActive`` and ``TransferVB``)."""
        if state is self.state:
            return False
        self.state = state
        self.generation += 1
        if state is VBucketState.ACTIVE and not transfer:
            self.failover.add_entry(self.high_seqno)
        return True

    def flush(self) -> None:
        """Bucket flush: emptied, seqnos from 0, a failover table of one entry at 0
        (kv_engine recreates the vbuckets)."""
        self.generation += 1
        self.reset(0)
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
