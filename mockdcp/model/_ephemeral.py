"""The ephemeral bucket's parts: the sequence list, the tombstone purger by age, and
the memory quota with its two full policies. Pure: time is passed in.

An ephemeral vbucket (kv_engine ``engines/ep/src/ephemeral_vb.cc``) has no disk. Every
item lives in the hash table and in a sequence list ordered by seqno
(``linked_list.cc``, ``seqlist.h``); a backfill reads a range of that list
(``dcp/backfill_memory.cc``, ``DCPBackfillMemoryBuffered``), not a file. Here the
vbucket's on-disk view plays the sequence list: ``sync_sequence_list`` keeps it holding
every write at once (the newest version of each key in seqno order, tombstones until
purged, as the list is once no range read holds a stale version), so the backfill
readers of a couchbase bucket read it unchanged, and the bucket never runs a flusher.

Facts, each from its source:

* "Persistence": ``EphemeralVBucket::getPersistenceSeqno`` is the high seqno (what
  replication and takeover use), ``getPublicPersistenceSeqno`` is 0 (what OBSERVE_SEQNO
  answers: nothing is ever on disk; kv_engine ``vbucket.h``, and ``ep_engine.cc``
  ``observe_seqno``). A consumer that waits for persistence (go-dcp's rollback
  mitigation) waits forever (go-dcp-kafka issue #66).
* No compaction: ``EphemeralBucket::scheduleCompaction`` answers ``not_supported``
  (``ephemeral_bucket.cc``). Tombstones (and completed prepares) go by age instead:
  ``EphemeralVBucket::HTTombstonePurger`` (``ephemeral_tombstone_purger.cc``) marks stale
  every deleted item whose delete time is at least ``ephemeral_metadata_purge_age``
  seconds old, but not one at or above its collection's high seqno; the stale item
  deleter (``EphemeralVBucket::purgeStaleItems``) then removes them up to the high
  seqno - 1 (the list's last element stays) and sets the purge seqno to the highest
  deleted seqno purged. ns_server sets the age from the bucket's purge interval in days
  (``memcached_bucket_config.erl`` ``ephemeral_metadata_purge_age``, default
  ``DEFAULT_EPHEMERAL_PURGE_INTERVAL_DAYS`` = 1 in ``ns_common.hrl``); kv_engine's own
  default (``configuration.json``) is 60 seconds, which ns_server always overrides.
  The purger runs every ``ephemeral_metadata_purge_interval`` (60 s,
  ``EPHEMERAL_PURGE_INTERVAL``) on the bucket's clock (``_timers.advance``), or now
  (``Bucket.ephemeral_purge``, the ``ephemeral_purge`` step).
* A backfill whose start is at or below the purge seqno (and not 1) ends the stream
  with Rollback (``backfill_memory.cc``, ``DCPBackfillMemoryBuffered::create``), written
  STATE_CHANGED on the wire (``producer._stream.wire_end_reason``).
* Full policies (ns_server ``memcached_bucket_config.erl`` ``ephemeral_full_policy``
  from ``evictionPolicy``; ``menelaus_web_buckets.erl``: an ephemeral bucket's
  ``evictionPolicy`` is ``noEviction`` (the default) or ``nruEviction``): noEviction is
  kv_engine's ``fail_new_data``: a write that would take the bucket above
  ``mutation_mem_ratio`` (0.93) of its quota is refused with a temporary failure
  (``StrictQuotaMemoryTracker::isBelowMutationMemoryQuota``,
  ``EventuallyPersistentEngine::memoryCondition``: TMPFAIL below the quota, ENOMEM above
  it, which a refused write never reaches). nruEviction is ``auto_delete``: above the high
  watermark (``mem_high_wat_percent`` 0.85) the item pager deletes items until the low
  watermark (``mem_low_wat_percent`` 0.75); ``EphemeralVBucket::pageOut`` soft-deletes
  each (rev seqno + 1, a deletion at the next seqno, streamed as a DCP deletion).

What the mock simplifies, each on purpose: memory used is the sum of the frame sizes of
every item the hash table holds (tombstones included), not the allocator's count; the
pager picks the items not recently used as the oldest writes (lowest seqnos) first, a
deterministic stand-in for kv_engine's NRU bits; it runs right after the write that
crossed the high watermark, not on its task's timer; and the purger removes tombstones
in seqno order, stopping at the first one not old enough (kv_engine's hash-table visit
may purge a later one first; with delete times that follow seqnos this is the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from mockdcp.model._item import Item
    from mockdcp.model._vbucket import VBucket

#: ``couchbase`` (ns_server's ``membase``: couchstore or magma on disk) or ``ephemeral``
BUCKET_TYPES = ("couchbase", "ephemeral")
#: an ephemeral bucket's eviction policies (ns_server ``menelaus_web_buckets.erl``
#: ``parse_validate_ephemeral_eviction_policy``), the first the default
EVICTION_POLICIES = ("noEviction", "nruEviction")
#: seconds a tombstone is kept: ns_server's default ephemeral purge interval, 1 day
#: (``DEFAULT_EPHEMERAL_PURGE_INTERVAL_DAYS``), passed as ``ephemeral_metadata_purge_age``
DEFAULT_PURGE_AGE = 24 * 3600
#: seconds between two runs of the tombstone purger (kv_engine ``configuration.json``
#: ``ephemeral_metadata_purge_interval``, ``EphTombstoneHTCleaner``'s sleep time)
EPHEMERAL_PURGE_INTERVAL = 60
#: kv_engine ``configuration.json``: ``mutation_mem_ratio``, ``mem_high_wat_percent``,
#: ``mem_low_wat_percent``
MUTATION_MEM_RATIO = 0.93
HIGH_WATERMARK = 0.85
LOW_WATERMARK = 0.75


class MemoryFull(ModelError):
    """A write refused by an ephemeral bucket with the noEviction policy that is full:
    a node answers TMPFAIL (kv_engine ``memoryCondition``)."""


class NoPersistence(ModelError):
    """A persistence step (``persist``, ``persistence``, ``purge``, ``purge_history``)
    on an ephemeral bucket, which has no disk."""


@attrs.frozen
class Ephemeral:
    """An ephemeral bucket's settings: its eviction policy, its memory quota in bytes
    (None: no limit, nothing is ever full) and the tombstone purge age in seconds."""

    eviction_policy: str = EVICTION_POLICIES[0]
    memory_quota: int | None = None
    purge_age: int = DEFAULT_PURGE_AGE

    def __attrs_post_init__(self) -> None:
        if self.eviction_policy not in EVICTION_POLICIES:
            raise ModelError(
                "an ephemeral bucket's eviction policy is noEviction or nruEviction, not"
                f" {self.eviction_policy!r} (ns_server menelaus_web_buckets.erl)"
            )
        quota = self.memory_quota
        if quota is not None and (not isinstance(quota, int) or isinstance(quota, bool)):
            raise ModelError(f"memory quota is a number of bytes, not {quota!r}")
        if quota is not None and quota < 1:
            raise ModelError(f"memory quota is a number of bytes > 0, not {quota}")
        age = self.purge_age
        if not isinstance(age, int) or isinstance(age, bool) or age < 0:
            raise ModelError(f"the ephemeral purge age is seconds >= 0, not {age!r}")


def ephemeral_settings(
    bucket_type: str,
    eviction_policy: str | None = None,
    memory_quota: int | None = None,
    purge_age: int | None = None,
) -> Ephemeral | None:
    """The ``Ephemeral`` settings given (None when none is: the bucket's defaults); a
    ``ModelError`` when they are given for a couchbase bucket. Every spelling (``serve``'s
    options and keywords, a scenario's ``bucket:`` block) makes them here."""
    if (eviction_policy, memory_quota, purge_age) == (None, None, None):
        return None
    if bucket_type != "ephemeral":
        raise ModelError(
            "the eviction policy, memory quota and purge age are an ephemeral bucket's"
            f" (the bucket type is {bucket_type})"
        )
    return Ephemeral(
        eviction_policy or EVICTION_POLICIES[0],
        memory_quota,
        DEFAULT_PURGE_AGE if purge_age is None else purge_age,
    )


def check_bucket_type(bucket_type: str, storage: str) -> None:
    """``ModelError`` for an unknown bucket type, or a storage backend on an ephemeral
    bucket (ns_server refuses ``storageBackend`` there: ``menelaus_web_buckets.erl``)."""
    if bucket_type not in BUCKET_TYPES:
        raise ModelError(f"bucket type is one of {', '.join(BUCKET_TYPES)}, not {bucket_type!r}")
    if bucket_type == "ephemeral" and storage != "couchstore":
        raise ModelError(f"an ephemeral bucket has no storage backend ({storage} given)")


def no_persistence(what: str, name: str) -> NoPersistence:
    """The error for a persistence step ``what`` on ephemeral bucket ``name``."""
    return NoPersistence(
        f"{what}: bucket {name!r} is ephemeral and has no persistence (kv_engine"
        " ephemeral_bucket.cc: no disk, compaction not supported; its tombstones are"
        " purged by age: ephemeral_purge)"
    )


# -- the sequence list ---------------------------------------------------------------


def sync_sequence_list(vb: VBucket) -> None:
    """Make the vbucket's sequence list (its on-disk view, which backfills read) hold
    every write: ``EphemeralVBucket::getPersistenceSeqno`` is the high seqno."""
    if vb.online and vb.high_seqno > vb.persisted_seqno:
        vb.persist(vb.high_seqno)


def lose_everything(vb: VBucket) -> None:
    """An ephemeral copy whose node went down: nothing survives a restart (there is no
    disk to warm up from, kv_engine ``EphemeralBucket``), so it comes back empty with a
    new failover table (a new vbucket uuid at seqno 0) and consumers roll back to 0."""
    vb.flush()


def public_persisted_seqno(vb: VBucket, ephemeral: bool) -> int:
    """The persisted seqno OBSERVE_SEQNO reports: 0 on an ephemeral vbucket
    (``EphemeralVBucket::getPublicPersistenceSeqno``), the vbucket's otherwise."""
    return 0 if ephemeral else vb.persisted_seqno


# -- the tombstone purger by age -----------------------------------------------------


@attrs.frozen
class Purged:
    """What one purger pass did to a vbucket: tombstones removed, the purge seqno."""

    vbucket: int
    count: int
    purge_seqno: int


def purge_cut(vb: VBucket, now: float, age: int) -> int:
    """The seqno up to which the purger removes ``vb``'s tombstones at ``now``: the
    tombstones in seqno order while each is at least ``age`` seconds old (delete time at
    or before ``now - age``), below the high seqno (the list's last element stays:
    ``purgeStaleItems``) and below its collection's high seqno
    (``HTTombstonePurger::visit``); 0 if none."""
    cut = 0
    collection_high = vb.collection_high
    for item in sorted(_tombstones(vb.disk.values()), key=_seqno):
        if item.seqno >= vb.high_seqno or item.seqno >= collection_high.get(item.collection_id, 0):
            break
        if not (item.delete_time <= now and now - item.delete_time >= age):
            break
        cut = item.seqno
    return cut


def purge_by_age(vb: VBucket, now: float, age: int) -> Purged:
    """One pass of the ephemeral purger over ``vb`` at ``now`` (kv_engine
    ``EphTombstoneHTCleaner`` then ``EphTombstoneStaleItemDeleter``): the tombstones
    ``purge_cut`` allows leave the list, the purge seqno rises to the highest one."""
    cut = purge_cut(vb, now, age)
    count = vb.purge(cut) if cut else 0
    return Purged(vb.vbid, count, vb.purge_seqno)


def _tombstones(items: Iterable[Item]) -> Iterable[Item]:
    return (it for it in items if it.deleted)


def _seqno(item: Item) -> int:
    return item.seqno


# -- memory ------------------------------------------------------------------------------


class MemoryUse:
    """Bytes the bucket's items take: each vbucket's sum of its hash table's frame sizes,
    recounted only for a vbucket whose seqnos moved since, or that was reset (its
    history cut: ``forget``, told by the bucket as it publishes the change)."""

    def __init__(self) -> None:
        self._counted: dict[int, tuple[tuple[int, int], int]] = {}

    def forget(self, vbids: Iterable[int]) -> None:
        """The vbuckets ``vbids`` were reset: count them again."""
        for vbid in vbids:
            self._counted.pop(vbid, None)

    def used(self, vbuckets: Sequence[VBucket]) -> int:
        total = 0
        for vb in vbuckets:
            stamp = (vb.high_seqno, vb.purge_seqno)
            known = self._counted.get(vb.vbid)
            if known is None or known[0] != stamp:
                known = (stamp, sum(it.size for _, it in vb.hash_table()))
                self._counted[vb.vbid] = known
            total += known[1]
        return total


def estimate(key: bytes, value: bytes) -> int:
    """The bytes a write of ``key`` with ``value`` needs (its frame's size, about)."""
    return 55 + len(key) + len(value)


def check_room(settings: Ephemeral, used: int, needed: int) -> None:
    """``MemoryFull`` when a noEviction bucket cannot take ``needed`` more bytes: at or
    above ``mutation_mem_ratio`` of the quota (kv_engine
    ``StrictQuotaMemoryTracker::isBelowMutationMemoryQuota``)."""
    quota = settings.memory_quota
    if quota is None or settings.eviction_policy != "noEviction":
        return
    if used + needed >= quota * MUTATION_MEM_RATIO:
        raise MemoryFull(
            f"the ephemeral bucket is full ({used} of {quota} bytes used, {needed} more"
            " needed, noEviction): a node answers TMPFAIL (kv_engine fail_new_data)"
        )


def eviction_victims(settings: Ephemeral, vbuckets: Sequence[VBucket], used: int) -> list[Item]:
    """The items the nruEviction pager deletes when ``used`` bytes are above the high
    watermark: live, committed documents (no pending prepare) of active vbuckets (the
    pager deletes on actives, ``EphemeralVBucket::canEvict``: replicas get the deletions),
    oldest write first, until the bytes they free bring the bucket to the low watermark
    (kv_engine ``EphemeralVBucket::pageOut``, ``isEligibleForEviction``). Empty below
    the high watermark or without a quota."""
    quota = settings.memory_quota
    if quota is None or settings.eviction_policy != "nruEviction" or used <= quota * HIGH_WATERMARK:
        return []
    target = quota * LOW_WATERMARK
    candidates = sorted(
        (
            it
            for vb in vbuckets
            if vb.online and vb.state is VBucketState.ACTIVE
            for key, it in vb.hash_table()
            if not it.deleted and key not in vb.pending and _is_document(it)
        ),
        key=lambda it: (it.seqno, it.vbucket),
    )
    victims = []
    for item in candidates:
        if used <= target:
            break
        victims.append(item)
        # a tombstone keeps the key and its metadata: the value's bytes are freed
        used -= len(item.value)
    return victims


def _is_document(item: Item) -> bool:
    from mockdcp.model._item import DurableItem, SystemEventItem

    return not isinstance(item, (DurableItem, SystemEventItem))
