"""Failing a node over, and a node going down and coming back (ns_server
``failover.erl``, ``mb_map.erl`` ``promote_replicas_for_graceful_failover``; kv_engine
``docs/dcp/documentation/failure-scenarios.md``): what happens to each copy the node
holds is ``_transitions``'.
"""

from __future__ import annotations

from mockdcp.model._changes import ChangeNote
from mockdcp.model._cluster_mover import VBucketMover
from mockdcp.model._cluster_replication import ClusterReplication
from mockdcp.model._ephemeral import lose_everything
from mockdcp.model._transitions import crash, promote, retire, warm_up
from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError


class NodeFailures(VBucketMover, ClusterReplication):
    """Failover and node failures (a part of ``Cluster``)."""

    def failover_node(self, node: str, *, graceful: bool = False) -> list[int]:
        """Fail ``node`` over: it leaves the map and the cluster, its copies go dead.

        Hard (default): for each vbucket it was active for, its first replica on an up
        node (else its first replica) is promoted with what it has (``promote``: the
        writes it had not received are lost, a new failover entry at its high seqno),
        the other replicas attach to it (rolling back if they were ahead); a vbucket
        with no replica is left with no copy (a dead, empty active on no node) until a
        rebalance creates it again, empty. Graceful: the node must be up and each
        vbucket it is active for must have a replica on an up node; each is first
        handed over by a takeover (``take_over``: nothing lost, no new failover entry),
        then the node, holding replicas only, is failed over (ns_server's graceful
        failover, ``mb_map.erl`` ``promote_replicas_for_graceful_failover``).
        ``ModelError`` for an unknown or the last node. The vbuckets whose active moved.
        """
        self._check_node(node)
        if len(self._copies) == 1:
            raise ModelError(f"{node!r} is the last node: it cannot be failed over")
        if node not in self.map.nodes:  # added, never rebalanced in: holds nothing
            del self._copies[node]
            self._forget([node])
            self._leaving.discard(node)
            return []
        if graceful:
            return self._graceful_failover_node(node)
        return self._hard_failover_node(node)

    def _graceful_failover_node(self, node: str) -> list[int]:
        moved = self.hand_over(node)
        self._hard_failover_node(node)
        return moved

    def hand_over(self, node: str) -> list[int]:
        """A graceful failover's moves: each vbucket ``node`` is active for is handed
        over by a takeover to its first replica on an up node (``take_over``: nothing
        lost; ``node``'s copy stays, a replica), ``node`` staying in the map until
        ``failover_node`` (ns_server ``ns_rebalancer.erl``
        ``do_run_graceful_failover_moves``; ``mb_map.erl``
        ``promote_replicas_for_graceful_failover``). ``ModelError`` before any move for
        a node down, unknown or the last one, or a vbucket with no up replica. The
        vbuckets whose active moved."""
        self._check_node(node)
        if node not in self.map.nodes:
            return []
        self._check_up(node)
        plan = []
        for vb in self.map.actives_on(node):
            up = [r for r in self.map.replicas(vb) if r not in self._down]
            if not up:
                raise ModelError(
                    f"vbucket {vb} has no replica on an up node: a graceful failover of"
                    f" {node!r} would lose it"
                )
            plan.append((vb, up[0]))
        self.map.with_failed_over(node)  # ModelError for the last node, before any move
        for vb, target in plan:
            self.take_over(vb, target)
        return [vb for vb, _ in plan]

    def _hard_failover_node(self, node: str) -> list[int]:
        new_map = self.map.with_failed_over(node, down=self._down)
        changed = self.map.actives_on(node)
        note = ChangeNote()
        for vb in changed:
            promoted = new_map.active(vb)
            if promoted is None:
                copy = self._fresh_active(vb, None)
            else:
                copy = self._copies[promoted][vb]
                promote(copy, *self._limits)
                self.bucket.vbuckets[vb] = copy
                if copy.online:
                    self.bucket._catch_up(copy)
                note.copy(promoted, vb, reset=True)
            note.active(vb, reset=True)
            note.branch(self.bucket.branch_cut(copy))
        for vb, copy in self._copies.pop(node).items():
            alive = copy.state is not VBucketState.DEAD
            if alive:
                retire(copy)
            note.copy(node, vb, reset=alive)
        self.map = new_map
        self._forget([node])
        self._leaving.discard(node)
        for vb in changed:
            for n in new_map.chain(vb):
                if n is not None:
                    note.copy(n, vb)
            for pair in self._reattach(vb):
                note.copy(*pair, reset=True)
        self._publish(note)
        return changed

    def node_down(self, node: str) -> None:
        """``node`` goes down uncleanly (``crash``): each copy it holds keeps only what
        it persisted and takes no writes; replication into and out of it stops. Its
        actives stay its own until it is back (``node_up``) or failed over. On an
        ephemeral bucket each copy loses everything (``_ephemeral.lose_everything``)."""
        self._check_up(node)
        ephemeral = self.bucket.ephemeral is not None
        note = ChangeNote()
        for vb, copy in self._copies[node].items():
            if ephemeral:
                lose_everything(copy)
            crash(copy)
            note.copy(node, vb, reset=True)
        self._down.add(node)
        for vb in self.map.actives_on(node) if node in self.map.nodes else []:
            note.active(vb, reset=True)
            if ephemeral:  # a new failover table
                note.branch(self.bucket.branch_cut(self._copies[node][vb]))
        self._publish(note)

    def node_up(self, node: str) -> None:
        """``node`` is back (``warm_up``): a new failover entry for each vbucket it is
        active for, whose replicas then attach again (rolling back what the crash took
        from the active); its own replicas attach to their actives."""
        self._check_node(node)
        if node not in self._down:
            raise ModelError(f"node {node!r} is not down")
        self._down.discard(node)
        for copy in self._copies[node].values():
            warm_up(copy)
        note = ChangeNote()
        for vb in self.map.actives_on(node) if node in self.map.nodes else []:
            copy = self._copies[node][vb]
            self.bucket._catch_up(copy)
            note.active(vb)
            if copy.state is VBucketState.ACTIVE:  # ``warm_up``'s new failover entry
                note.branch(self.bucket.branch_cut(copy))
        for vb in sorted(self._copies[node]):
            note.copy(node, vb)
            for pair in self._reattach(vb):
                note.copy(*pair, reset=True)
        self._publish(note)
