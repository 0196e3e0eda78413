"""A cluster, not a node: the bucket's vbuckets as copies on several nodes.

``Cluster`` wraps a ``Bucket`` and owns the vbucket map (``VBucketMap``) and every copy
that is not an active one. The bucket's ``vbuckets[vb]`` is always the vbucket's active
copy, wherever it lives: writes, the flusher, the collections steps and the oracle go to
the actives as they did on one node, and a bucket wrapped in a one-node cluster with no
replica behaves as before. The other copies are replicas, filled by ``replicate``
(``_replication``); the cluster's steps (add, remove and rebalance, takeover, hard and
graceful failover, node down and up) apply the rules of ``_transitions`` and keep the
map, the copies and the bucket in step.

Listeners (``listeners``) are told each (node, vbucket) whose copy changed; the bucket's
own listeners are still told each vbucket whose active changed (a write, or a new
active). Every step validates its arguments and raises ``ModelError`` before changing
anything. Pure: uuids of new copies come from ``random.Random`` seeded with ``seed``.
"""

from __future__ import annotations

import random
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from mockdcp.model._ephemeral import lose_everything
from mockdcp.model._replication import as_replica, attach, catch_up, new_replica
from mockdcp.model._transitions import crash, promote, retire, take_over, warm_up
from mockdcp.model._vbmap import VBucketMap, VBucketMove
from mockdcp.model._vbucket import VBucket, collection_high_seqnos, high_seqnos
from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from mockdcp.model._bucket import Bucket
    from mockdcp.model._manifest import Manifest
    from mockdcp.model._oracle import Oracle

#: told (node, vbucket) when that node's copy of that vbucket changed
NodeListener = Callable[[str, int], None]

#: the node of a one-node cluster when none is named
DEFAULT_NODE = "node0"


