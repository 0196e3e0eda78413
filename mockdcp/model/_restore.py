"""What a vbucket holds after its branch is cut at a seqno (restart, failover) and after
it takes a cold tier (a warm-up after a bulk load).

Sources: kv_engine ``vbucket_loader.cc`` (warmup reloads what is persisted, the
persisted prepares included), ``failover-table.cc`` and
``docs/dcp/documentation/rollback.md`` (a copy rolled back holds what it held at the
seqno; purged tombstones stay purged), ``ep_bucket.cc`` (compaction drops completed
prepares). The cut keeps the prepares it keeps, pending unless it keeps their commit
or abort too; a collection flushed (its begin event kept) keeps nothing from before.
"""

from __future__ import annotations

import bisect
from operator import attrgetter
from typing import TYPE_CHECKING

from mockdcp.model._item import DurableItem, Item, ItemKind, SystemEventItem
from mockdcp.protocol import SystemEventType

if TYPE_CHECKING:
    from mockdcp.model._cold import ColdSegment
    from mockdcp.model._vbucket import VBucket

_SEQNO = attrgetter("seqno")


def truncate(vb: VBucket, seqno: int) -> None:
    """``vb`` holds what it held at ``seqno``, all of it on disk, memory from after it
    (``VBucket.truncate``: the caller has moved its generation on)."""
    store, history = vb.store, vb.history
    purge, history_start, cold = store.purge_seqno, history.start_seqno, store.cold
    log = vb.log[: bisect.bisect_right(vb.log, seqno, key=_SEQNO)]
    latest: dict[tuple[int, bytes], Item] = {}
    begins: dict[int, int] = {}  # collection -> seqno of its last begin (create, flush)
    for item in log:
        if isinstance(item, SystemEventItem) and item.event is SystemEventType.BEGIN_COLLECTION:
            begins[item.event_collection_id or 0] = item.seqno
        latest[item.doc_key] = item
    vb.reset(seqno)
    store.purge_seqno = purge
    vb.log = log
    if cold is not None and seqno >= cold.segment.first_seqno:
        # the cold tier as far as the cut keeps it, its slots alive again unless a
        # kept newer version replaced them or a kept flush emptied their collection
        view = store.load_cold(cold.segment, min(seqno, cold.upto), purged=purge)
        store.kill_cold(list(latest.values()))
        for cid, begin in begins.items():
            if begin > view.upto:
                view.kill_collection(cid)
        _drop_older_than_cold(latest, view.segment, view.upto)
    history.kept(log, history_start, seqno)  # what is kept of the history stays history
    durability = vb.durability
    for item in log:
        if isinstance(item, SystemEventItem):
            vb.system_events.append(item)
            if item.event_collection_id is not None:
                vb.collection_high[item.event_collection_id] = item.seqno
        else:
            vb.collection_high[item.collection_id] = item.seqno
        durability.replay(item)
        durability.durable_writes += isinstance(item, DurableItem)
    if store.cold is not None:
        cold_counts(vb)
    store.persisted_visible_seqno = durability.visible_seqno
    store.persisted_completed_seqno = durability.high_completed_seqno
    for item in sorted(latest.values(), key=_SEQNO):
        if item.deleted and item.seqno <= purge:
            continue
        if item.seqno < begins.get(item.collection_id, 0):
            continue  # flushed
        if isinstance(item, DurableItem):
            if (
                item.kind is ItemKind.ABORT
                or durability.pending.get((item.collection_id, item.key)) is item
            ):
                store.put(item)  # completed prepares are not kept
            continue
        vb.items[item.doc_key] = item
        store.put(item)


def _drop_older_than_cold(
    latest: dict[tuple[int, bytes], Item], segment: ColdSegment, upto: int
) -> None:
    """Drop from ``latest`` each document version the write log kept from before the
    cold tier whose key the cold tier holds (up to ``upto``) a newer version of, alive
    or not: compaction's first fold takes the writes after the last system event, so
    the earlier ones stay in the log (``_compaction.compact``), and a key written
    before and after that event has its older version there."""
    first = segment.first_seqno
    held = upto - first + 1
    stale = [
        doc
        for doc, item in latest.items()
        if item.seqno < first
        and type(item) is Item
        and any(slot < held for slot in segment.slots_of(*doc))
    ]
    for doc in stale:
        del latest[doc]


def load_cold(vb: VBucket, segment: ColdSegment, upto: int | None) -> None:
    """``vb`` takes ``segment`` (up to seqno ``upto``, default all of it) as its
    persisted documents, as a warm-up after a bulk load leaves a node: everything
    before is persisted, the segment's seqnos follow the high seqno, the checkpoints
    hold nothing of it and start after it; stream cursors are dropped (their streams
    backfill, kv_engine ``ActiveStream::handleSlowStream``). The bucket (or the
    replication stream) has checked that the vbucket holds no document and that the
    segment starts after its high seqno (or that it holds the segment up to its high
    seqno, and takes more of it)."""
    store = vb.store
    held = store.cold
    # a copy a rollback cut inside the segment takes the rest of it
    assert segment.first_seqno == vb.high_seqno + 1 or (
        held is not None and held.segment is segment and held.upto == vb.high_seqno
    )
    vb.persist(vb.high_seqno)
    view = store.load_cold(segment, upto)
    vb.high_seqno = store.persisted_seqno = view.upto
    cold_counts(vb)
    store.persisted_visible_seqno = vb.durability.visible_seqno
    vb.checkpoint_manager.reset(view.upto + 1)
    if vb.history.start_seqno:
        vb.history.start_seqno = view.upto + 1


def cold_counts(vb: VBucket) -> None:
    """The cold tier's part of ``vb``'s visible seqno and its collections' high seqnos."""
    cold = vb.store.cold
    assert cold is not None
    seg = cold.segment
    vb.durability.visible_seqno = max(vb.durability.visible_seqno, cold.upto)
    high = vb.collection_high
    for cid, last in zip(*seg.last_slots(cold.upto - seg.first_seqno + 1), strict=True):
        high[cid] = max(high.get(cid, 0), seg.first_seqno + last)
