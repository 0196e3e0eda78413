"""The buckets of one cluster: each its own model, vbucket map, nodes and connections.

A bucket is served on every data node by a ``Node`` of its own (its connections, event
log, protocol checkers and steps), with a ``Topology`` of its own (its map, its
revision); the nodes of different buckets on one data node share its name, ports,
users and connection ids. A connection opens on the data node's first bucket and moves
to the node of the bucket SELECT_BUCKET names (``select``; kv_engine
``daemon/protocol/mcbp/select_bucket_executor.cc``: KEY_ENOENT for no such bucket, a
DCP connection cannot change bucket).

``create`` and ``delete`` are the bucket's life (the ``create_bucket`` and
``delete_bucket`` steps, ns_server's ``POST /pools/default/buckets`` and ``DELETE
/pools/default/buckets/{b}``). Deleting a bucket closes every connection to it
(kv_engine ``daemon/bucket_destroyer.cc``: the destroyer waits for the bucket's clients
to disconnect, signalling each) and its name answers as unknown. A bucket made again
under a deleted name reuses its nodes (so the steps and the event log go on) with a new
model: new vbucket uuids, seqnos from 0 (go-dcp issue #128). Pure: the shell is told
through ``on_create`` / ``on_delete`` (a flusher task to start or stop).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

import attrs

from mockdcp.model import Bucket, BucketSpec, Cluster
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.producer._connection import Connection
    from mockdcp.producer._node import Node
    from mockdcp.producer._topology import Topology


@attrs.define(eq=False)
class BucketSlot:
    """One bucket name's nodes and settings; ``deleted`` until made again."""

    spec: BucketSpec
    topology: Topology
    deleted: bool = False
    #: how many times a bucket of this name was made (its uuids' seed)
    generation: int = 0


