"""A cluster, not a node: the bucket's vbuckets as copies on several nodes.

``Cluster`` wraps a ``Bucket`` and owns the vbucket map (``VBucketMap``) and every copy
that is not an active one. The bucket's ``vbuckets[vb]`` is always the vbucket's active
copy, wherever it lives: writes, the flusher, the collections steps and the oracle go to
the actives as they did on one node, and a bucket wrapped in a one-node cluster with no
replica behaves as before. The other copies are replicas, filled by ``replicate``
(``_replication``); the cluster's steps (add, remove and rebalance, takeover, hard and
graceful failover, node down and up) apply the rules of ``_transitions`` and keep the
map, the copies and the bucket in step.

Each step publishes what it changed on the bucket's feed (``Bucket.publish``: one
``Change`` with the (node, vbucket) copies it touched or reset, the actives, the new
branches), and the cluster follows the bucket's own changes from the same feed
(``_on_change``: replicas attach again after a cut, and take what their actives wrote).
Every step validates its arguments and raises ``ModelError`` before changing
anything. Pure: uuids of new copies come from ``random.Random`` seeded with ``seed``.
"""

from __future__ import annotations

import random
import types
from typing import TYPE_CHECKING

from mockdcp.model._cluster_core import ClusterCore
from mockdcp.model._cluster_failover import NodeFailures
from mockdcp.model._cluster_mover import VBucketMover
from mockdcp.model._cluster_replication import ClusterReplication
from mockdcp.model._vbmap import VBucketMap
from mockdcp.model._vbucket import VBucket, collection_high_seqnos, high_seqnos
from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from mockdcp.model._bucket import Bucket
    from mockdcp.model._manifest import Manifest
    from mockdcp.model._oracle import Oracle

#: the node of a one-node cluster when none is named
DEFAULT_NODE = "node0"


class Cluster(NodeFailures, VBucketMover, ClusterReplication, ClusterCore):
    """The copies of ``bucket``'s vbuckets on ``nodes`` (see the module docstring): the
    map and the nodes here; its parts replicate (``_cluster_replication``), move
    vbuckets (``_cluster_mover``) and fail nodes over (``_cluster_failover``) over the
    state ``_cluster_core`` declares."""

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
        for vb, (active, (node, replica_nodes)) in enumerate(
            zip(bucket.vbuckets, self.map.copies(), strict=True)
        ):
            assert node is not None
            self._copies[node][vb] = active
            for replica_node in replica_nodes:
                self._build(replica_node, vb, active, persist_upto=active.persisted_seqno)
        #: replicate each change of an active at once (the server's replication
        #: streams); False: only ``replicate`` copies (the model's own tests)
        self.auto_replicate = False
        self._views: dict[str, NodeView] = {}
        bucket.feed.subscribe(self._on_change)
        if len(nodes) > 1 or replicas:
            self._stop_compaction()

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

    def active(self, vbucket: int) -> VBucket:
        """The active copy of ``vbucket`` (``bucket.vbuckets[vbucket]``): a dead empty
        one, on no node, when a failover left the vbucket without any copy."""
        self._check_vbucket(vbucket)
        return self.bucket.vbuckets[vbucket]

    def replicas(self, vbucket: int) -> dict[str, VBucket]:
        """node -> replica copy of ``vbucket``, in chain order."""
        return {node: self._copies[node][vbucket] for node in self.map.replicas(vbucket)}

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

    # -- topology steps ----------------------------------------------------------------

    def add_node(self, node: str) -> None:
        """A new node joins, holding nothing until the next ``rebalance``."""
        if not isinstance(node, str) or not node:
            raise ModelError(f"a node is named by a non-empty string, not {node!r}")
        if node in self._copies:
            raise ModelError(f"node {node!r} is already in the cluster")
        self._copies[node] = {}
        self._stop_compaction()

    def _stop_compaction(self) -> None:
        """The actives no longer fold their writes into the cold tier
        (``_compaction``): their copies elsewhere follow their write logs, which
        compaction would cut."""
        for vb in self.bucket.vbuckets:
            vb.store.compacts = False

    def remove_node(self, node: str) -> None:
        """Mark ``node`` to leave: the next ``rebalance`` moves its copies away and
        takes it out. ``ModelError`` for the last node."""
        self._check_node(node)
        if node in self._leaving:
            raise ModelError(f"node {node!r} is already being removed")
        if not [n for n in self._copies if n not in self._leaving and n != node]:
            raise ModelError(f"{node!r} is the last node: it cannot be removed")
        self._leaving.add(node)


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
        #: the dead copy read for a vbucket it has none of, made when first read (a
        #: node holding every vbucket, one node alone, never reads one)
        self._absent: dict[int, VBucket] = {}

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
            absent = self._absent.get(vbid)
            if absent is None:
                absent = self._absent[vbid] = _absent_copy(vbid)
            return absent
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
