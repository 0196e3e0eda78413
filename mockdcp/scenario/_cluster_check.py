"""What the topology steps will have done to the cluster, for checking a step list whole.

``ClusterSim`` follows the statuses of the nodes (numbered from 0 in join order) and the
vbucket map (a value: ``VBucketMap``) through ``add_node``, ``remove_node``,
``rebalance``, ``failover_node``, ``node_down`` and ``node_up``, so a step naming an
unknown node, removing the last one, rebalancing a vbucket to where it already is or
while a node is down is refused before any step runs, as ns_server refuses the REST call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model import VBucketMap
    from mockdcp.producer import Topology


@attrs.define
class ClusterSim:
    """See the module docstring. ``status[i]``: ``active``, ``added``, ``down``,
    ``failed_over`` or ``removed``; ``leaving``: the nodes ``remove_node`` marked."""

    names: list[str]
    status: list[str]
    map: VBucketMap
    leaving: set[str] = attrs.field(factory=set)

    @classmethod
    def of(cls, topology: Topology) -> ClusterSim:
        names = list(topology.nodes)
        return cls(
            names,
            [topology.status(n).value for n in names],
            topology.cluster.map,
            set(topology.cluster.leaving),
        )

    @classmethod
    def new(cls, num_vbuckets: int, nodes: int = 1, replicas: int = 0) -> ClusterSim:
        """A new cluster of ``nodes`` with ``replicas`` (a scenario file checked on its
        own: as ``serve`` will start it)."""
        from mockdcp.model import VBucketMap

        names = [f"node{i}" for i in range(nodes)]
        return cls(names, ["active"] * nodes, VBucketMap.balanced(num_vbuckets, names, replicas))

    def member(self, number: int, step: str) -> str:
        """The name of node ``number``, which must still be in the cluster."""
        if not 0 <= number < len(self.names):
            raise ValueError(
                f"{step}: no node {number}: the cluster's nodes are 0..{len(self.names) - 1}"
            )
        if self.status[number] in ("failed_over", "removed"):
            raise ValueError(f"{step}: node {number} was {self.status[number].replace('_', ' ')}")
        return self.names[number]

    def in_cluster(self) -> list[str]:
        return [
            n
            for n, s in zip(self.names, self.status, strict=True)
            if s in ("active", "added", "down")
        ]

    def add_node(self) -> None:
        self.names.append(f"node{len(self.names)}")
        self.status.append("added")

    def remove_node(self, number: int) -> None:
        name = self.member(number, "remove_node")
        if name in self.leaving:
            raise ValueError(f"remove_node: node {number} is already being removed")
        if not [n for n in self.in_cluster() if n not in self.leaving and n != name]:
            raise ValueError(f"remove_node: node {number} is the last node: it cannot be removed")
        self.leaving.add(name)

    def rebalance(self, vbuckets: Sequence[int] | None) -> None:
        down = [i for i, s in enumerate(self.status) if s == "down"]
        if down:
            raise ValueError(
                f"rebalance: node(s) {down} are down: bring them up (node_up) or fail them"
                " over (failover_node) first"
            )
        keep = [n for n in self.in_cluster() if n not in self.leaving]
        moves = self.map.moves_to(self.map.rebalanced(keep))
        moved = {m.vbucket for m in moves}
        if vbuckets is not None:
            if len(set(vbuckets)) != len(vbuckets):
                raise ValueError(f"rebalance: vbuckets {list(vbuckets)} name one twice")
            for vb in vbuckets:
                if not 0 <= vb < self.map.num_vbuckets:
                    raise ValueError(f"rebalance: no vbucket {vb}")
                if vb not in moved:
                    raise ValueError(
                        f"rebalance: vbucket {vb} is already where the balanced map puts it"
                    )
            moved = set(vbuckets)
        chains = [self.map.chain(vb) for vb in range(self.map.num_vbuckets)]
        target = self.map.rebalanced(keep)
        for vb in moved:
            chains[vb] = target.chain(vb)
        holders = {n for chain in chains for n in chain if n is not None}
        from mockdcp.model import VBucketMap

        nodes = [n for n in dict.fromkeys([*self.map.nodes, *target.nodes]) if n in holders]
        nodes = nodes or list(target.nodes)
        self.map = VBucketMap.from_chains(nodes, chains, self.map.num_replicas)
        for i, name in enumerate(self.names):
            if name in nodes and self.status[i] == "added":
                self.status[i] = "active"
            if name in self.leaving and name not in holders:
                self.status[i] = "removed"
                self.leaving.discard(name)
            if self.status[i] == "failed_over":
                self.status[i] = "removed"

    def failover_node(self, number: int, graceful: bool) -> None:
        name = self.member(number, "failover_node")
        if len(self.in_cluster()) == 1:
            raise ValueError(f"failover_node: node {number} is the last node")
        i = self.names.index(name)
        if graceful and self.status[i] == "down":
            raise ValueError(
                f"failover_node: node {number} is down: only a hard failover can take it out"
            )
        if name in self.map.nodes:
            down = {n for n, s in zip(self.names, self.status, strict=True) if s == "down"}
            self.map = self.map.with_failed_over(name, down=down)
        self.status[i] = "failed_over"
        self.leaving.discard(name)

    def node_down(self, number: int) -> None:
        name = self.member(number, "node_down")
        i = self.names.index(name)
        if self.status[i] == "down":
            raise ValueError(f"node_down: node {number} is already down")
        self.status[i] = "down"

    def node_up(self, number: int) -> None:
        name = self.member(number, "node_up")
        i = self.names.index(name)
        if self.status[i] != "down":
            raise ValueError(f"node_up: node {number} is not down")
        self.status[i] = "active" if name in self.map.nodes else "added"

    def check_replication(self, node: int | None, vbucket: int | None) -> None:
        if node is not None:
            self.member(node, "replication")
        if vbucket is not None and not 0 <= vbucket < self.map.num_vbuckets:
            raise ValueError(f"replication: no vbucket {vbucket}")