class Cluster:
    """The copies of ``bucket``'s vbuckets on ``nodes`` (see the module docstring)."""

    def __init__(
        self,
        bucket: Bucket,
        nodes: Sequence[str] = (DEFAULT_NODE,),
        replicas: int = 0,
        *,
        seed: int = 0,
    ) -> None:
        """The bucket's vbuckets become the actives of a balanced map over ``nodes``
        (``VBucketMap.balanced``: ``ModelError`` for more replicas than nodes - 1);
        each replica starts caught up, persisted as far as its active."""
        self.map = VBucketMap.balanced(bucket.num_vbuckets, nodes, replicas)
        self.bucket = bucket
        self.rng = random.Random(f"mockdcp-cluster-{seed}")
        first = bucket.vbuckets[0]
        self._limits = (first.checkpoint_max_items, first.checkpoint_max_bytes)
        self._copies: dict[str, dict[int, VBucket]] = {node: {} for node in nodes}
        #: node -> vbucket -> the copy a move left there (the old active dead, a
        #: dropped replica still a replica), until the move ends (``delete_old_copies``)
        self._old: dict[str, dict[int, VBucket]] = {}
        self._down: set[str] = set()
        self._leaving: set[str] = set()
        #: (node or None, vbucket or None): replication paused for the copies matching
        self._paused: set[tuple[str | None, int | None]] = set()
        self.listeners: list[NodeListener] = []
        for vb, active in enumerate(bucket.vbuckets):
            node = self.map.active(vb)
            assert node is not None
            self._copies[node][vb] = active
            for replica_node in self.map.replicas(vb):
                self._build(replica_node, vb, active, persist_upto=active.persisted_seqno)
        self._generations = [vb.generation for vb in bucket.vbuckets]
        #: replicate each change of an active at once (the server's replication
        #: streams); False: only ``replicate`` copies (the model's own tests)
        self.auto_replicate = False
        self._views: dict[str, NodeView] = {}
        bucket.listeners.append(self._on_bucket_change)

    # -- lookups ---------------------------------------------------------------------

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every node of the cluster, those added and not yet rebalanced in included."""
        return tuple(self._copies)

    @property
    def down(self) -> frozenset[str]:
        """The nodes that are down (``node_down``)."""
        return frozenset(self._down)

    @property
    def leaving(self) -> frozenset[str]:
        """The nodes ``remove_node`` marked; the next ``rebalance`` takes them out."""
        return frozenset(self._leaving)

    def copies_on(self, node: str) -> Mapping[int, VBucket]:
        """vbucket -> the copy ``node`` holds (active or replica): what that node serves."""
        self._check_node(node)
        return types.MappingProxyType(self._copies[node])

    def copy(self, node: str, vbucket: int) -> VBucket | None:
        """``node``'s copy of ``vbucket``, or None (NOT_MY_VBUCKET there)."""
        self._check_vbucket(vbucket)
        return self.copies_on(node).get(vbucket)

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
        for node, old in self._old.items():
            for vb in [v for v in old if vbucket is None or v == vbucket]:
                copy = old.pop(vb)
                if copy.state is not VBucketState.DEAD:
                    retire(copy)
                gone.append((node, vb))
        self._old = {node: old for node, old in self._old.items() if old}
        self._notify(gone)
        return gone

    def active(self, vbucket: int) -> VBucket:
        """The active copy of ``vbucket`` (``bucket.vbuckets[vbucket]``): a dead empty
        one, on no node, when a failover left the vbucket without any copy."""
        self._check_vbucket(vbucket)
        return self.bucket.vbuckets[vbucket]

    def replicas(self, vbucket: int) -> dict[str, VBucket]:
        """node -> replica copy of ``vbucket``, in chain order."""
        return {node: self._copies[node][vbucket] for node in self.map.replicas(vbucket)}

    def is_paused(self, node: str, vbucket: int) -> bool:
        """Is replication into ``node``'s copy of ``vbucket`` paused?"""
        return any(
            (n is None or n == node) and (v is None or v == vbucket) for n, v in self._paused
        )

    def view(self, node: str) -> NodeView:
        """The bucket as ``node`` serves it (``NodeView``)."""
        self._check_node(node)
        view = self._views.get(node)
        if view is None:
            view = self._views[node] = NodeView(self, node)
        return view

    def oracle(self) -> Oracle:
        """What a correct consumer must hold once caught up: the documents of the
        active copies (``Bucket.oracle``). An active on a down node counts with what it
        persisted (all that it will have when it is back)."""
        return self.bucket.oracle()

    def _check_node(self, node: str) -> None:
        if node not in self._copies:
            raise ModelError(f"no node {node!r} in the cluster ({list(self._copies)})")

    def _check_vbucket(self, vbucket: int) -> None:
        self.bucket.vbucket(vbucket)  # ModelError if there is none

    def _check_up(self, node: str) -> None:
        self._check_node(node)
        if node in self._down:
            raise ModelError(f"node {node!r} is down")

    # -- notification ----------------------------------------------------------------

    def _notify(self, touched: Iterable[tuple[str, int]], actives: Iterable[int] = ()) -> None:
        """Tell the listeners each (node, vbucket) touched, then the bucket's listeners
        each vbucket whose active changed (which tells ours again, harmlessly)."""
        for node, vb in sorted(set(touched)):
            for listener in list(self.listeners):
                listener(node, vb)
        self.bucket.notify(sorted(set(actives)))

    def _on_bucket_change(self, vbid: int) -> None:
        """A vbucket's active changed (a write, or a step of the bucket's own): tell our
        listeners; when its history was cut (a new generation: the bucket's failover,
        restart or flush), its replicas attach again and roll back where they must."""
        node = self.map.active(vbid)
        if node is not None:
            for listener in list(self.listeners):
                listener(node, vbid)
        active = self.bucket.vbuckets[vbid]
        if active.generation != self._generations[vbid]:
            self._generations[vbid] = active.generation
            self._reattach(vbid)
        if self.auto_replicate and node is not None:
            self._follow(vbid, active)

    def _follow(self, vb: int, active: VBucket) -> None:
        """Replication streams at work (``auto_replicate``): each replica of ``vb`` that
        is not paused, on an up node, takes what its active wrote, and persists as far as
        the active has (a replica's flusher keeps pace with its active's: a write the
        active has not persisted is in the replica's memory only)."""
        if not active.online:
            return
        touched = []
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
            touched.append((n, vb))
        self._notify(touched)

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

    # -- replication -----------------------------------------------------------------

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
        touched = []
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
                touched.append((n, vb))
        self._notify(touched)
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
        touched = []
        for n, vb in self._targets(node, vbucket):
            replica = self._copies[n][vb]
            seqno = replica.high_seqno if upto is None else min(upto, replica.high_seqno)
            if n not in self._down and seqno > replica.persisted_seqno:
                replica.persist(seqno)
                touched.append((n, vb))
        self._notify(touched)

    # -- copies ------------------------------------------------------------------------

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

    def _move(self, move: VBucketMove) -> list[tuple[str, int]]:
        """Give ``move.vbucket`` the chain ``move.target`` (its nodes up): a takeover
        when the active moves, a new empty active when it had none, new replicas built
        from the active, the copies that leave the chain kept on their nodes until the move
        ends (``delete_old_copies``). The (node, vbucket) touched."""
        vb = move.vbucket
        old_node, new_node = move.source[0], move.target[0]
        assert new_node is not None, "a move always has an active"
        active = self.bucket.vbuckets[vb]
        if old_node is None:
            active = self._fresh_active(vb, new_node)
        elif old_node != new_node:
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
        return [(n, vb) for n in {*move.source, *move.target} if n is not None]

    # -- topology steps ----------------------------------------------------------------

    def add_node(self, node: str) -> None:
        """A new node joins, holding nothing until the next ``rebalance``."""
        if not isinstance(node, str) or not node:
            raise ModelError(f"a node is named by a non-empty string, not {node!r}")
        if node in self._copies:
            raise ModelError(f"node {node!r} is already in the cluster")
        self._copies[node] = {}

    def remove_node(self, node: str) -> None:
        """Mark ``node`` to leave: the next ``rebalance`` moves its copies away and
        takes it out. ``ModelError`` for the last node."""
        self._check_node(node)
        if node in self._leaving:
            raise ModelError(f"node {node!r} is already being removed")
        if not [n for n in self._copies if n not in self._leaving and n != node]:
            raise ModelError(f"{node!r} is the last node: it cannot be removed")
        self._leaving.add(node)

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
        touched = [pair for move in moves for pair in self._move(move)]
        self.delete_old_copies()  # every move done: ns_server deletes what they left
        for node in self._leaving:
            assert not self._copies[node], "a leaving node keeps no copy after a rebalance"
            del self._copies[node]
        self._forget(self._leaving)
        self._leaving.clear()
        self._notify(touched, (m.vbucket for m in moves))
        return moves

    # -- a rebalance a move at a time (the server's: configs and waits between moves) ----

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
        self._notify(self._move(move), [move.vbucket])

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

    def _forget(self, nodes: Iterable[str]) -> None:
        gone = set(nodes)
        for node in gone:
            self._old.pop(node, None)
        self._paused = {(n, v) for n, v in self._paused if n not in gone}
        self._down -= gone

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
        self._notify(self._move(move), [vbucket])
        self.delete_old_copies(vbucket)  # a move of its own: done at once
        return move

    def failover(self, node: str, *, graceful: bool = False) -> list[int]:
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
            return self._graceful_failover(node)
        return self._hard_failover(node)

    def _graceful_failover(self, node: str) -> list[int]:
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
        self._hard_failover(node)
        return [vb for vb, _ in plan]

    def _hard_failover(self, node: str) -> list[int]:
        new_map = self.map.with_failed_over(node, down=self._down)
        changed = self.map.actives_on(node)
        for vb in changed:
            promoted = new_map.active(vb)
            if promoted is None:
                self._fresh_active(vb, None)
                continue
            copy = self._copies[promoted][vb]
            promote(copy, *self._limits)
            self.bucket.vbuckets[vb] = copy
            if copy.online:
                self.bucket._catch_up(copy)
        touched = [(node, vb) for vb in self._copies[node]]
        for copy in self._copies.pop(node).values():
            if copy.state is not VBucketState.DEAD:
                retire(copy)
        self.map = new_map
        self._forget([node])
        self._leaving.discard(node)
        for vb in changed:
            touched += [(n, vb) for n in new_map.chain(vb) if n is not None]
            touched += self._reattach(vb)
        self._notify(touched, changed)
        return changed

    def node_down(self, node: str) -> None:
        """``node`` goes down uncleanly (``crash``): each copy it holds keeps only what
        it persisted and takes no writes; replication into and out of it stops. Its
        actives stay its own until it is back (``node_up``) or failed over. On an
        ephemeral bucket each copy loses everything (``_ephemeral.lose_everything``)."""
        self._check_up(node)
        for copy in self._copies[node].values():
            if self.bucket.ephemeral is not None:
                lose_everything(copy)
            crash(copy)
        self._down.add(node)
        actives = self.map.actives_on(node) if node in self.map.nodes else []
        self._notify(((node, vb) for vb in self._copies[node]), actives)

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
        actives = self.map.actives_on(node) if node in self.map.nodes else []
        for vb in actives:
            self.bucket._catch_up(self._copies[node][vb])
        touched = [(node, vb) for vb in self._copies[node]]
        for vb in sorted(self._copies[node]):
            touched += self._reattach(vb)
        self._notify(touched, actives)


