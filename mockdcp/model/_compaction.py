"""Compaction into the cold tier: writes that arrived one at a time (KV, the steps,
``Bucket.set_many``) leave their Python objects for the vbucket's columns once they are
persisted and no checkpoint holds them.

Sources: kv_engine ``checkpoint_manager.cc`` (``expelUnreferencedCheckpointItems``,
``removeClosedUnrefCheckpoints``: items persisted and passed by every cursor leave the
checkpoints, a cursor registered below them backfills from disk), ``stored_value.h`` and
``item_pager.cc`` (the hash table keeps a small stored value per item, the disk the
rest). A node keeps about 56 bytes per item beyond key and value; the model's hot tier
kept an ``Item``, two frame pieces, a hash-table entry, a write-log entry and the disk's
entries (about 520 bytes); the cold tier (``_cold``) keeps 80 to 100.

The rule (``compact``, after each ``Bucket.persist``: the flusher's, a step's): once a
vbucket that folds (``DiskStore.compacts``: a couchbase bucket's vbucket on one node
without replicas) with no sync write and no history retained has persisted
``max(FOLD_MIN, a quarter of its cold tier)`` writes past its cold tier, the run of
plain writes (mutations and tombstones: no system event, no prepare, commit or abort)
from there up to the persisted seqno and below every checkpoint joins the cold tier. The
open checkpoint is closed first when no cursor reads it and it is all persisted
(kv_engine expels such items; a stream asking for them later backfills them from disk,
as there). A new ``ColdSegment`` holds the old segment's slots and the run's frames as
written, every version (a rollback cuts the segment and an older version comes back, as
the write log gave it back); its view keeps each old slot's liveness and makes a new
slot alive where its item is the disk's version of its key. The run's items leave the
write log, the hash table and the hot disk; readers find them in the cold tier
(``VBucket.get``, ``DiskStore.snapshot``, ``_restore.truncate``,
``_replication.catch_up``).

The segment's seqnos are consecutive, so a system event or a sync write after the cold
tier stops folding in that vbucket (``BLOCKED``): later writes stay in the hot tier. An
on-disk corpus's segment (``_disk_segment``) never folds.
"""

from __future__ import annotations

import bisect
import sys
from itertools import compress
from operator import attrgetter, gt, is_
from typing import TYPE_CHECKING

from mockdcp.model._item import DEFAULT_PREFIX, TAG_TOMBSTONE, Item

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model._cold import ColdView
    from mockdcp.model._vbucket import VBucket

#: the fewest persisted writes past the cold tier that compaction folds at once
FOLD_MIN = 256
#: ``DiskStore.fold_after`` when a system event or a sync write follows the cold tier
BLOCKED = sys.maxsize

_SEQNO = attrgetter("seqno")
_CID, _TAG = attrgetter("collection_id"), attrgetter("tag")
_DELETE_TIME, _KEY = attrgetter("delete_time"), attrgetter("key")
_HEAD, _TAIL = attrgetter("head"), attrgetter("tail")
_NO_PREFIX = b""
_DOC = attrgetter("collection_id", "key")


