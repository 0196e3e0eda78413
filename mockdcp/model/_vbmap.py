"""The vbucket map: which node holds each vbucket's active and replica copies.

As the cluster config's ``vBucketServerMap`` carries it (libvbucket's README "Config
syntax", gocbcore ``config.go``): ``serverList`` (the nodes), ``numReplicas`` and
``vBucketMap``, one chain ``[active, replica 1, ..., replica R]`` a vbucket of indexes
into ``serverList``, ``-1`` where there is no copy; ``hashAlgorithm`` is ``CRC``
(``vbucket_of``). A chain never names a node twice, and its ``-1`` come last (ns_server
``src/mb_map.erl``, ``is_valid`` and ``promote_replica``).

A map is a value: every change (a rebalance's target, a failover, one vbucket's new
chain) is a new map. The steps that move data between copies are ``Cluster``'s.
"""

from __future__ import annotations

import itertools
import operator
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp.model._placement import place
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping, Sequence

#: A bucket has 0..3 replicas (couchbase-net-client ``ReplicaNumber.cs``: "minimum 0,
#: maximum 3", as the bucket REST API checks).
MAX_REPLICAS = 3

Chain = tuple[int, ...]
NamedChain = tuple[str | None, ...]


@attrs.frozen
class VBucketMove:
    """One vbucket's chain before and after a map change (node names, ``None`` for no
    copy): what a rebalance does to that vbucket."""

    vbucket: int
    source: NamedChain
    target: NamedChain

    @property
    def takeover(self) -> bool:
        """The active moves from one node to another (a takeover stream hands it over;
        kv_engine ``docs/dcp/documentation/rebalance.md``, "VBucket Takeover")."""
        old, new = self.source[0], self.target[0]
        return old is not None and new is not None and old != new

    @property
    def new_copies(self) -> tuple[str, ...]:
        """Nodes that hold no copy of the vbucket yet and must be given one (built by
        streaming it from the active: a backfill)."""
        return tuple(n for n in self.target if n is not None and n not in self.source)

    @property
    def dropped(self) -> tuple[str, ...]:
        """Nodes whose copy of the vbucket goes away."""
        return tuple(n for n in self.source if n is not None and n not in self.target)


def _check_nodes(nodes: Sequence[str]) -> None:
    if not nodes:
        raise ModelError("a vbucket map needs at least one node")
    for node in nodes:
        if not isinstance(node, str) or not node:
            raise ModelError(f"a node is named by a non-empty string, not {node!r}")
    if len(set(nodes)) != len(nodes):
        raise ModelError(f"node names must be unique: {list(nodes)}")


def _check_replicas(replicas: int) -> None:
    if not isinstance(replicas, int) or not 0 <= replicas <= MAX_REPLICAS:
        raise ModelError(f"a bucket has 0..{MAX_REPLICAS} replicas, not {replicas!r}")


def _chain_problem(chain: Chain, num_nodes: int, width: int) -> str | None:
    """What is wrong with a chain of a map of ``num_nodes`` nodes whose chains have
    ``width`` entries (``None``: nothing)."""
    if len(chain) != width:
        return f"a chain has {width} entries, not {len(chain)}"
    if any(not isinstance(i, int) or not -1 <= i < num_nodes for i in chain):
        return f"chain {list(chain)} names no node of {num_nodes}"
    placed = [i for i in chain if i >= 0]
    if len(set(placed)) != len(placed):
        return f"chain {list(chain)} names a node twice"
    if list(chain[: len(placed)]) != placed:
        return f"chain {list(chain)} has a copy after a -1"
    return None