class Buckets:
    """The cluster's buckets by name, in the order they were made (the first is the
    default of the steps and of ``/mock/*``)."""

    def __init__(self, first: Topology, spec: BucketSpec, *, seed: int = 0) -> None:
        self._slots: dict[str, BucketSlot] = {spec.name: BucketSlot(spec, first)}
        self.seed = seed
        #: told each model made (``create``) and dropped (``delete``): the shell's flushers
        self.on_create: list[Callable[[Bucket], None]] = []
        self.on_delete: list[Callable[[Bucket], None]] = []

    # -- lookups ------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """The buckets that exist, in the order they were first made."""
        return [name for name, slot in self._slots.items() if not slot.deleted]

    def spec(self, name: str) -> BucketSpec | None:
        slot = self._slots.get(name)
        return None if slot is None or slot.deleted else slot.spec

    def declare(self, spec: BucketSpec) -> None:
        """The settings an existing bucket was made with (the server's first bucket:
        ``serve``'s ``--bucket`` and ``--replicas``); ``ModelError`` for no such bucket."""
        slot = self._slots.get(spec.name)
        if slot is None or slot.deleted:
            raise ModelError(f"no bucket {spec.name!r}")
        slot.spec = spec

    def exists(self, name: str) -> bool:
        return self.spec(name) is not None

    def deleted(self, name: str) -> bool:
        slot = self._slots.get(name)
        return slot is not None and slot.deleted

    def topology(self, name: str) -> Topology | None:
        slot = self._slots.get(name)
        return None if slot is None or slot.deleted else slot.topology

    def node(self, bucket: str, node: str) -> Node | None:
        """The node that serves ``bucket`` on data node ``node``, or None."""
        topology = self.topology(bucket)
        return None if topology is None else topology.nodes.get(node)

    def first_node(self, bucket: str) -> Node:
        """``bucket``'s first node (what steps and ``/mock/*`` act through);
        ``ModelError`` naming the buckets there are for an unknown one."""
        topology = self.topology(bucket)
        if topology is None or not topology.nodes:
            raise ModelError(f"no bucket {bucket!r} (the buckets: {', '.join(self.names)})")
        return next(iter(topology.nodes.values()))

    def topologies(self) -> list[Topology]:
        """Every bucket's topology, deleted ones' included, the first bucket's first
        (what the topology steps keep in step: ``DataNodes``)."""
        return [slot.topology for slot in self._slots.values()]

    def every_node(self) -> list[Node]:
        """The nodes of every bucket, deleted ones' included (what a shutdown closes)."""
        return [n for slot in self._slots.values() for n in slot.topology.nodes.values()]

    # -- SELECT_BUCKET ------------------------------------------------------------------

    def select(self, conn: Connection, name: str) -> bool:
        """Move ``conn`` to the node serving bucket ``name`` on its data node; False
        when there is no such bucket there (KEY_ENOENT)."""
        here: Node = conn.node  # type: ignore[assignment]
        target = self.node(name, here.name)
        if target is None:
            return False
        if target is not here:
            from mockdcp.producer._bucket_move import move_connection  # on first use

            move_connection(conn, here, target)
        return True

    # -- the bucket's life ----------------------------------------------------------------

    def create(self, spec: BucketSpec) -> Node:
        """Make bucket ``spec`` on every data node (``ModelError`` with ns_server's
        message for a name taken or refused); its first node. Its vbuckets are placed
        over the nodes of the first bucket's map; the nodes added and not yet
        rebalanced in, marked to leave, down or gone are so for it too (``_follow``)."""
        spec.check()
        slot = self._slots.get(spec.name)
        if slot is not None and not slot.deleted:
            raise ModelError("Bucket with given name already exists")
        live = [s.topology for s in self._slots.values() if not s.deleted]
        template = live[0] if live else next(iter(self._slots.values())).topology
        base = template.cluster.bucket
        generation = 0 if slot is None else slot.generation + 1
        model = Bucket(
            spec.name,
            base.num_vbuckets,
            seed=zlib.crc32(f"{self.seed}/{spec.name}/{generation}".encode()),
            clock=base.clock,
            storage=spec.storage,
            backfills_per_connection=base.backfills_per_connection,
            pause_collector=base.pause_collector,
            timers=base.timers,
        )
        model.flusher.interval = base.flusher.interval
        primary = next(iter(self._slots.values())).topology  # kept in step by DataNodes
        names = list(primary.cluster.map.nodes)
        cluster = Cluster(model, names, min(spec.replicas, len(names) - 1), seed=generation)
        cluster.auto_replicate = template.cluster.auto_replicate
        _follow(cluster, primary.cluster)
        if slot is not None:
            slot.spec, slot.deleted, slot.generation = spec, False, generation
            slot.topology.replace_cluster(cluster)
            first = next(iter(slot.topology.nodes.values()))
        else:
            first = self._nodes(cluster, primary)
            self._slots[spec.name] = BucketSlot(spec, first.topology)
        for hook in list(self.on_create):
            hook(model)
        return first

    def _nodes(self, cluster: Cluster, template: Topology) -> Node:
        """A new bucket's nodes, one per data node of ``template`` (in its order, with
        its statuses), sharing their addresses; the first."""
        from mockdcp.producer._topology import Topology

        topology = Topology(cluster)
        topology.conn_ids = template.conn_ids
        for node in template.nodes.values():  # the same numbers, those gone included
            node.for_bucket(topology)  # joins ``topology``
        topology.follow(template)
        return next(iter(topology.nodes.values()))

    def delete(self, name: str) -> int:
        """Delete bucket ``name``: every connection to it closes; how many
        (``ModelError`` with ns_server's message when there is no such bucket)."""
        slot = self._slots.get(name)
        if slot is None or slot.deleted:
            raise ModelError("The bucket to be deleted was not found.")
        closed = 0
        for node in slot.topology.nodes.values():
            closed += len(node.connections)
            node.close_own(f"bucket {name!r} deleted")
        slot.deleted = True
        model = slot.topology.cluster.bucket
        for hook in list(self.on_delete):
            hook(model)
        return closed


def _follow(cluster: Cluster, template: Cluster) -> None:
    """A new bucket's ``cluster`` as the cluster's nodes stand (``template``, the first
    bucket's): the nodes added and not yet rebalanced in join it, holding nothing; those
    marked to leave are marked; those down are down (ns_server makes a bucket on the
    nodes of the cluster; a node down has its vbuckets when it is back)."""
    for name in template.nodes:
        if name not in cluster.nodes:
            cluster.add_node(name)
    for name in sorted(template.leaving):
        cluster.remove_node(name)
    for name in sorted(template.down):
        if name in cluster.nodes:
            cluster.node_down(name)
