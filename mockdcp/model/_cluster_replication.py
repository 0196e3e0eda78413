"""The cluster's replication: the replicas of each active attach to it and take what it
wrote (kv_engine's replication streams, ``docs/dcp/documentation/rebalance.md``; a
replica whose history parted rolls back: ``_replication.attach``), paused and resumed
by the steps, and followed at once from the change feed when ``auto_replicate``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model._changes import Change, ChangeNote
from mockdcp.model._cluster_core import ClusterCore
from mockdcp.model._replication import attach, catch_up
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from mockdcp.model._vbucket import VBucket


class ClusterReplication(ClusterCore):
    """Replicas kept in step with their actives (a part of ``Cluster``)."""

    def is_paused(self, node: str, vbucket: int) -> bool:
        """Is replication into ``node``'s copy of ``vbucket`` paused?"""
        return any(
            (n is None or n == node) and (v is None or v == vbucket) for n, v in self._paused
        )

    def _on_change(self, change: Change) -> None:
        """A change on the bucket's feed (a write, a step of the bucket's or of ours):
        the replicas of each active reset attach again, rolling back where their
        histories parted; with ``auto_replicate`` each replica of an active changed
        takes what it wrote (``_follow``). What that changed is published in turn."""
        if not change.vbuckets or not (change.reset or self.auto_replicate):
            return  # a write with nothing to replicate: the hot path
        note = ChangeNote()
        for vbid in change.vbuckets:
            if vbid in change.reset:
                for node, vb in self._reattach(vbid):
                    note.copy(node, vb, reset=True)
            if self.auto_replicate and self.map.active(vbid) is not None:
                self._follow(vbid, self.bucket.vbuckets[vbid], note)
        self._publish(note)

    def _follow(self, vb: int, active: VBucket, note: ChangeNote) -> None:
        """Replication streams at work (``auto_replicate``): each replica of ``vb`` that
        is not paused, on an up node, takes what its active wrote, and persists as far as
        the active has (a replica's flusher keeps pace with its active's: a write the
        active has not persisted is in the replica's memory only)."""
        if not active.online:
            return
        for n in self.map.replicas(vb):
            if n in self._down or self.is_paused(n, vb):
                continue
            copied, rolled = self._stream(n, vb, active)
            replica = self._copies[n][vb]
            upto = min(replica.high_seqno, active.persisted_seqno)
            if upto > replica.persisted_seqno:
                replica.persist(upto)
            elif not (copied or rolled):
                continue
            note.copy(n, vb, reset=rolled)

    def _stream(self, node: str, vb: int, active: VBucket) -> tuple[int, bool]:
        """The replication stream into ``node``'s copy of ``vb``: it attaches (rolling
        back where the histories parted) and takes what it lacks. (Items taken, whether
        it rolled back.)"""
        replica = self._copies[node][vb]
        rolled = attach(replica, active) is not None
        return catch_up(replica, active), rolled

    def _reattach(self, vb: int) -> list[tuple[str, int]]:
        """Attach every replica of ``vb`` on an up node to its active, when that is up."""
        active = self.bucket.vbuckets[vb]
        if self.map.active(vb) is None or not active.online:
            return []
        return [
            (node, vb)
            for node in self.map.replicas(vb)
            if node not in self._down and attach(self._copies[node][vb], active) is not None
        ]

    def _targets(self, node: str | None, vbucket: int | None) -> list[tuple[str, int]]:
        """(node, vbucket) of every replica matching the arguments (validated)."""
        if node is not None:
            self._check_node(node)
        if vbucket is not None:
            self._check_vbucket(vbucket)
        vbs = range(self.bucket.num_vbuckets) if vbucket is None else [vbucket]
        return [(n, vb) for vb in vbs for n in self.map.replicas(vb) if node is None or n == node]

    def replicate(self, node: str | None = None, vbucket: int | None = None) -> int:
        """Catch up the replicas (on ``node``, of ``vbucket``, or all) whose replication
        is not paused, whose node is up and whose active's node is up; how many items
        they took. Each persists as far as its active has, as ``_follow``'s do (a
        replica's flusher persists what it took within milliseconds, kv_engine
        ``flusher.cc``: it does not wait for its active's next write)."""
        total = 0
        note = ChangeNote()
        for n, vb in self._targets(node, vbucket):
            active = self.bucket.vbuckets[vb]
            if n in self._down or not active.online or self.is_paused(n, vb):
                continue
            copied, rolled = self._stream(n, vb, active)
            total += copied
            replica = self._copies[n][vb]
            upto = min(replica.high_seqno, active.persisted_seqno)
            persisted = upto > replica.persisted_seqno
            if persisted:
                replica.persist(upto)
            if copied or rolled or persisted:
                note.copy(n, vb, reset=rolled)
        self._publish(note)
        return total

    def pause_replication(self, node: str | None = None, vbucket: int | None = None) -> None:
        """Replication into the replicas on ``node``, of ``vbucket`` (both: that one
        copy; neither: every replica) stops until ``resume_replication`` with the same
        arguments: those replicas fall behind their actives."""
        self._targets(node, vbucket)  # validates
        self._paused.add((node, vbucket))

    def resume_replication(self, node: str | None = None, vbucket: int | None = None) -> None:
        """Lift the pause given with the same arguments (with none: every pause); the
        next ``replicate`` catches those replicas up."""
        self._targets(node, vbucket)
        if node is None and vbucket is None:
            self._paused.clear()
        else:
            self._paused.discard((node, vbucket))

    def persist_replicas(
        self, node: str | None = None, vbucket: int | None = None, upto: int | None = None
    ) -> None:
        """The replicas (on ``node``, of ``vbucket``, or all) on up nodes persist what
        they hold up to ``upto`` (default: everything); each has its own persisted
        seqno."""
        if upto is not None and (not isinstance(upto, int) or upto < 0):
            raise ModelError(f"persist upto {upto!r}: a seqno is a non-negative integer")
        note = ChangeNote()
        for n, vb in self._targets(node, vbucket):
            replica = self._copies[n][vb]
            seqno = replica.high_seqno if upto is None else min(upto, replica.high_seqno)
            if n not in self._down and seqno > replica.persisted_seqno:
                replica.persist(seqno)
                note.copy(n, vb)
        self._publish(note)
