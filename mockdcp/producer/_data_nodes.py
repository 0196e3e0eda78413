"""The cluster's data nodes: each topology step applied to every bucket.

On a real cluster every bucket spans every data node. A node that joins serves each
bucket once a rebalance gives it that bucket's vbuckets; a rebalance moves each bucket's
vbuckets, the buckets one after another, and the nodes leaving are ejected once every
bucket is done (ns_server ``src/ns_rebalancer.erl``: ``rebalance_kv`` runs the bucket
rebalances in turn, then the ejected nodes leave); a failover, a node going down or
coming back does so for every bucket on it (ns_server ``src/failover.erl`` fails the
node over bucket by bucket, promoting each bucket's replicas), and a restart of the
nodes restarts every bucket, all being in the one memcached process of each node
(kv_engine ``daemon/bucket_manager.h``: the process holds every bucket,
``BucketManager::all_buckets_ptr``).

Each bucket has a ``Topology`` of its own (its map and its revision); the data nodes
keep them in step: the same nodes, in the same order, with the same statuses. Node
numbers are those of the first bucket's topology (the shell's: its listeners follow
those statuses); a deleted bucket's topology follows the steps too, so that a bucket
made again under its name finds the nodes as they are. Every step validates against
each bucket first (``ModelError`` before anything changes). Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from mockdcp.model import Cluster
    from mockdcp.producer._buckets import Buckets
    from mockdcp.producer._node import Node
    from mockdcp.producer._topology import Topology


class DataNodes:
    """The topology steps over every bucket of ``buckets`` (see the module docstring).
    ``first``: the topology of the bucket the step names, acted on first (a
    rebalance's ``vbuckets`` are its own)."""

    def __init__(self, buckets: Buckets, first: Topology | None = None) -> None:
        self.buckets = buckets
        every = buckets.topologies()
        self.primary = every[0]
        self.first = self.primary if first is None else first
        #: the step's bucket first, then the others in the order they were made
        self.topologies = [self.first, *(t for t in every if t is not self.first)]

    def _name(self, number: int) -> str:
        """The name of node ``number`` (the first bucket's numbering)."""
        return self.primary.node(number).name

    def _each(self, number: int) -> Iterator[tuple[Topology, int]]:
        """Each topology with node ``number``'s number in it."""
        name = self._name(number)
        for topology in self.topologies:
            yield topology, topology.number(name)

    def add_node(self) -> Node:
        """A new data node joins every bucket (the first bucket's makes it, with its
        ports: ``Topology.spawn``), holding nothing until a rebalance; the node of the
        first bucket."""
        node = self.primary.add_node()
        for topology in self.topologies:
            if topology is not self.primary:
                topology.add_node(like=node)
        return node

    def remove_node(self, number: int) -> None:
        """Mark node ``number`` to leave every bucket at the next rebalance."""
        for topology, n in list(self._each(number)):
            topology.remove_node(n)

    def rebalance(
        self,
        vbuckets: Sequence[int] | None = None,
        *,
        interval: float = 0.0,
        mid_move: bool = False,
        out_delay: float = 0.0,
    ) -> Iterator[float]:
        """Rebalance every bucket, one after another: the other buckets' moves first,
        whole, then the step's bucket's (``vbuckets``: only those moves, in that order;
        ``mid_move``: its last move stops once its new copies are built); then, unless
        stopped mid-move, the nodes that hold nothing leave each bucket. Yields the
        seconds to wait where time passes (``interval`` between moves, half before and
        half after each takeover; ``out_delay`` after a bucket's moves when nodes leave
        it: ``_out_delay``, ``_leaving``). Every bucket's plan is made before any move
        (``ModelError`` before anything changes)."""
        others = self.topologies[1:]
        plans = [(t, t.plan_rebalance(None)) for t in others]
        plans.append((self.first, self.first.plan_rebalance(vbuckets)))
        for index, (topology, moves) in enumerate(plans):
            last_bucket = index == len(plans) - 1
            topology.rebalancing = (0, len(moves))
            try:
                for i, move in enumerate(moves):
                    topology.prepare_move(move)
                    if mid_move and last_bucket and i == len(moves) - 1:
                        return
                    if interval:
                        yield interval / 2
                    topology.apply_move(move)
                    topology.rebalancing = (i + 1, len(moves))
                    if interval and not (last_bucket and i == len(moves) - 1):
                        yield interval / 2
                    topology.end_move(move)  # the old copies, dead since the takeover, go
            finally:
                topology.rebalancing = None
            yield from _out_delay(out_delay, _leaving(topology))
        for topology in self.topologies:
            topology.finish_rebalance()

    def failover_node(
        self, number: int, *, graceful: bool = False, out_delay: float = 0.0
    ) -> Iterator[float]:
        """Fail node ``number`` over in every bucket (``Topology.failover_node``); a
        graceful failover needs, in each bucket, an up replica of every vbucket the
        node is active for (checked for all before any bucket moves). ``out_delay``
        (graceful only): every bucket's moves first (``Topology.hand_over``), then the
        node stays up that long, yielded (``_out_delay``), before it is failed over."""
        name = self._name(number)
        if graceful:
            for topology in self.topologies:
                _check_graceful(topology.cluster, name)
            if out_delay:
                for topology, n in list(self._each(number)):
                    topology.hand_over(n)
                yield from _out_delay(out_delay, [name])
        for topology, n in list(self._each(number)):
            topology.failover_node(n, graceful=graceful)

    def restart(self) -> None:
        """The nodes restart (an unclean restart of memcached, which holds every
        bucket): each bucket that exists, the step's first, loses what it had not
        persisted, warms up and drops its connections (``Node.restart``)."""
        for topology in self.topologies:
            name = topology.cluster.bucket.name
            if self.buckets.topology(name) is topology:  # not a deleted bucket's
                self.buckets.first_node(name).restart(None)

    def node_down(self, number: int) -> None:
        """Node ``number`` stops, for every bucket."""
        for topology, n in list(self._each(number)):
            topology.node_down(n)

    def node_up(self, number: int) -> None:
        """Node ``number`` is back, for every bucket."""
        for topology, n in list(self._each(number)):
            topology.node_up(n)


def _leaving(topology: Topology) -> list[str]:
    """The nodes leaving ``topology``'s bucket at the end of a rebalance: marked to
    leave, in its map, holding none of its vbuckets."""
    the_map = topology.cluster.map
    return [
        n
        for n in topology.cluster.leaving
        if n in the_map.nodes and not the_map.actives_on(n) and not the_map.replicas_on(n)
    ]


def _out_delay(seconds: float, going: Sequence[str]) -> Iterator[float]:
    """Nodes on their way out (``going``) stay up ``seconds`` more before they go:
    holding no active vbucket, they answer every request for one NOT_MY_VBUCKET with
    the new map, so that a client learns the map from them rather than from a closed
    connection. ns_server ``src/ns_rebalancer.erl`` ``sleep_for_sdk_clients`` sleeps
    ``rebalance_out_delay_seconds`` (10 by default; its log line gives the reason: a
    client then meets NOT_MY_VBUCKET, not a connection closed under it), called twice:
    in ``run_mover``, after a bucket's moves when its servers lose nodes
    (``HadRebalanceOut``), before ``ns_bucket:set_servers`` drops them from the bucket
    and ``eject_nodes`` ejects them (``DataNodes.rebalance``, with ``_leaving``: not
    for a bucket no node leaves, failed-over nodes having left it at the failover); and
    in ``run_graceful_failover``, once after every bucket's moves (whose ``run_mover``
    keeps every server, so does not sleep), before ``failover:orchestrate`` fails the
    node over (``DataNodes.failover_node``). A hard failover does not sleep:
    ``failover.erl`` ``start`` runs ``orchestrate`` at once. Nothing with ``seconds``
    0 (ns_server's own tests set the key to 0)."""
    if seconds and going:
        yield seconds


def _check_graceful(cluster: Cluster, node: str) -> None:
    """``ModelError`` unless each vbucket ``node`` is active for in ``cluster`` has a
    replica on an up node (what ``Cluster.failover(graceful=True)`` needs: ns_server
    refuses a graceful failover that would lose a bucket's vbucket)."""
    if node in cluster.down or node not in cluster.map.nodes:
        return  # Topology.failover_node and Cluster.failover say why, or it holds nothing
    for vb in cluster.map.actives_on(node):
        if not [r for r in cluster.map.replicas(vb) if r not in cluster.down]:
            raise ModelError(
                f"bucket {cluster.bucket.name!r}: vbucket {vb} has no replica on an up node:"
                f" a graceful failover of {node!r} would lose it"
            )
