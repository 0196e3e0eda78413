"""The cluster the nodes of one process make: which nodes there are, their addresses,
the cluster map they all serve, and its revision.

Every node answers CCCP, NOT_MY_VBUCKET and the HTTP config endpoints with the same map
(``config``): ``vBucketServerMap`` from the model's ``VBucketMap`` (``serverList`` in the
map's node order, ``nodes`` and ``nodesExt`` in the same order, as gocbcore and
java-dcp-client index them), ``rev`` advancing on every change of the map, of the nodes or
of the collections manifest (java-dcp-client ignores a config whose (revEpoch, rev) is not
newer: couchbase-jvm-clients ``ClusterTopologyParser.java``). On each new revision
every connection that negotiated HELLO CLUSTERMAP_CHANGE_NOTIFICATION(_BRIEF) is pushed
the config (``Connection.push_config``; kv_engine ``docs/BinaryProtocol.md``, "0x01
Clustermap Change Notification") and the shell is told (``on_change``: the streaming
config endpoint, listeners to stop or start).

Nodes are numbered from 0 in the order they joined (``number``); a node that was failed
over or rebalanced out keeps its number, and its listeners stay closed. The topology
steps (``add_node``, ``remove_node``, a rebalance a move at a time, ``failover_node``,
``node_down``/``node_up``) validate their arguments (``ModelError`` before anything
changes), change the model (``Cluster``), close what a real node would close, and
advance the revision. Pure: the shell supplies the time and the I/O.
"""

from __future__ import annotations

import enum
import itertools
from typing import TYPE_CHECKING, Any

from mockdcp.protocol import cluster_config, encode_config, node_ext
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mockdcp.model import Change, Cluster, VBucketMove
    from mockdcp.producer._node import Node


class NodeStatus(enum.Enum):
    """Where a node stands in the cluster (ns_server's ``clusterMembership`` and
    health, as a consumer meets them)."""

    #: serving its vbuckets
    ACTIVE = "active"
    #: joined (``add_node``), holding nothing until a rebalance
    ADDED = "added"
    #: down (``node_down``): its ports refuse until ``node_up``
    DOWN = "down"
    #: failed over: out of the map, its ports closed, listed until a rebalance
    FAILED_OVER = "failed_over"
    #: rebalanced out: gone from the cluster
    REMOVED = "removed"


#: statuses whose listeners are closed (connections refused)
CLOSED_STATUSES = frozenset({NodeStatus.DOWN, NodeStatus.FAILED_OVER, NodeStatus.REMOVED})