@attrs.frozen
class VBucketMap:
    """``nodes`` (the server list), one chain of node indexes a vbucket (``-1``: no
    copy) and the configured replica count (see the module docstring). Construction
    validates; ``ModelError`` names what is wrong."""

    nodes: tuple[str, ...]
    chains: tuple[Chain, ...]
    num_replicas: int

    def __attrs_post_init__(self) -> None:
        _check_nodes(self.nodes)
        _check_replicas(self.num_replicas)
        if not self.chains:
            raise ModelError("a vbucket map needs at least one vbucket")
        # (chain, its first vbucket), each distinct chain once (a map repeats a few over
        # 1,024 vbuckets) when every entry is an int; else each in turn (1.0 equals 1,
        # yet names no node)
        count = len(self.chains)
        checks: Iterable[tuple[Chain, int]] = zip(self.chains, range(count), strict=True)
        if set(map(type, itertools.chain.from_iterable(self.chains))) <= {int}:
            first = dict(zip(reversed(self.chains), range(count - 1, -1, -1), strict=True))
            checks = sorted(first.items(), key=operator.itemgetter(1))
        for chain, vb in checks:
            problem = _chain_problem(chain, len(self.nodes), self.num_replicas + 1)
            if problem is not None:
                raise ModelError(f"vbucket {vb}: {problem}")

    # -- construction ------------------------------------------------------------------

    @classmethod
    def balanced(cls, num_vbuckets: int, nodes: Sequence[str], replicas: int) -> VBucketMap:
        """A new bucket's map: actives in blocks of consecutive vbuckets, counts within
        one of each other, replicas spread evenly, never on their active's node nor two
        on one node (``place``). ``ModelError`` for more replicas than nodes - 1."""
        _check_nodes(nodes)
        _check_replicas(replicas)
        if replicas > len(nodes) - 1:
            raise ModelError(
                f"{replicas} replicas need {replicas + 1} nodes, not {len(nodes)}"
                " (a node holds one copy of a vbucket)"
            )
        if not isinstance(num_vbuckets, int) or num_vbuckets < 1:
            raise ModelError(f"a vbucket map needs at least one vbucket, not {num_vbuckets!r}")
        chains = place(num_vbuckets, len(nodes), replicas)
        return cls(tuple(nodes), tuple(tuple(c) for c in chains), replicas)

    @classmethod
    def from_chains(
        cls, nodes: Sequence[str], chains: Sequence[Sequence[str | None]], replicas: int
    ) -> VBucketMap:
        """A map from chains of node names (``None``: no copy), each padded with ``-1``
        to ``replicas + 1`` entries."""
        _check_nodes(nodes)
        index = {name: i for i, name in enumerate(nodes)}
        out = []
        for vb, chain in enumerate(chains):
            unknown = [n for n in chain if n is not None and n not in index]
            if unknown:
                raise ModelError(f"vbucket {vb}: no node {unknown[0]!r} in {list(nodes)}")
            if len(chain) > replicas + 1:
                raise ModelError(f"vbucket {vb}: a chain has at most {replicas + 1} entries")
            padded = [index[n] if n is not None else -1 for n in chain]
            out.append(tuple(padded + [-1] * (replicas + 1 - len(padded))))
        return cls(tuple(nodes), tuple(out), replicas)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> VBucketMap:
        """The map of a config's ``vBucketServerMap`` (``ModelError`` if malformed)."""
        try:
            nodes, chains, replicas = obj["serverList"], obj["vBucketMap"], obj["numReplicas"]
        except (KeyError, TypeError):
            raise ModelError("a vBucketServerMap has serverList, vBucketMap, numReplicas") from None
        if obj.get("hashAlgorithm", "CRC") != "CRC":
            raise ModelError(f"hashAlgorithm {obj['hashAlgorithm']!r}: only CRC is modelled")
        if not isinstance(nodes, list) or not isinstance(chains, list):
            raise ModelError("serverList and vBucketMap are lists")
        if not all(isinstance(c, list) for c in chains):
            raise ModelError("each vBucketMap entry is a list of node indexes")
        return cls(tuple(nodes), tuple(tuple(c) for c in chains), replicas)

    # -- reading ---------------------------------------------------------------------

    @property
    def num_vbuckets(self) -> int:
        return len(self.chains)

    def _name(self, index: int) -> str | None:
        return self.nodes[index] if index >= 0 else None

    def _check_vbucket(self, vb: int) -> None:
        if not isinstance(vb, int) or not 0 <= vb < len(self.chains):
            raise ModelError(f"no vbucket {vb!r} (the map has {len(self.chains)})")

    def chain(self, vb: int) -> NamedChain:
        """The node names of ``vb``'s chain, ``None`` where there is no copy."""
        self._check_vbucket(vb)
        return tuple(self._name(i) for i in self.chains[vb])

    def active(self, vb: int) -> str | None:
        """The node holding ``vb``'s active copy (``None``: the vbucket has none)."""
        self._check_vbucket(vb)
        return self._name(self.chains[vb][0])

    def replicas(self, vb: int) -> tuple[str, ...]:
        """The nodes holding replicas of ``vb``, in chain order."""
        self._check_vbucket(vb)
        return tuple(self.nodes[i] for i in self.chains[vb][1:] if i >= 0)

    def copies(self) -> list[tuple[str | None, tuple[str, ...]]]:
        """Every vbucket's ``(active, replicas)`` (as ``active`` and ``replicas``), in
        vbucket order: a new cluster places its 1,024 at once."""
        names = self.nodes
        return [
            (names[c[0]] if c[0] >= 0 else None, tuple(names[i] for i in c[1:] if i >= 0))
            for c in self.chains
        ]

    def _index(self, node: str) -> int:
        try:
            return self.nodes.index(node)
        except ValueError:
            raise ModelError(f"no node {node!r} in the map ({list(self.nodes)})") from None

    def actives_on(self, node: str) -> list[int]:
        """The vbuckets ``node`` is active for."""
        i = self._index(node)
        return [vb for vb, chain in enumerate(self.chains) if chain[0] == i]

    def replicas_on(self, node: str) -> list[int]:
        """The vbuckets ``node`` holds a replica of."""
        i = self._index(node)
        return [vb for vb, chain in enumerate(self.chains) if i in chain[1:]]

    def counts(self) -> dict[str, tuple[int, int]]:
        """node -> (active vbuckets, replica vbuckets)."""
        out = dict.fromkeys(self.nodes, (0, 0))
        for chain in self.chains:
            for pos, i in enumerate(chain):
                if i >= 0:
                    a, r = out[self.nodes[i]]
                    out[self.nodes[i]] = (a + 1, r) if pos == 0 else (a, r + 1)
        return out

    def to_json(self) -> dict[str, Any]:
        """The cluster config's ``vBucketServerMap``."""
        return {
            "hashAlgorithm": "CRC",
            "numReplicas": self.num_replicas,
            "serverList": list(self.nodes),
            "vBucketMap": [list(chain) for chain in self.chains],
        }

    # -- changes -----------------------------------------------------------------------

    def rebalanced(self, nodes: Sequence[str]) -> VBucketMap:
        """The balanced map over ``nodes`` (new ones included, missing ones left out)
        that keeps as many copies where they are as ``place`` can: the target of a
        rebalance. With fewer than ``num_replicas + 1`` nodes the chains hold fewer
        replicas, padded with ``-1`` (ns_server ``mb_map.erl``, ``balance``).
        ``ModelError`` for no node or a repeated one."""
        _check_nodes(nodes)
        index = {name: i for i, name in enumerate(nodes)}
        current = [
            [index.get(n, -1) if n is not None else -1 for n in self.chain(vb)]
            for vb in range(self.num_vbuckets)
        ]
        chains = place(self.num_vbuckets, len(nodes), self.num_replicas, current)
        pad = self.num_replicas + 1
        return VBucketMap(
            tuple(nodes),
            tuple(tuple(c + [-1] * (pad - len(c))) for c in chains),
            self.num_replicas,
        )

    def moves_to(self, target: VBucketMap) -> list[VBucketMove]:
        """The vbuckets whose chain differs in ``target`` (compared by node name), in
        vbucket order: what a rebalance from this map to ``target`` must do. A chain
        already as ``target`` wants it is not listed."""
        if target.num_vbuckets != self.num_vbuckets:
            raise ModelError(
                f"the maps have {self.num_vbuckets} and {target.num_vbuckets} vbuckets"
            )
        moves = []
        for vb in range(self.num_vbuckets):
            source, dest = self.chain(vb), target.chain(vb)
            if source != dest:
                moves.append(VBucketMove(vb, source, dest))
        return moves

    def with_failed_over(self, node: str, down: Collection[str] = ()) -> VBucketMap:
        """The map after ``node`` is failed over: it leaves the server list and every
        chain; where it was active, the chain's first replica not on a ``down`` node
        (else its first replica) becomes the active (ns_server ``mb_map.erl``,
        ``promote_replica``: the failed node is taken out and the rest move up). A
        vbucket with no other copy is left with none. ``ModelError`` for a node not in
        the map or the last node."""
        self._index(node)
        if len(self.nodes) == 1:
            raise ModelError(f"{node!r} is the last node: it cannot be failed over")
        rest = [n for n in self.nodes if n != node]
        chains: list[list[str | None]] = []
        for vb in range(self.num_vbuckets):
            chain = [n for n in self.chain(vb) if n is not None and n != node]
            if self.active(vb) == node and chain:
                up = [n for n in chain if n not in down]
                if up:
                    chain.remove(up[0])
                    chain.insert(0, up[0])
            chains.append(list(chain))
        return VBucketMap.from_chains(rest, chains, self.num_replicas)

    def with_chain(self, vb: int, chain: Sequence[str | None]) -> VBucketMap:
        """The map with ``vb``'s chain replaced (node names, ``None`` for no copy,
        padded); a node not yet in the server list is added at its end."""
        self._check_vbucket(vb)
        nodes = list(self.nodes) + [
            n for n in dict.fromkeys(chain) if n is not None and n not in self.nodes
        ]
        chains = [self.chain(i) for i in range(self.num_vbuckets)]
        chains[vb] = tuple(chain)
        return VBucketMap.from_chains(nodes, chains, self.num_replicas)