class NodeView:
    """The bucket as one node of the cluster serves it: the same name, manifest and
    vbucket count, but the vbuckets are that node's copies (active or replica) and a
    vbucket it holds no copy of reads as dead (NOT_MY_VBUCKET), as a data node answers
    for a vbucket it does not have (kv_engine ``KVBucket::getVBucket`` returning none).
    What the producer's lookups and stream requests read (``Bucket``'s read side)."""

    def __init__(self, cluster: Cluster, node: str) -> None:
        self.cluster = cluster
        self.node = node
        bucket = cluster.bucket
        self.name = bucket.name
        self.num_vbuckets = bucket.num_vbuckets
        self._absent = [_absent_copy(vb) for vb in range(bucket.num_vbuckets)]

    @property
    def manifest(self) -> Manifest:
        return self.cluster.bucket.manifest

    def holds(self, vbid: int) -> VBucket | None:
        """This node's copy of ``vbid``: active, replica, or the one a move left until
        ns_server deletes it (``Cluster.delete_old_copies``); None: it has none, or the
        node is gone."""
        copies = self.cluster._copies.get(self.node)
        if copies is None:
            return None
        copy = copies.get(vbid)
        return copy if copy is not None else self.cluster.old_copy(self.node, vbid)

    def is_active(self, vbid: int) -> bool:
        """Does this node hold ``vbid``'s active copy, up?"""
        copy = self.holds(vbid)
        return copy is not None and copy.state is VBucketState.ACTIVE and copy.online

    def vbucket(self, vbid: int) -> VBucket:
        """This node's copy of ``vbid``: a dead, empty one where it has none (or is
        down); ``ModelError`` for a vbucket the bucket does not have."""
        if not isinstance(vbid, int) or not 0 <= vbid < self.num_vbuckets:
            raise ModelError(f"no vbucket {vbid!r} (the bucket has {self.num_vbuckets})")
        copy = self.holds(vbid)
        if copy is None or not copy.online:
            return self._absent[vbid]
        return copy

    @property
    def vbuckets(self) -> list[VBucket]:
        return [self.vbucket(vb) for vb in range(self.num_vbuckets)]

    def high_seqnos(self, state: int | None = None) -> list[tuple[int, int]]:
        """GET_ALL_VB_SEQNOS on this node: its copies in ``state`` (0/None: every
        live one), as ``Bucket.high_seqnos``; a vbucket it has no copy of is not
        listed, even for ``state`` dead (kv_engine ``getAllVBucketSequenceNumbers``
        walks the vbuckets the node has)."""
        return [pair for pair in high_seqnos(self.vbuckets, state) if self._has(pair[0])]

    def collection_high_seqnos(
        self, collection_id: int, state: int | None = None
    ) -> list[tuple[int, int]]:
        """As ``Bucket.collection_high_seqnos``, over this node's copies."""
        self.manifest.check_collection(collection_id)
        pairs = collection_high_seqnos(self.vbuckets, collection_id, state)
        return [pair for pair in pairs if self._has(pair[0])]

    def _has(self, vbid: int) -> bool:
        copy = self.holds(vbid)
        return copy is not None and copy.online


def _absent_copy(vbid: int) -> VBucket:
    copy = VBucket(
        vbid,
        random.Random(0),
        max_failover_entries=1,
        checkpoint_max_items=1,
        checkpoint_max_bytes=1,
    )
    copy.state = VBucketState.DEAD
    return copy
