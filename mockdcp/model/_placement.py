"""Where each vbucket's copies go: a balanced placement that keeps what it can.

The rule ns_server's map generation follows (ns_server ``src/mb_map.erl``: ``balance``,
``is_balanced``, ``simple_minimize_moves`` and the scoring of ``vbucket_movements``), not
its algorithm:

* each node is active for ⌊V/N⌋ or ⌈V/N⌉ of the V vbuckets, and holds ⌊V·R/N⌋ or
  ⌈V·R/N⌉ replicas (R replicas a vbucket, N nodes);
* a replica is never on its vbucket's active node, and no node holds two copies of one
  vbucket; with fewer than R + 1 nodes a chain has fewer replicas (``balance`` cuts the
  copies to the node count and pads the chain with ``undefined``);
* starting from a current placement, a copy already where the balanced target may have
  it stays there: an active stays on its node while that node has room, a vbucket whose
  active must move goes to a node that already holds a replica of it (a takeover with
  no backfill), and a replica stays on its node, as does the old active as a replica.

Nodes are numbered 0..N-1 here; ``-1`` is no node. Pure and deterministic: ties go to
the lower node number.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

Chain = list[int]


def place(
    num_vbuckets: int, num_nodes: int, replicas: int, current: Sequence[Sequence[int]] = ()
) -> list[Chain]:
    """The chains ``[active, replica...]`` of a balanced placement of ``num_vbuckets``
    vbuckets on ``num_nodes`` nodes with ``min(replicas, num_nodes - 1)`` replicas each
    (the caller pads to ``replicas``), keeping what it can of ``current`` (one chain a
    vbucket, the same node numbers, ``-1`` for a copy on no kept node; empty: no
    placement yet, and the actives go in blocks of consecutive vbuckets, as on a new
    cluster)."""
    copies = min(replicas, num_nodes - 1)
    if not current and not copies:  # a new cluster of one node, or without replicas
        return [[a] for a in _blocks(num_vbuckets, num_nodes)]
    old = [list(c) for c in current] or [[] for _ in range(num_vbuckets)]
    actives = _place_actives(num_vbuckets, num_nodes, old)
    chosen = _Replicas(num_vbuckets, num_nodes, copies, actives, old).place()
    return [[a, *r] for a, r in zip(actives, chosen, strict=True)]


def _blocks(num_vbuckets: int, num_nodes: int) -> list[int]:
    """The actives of a new cluster (``_place_actives`` with no placement yet): blocks
    of consecutive vbuckets, ⌈V/N⌉ for the first ``V mod N`` nodes, ⌊V/N⌋ for the rest."""
    base, extra = divmod(num_vbuckets, num_nodes)
    return [node for node in range(num_nodes) for _ in range(base + (node < extra))]


def _place_actives(num_vbuckets: int, num_nodes: int, old: list[Chain]) -> list[int]:
    """Each vbucket's active node: ⌈V/N⌉ for the nodes that are active for the most
    vbuckets now, ⌊V/N⌋ for the others; current actives stay while their node has room,
    the rest go to a node with a replica of them, else to the first node with room."""
    held = Counter(chain[0] for chain in old if chain and chain[0] >= 0)
    base, extra = divmod(num_vbuckets, num_nodes)
    room = [base] * num_nodes
    for node in sorted(range(num_nodes), key=lambda i: (-held[i], i))[:extra]:
        room[node] += 1
    actives = [-1] * num_vbuckets
    for vb, chain in enumerate(old):
        if chain and chain[0] >= 0 and room[chain[0]] > 0:
            actives[vb] = chain[0]
            room[chain[0]] -= 1
    for vb in range(num_vbuckets):
        if actives[vb] >= 0:
            continue
        holders = [n for n in old[vb][1:] if n >= 0 and room[n] > 0]
        node = holders[0] if holders else next(i for i in range(num_nodes) if room[i] > 0)
        actives[vb] = node
        room[node] -= 1
    return actives


class _Replicas:
    """The replica placement for fixed actives (see the module docstring).

    Replica quotas: ⌊V·R/N⌋ each, one more for ``V·R mod N`` nodes: those holding the
    most replicas now, then those active for fewer vbuckets, never one whose actives and
    replicas would pass V (a node holds at most one copy of each vbucket). With every
    node within V the placement exists (a transportation problem whose cuts all hold),
    so when the greedy fill finds no node for a copy, an augmenting path of replica
    moves (``_augment``) makes room.
    """

    def __init__(
        self,
        num_vbuckets: int,
        num_nodes: int,
        copies: int,
        actives: list[int],
        old: list[Chain],
    ) -> None:
        self.num_vbuckets, self.num_nodes, self.copies = num_vbuckets, num_nodes, copies
        self.actives, self.old = actives, old
        self.chosen: list[Chain] = [[] for _ in range(num_vbuckets)]
        #: node -> the vbuckets it holds a replica of
        self.holders: list[set[int]] = [set() for _ in range(num_nodes)]
        self.room = self._quotas()

    def _quotas(self) -> list[int]:
        held = Counter(n for chain in self.old for n in chain[1:] if n >= 0)
        active_count = Counter(self.actives)
        base, extra = divmod(self.num_vbuckets * self.copies, self.num_nodes)
        order = sorted(range(self.num_nodes), key=lambda i: (-held[i], active_count[i], i))
        fits = [i for i in order if active_count[i] + base + 1 <= self.num_vbuckets]
        assert len(fits) >= extra, "the quotas always fit (see the class docstring)"
        room = [base] * self.num_nodes
        for node in fits[:extra]:
            room[node] += 1
        return room

    def place(self) -> list[Chain]:
        if not self.copies:
            return self.chosen
        for vb, chain in enumerate(self.old):  # keep: replicas, then the old active
            for node in [*chain[1:], *chain[:1]]:
                keep = len(self.chosen[vb]) < self.copies and self._eligible(vb, node)
                if keep and self.room[node] > 0:
                    self._add(vb, node)
        for vb in range(self.num_vbuckets):  # fill: the node with the most room
            while len(self.chosen[vb]) < self.copies:
                free = [
                    i for i in range(self.num_nodes) if self.room[i] > 0 and self._eligible(vb, i)
                ]
                if free:
                    self._add(vb, max(free, key=lambda i: (self.room[i], -i)))
                else:
                    self._augment(vb)
        return self.chosen

    def _eligible(self, vb: int, node: int) -> bool:
        return node >= 0 and node != self.actives[vb] and node not in self.chosen[vb]

    def _add(self, vb: int, node: int) -> None:
        self.chosen[vb].append(node)
        self.holders[node].add(vb)
        self.room[node] -= 1

    def _augment(self, vb: int) -> None:
        """Give ``vb`` one more replica when every node it may use is full: a shortest
        chain of moves (``vb`` takes node X1, a vbucket holding X1 moves that replica to
        X2, ...) ending at a node with room. Breadth first over nodes."""
        parent: dict[int, tuple[int, int] | None] = {}
        queue: deque[int] = deque()
        for node in range(self.num_nodes):
            if self._eligible(vb, node):
                parent[node] = None
                queue.append(node)
        while queue:
            node = queue.popleft()
            if self.room[node] > 0:
                self._apply_path(vb, node, parent)
                return
            for other in sorted(self.holders[node]):
                for to in range(self.num_nodes):
                    if to not in parent and self._eligible(other, to):
                        parent[to] = (node, other)
                        queue.append(to)
        raise AssertionError("no placement: the quotas always fit")

    def _apply_path(self, vb: int, end: int, parent: dict[int, tuple[int, int] | None]) -> None:
        self.room[end] -= 1
        node = end
        while (step := parent[node]) is not None:
            came_from, other = step
            chain = self.chosen[other]
            chain[chain.index(came_from)] = node
            self.holders[came_from].discard(other)
            self.holders[node].add(other)
            node = came_from
        self.chosen[vb].append(node)
        self.holders[node].add(vb)
