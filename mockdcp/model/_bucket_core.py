"""What every part of the bucket stands on: its vbuckets, their lookup, the change feed
(``publish``), the manifest events every vbucket carries, and the ephemeral bucket's
hooks on a write (the sequence list, the quota: kv_engine ``ephemeral_bucket.cc``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from mockdcp.model._bucket_cas import CasClock
from mockdcp.model._changes import BranchCut, Change, ChangeFeed
from mockdcp.model._ephemeral import (
    Ephemeral,
    MemoryUse,
    check_room,
    estimate,
    eviction_victims,
    no_persistence,
    sync_sequence_list,
)
from mockdcp.model._item import ItemKind, SystemEventItem, vbucket_of
from mockdcp.model._manifest import Manifest, ManifestEvent, VBucketManifest
from mockdcp.model._validate import as_bytes, check_u32
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from mockdcp.model._vbucket import VBucket


class BucketCore(CasClock):
    """The vbuckets of a bucket and the feed their changes go out on (a part of
    ``Bucket``, whose constructor sets what is declared here)."""

    name: str
    num_vbuckets: int
    vbuckets: list[VBucket]
    storage: str
    history_retention_bytes: int
    history_retention_seconds: int
    manifest: Manifest
    feed: ChangeFeed
    ephemeral: Ephemeral | None
    _memory: MemoryUse
    #: vbucket -> the change a write to it publishes (made once: ``wrote``)
    _writes: tuple[Change, ...]
    auto_deleted: int

    @property
    def retains_history(self) -> bool:
        """Magma with a retention (kv_engine ``KVBucket::isHistoryRetentionEnabled``):
        ``change_streams`` may be enabled."""
        return bool(self.history_retention_bytes or self.history_retention_seconds)

    def vbucket(self, vbid: int) -> VBucket:
        """The vbucket ``vbid``; ``ModelError`` if there is none."""
        if not isinstance(vbid, int) or not 0 <= vbid < self.num_vbuckets:
            raise ModelError(f"no vbucket {vbid!r} (the bucket has {self.num_vbuckets})")
        return self.vbuckets[vbid]

    def vbucket_of(self, key: bytes | str) -> int:
        return vbucket_of(as_bytes(key, "key"), self.num_vbuckets)

    def _targets(self, vbucket: int | None) -> list[VBucket]:
        return list(self.vbuckets) if vbucket is None else [self.vbucket(vbucket)]

    def publish(self, change: Change) -> None:
        """Hand ``change`` to the feed's subscribers: on an ephemeral bucket once the
        sequence lists hold its writes and the pager made room (``_ephemeral_settle``,
        whose deletions join the change)."""
        if change.reset:
            self._memory.forget(change.reset)
        if self.ephemeral is not None:
            change = self._ephemeral_settle(change)
        self.feed.publish(change)

    def wrote(self, vbid: int) -> None:
        """Publish a write to the active of ``vbid`` (the hot path: its record was made
        with the bucket, nothing is allocated)."""
        self.publish(self._writes[vbid])

    def touched(self, vbids: Iterable[int]) -> None:
        """Publish that the active copies of ``vbids`` changed (writes, a storage step
        that cuts nothing)."""
        self.publish(Change(tuple(vbids)))

    def branch_cut(self, vb: VBucket) -> BranchCut:
        """The branch ``vb``'s newest failover entry opened."""
        uuid, seqno = vb.failover.entries[0]
        return BranchCut(vb.vbid, uuid, seqno)

    def _ephemeral_settle(self, change: Change) -> Change:
        """The sequence lists of the vbuckets changed hold every write; with nruEviction
        above the high watermark, the pager's deletions are written (each a tombstone at
        the next seqno of its vbucket) and join the change."""
        settings = self.ephemeral
        assert settings is not None
        vbuckets = self.vbuckets
        for vbid in change.vbuckets:
            sync_sequence_list(vbuckets[vbid])
        if settings.memory_quota is None or settings.eviction_policy != "nruEviction":
            return change
        victims = eviction_victims(settings, vbuckets, self._memory.used(vbuckets))
        for item in victims:
            vb = vbuckets[item.vbucket]
            vb.mutate(
                self._next_cas(),
                key=item.key,
                collection_id=item.collection_id,
                kind=ItemKind.DELETION,
                delete_time=int(self.clock()),
            )
            sync_sequence_list(vb)
            self.auto_deleted += 1
        if not victims:
            return change
        vbids = tuple(sorted({*change.vbuckets, *(it.vbucket for it in victims)}))
        return attrs.evolve(change, vbuckets=vbids)

    def memory_used(self) -> int:
        """Bytes the items take (an ephemeral bucket's quota counts them)."""
        return self._memory.used(self.vbuckets)

    def _check_room(self, key: bytes, value: bytes) -> None:
        """``MemoryFull`` when an ephemeral noEviction bucket is full."""
        settings = self.ephemeral
        if settings is not None and settings.memory_quota is not None:
            check_room(settings, self.memory_used(), estimate(key, value))

    def _check_persistent(self, what: str) -> None:
        """``NoPersistence`` on an ephemeral bucket."""
        if self.ephemeral is not None:
            raise no_persistence(what, self.name)

    def _locate(
        self, key: bytes | str, vbucket: int | None, collection_id: int = 0
    ) -> tuple[bytes, VBucket]:
        check_u32(collection_id=collection_id)
        self.manifest.check_collection(collection_id)
        k = as_bytes(key, "key")
        if not 1 <= len(k) <= 250:
            raise ModelError(f"a key has 1..250 bytes, not {len(k)}")
        vb = self.vbucket(vbucket_of(k, self.num_vbuckets) if vbucket is None else vbucket)
        vb.check_writable()
        return k, vb

    def _publish_reset(self, targets: Sequence[VBucket], branched: Sequence[VBucket]) -> None:
        """Publish that ``targets`` were reset (history cut or state changed: their
        streams end) and ``branched`` of them got a new failover entry."""
        vbids = tuple(vb.vbid for vb in targets)
        cuts = tuple(self.branch_cut(vb) for vb in branched)
        self.publish(Change(vbids, reset=frozenset(vbids), branches=cuts))

    def _write_events(self, vb: VBucket, events: Iterable[ManifestEvent]) -> None:
        for ev in events:
            vb.write_system_event(
                SystemEventItem(
                    vbucket=vb.vbid,
                    seqno=vb.high_seqno + 1,
                    cas=self._next_cas(),
                    event=ev.event,
                    manifest_uid=ev.manifest_uid,
                    scope_id=ev.scope_id,
                    collection_id=ev.collection_id,
                    name=ev.name,
                    max_ttl=ev.max_ttl,
                    flush_uid=ev.flush_uid,
                    history=ev.history,
                )
            )

    def _catch_up(self, vb: VBucket) -> None:
        """After history was cut (failover, restart, flush), write the manifest changes
        the vbucket lost again, at new seqnos: its manifest follows the bucket's, as
        kv_engine's vbucket manifest does when the current one is applied to it."""
        state = VBucketManifest.replay(e.as_manifest_event() for e in vb.system_events)
        self._write_events(vb, state.catch_up(self.manifest))


def check_no_prepare(vb: VBucket, key: bytes, collection_id: int) -> None:
    """``ModelError`` if the document has a prepare pending: a node refuses other writes
    of it with SYNC_WRITE_IN_PROGRESS until the prepare completes."""
    if vb.pending and (collection_id, key) in vb.pending:
        raise ModelError(f"a durable write of {key!r} is in progress (SYNC_WRITE_IN_PROGRESS)")