def compact(vb: VBucket, minimum: int | None = None) -> int:
    """Fold ``vb``'s persisted plain writes into its cold tier when due (see the module
    docstring; ``minimum``: ``FOLD_MIN``); how many writes were folded."""
    from mockdcp.model._cold import ColdSegment

    if minimum is None:
        minimum = FOLD_MIN
    store = vb.store
    cold = store.cold
    if (
        not vb.store.compacts
        or vb.store.fold_after == BLOCKED
        or vb.durability.durable_writes
        or vb.history.retains
        or (cold is not None and (type(cold.segment) is not ColdSegment or cold.flushed))
    ):
        return 0
    held = 0 if cold is None else cold.upto - cold.segment.first_seqno + 1
    base = max(vb.store.fold_after, 0 if cold is None else cold.upto)
    due = max(minimum, held // 4)
    persisted = store.persisted_seqno
    if persisted - base < due:
        return 0
    if not vb.cursors and vb.high_seqno <= persisted:
        vb.close_checkpoint()  # expelled at once: persisted, no cursor in it
    upto = min(persisted, vb.checkpoints[0].start_seqno - 1)
    if upto - base < due:
        return 0  # the checkpoints still hold most of it (a stream's cursor)
    log = vb.log
    i = bisect.bisect_right(log, base, key=_SEQNO)
    run = log[i : bisect.bisect_right(log, upto, key=_SEQNO)]
    stops = _stops(run)
    if cold is None:
        if stops:  # the run starts after the last system event or sync write
            i += stops[-1] + 1
            vb.store.fold_after = run[stops[-1]].seqno
            run = run[stops[-1] + 1 :]
    elif (run and run[0].seqno != cold.upto + 1) or stops:
        vb.store.fold_after = BLOCKED  # the segment cannot take what follows
        run = run[: stops[0]] if stops and run[0].seqno == cold.upto + 1 else []
    if (vb.store.fold_after != BLOCKED and len(run) < due) or not run:
        return 0  # the checkpoints still hold most of it
    items = vb.items
    docs = list(map(_DOC, run))  # (collection, key): ``Item.doc_key`` of a plain item
    on_disk = list(map(is_, map(store.by_key.get, docs), run))
    in_table = list(map(is_, map(items.get, docs), run))
    if any(map(gt, on_disk, in_table)):
        vb.store.fold_after = BLOCKED  # the hash table forgot a version the disk keeps
        return 0
    view = _extended(vb.vbid, cold, run, on_disk)
    for doc in compress(docs, in_table):
        del items[doc]
    vb.items = dict(items)  # a dict keeps its table when emptied: a copy is its size
    store.fold(view, list(compress(docs, on_disk)), run)
    del log[i : i + len(run)]
    return len(run)


def _stops(run: Sequence[Item]) -> list[int]:
    """The positions in ``run`` of what a cold slot cannot keep: a system event, a sync
    write (their classes are ``Item``'s subclasses), a tombstone with flags or an expiry
    (a tombstone's frame has neither)."""
    if any(type(it) is not Item for it in run) or any(t & TAG_TOMBSTONE for t in map(_TAG, run)):
        return [k for k, it in enumerate(run) if not _plain(it)]
    return []


def _plain(item: Item) -> bool:
    """A mutation or a tombstone a cold slot keeps whole (a tombstone's frame has no
    flags nor expiry)."""
    return type(item) is Item and (not item.tag & TAG_TOMBSTONE or not (item.flags or item.expiry))


def _extended(vbid: int, cold: ColdView | None, run: Sequence[Item], alive: list[bool]) -> ColdView:
    """A view of a new segment: ``cold``'s slots it holds, then ``run``'s frames; the old
    slots as alive as in ``cold``, the new ones where ``alive``."""
    import numpy as np

    from mockdcp.model._cold import ColdSegment, ColdView, key_hashes

    n = len(run)
    cids = np.fromiter(map(_CID, run), np.uint32, n)
    tags = np.frombuffer(bytes(map(_TAG, run)), np.uint8)
    # each frame is ``Item.wire``: head, the default collection's prefix (unless the
    # head ends with another's), tail; joined once, no frame built apart
    wires: list[bytes] = [b""] * (3 * n)
    wires[0::3], wires[2::3] = map(_HEAD, run), map(_TAIL, run)
    wires[1::3] = [_NO_PREFIX if cid else DEFAULT_PREFIX for cid in cids.tolist()]
    ends = np.cumsum(np.fromiter(map(len, wires), np.int64, 3 * n).reshape(n, 3).sum(axis=1))
    hashes = key_hashes(list(map(_KEY, run)), cids)
    times = (
        np.fromiter(map(_DELETE_TIME, run), np.uint32, n) if (tags & TAG_TOMBSTONE).any() else None
    )
    if cold is None:
        buf, first, held = b"".join(wires), run[0].seqno, 0
        starts = np.concatenate([np.zeros(1, np.int64), ends])
    else:
        seg = cold.segment
        first, held = seg.first_seqno, cold.upto - seg.first_seqno + 1
        end = int(seg.starts[held])
        with memoryview(seg.buf) as old:
            buf = b"".join([old[:end], *wires])
        by_slot = np.empty_like(seg.hashes)
        by_slot[seg.order] = seg.hashes
        starts = np.concatenate([seg.starts[: held + 1], end + ends])
        cids = np.concatenate([seg.cids[:held], cids])
        tags = np.concatenate([seg.tags[:held], tags])
        hashes = np.concatenate([by_slot[:held], hashes])
        if times is not None or seg.delete_times is not None:
            old_times = np.zeros(held, np.uint32) if seg.delete_times is None else seg.delete_times
            new_times = np.zeros(n, np.uint32) if times is None else times
            times = np.concatenate([old_times[:held], new_times])
    view = ColdView(
        ColdSegment(vbid, first, buf, starts, cids, tags, hashes, times), first + held + n - 1
    )
    if cold is not None:
        view.retain(cold.alive[:held])
    view.retain(np.array(alive, np.bool_), held)
    return view
