"""What a node does on its timers while its clock moves from one time to another.

``advance(bucket, clock, to)`` is a pure function of the bucket and the two times: it
runs, in time order, the tasks a data node runs in that interval and leaves the clock at
``to``. It never steps second by second: the runs that change something are computed
(each expiring document falls to the first pager run at or after its expiry; of the
compactions only the last one leaves a trace a newer one would not), so 30 days cost
the work they cause.

* The expiry pager (kv_engine ``engines/ep/src/item_pager.cc``, ``ExpiredItemPager``,
  every ``exp_pager_stime`` seconds from the bucket's start) turns each live document of
  an active vbucket whose expiry has passed into an EXPIRATION tombstone, by the path
  of the ``expire`` step (``Bucket.expire_due``, ``Bucket.expire``'s write for a batch):
  each stream sends it as a DCP_EXPIRATION or
  a DCP_DELETION as its connection negotiated (``enable_expiry_opcode``). A document
  with a durable write pending is left to a later run (a node skips it too).
* Compaction (ns_server's auto-compaction; kv_engine ``compaction_config.h``
  ``purge_before_ts``), every ``compaction_interval`` seconds, removes the persisted
  tombstones older than ``metadata_purge_age`` by the path of the ``purge`` step
  (``Bucket.purge``): the purge seqno rises to the newest one removed. The tombstones
  removed are a prefix of the vbucket's seqnos (up to the first younger tombstone): the
  delete times of the model grow with the seqnos but for an expiration, stamped with
  the document's expiry, so the prefix is the set of old tombstones unless a document
  expired long after its expiry. On a Magma bucket the same compaction applies the
  history retention by seconds (revisions older than ``history_retention_seconds``
  leave, ``Bucket.purge_history``'s path).
* Writes made by the pager before a compaction are persisted first when the bucket's
  flusher runs (a node flushes within milliseconds); a held flusher (``persistence:
  {paused: true}``) keeps them in memory, and compaction then cannot purge them.

Not modelled: compaction's own expiry of documents it finds expired on disk (the pager
does it within ``exp_pager_stime``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from mockdcp.model._bucket import Bucket
    from mockdcp.model._clock import VirtualClock


@attrs.frozen
class ClockAdvanced:
    """What moving the clock did: the times, how many pager runs and compactions fell
    in the interval, the documents expired, the tombstones purged, and the vbuckets
    changed."""

    start: float
    end: float
    pager_runs: int = 0
    compactions: int = 0
    expired: int = 0
    purged: int = 0
    vbuckets: tuple[int, ...] = ()


def runs_between(phase: float, interval: int, start: float, end: float) -> tuple[int, float]:
    """How many runs of a task run every ``interval`` seconds from ``phase`` (the first
    at ``phase + interval``) fall in (``start``, ``end``], and the time of the last one
    (``nan`` if none)."""
    first = math.floor((start - phase) / interval) + 1
    last = math.floor((end - phase) / interval)
    first = max(first, 1)
    if last < first:
        return 0, math.nan
    return last - first + 1, phase + last * interval


def _first_run_from(phase: float, interval: int, after: float, at_least: float) -> float:
    """The first run time > ``after`` and >= ``at_least``."""
    k = max(math.floor((after - phase) / interval) + 1, math.ceil((at_least - phase) / interval), 1)
    return phase + k * interval


def advance(bucket: Bucket, clock: VirtualClock, to: float) -> ClockAdvanced:
    """Move ``clock`` (the bucket's) to ``to``, running what falls due meanwhile (see
    the module docstring). ``ModelError`` if ``to`` is before the clock's time; nothing
    changes then."""
    start = clock.now
    if to < start:
        raise ModelError(f"the clock cannot go back from {start} to {to}")
    timers = bucket.timers
    pager_runs, last_pager = runs_between(clock.start, timers.exp_pager_stime, start, to)
    compactions, last_compaction = runs_between(clock.start, timers.compaction_interval, start, to)
    due = _due_documents(bucket, clock, start, last_pager) if pager_runs else {}
    expired, purged = 0, 0
    changed: set[int] = set()
    groups = sorted(due)
    early = [when for when in groups if when <= last_compaction]  # none if nan
    later = groups[len(early) :]
    for when in early:
        expired += _expire(bucket, clock, when, due[when], changed)
    if compactions:
        clock.now = last_compaction
        purged = _compact(bucket, last_compaction, changed)
    for when in later:
        expired += _expire(bucket, clock, when, due[when], changed)
    clock.now = to
    return ClockAdvanced(
        start, to, pager_runs, compactions, expired, purged, tuple(sorted(changed))
    )


def _due_documents(
    bucket: Bucket, clock: VirtualClock, start: float, last_pager: float
) -> dict[float, list[tuple[int, int, int, bytes]]]:
    """Pager run time -> the (vbucket, seqno, collection, key) of the live documents of
    active vbuckets it expires: those whose expiry is at or before the last run."""
    stime = bucket.timers.exp_pager_stime
    due: dict[float, list[tuple[int, int, int, bytes]]] = defaultdict(list)
    for vb in bucket.vbuckets:
        if vb.state is not VBucketState.ACTIVE or not vb.online:
            continue
        hot = vb.items
        candidates = [it for it in hot.values() if it.expiry and not it.deleted]
        if vb.cold is not None:  # its slots no hot version shadows
            candidates += [it for it in vb.cold.expiring(last_pager) if it.doc_key not in hot]
        for item in candidates:
            expiry, cid, key = item.expiry, item.collection_id, item.key
            if expiry <= last_pager and not (vb.pending and (cid, key) in vb.pending):
                when = _first_run_from(clock.start, stime, start, expiry)
                due[when].append((vb.vbid, item.seqno, cid, key))
    return due


def _expire(
    bucket: Bucket,
    clock: VirtualClock,
    when: float,
    docs: list[tuple[int, int, int, bytes]],
    changed: set[int],
) -> int:
    """One pager run at ``when``: its documents expired, vbucket by vbucket, each in
    seqno order (as the pager visits a vbucket's hash table)."""
    clock.now = when
    docs.sort()
    changed.update(vbid for vbid, _seqno, _cid, _key in docs)
    return bucket.expire_due([(vbid, cid, key) for vbid, _seqno, cid, key in docs])


def _compact(bucket: Bucket, when: float, changed: set[int]) -> int:
    """The compaction at ``when``: what the flusher would have persisted by then, the
    tombstones older than the purge age purged, the history retention by seconds."""
    flusher = bucket.flusher
    if flusher.enabled and not flusher.paused:
        dirty = [vb.vbid for vb in bucket.vbuckets if vb.persisted_seqno < vb.high_seqno]
        for vbid in dirty:
            bucket.persist(vbid)
    before = when - bucket.timers.metadata_purge_age
    purged = 0
    for vb in bucket.vbuckets:
        upto = vb.store.purge_bound(before)
        if upto is not None:
            n = bucket.purge(vb.vbid, upto)
            purged += n
            if n:
                changed.add(vb.vbid)
    if bucket.history_retention_seconds:
        for vb in bucket.vbuckets:
            old = vb.history_start_seqno
            bucket.purge_history(vb.vbid)
            if vb.history_start_seqno != old:
                changed.add(vb.vbid)
    return purged


__all__ = ["ClockAdvanced", "advance", "runs_between"]