class Topology:
    """See the module docstring."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        #: name -> node, in join order (a node's number is its index here)
        self.nodes: dict[str, Node] = {}
        self.rev = 1
        self.epoch = 1
        #: nodes failed over or rebalanced out (kept, with their numbers)
        self._gone: dict[str, NodeStatus] = {}
        #: called after each new revision (the shell: streaming configs, listeners)
        self.on_change: list[Callable[[], None]] = []
        self._manifest_uid = cluster.bucket.manifest.uid
        #: new connections (to any node) are closed at once while set
        self.refusing = False
        #: the rebalance under way: (moves done, moves in all), None when there is none
        self.rebalancing: tuple[int, int] | None = None
        #: makes the node ``add_node`` adds, with its ports (the shell's; without one, a
        #: sibling of the first node with no ports of its own)
        self.spawn: Callable[[str], Node] | None = None
        #: connection ids, shared by the topologies of the cluster's buckets
        self.conn_ids = itertools.count(1)
        cluster.bucket.feed.subscribe(self._on_change)

    def next_conn_id(self) -> int:
        """Connection ids are unique across the cluster's nodes and buckets (the steps
        and the protocol checkers name connections by them)."""
        return next(self.conn_ids)

    def replace_cluster(self, cluster: Cluster) -> None:
        """The bucket was made again (``Buckets.create``): its nodes serve ``cluster``'s
        new model, and the config takes a new revision."""
        self.cluster.bucket.feed.unsubscribe(self._on_change)
        self.cluster = cluster
        self._manifest_uid = cluster.bucket.manifest.uid
        cluster.bucket.feed.subscribe(self._on_change)
        for node in self.nodes.values():
            node.replace_bucket(cluster.bucket)
        self.changed()

    # -- nodes ----------------------------------------------------------------------------

    def join(self, node: Node) -> None:
        """``node`` is part of this topology (the shell's nodes, at start or by
        ``add_node``)."""
        self.nodes[node.name] = node

    def follow(self, template: Topology) -> None:
        """The statuses of ``template``'s nodes that left (failed over, rebalanced
        out) are this topology's too: a bucket made on a cluster knows its nodes as
        the cluster's other buckets do (``Buckets.create``)."""
        self._gone = {name: status for name, status in template._gone.items() if name in self.nodes}

    def number(self, node: Node | str) -> int:
        name = node if isinstance(node, str) else node.name
        return list(self.nodes).index(name)

    def node(self, number: int) -> Node:
        """The node numbered ``number`` (``ModelError`` if there is none)."""
        names = list(self.nodes)
        if not isinstance(number, int) or isinstance(number, bool) or not 0 <= number < len(names):
            raise ModelError(f"no node {number!r}: the cluster's nodes are 0..{len(names) - 1}")
        return self.nodes[names[number]]

    def status(self, node: Node | str) -> NodeStatus:
        name = node if isinstance(node, str) else node.name
        if name in self._gone:
            return self._gone[name]
        if name in self.cluster.down:
            return NodeStatus.DOWN
        if name not in self.cluster.map.nodes:
            return NodeStatus.ADDED
        return NodeStatus.ACTIVE

    def serving(self) -> list[Node]:
        """The nodes in the map's server list, in its order (the config's nodes)."""
        return [self.nodes[name] for name in self.cluster.map.nodes]

    def live(self) -> list[Node]:
        """Every node whose listeners are open."""
        return [n for n in self.nodes.values() if self.status(n) not in CLOSED_STATUSES]

    # -- the config -----------------------------------------------------------------------

    def config(self, node: Node, host: str | None = None) -> dict[str, Any]:
        """The cluster config as ``node`` serves it (``host``: as the client addressed
        it, for its own entry)."""
        cmap = self.cluster.map
        servers = self.serving()
        if len(servers) == 1 and servers[0] is node and cmap.num_replicas == 0:
            return solo_config(node, host, self.rev, self.epoch)
        config = solo_config(node, host, self.rev, self.epoch)
        config["nodes"] = [
            {
                "couchApiBase": f"http://{s.host}:{s.http_port}/{node.bucket.name}",
                "hostname": f"{s.host}:{s.http_port}",
                "ports": {"direct": s.kv_port},
            }
            for s in servers
        ]
        config["nodesExt"] = [
            node_ext(
                (host or s.host) if s is node else s.host,
                s.service_ports(),
                s.network,
                this_node=s is node,
            )
            for s in servers
        ]
        vbmap = cmap.to_json()
        vbmap["serverList"] = [f"{s.host}:{s.kv_port}" for s in servers]
        config["vBucketServerMap"] = vbmap
        return config

    def config_bytes(self, node: Node, host: str | None = None) -> bytes:
        return encode_config(self.config(node, host))

    def changed(self) -> None:
        """A new revision: pushed to the connections that asked for notifications, and
        the shell told."""
        self.rev += 1
        for n in self.nodes.values():
            n.push_config()
        for hook in list(self.on_change):
            hook()

    def _on_change(self, change: Change) -> None:
        """A change on the bucket's feed: each node holding a copy it touched is told
        once (the copies a cluster step names, then each active's node), with whether
        that copy was reset (its streams end). A new manifest is a new revision."""
        active_of = self.cluster.map.active
        if change.copies:
            for node, vbid in sorted(change.copies):
                reset = (node, vbid) in change.copies_reset or (
                    vbid in change.reset and active_of(vbid) == node
                )
                self._tell(node, vbid, reset)
        for vbid in change.vbuckets:
            active = active_of(vbid)
            if active is not None and (active, vbid) not in change.copies:
                self._tell(active, vbid, vbid in change.reset)
        if change.collections:
            self._manifest_changed()

    def _tell(self, node: str, vbid: int, reset: bool) -> None:
        member = self.nodes.get(node)
        if member is not None:
            member.vbucket_changed(vbid, reset=reset)

    def _manifest_changed(self) -> None:
        uid = self.cluster.bucket.manifest.uid
        if uid != self._manifest_uid:
            # the bucket config carries collectionsManifestUid: a new manifest is a new
            # config revision (clients ignore a config whose revision they have seen)
            self._manifest_uid = uid
            self.rev += 1

    # -- steps ----------------------------------------------------------------------------

    def add_node(self, like: Node | None = None) -> Node:
        """A new node joins (made by ``spawn``, listening); it holds nothing until a
        rebalance. Its number is the next one. ``like``: the data node another
        bucket's topology just added (``DataNodes.add_node``): this bucket's node on
        it (``Node.for_bucket``) joins."""
        name = f"node{len(self.nodes)}" if like is None else like.name
        if like is not None:
            node = like.for_bucket(self)
        elif self.spawn is not None:
            node = self.spawn(name)
        else:
            first = next(iter(self.nodes.values()))
            node = first.sibling(name, host=first.host, kv_port=0, http_port=0)
        self.cluster.add_node(node.name)
        self.join(node)
        self.changed()
        return node

    def remove_node(self, number: int) -> Node:
        """Mark node ``number`` to leave at the next rebalance."""
        node = self._member(number)
        self.cluster.remove_node(node.name)
        return node

    def plan_rebalance(self, vbuckets: Sequence[int] | None = None) -> list[VBucketMove]:
        return self.cluster.plan_rebalance(vbuckets)

    def prepare_move(self, move: VBucketMove) -> None:
        self.cluster.prepare_move(move)

    def apply_move(self, move: VBucketMove) -> None:
        """A move's takeover: the old node's streams of the vbucket end STATE_CHANGED
        (its copy went dead), then a new revision."""
        self.cluster.apply_move(move)
        self.changed()

    def end_move(self, move: VBucketMove) -> None:
        """A move is done: ns_server deletes the copies it left on their nodes
        (``Cluster.delete_old_copies``); until then those nodes answer
        GET_FAILOVER_LOG for the vbucket from them."""
        self.cluster.delete_old_copies(move.vbucket)

    def finish_rebalance(self) -> list[Node]:
        """The nodes rebalanced out: their connections drop and their listeners close
        (a removed node is gone)."""
        gone = [self.nodes[name] for name in self.cluster.finish_rebalance()]
        for name, status in list(self._gone.items()):
            if status is NodeStatus.FAILED_OVER:
                self._gone[name] = NodeStatus.REMOVED
        for node in gone:
            self._gone[node.name] = NodeStatus.REMOVED
            node.close_own("node rebalanced out")
        self.changed()
        return gone

    def failover_node(self, number: int, *, graceful: bool = False) -> Node:
        """Fail node ``number`` over (``Cluster.failover_node``): a hard failover promotes
        its replicas (a new branch where they were behind); a graceful one hands its
        actives over first. Its connections drop and its listeners close; it stays
        listed (failed over) until a rebalance."""
        node = self._graceful_member(number) if graceful else self._member(number)
        self.cluster.failover_node(node.name, graceful=graceful)
        self._gone[node.name] = NodeStatus.FAILED_OVER
        node.close_own("node failed over")
        self.changed()
        return node

    def hand_over(self, number: int) -> list[int]:
        """A graceful failover's moves, before the failover (``Cluster.hand_over``): the
        streams of the vbuckets node ``number`` was active for end STATE_CHANGED, and a
        new revision; the node stays up and in the map (a replica of them) until
        ``failover_node``. The vbuckets whose active moved."""
        node = self._graceful_member(number)
        moved = self.cluster.hand_over(node.name)
        if moved:
            self.changed()
        return moved

    def node_down(self, number: int) -> Node:
        """Node ``number`` stops (unclean): what it had not persisted is lost, its
        connections drop and its ports refuse until ``node_up``."""
        node = self._member(number)
        self.cluster.node_down(node.name)
        node.close_own("node down")
        self.changed()
        return node

    def node_up(self, number: int) -> Node:
        """Node ``number`` is back (warmup: what it persisted, a new failover entry per
        active vbucket); its listeners open again."""
        node = self._member(number)
        self.cluster.node_up(node.name)
        self.changed()
        return node

    def _graceful_member(self, number: int) -> Node:
        node = self._member(number)
        if self.status(node) is NodeStatus.DOWN:
            raise ModelError(f"node {number} is down: only a hard failover can take it out")
        return node

    def _member(self, number: int) -> Node:
        node = self.node(number)
        status = self.status(node)
        if status in (NodeStatus.FAILED_OVER, NodeStatus.REMOVED):
            raise ModelError(f"node {number} was {status.value.replace('_', ' ')}")
        return node


def solo_config(node: Node, host: str | None, rev: int, epoch: int) -> dict[str, Any]:
    """The config ``node`` serves as a one-node cluster with no replica (every vbucket
    there; ``Topology.config`` lists the other nodes over it): its bucket, address,
    ports, capabilities and version profile."""
    bucket = node.bucket
    return cluster_config(
        bucket=bucket.name,
        bucket_uuid=node.bucket_uuid,
        host=host or node.host,
        kv_port=node.kv_port,
        http_port=node.http_port,
        num_vbuckets=bucket.num_vbuckets,
        rev=rev,
        rev_epoch=epoch,
        manifest_uid=bucket.manifest.uid,
        network=node.network,
        history=bucket.retains_history,
        ephemeral=bucket.ephemeral is not None,
        magma=bucket.storage == "magma",
        profile=node.profile,
    )
