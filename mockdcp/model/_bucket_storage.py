"""The bucket's storage steps: checkpoints, persistence, purges, cursors, and the steps
that reset vbuckets (restart, a branch cut, a state change, flush); each publishes what
it changed (kv_engine ``kv_bucket.cc``, ``vbucket_loader.cc``, ``failover-table.cc``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model._bucket_core import BucketCore
from mockdcp.model._ephemeral import lose_everything, purge_by_age
from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from mockdcp.model._vbucket import VBucket


class StorageSteps(BucketCore):
    """Persistence and the vbuckets' lifecycle (a part of ``Bucket``)."""

    def ephemeral_purge(
        self, vbucket: int | None = None, *, age: int | None = None, now: float | None = None
    ) -> int:
        """The ephemeral purger's pass (``_ephemeral.purge_by_age``) at ``now`` (default:
        the bucket's clock): tombstones at least ``age`` seconds old (default: the
        bucket's purge age) leave the sequence list, the purge seqno rises; a stream
        whose backfill then starts at or below it ends with Rollback. Returns how many
        went. ``ModelError`` on a couchbase bucket (its tombstones go at compaction:
        ``purge``)."""
        if self.ephemeral is None:
            raise ModelError(
                f"ephemeral_purge: bucket {self.name!r} is not ephemeral (its tombstones"
                " are purged by compaction: purge)"
            )
        if age is not None and (not isinstance(age, int) or isinstance(age, bool) or age < 0):
            raise ModelError(f"ephemeral_purge age is seconds >= 0, not {age!r}")
        targets = self._targets(vbucket)
        when = self.clock() if now is None else now
        limit = self.ephemeral.purge_age if age is None else age
        n = sum(purge_by_age(vb, when, limit).count for vb in targets)
        self.touched(vb.vbid for vb in targets)
        return n

    def checkpoint(self, vbucket: int | None = None) -> None:
        """Close the open checkpoint(s): the next write starts a new one."""
        targets = self._targets(vbucket)
        for vb in targets:
            vb.close_checkpoint()
        self.touched(vb.vbid for vb in targets)

    def persist(self, vbucket: int | None = None, upto: int | None = None) -> None:
        """Write items up to ``upto`` (default: everything) to disk.
        ``NoPersistence`` on an ephemeral bucket."""
        self._check_persistent("persist")
        targets = self._targets(vbucket)
        if upto is not None:
            for vb in targets:
                vb.check_persist(upto)
        from mockdcp.model._compaction import compact  # on the first persist

        for vb in targets:
            vb.persist(vb.high_seqno if upto is None else upto)
            compact(vb)  # persisted writes may fold into the cold tier
            self._retain(vb)
        self.touched(vb.vbid for vb in targets)

    def _retain(self, vb: VBucket) -> None:
        """Hold the vbucket's history within the retention (its share of the bytes,
        kv_engine ``MagmaKVStore::setHistoryRetentionBytes``: bytes / vbuckets)."""
        if self.retains_history:
            share = self.history_retention_bytes // self.num_vbuckets
            if self.history_retention_bytes and not share:
                share = 1
            vb.purge_history(vb.retention_cut(self.clock(), share, self.history_retention_seconds))

    def purge_history(self, vbucket: int | None = None, upto: int | None = None) -> None:
        """Apply the history retention now (magma's compaction), or with ``upto`` purge
        history up to that persisted seqno whatever the retention: the history start
        seqno moves above it, and change-streams backfills from below it get a
        de-duplicated snapshot first. ``ModelError`` on a bucket without history."""
        self._check_persistent("purge_history")
        if not self.retains_history:
            raise ModelError(f"bucket {self.name!r} ({self.storage}) retains no history")
        targets = self._targets(vbucket)
        if upto is not None:
            for vb in targets:
                vb.check_purge(upto)
        for vb in targets:
            if upto is None:
                self._retain(vb)
            else:
                vb.purge_history(upto)
        self.touched(vb.vbid for vb in targets)

    def purge(self, vbucket: int | None = None, upto: int | None = None) -> int:
        """Remove on-disk tombstones at or below ``upto`` (default: the persisted seqno).

        The purge seqno becomes the highest seqno removed (kv_engine
        ``docs/dcp/documentation/rollback.md``, PurgeSeqno: compaction raises it to the
        newest purged tombstone); it does not move when nothing was purged. Returns how
        many tombstones went. ``NoPersistence`` on an ephemeral bucket (no compaction:
        ``ephemeral_purge``).
        """
        self._check_persistent("purge")
        targets = self._targets(vbucket)
        if upto is not None:
            for vb in targets:
                vb.check_purge(upto)
        n = sum(vb.purge(vb.persisted_seqno if upto is None else upto) for vb in targets)
        self.touched(vb.vbid for vb in targets)
        return n

    def drop_cursor(
        self, vbucket: int | None = None, name: str | None = None
    ) -> list[tuple[int, str]]:
        """Drop stream cursors: those streams switch from memory to disk (kv_engine
        ``ActiveStream::handleSlowStream``)."""
        targets = self._targets(vbucket)
        dropped = [(vb.vbid, n) for vb in targets for n in vb.drop_cursor(name)]
        self.touched(sorted({vbid for vbid, _ in dropped}))
        return dropped

    def restart(self, vbucket: int | None = None) -> None:
        """An unclean restart: everything above the persisted seqno is lost, then warmup
        adds a failover entry at the persisted seqno (kv_engine ``vbucket_loader.cc``).

        An ephemeral bucket loses everything: it has no warmup, its vbuckets are made
        anew (kv_engine ``EphemeralBucket::makeVBucket`` with no persisted state), empty,
        with a new failover table (a new uuid at seqno 0): consumers roll back to 0."""
        targets = self._targets(vbucket)
        branched = []
        for vb in targets:
            if self.ephemeral is not None:
                lose_everything(vb)
            else:
                vb.warmup()
            if self.ephemeral is not None or vb.state is VBucketState.ACTIVE:
                branched.append(vb)
            self._catch_up(vb)
        self._publish_reset(targets, branched)

    def cut_branch(
        self,
        vbucket: int | None = None,
        *,
        lose_after: int | None = None,
        lose_unpersisted: bool = True,
    ) -> None:
        """Cut the branch of ``vbucket`` (all when None), as a failover of its active
        does: a replica that had everything up to ``lose_after`` takes over, what came
        after is lost and a failover entry opens a new branch there (kv_engine
        ``failover-table.cc``). ``failover`` is the same operation, under the name the
        Python API has always given it (failing a node over is ``Cluster.failover_node``).

        ``lose_after`` defaults to the persisted seqno (``lose_unpersisted``) or the high
        seqno (nothing lost: only the branch changes). It may be below the persisted seqno:
        how far a replica had got depends on replication, not on the active's flusher, so
        items the old active had on disk can be lost too.
        """
        targets = self._targets(vbucket)
        if lose_after is not None:
            for vb in targets:
                vb.check_history(lose_after)
        for vb in targets:
            seqno = (
                lose_after
                if lose_after is not None
                else (vb.persisted_seqno if lose_unpersisted else vb.high_seqno)
            )
            vb.cut_branch(seqno)
            self._catch_up(vb)
        self._publish_reset(targets, targets)

    failover = cut_branch

    def set_vbucket_state(self, vbucket: int, state: VBucketState | int) -> None:
        """Change a vbucket's state; streams of it end with STATE_CHANGED (kv_engine
        ``DcpProducer::closeStreamDueToVbStateChange``).

        Becoming active from any other state is a promotion and adds a failover entry
        (kv_engine ``kv_bucket.cc``); a takeover (mockdcp has no TAKEOVER streams) would not.
        """
        vb = self.vbucket(vbucket)
        try:
            new = VBucketState(state)
        except ValueError:
            raise ModelError(f"no vbucket state {state!r}") from None
        if vb.set_state(new):
            self._publish_reset([vb], [vb] if new is VBucketState.ACTIVE else [])

    def flush(self) -> None:
        """Bucket flush: every vbucket emptied and its seqnos restarted from 0 with a new
        failover table (kv_engine recreates the vbuckets on flush)."""
        for vb in self.vbuckets:
            vb.flush()
            self._catch_up(vb)
        self._publish_reset(self.vbuckets, self.vbuckets)
