"""What a node does on its timers while its clock moves from one time to another.

``run_due(bucket, phase, start, to, at)`` is a pure function of the bucket and the times:
it runs, in time order, the tasks a data node runs in (``start``, ``to``], each task
every interval from ``phase`` (the bucket's start), telling ``at`` the time of each run.
It never steps second by second: the runs that change something are computed (each
expiring document falls to the first pager run at or after its expiry; of the
compactions only the last one leaves a trace a newer one would not), so 30 days cost
the work they cause. Two clocks drive it:

* a virtual clock (``advance_buckets``, the ``advance_clock`` step): the node's clock,
  shared by its buckets, moves at once and every bucket's runs in the interval happen
  then, the clock set to each run's time as it happens (``at``), left at ``to``;
* the wall clock (``WallTimers``): the shell sleeps until ``due`` and hands the time in
  (``run``); the runs happen at their time, so ``at`` has nothing to set. Nothing here
  reads a clock.

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

* On an ephemeral bucket there is no compaction (kv_engine ``ephemeral_bucket.cc``:
  ``scheduleCompaction`` is not supported): its tombstone purger runs instead, every
  ``ephemeral_metadata_purge_interval`` seconds (``ServerTimers.ephemeral_purge_interval``;
  kv_engine ``EphTombstoneHTCleaner``), purging the tombstones older than the bucket's
  purge age (``mockdcp.model._ephemeral``, ``Bucket.ephemeral_purge``).

Not modelled: compaction's own expiry of documents it finds expired on disk (the pager
does it within ``exp_pager_stime``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model._bucket import Bucket
    from mockdcp.model._clock import VirtualClock
    from mockdcp.model._vbucket import VBucket

#: told the time of each run as it happens (a virtual clock is set to it)
At = Callable[[float], None]


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


def _purge_interval(bucket: Bucket) -> int:
    """Seconds between two compactions, or between two runs of an ephemeral bucket's
    tombstone purger (it has no compaction)."""
    timers = bucket.timers
    return (
        timers.compaction_interval if bucket.ephemeral is None else timers.ephemeral_purge_interval
    )


def advance(bucket: Bucket, clock: VirtualClock, to: float) -> ClockAdvanced:
    """Move ``clock`` (the bucket's) to ``to``, running what falls due meanwhile (see
    the module docstring). ``ModelError`` if ``to`` is before the clock's time; nothing
    changes then."""
    [moved] = advance_buckets([bucket], clock, to)
    return moved


def advance_buckets(
    buckets: Sequence[Bucket], clock: VirtualClock, to: float
) -> list[ClockAdvanced]:
    """Move ``clock``, the node's clock all ``buckets`` share (``Bucket.clock``), to
    ``to``, running each bucket's tasks that fall due meanwhile, bucket by bucket (each
    on its own seqnos: their order does not matter); what each did. ``ModelError`` if
    ``to`` is before the clock's time, or a bucket reads another clock; nothing changes
    then."""
    start = clock.now
    if to < start:
        raise ModelError(f"the clock cannot go back from {start} to {to}")
    for bucket in buckets:
        if bucket.clock is not clock:
            raise ModelError(f"bucket {bucket.name!r} does not run on this clock")

    def at(when: float) -> None:
        clock.now = when

    moved = []
    for bucket in buckets:
        clock.now = start
        moved.append(run_due(bucket, clock.start, start, to, at))
    clock.now = to
    return moved


def run_due(
    bucket: Bucket,
    phase: float,
    start: float,
    to: float,
    at: At,
    quiet: QuietVbuckets | None = None,
) -> ClockAdvanced:
    """Run the bucket's tasks that fall due in (``start``, ``to``], each every interval
    from ``phase``, in time order, telling ``at`` each run's time before it runs (see
    the module docstring); ``quiet``: skip the vbuckets where a purge finds nothing."""
    timers = bucket.timers
    pager_runs, last_pager = runs_between(phase, timers.exp_pager_stime, start, to)
    compactions, last_compaction = runs_between(phase, _purge_interval(bucket), start, to)
    due = _due_documents(bucket, phase, start, last_pager) if pager_runs else {}
    expired, purged = 0, 0
    changed: set[int] = set()
    groups = sorted(due)
    early = [when for when in groups if when <= last_compaction]  # none if nan
    later = groups[len(early) :]
    for when in early:
        at(when)
        expired += _expire(bucket, due[when], changed)
    if compactions:
        at(last_compaction)
        purged = _compact(bucket, last_compaction, changed, quiet)
    for when in later:
        at(when)
        expired += _expire(bucket, due[when], changed)
    return ClockAdvanced(
        start, to, pager_runs, compactions, expired, purged, tuple(sorted(changed))
    )


def _no_clock(_when: float) -> None:
    """On the wall clock each run happens at its time: nothing to set."""


@attrs.define(eq=False)
class WallTimers:
    """The timed tasks of a bucket on the wall clock (the default ``serve --clock``):
    the shell asks when the next run is ``due``, sleeps until then and hands the time
    to ``run``, which runs what fell due since the last call as a node runs it
    (``run_due``: the expiry pager, compaction or the ephemeral purger). ``start``:
    the bucket's start, the first run of each task one interval after it (kv_engine
    ``exp_pager_initial_run_time`` -1)."""

    bucket: Bucket
    start: float
    #: the runs up to this time have run
    done: float = attrs.field()
    #: the vbuckets a purge would find nothing in (a compaction runs every 30 s)
    quiet: QuietVbuckets = attrs.field(factory=lambda: QuietVbuckets(), repr=False)

    @done.default
    def _started(self) -> float:
        return self.start

    def due(self) -> float:
        """The time of the next run of any of the bucket's tasks."""
        pager = _next_run(self.start, self.bucket.timers.exp_pager_stime, self.done)
        return min(pager, _next_run(self.start, _purge_interval(self.bucket), self.done))

    def run(self, now: float) -> ClockAdvanced:
        """Run the tasks that fell due up to ``now``; what they did (nothing before
        ``due``)."""
        if not now > self.done:
            return ClockAdvanced(self.done, self.done)
        start, self.done = self.done, now  # a failing run is not run again
        return run_due(self.bucket, self.start, start, now, _no_clock, self.quiet)


