"""Replication: how a replica copy of a vbucket follows its active.

A replica is a ``VBucket`` in state REPLICA holding the same ``Item`` objects as its
active (items are immutable once written, so sharing them costs a pointer a copy, not a
document). The rules:

* ``attach``: a replica (re)connects to its active as kv_engine's replication stream
  does: it asks to continue after its high seqno on its newest vbucket uuid; where the
  active's failover table says the two histories parted below that (a failover or an
  unclean restart since), the replica rolls back to where they part (kv_engine
  ``FailoverTable::needsRollback``, the worked example of
  ``docs/dcp/documentation/failure-scenarios.md``); then it keeps the active's failover
  table (the stream request's answer carries it, and the consumer persists it: same
  document, "Failover Log (Handshake)");
* ``catch_up``: the items the replica lacks, in seqno order, each closing the replica's
  open checkpoint where the active's next one starts (a snapshot marker a checkpoint,
  kv_engine ``docs/dcp/documentation/commands/snapshot-marker.md``), so memory holds the
  same checkpoint boundaries on both. The model reads the active's write log (every
  version, never de-duplicated): a replica behind the purge seqno still gets the whole
  history, so a purge never sends it back to 0.

A replica's checkpoints do not close by size (the marks come from its active); becoming
active gives it the bucket's limits again (``as_active``).
"""

from __future__ import annotations

import bisect
import sys
from operator import attrgetter
from typing import TYPE_CHECKING

from mockdcp.model._failover import needs_rollback
from mockdcp.model._item import SystemEventItem
from mockdcp.model._vbucket import VBucket
from mockdcp.protocol import VBucketState

if TYPE_CHECKING:
    import random

    from mockdcp.model._cold import ColdView

#: A replica's checkpoint limits: it closes checkpoints where its active did, never by size.
UNBOUNDED = sys.maxsize

_SEQNO = attrgetter("seqno")


def new_replica(active: VBucket, rng: random.Random) -> VBucket:
    """An empty replica copy of ``active``'s vbucket (not yet attached)."""
    copy = VBucket(
        active.vbid,
        rng,
        max_failover_entries=active.failover.max_entries,
        checkpoint_max_items=UNBOUNDED,
        checkpoint_max_bytes=UNBOUNDED,
    )
    copy.state = VBucketState.REPLICA
    return copy


def as_replica(copy: VBucket) -> None:
    """``copy`` is a replica from now on (a takeover's old active kept as one)."""
    copy.set_state(VBucketState.REPLICA)
    copy.checkpoint_max_items = copy.checkpoint_max_bytes = UNBOUNDED


def as_active(copy: VBucket, checkpoint_max_items: int, checkpoint_max_bytes: int) -> None:
    """Give a copy that became active the bucket's checkpoint limits."""
    copy.checkpoint_max_items = checkpoint_max_items
    copy.checkpoint_max_bytes = checkpoint_max_bytes


def attach(replica: VBucket, active: VBucket) -> int | None:
    """(Re)connect ``replica`` to ``active`` (see the module docstring): roll it back if
    its history parted from the active's, then take the active's failover table. The
    seqno it rolled back to, or None."""
    high = replica.high_seqno
    rollback, seqno, _ = needs_rollback(
        start_seqno=high,
        high_seqno=active.high_seqno,
        vbucket_uuid=replica.failover.newest_uuid,
        snap_start_seqno=high,
        snap_end_seqno=high,
        purge_seqno=active.purge_seqno,
        failover_entries=active.failover.entries,
        ignore_purged_tombstones=True,
    )
    if rollback:
        replica.truncate(seqno)
    replica.failover.entries = list(active.failover.entries)
    return seqno if rollback else None


def catch_up(replica: VBucket, active: VBucket, upto: int | None = None) -> int:
    """Write into the attached ``replica`` the active's items after its high seqno (up
    to ``upto``, default all), closing its checkpoints where the active's start; how
    many items."""
    log = active.log
    first = bisect.bisect_right(log, replica.high_seqno, key=_SEQNO)
    last = len(log) if upto is None else bisect.bisect_right(log, upto, key=_SEQNO)
    starts = {cp.start_seqno for cp in active.checkpoints}
    cold = active.cold
    copied = 0
    if (
        cold is None
        or replica.high_seqno >= cold.upto
        or (upto is not None and upto < cold.segment.first_seqno)
    ):
        cold = None
    for item in log[first:last]:
        if cold is not None and item.seqno > cold.upto:
            copied += _take_cold(replica, cold, upto)
            cold = None
        if item.seqno in starts and replica.checkpoints[-1].entries:
            replica.close_checkpoint()
        if isinstance(item, SystemEventItem):
            replica.write_system_event(item)
        else:
            replica.write(item)
    if cold is not None:
        copied += _take_cold(replica, cold, upto)
    if replica.checkpoints[-1].entries and replica.high_seqno + 1 in starts:
        replica.close_checkpoint()  # the active closed its checkpoint here: so does it
    return max(0, last - first) + copied


def _take_cold(replica: VBucket, cold: ColdView, upto: int | None) -> int:
    """The replica takes the active's cold tier (the same segment, its own liveness)
    as far as the active holds it (up to ``upto``): persisted, as the active's. How
    many slots it gained."""
    end = cold.upto if upto is None else min(upto, cold.upto)
    before = replica.high_seqno
    replica.load_cold(cold.segment, end)
    return end - before


def is_prefix(replica: VBucket, active: VBucket) -> bool:
    """Is ``replica``'s history the start of ``active``'s: the same item objects in the
    same order (the same branch), nothing beyond the active's high seqno?"""
    theirs, ours = active.log, replica.log
    mine, its = replica.cold, active.cold
    if mine is not None and (
        its is None or mine.segment is not its.segment or mine.upto > its.upto
    ):
        return False
    if mine is None and its is not None and replica.high_seqno >= its.segment.first_seqno:
        return False
    return (
        replica.high_seqno <= active.high_seqno
        and len(ours) <= len(theirs)
        and all(a is b for a, b in zip(ours, theirs, strict=False))
    )
