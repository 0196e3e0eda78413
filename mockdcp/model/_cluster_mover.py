"""The cluster's vbucket mover: a rebalance as moves, each building the new copies from
the active (a backfill), handing the active over by a takeover, and leaving the old
copies dead on their nodes until the move is done (ns_server
``ns_single_vbucket_mover.erl``, ``ns_rebalancer.erl``; kv_engine
``docs/dcp/documentation/rebalance.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model._changes import ChangeNote
from mockdcp.model._cluster_core import ClusterCore
from mockdcp.model._replication import as_replica, attach, catch_up, new_replica
from mockdcp.model._transitions import retire, take_over
from mockdcp.model._vbmap import VBucketMap, VBucketMove
from mockdcp.model._vbucket import VBucket
from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Sequence


class VBucketMover(ClusterCore):
    """Moves of vbuckets between nodes (a part of ``Cluster``)."""

    def old_copy(self, node: str, vbucket: int) -> VBucket | None:
        """The copy of ``vbucket`` a move left on ``node`` and ns_server has not deleted
        yet (``delete_old_copies``), or None."""
        return self._old.get(node, {}).get(vbucket)

    def _keep_old(self, node: str, copy: VBucket) -> None:
        """``copy`` left ``node``'s chain: it stays on the node as it is (the old
        active dead since its takeover, a replica still a replica that nothing
        replicates into) until its move ends (``delete_old_copies``)."""
        self._old.setdefault(node, {})[copy.vbid] = copy

    def delete_old_copies(self, vbucket: int | None = None) -> list[tuple[str, int]]:
        """ns_server deletes the copies a move left once the move is done (the vbucket
        mover logs "Moving vbucket ~p done. Will delete it on: ~p" and calls
        ``janitor_agent:delete_vbucket_copies`` after the new map is out; ns_memcached
        sets a copy that is not dead dead first). Until then the old node still has the
        vbucket and answers GET_FAILOVER_LOG from it (kv_engine
        ``EventuallyPersistentEngine::getFailoverLog`` is NOT_MY_VBUCKET only for a
        vbucket it does not have), and OBSERVE_SEQNO and replica streams too while it
        is a replica. Those of ``vbucket`` (None: all) go, dead (their streams end
        STATE_CHANGED); the (node, vbucket) deleted."""
        gone = []
        note = ChangeNote()
        for node, old in self._old.items():
            for vb in [v for v in old if vbucket is None or v == vbucket]:
                copy = old.pop(vb)
                alive = copy.state is not VBucketState.DEAD
                if alive:
                    retire(copy)
                note.copy(node, vb, reset=alive)
                gone.append((node, vb))
        self._old = {node: old for node, old in self._old.items() if old}
        self._publish(note)
        return gone

    def _build(
        self, node: str, vb: int, source: VBucket, persist_upto: int | None = None
    ) -> VBucket:
        """A new replica of ``vb`` on ``node``, streamed from ``source`` whole and
        persisted up to ``persist_upto`` (default: all of it, as a rebalance waits for
        the new copy's persistence: kv_engine ``docs/dcp/documentation/rebalance.md``,
        "Moving Data")."""
        copy = new_replica(source, self.rng)
        attach(copy, source)
        catch_up(copy, source)
        upto = copy.high_seqno if persist_upto is None else persist_upto
        copy.persist(min(upto, copy.high_seqno))
        self._copies[node][vb] = copy
        return copy

    def _fresh_active(self, vb: int, node: str | None) -> VBucket:
        """A new, empty active copy of ``vb`` (on ``node``; on none: dead, a vbucket
        with no copy left), its manifest caught up with the bucket's."""
        copy = VBucket(
            vb,
            self.rng,
            max_failover_entries=self.bucket.vbuckets[vb].failover.max_entries,
            checkpoint_max_items=self._limits[0],
            checkpoint_max_bytes=self._limits[1],
        )
        self.bucket.vbuckets[vb] = copy
        if node is None:
            copy.state = VBucketState.DEAD
        else:
            self._copies[node][vb] = copy
            self.bucket._catch_up(copy)
        return copy

    def _move(self, move: VBucketMove, note: ChangeNote) -> None:
        """Give ``move.vbucket`` the chain ``move.target`` (its nodes up): a takeover
        when the active moves, a new empty active when it had none, new replicas built
        from the active, the copies that leave the chain kept on their nodes until the move
        ends (``delete_old_copies``). What it changed goes to ``note``."""
        vb = move.vbucket
        old_node, new_node = move.source[0], move.target[0]
        assert new_node is not None, "a move always has an active"
        active = self.bucket.vbuckets[vb]
        note.active(vb)
        if old_node is None:
            active = self._fresh_active(vb, new_node)
            note.active(vb, reset=True)
            note.branch(self.bucket.branch_cut(active))
        elif old_node != new_node:
            note.active(vb, reset=True)
            note.copy(old_node, vb, reset=True)
            note.copy(new_node, vb, reset=True)
            new = self._copies[new_node].get(vb)
            if new is None:
                new = self._build(new_node, vb, active)
            take_over(active, new)
            self.bucket.vbuckets[vb] = new
            if old_node in move.target:
                as_replica(active)
                attach(active, new)
            else:
                self._keep_old(old_node, self._copies[old_node].pop(vb))
            active = new
        for node in move.target[1:]:
            if node is not None and vb not in self._copies[node]:
                self._build(node, vb, active)
        for node in move.dropped:
            gone = self._copies[node].pop(vb, None)
            if gone is not None:
                self._keep_old(node, gone)
        for n in {*move.source, *move.target}:
            if n is not None:
                note.copy(n, vb)

    def rebalance(self) -> list[VBucketMove]:
        """Move to the balanced map over the nodes not leaving, keeping what is already
        in place (``VBucketMap.rebalanced``); each moved active is handed over by a
        takeover (no loss, the same vbucket uuid), new copies are streamed whole, and
        the leaving nodes go. The moves, in vbucket order. ``ModelError`` while a node is
        down (ns_server rebalances only when every node is up: fail it over first)."""
        if self._down:
            raise ModelError(
                f"node(s) {sorted(self._down)} are down: bring them up or fail them over"
                " before a rebalance"
            )
        keep = [n for n in self._copies if n not in self._leaving]
        target = self.map.rebalanced(keep)
        moves = self.map.moves_to(target)
        self.map = target
        note = ChangeNote()
        for move in moves:
            self._move(move, note)
        self.delete_old_copies()  # every move done: ns_server deletes what they left
        for node in self._leaving:
            assert not self._copies[node], "a leaving node keeps no copy after a rebalance"
            del self._copies[node]
        self._forget(self._leaving)
        self._leaving.clear()
        self._publish(note)
        return moves

    def plan_rebalance(self, vbuckets: Sequence[int] | None = None) -> list[VBucketMove]:
        """The moves of a rebalance to the balanced map over the nodes not leaving
        (``rebalance``'s target), in vbucket order; with ``vbuckets``, only theirs, in
        that order (``ModelError`` for one the balanced map leaves where it is, or
        named twice). Changes nothing: ``prepare_move``, ``apply_move`` and
        ``finish_rebalance`` carry the moves out."""
        if self._down:
            raise ModelError(
                f"node(s) {sorted(self._down)} are down: bring them up or fail them over"
                " before a rebalance"
            )
        keep = [n for n in self._copies if n not in self._leaving]
        moves = self.map.moves_to(self.map.rebalanced(keep))
        if vbuckets is None:
            return moves
        by_vb = {m.vbucket: m for m in moves}
        if len(set(vbuckets)) != len(vbuckets):
            raise ModelError(f"rebalance vbuckets {list(vbuckets)} name one twice")
        for vb in vbuckets:
            self._check_vbucket(vb)
            if vb not in by_vb:
                raise ModelError(
                    f"vbucket {vb} is already where the balanced map puts it: nothing to move"
                )
        return [by_vb[vb] for vb in vbuckets]

    def prepare_move(self, move: VBucketMove) -> None:
        """The first half of a move: the nodes that get a new copy of the vbucket have
        it built from the active (a backfill), as replicas; the map and the active are
        unchanged, so clients still find the vbucket where it was (kv_engine
        ``docs/dcp/documentation/rebalance.md``, "Moving Data")."""
        vb = move.vbucket
        active = self.bucket.vbuckets[vb]
        for node in move.new_copies:
            self._check_up(node)
            if vb not in self._copies[node] and move.source[0] is not None:
                self._build(node, vb, active)

    def apply_move(self, move: VBucketMove) -> None:
        """The second half: the vbucket gets its new chain (a takeover when its active
        moves: no loss, the same vbucket uuid), dropped copies go dead."""
        for node in move.target:
            if node is not None:
                self._check_up(node)
        self.map = self.map.with_chain(move.vbucket, move.target)
        note = ChangeNote()
        self._move(move, note)
        self._publish(note)

    def finish_rebalance(self) -> list[str]:
        """The leaving nodes that hold no copy any more leave the cluster and the map's
        server list; the nodes removed."""
        self.delete_old_copies()  # the last moves are done
        gone = [n for n in self._leaving if not self._copies[n]]
        for node in gone:
            del self._copies[node]
        self._forget(gone)
        self._leaving.difference_update(gone)
        if any(n in self.map.nodes for n in gone):
            kept = [n for n in self.map.nodes if n not in gone]
            chains = [self.map.chain(vb) for vb in range(self.bucket.num_vbuckets)]
            self.map = VBucketMap.from_chains(kept, chains, self.map.num_replicas)
        return gone

    def take_over(self, vbucket: int, node: str) -> VBucketMove:
        """Move ``vbucket``'s active to ``node`` by a takeover (no loss, the same vbucket
        uuid; the old active goes dead, its streams end STATE_CHANGED). The old active
        becomes a replica in ``node``'s place if ``node`` held one, else leaves the
        chain. Both nodes must be up."""
        self._check_vbucket(vbucket)
        self._check_up(node)
        old = self.map.active(vbucket)
        if old is None:
            raise ModelError(f"vbucket {vbucket} has no active copy: a rebalance creates one")
        if old == node:
            raise ModelError(f"vbucket {vbucket} is already active on {node!r}")
        self._check_up(old)
        chain = [node, *(old if r == node else r for r in self.map.replicas(vbucket))]
        target = self.map.with_chain(vbucket, chain)
        move = VBucketMove(vbucket, self.map.chain(vbucket), target.chain(vbucket))
        self.map = target
        note = ChangeNote()
        self._move(move, note)
        self._publish(note)
        self.delete_old_copies(vbucket)  # a move of its own: done at once
        return move