def _next_run(phase: float, interval: int, after: float) -> float:
    """The first run time > ``after`` of a task run every ``interval`` from ``phase``."""
    return phase + max(math.floor((after - phase) / interval) + 1, 1) * interval


def _due_documents(
    bucket: Bucket, phase: float, start: float, last_pager: float
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
                when = _first_run_from(phase, stime, start, expiry)
                due[when].append((vb.vbid, item.seqno, cid, key))
    return due


def _expire(bucket: Bucket, docs: list[tuple[int, int, int, bytes]], changed: set[int]) -> int:
    """One pager run: its documents expired, vbucket by vbucket, each in seqno order (as
    the pager visits a vbucket's hash table)."""
    docs.sort()
    changed.update(vbid for vbid, _seqno, _cid, _key in docs)
    return bucket.expire_due([(vbid, cid, key) for vbid, _seqno, cid, key in docs])


class QuietVbuckets:
    """What the last purge pass saw of each vbucket: its stamp (generation, store,
    seqnos) and the oldest delete time of its tombstones. A vbucket unchanged since
    whose oldest tombstone is not old enough yet is skipped: the pass would purge
    nothing there. It keeps the wall clock's compaction every 30 s from scanning a
    large bucket's every document each time (``WallTimers``); the outcome is the same.
    A vbucket with a cold tier is never skipped (its tombstones are not looked at)."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[tuple[int, ...], float]] = {}

    def may_purge(self, vb: VBucket, before: float) -> bool:
        """Could a pass purge a tombstone of ``vb`` deleted at or before ``before``?"""
        seen = self._seen.get(vb.vbid)
        return seen is None or seen[0] != _stamp(vb) or seen[1] <= before

    def saw(self, vb: VBucket) -> None:
        """A pass looked at ``vb`` as it is now."""
        store = vb.store
        if store.cold is not None:
            self._seen.pop(vb.vbid, None)
            return
        times = (it.delete_time for it in store.by_key.values() if it.deleted)
        self._seen[vb.vbid] = (_stamp(vb), min(times, default=math.inf))


def _stamp(vb: VBucket) -> tuple[int, ...]:
    store = vb.store
    return (vb.generation, id(store.by_key), vb.high_seqno, store.persisted_seqno, vb.purge_seqno)


def _compact(
    bucket: Bucket, when: float, changed: set[int], quiet: QuietVbuckets | None = None
) -> int:
    """The compaction at ``when``: what the flusher would have persisted by then, the
    tombstones older than the purge age purged, the history retention by seconds; on
    an ephemeral bucket, the purger's pass instead. ``quiet``: skip the vbuckets where
    nothing can be purged (``QuietVbuckets``)."""
    if bucket.ephemeral is not None:
        return _ephemeral_purge(bucket, when, changed, quiet)
    flusher = bucket.flusher
    if flusher.enabled and not flusher.paused:
        dirty = [vb.vbid for vb in bucket.vbuckets if vb.persisted_seqno < vb.high_seqno]
        for vbid in dirty:
            bucket.persist(vbid)
    before = when - bucket.timers.metadata_purge_age
    purged = 0
    for vb in bucket.vbuckets:
        if quiet is not None and not quiet.may_purge(vb, before):
            continue
        upto = vb.store.purge_bound(before)
        if upto is not None:
            n = bucket.purge(vb.vbid, upto)
            purged += n
            if n:
                changed.add(vb.vbid)
        if quiet is not None:
            quiet.saw(vb)
    if bucket.history_retention_seconds:
        for vb in bucket.vbuckets:
            old = vb.history_start_seqno
            bucket.purge_history(vb.vbid)
            if vb.history_start_seqno != old:
                changed.add(vb.vbid)
    return purged


def _ephemeral_purge(
    bucket: Bucket, when: float, changed: set[int], quiet: QuietVbuckets | None
) -> int:
    """The ephemeral purger's pass at ``when`` (``Bucket.ephemeral_purge``)."""
    before = [vb.purge_seqno for vb in bucket.vbuckets]
    if quiet is None:
        purged = bucket.ephemeral_purge(now=when)
    else:
        assert bucket.ephemeral is not None
        old = when - bucket.ephemeral.purge_age
        purged = 0
        for vb in bucket.vbuckets:
            if quiet.may_purge(vb, old):
                purged += bucket.ephemeral_purge(vb.vbid, now=when)
                quiet.saw(vb)
    changed.update(vb.vbid for vb in bucket.vbuckets if vb.purge_seqno != before[vb.vbid])
    return purged


__all__ = ["ClockAdvanced", "WallTimers", "advance", "advance_buckets", "run_due", "runs_between"]
