"""One mock data node: the bucket, the users, the topology, and every connection.

Pure (no I/O): the trio shell gives the node a ``wake`` callback at construction and asks
it for new connections (``open_connection``); every step that acts on connections
(disconnect, drop_cursor, end_stream, faults, refuse_connections, restart, holds for
triggers) goes through the node or its parts (``steps``: ``_connection_steps``;
``rejections``: ``_rejections``), so the shell never walks connections itself.

Everything the connections observe of their consumers arrives here as typed events
(``record``): kept in a bounded log and handed to subscribers (triggers, expectations,
the live view). The protocol checkers (``checkers``, one per DCP connection name, kept
across that name's reconnects) watch every DCP connection and report what they find as
``ProtocolViolation`` events.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import TYPE_CHECKING

import attrs

from mockdcp.model import Users, as_users
from mockdcp.producer._connection_steps import ConnectionSteps
from mockdcp.producer._rejections import Rejections
from mockdcp.producer._topology import CLOSED_STATUSES
from mockdcp.protocol import (
    DEFAULT_PROFILE,
    NodeNetwork,
    ServicePorts,
    VBucketState,
    encode_config,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from mockdcp.model import Bucket, NodeView
    from mockdcp.producer._buckets import Buckets
    from mockdcp.producer._checker import CheckerRegistry
    from mockdcp.producer._checker_rules import CheckerLimits
    from mockdcp.producer._connection import Connection
    from mockdcp.producer._topology import Topology
    from mockdcp.producer.events import ProducerEvent
    from mockdcp.protocol import ServerProfile

#: kv_engine ``dcp_idle_timeout``: a noop-enabled connection silent this long is dropped.
DEFAULT_IDLE_TIMEOUT = 360.0
#: Events kept for reports and expectations (the oldest go first).
EVENT_LOG_SIZE = 100_000
#: the ``ConnectionStatistics`` counters a closed connection leaves in ``Node.retired``
RETIRED_COUNTERS = (
    "bytes_received",
    "bytes_sent",
    "acked_bytes",
    "noops_sent",
    "noops_answered",
    "messages_sent",
    "acks",
)


def _no_wake(conn: Connection) -> None:
    """The default ``wake`` of a node without a shell (unit tests poll instead)."""


@attrs.define(kw_only=True, eq=False)
class Node:
    """One data node serving one bucket: its connections, and the bucket as it holds it
    (``view``: its copies of the vbuckets). The nodes of one cluster share a
    ``Topology`` (the map, its revision) and everything the steps observe or set: the
    event log and its subscribers, the counters, holds, rejections, the protocol
    checkers and connection ids (``sibling`` makes a node that shares them). A node made
    alone is a one-node cluster's."""

    bucket: Bucket
    #: the cluster's users (a name -> password mapping is made admins): shared by every
    #: node of the cluster
    users: Users = attrs.field(converter=as_users)
    #: the node's name in the cluster map's model (``node0``, ``node1``...)
    name: str = "node0"
    host: str = "127.0.0.1"
    kv_port: int = 11210
    http_port: int = 8091
    #: TLS ports and alternate addresses the cluster map advertises
    network: NodeNetwork = attrs.field(factory=NodeNetwork)
    #: the server version it behaves as (``mockdcp.protocol.PROFILES``): what HELLO
    #: grants, which controls and stream flags it takes, what it reports
    profile: ServerProfile = DEFAULT_PROFILE
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    bucket_uuid: str = ""
    #: called for a connection that must be looked at again from outside its own I/O
    wake: Callable[[Connection], None] = _no_wake
    #: the cluster this node is part of (made for it when None: a one-node cluster)
    topology: Topology = attrs.field(default=None)
    #: the cluster's buckets (``_buckets``; made for this node's bucket when None)
    buckets: Buckets = attrs.field(default=None)
    producers: dict[bytes, Connection] = attrs.field(factory=dict)
    connections: dict[int, Connection] = attrs.field(factory=dict)
    #: vbucket -> seqno: no stream sends past it until ``release`` (triggers)
    holds: dict[int, int] = attrs.field(factory=dict)
    rejections: Rejections = attrs.field(factory=Rejections)
    events: deque[ProducerEvent] = attrs.field(factory=lambda: deque(maxlen=EVENT_LOG_SIZE))
    subscribers: list[Callable[[ProducerEvent], None]] = attrs.field(factory=list)
    #: events so far by kind ("stream_opened"...; "rollback": ROLLBACK answers), /metrics
    counts: Counter[str] = attrs.field(factory=Counter)
    #: the final counters of closed connections (``RETIRED_COUNTERS``; "connections")
    retired: Counter[str] = attrs.field(factory=Counter)
    #: the protocol checker's limits when the node is made (``checker_limits`` is then
    #: the shared registry's: one setting for every node of the cluster); None: the
    #: defaults, made with the registry (the rules load when the checker first runs)
    _initial_limits: CheckerLimits | None = attrs.field(default=None, alias="checker_limits")
    _checkers: CheckerRegistry | None = attrs.field(default=None, init=False)
    _view: NodeView | None = attrs.field(default=None, init=False)
    #: the steps that act on the cluster's connections (faults, end_stream...)
    steps: ConnectionSteps = attrs.field(
        init=False, default=attrs.Factory(ConnectionSteps, takes_self=True)
    )

    def __attrs_post_init__(self) -> None:
        if not self.bucket_uuid:
            self.bucket_uuid = f"{self.bucket.rng.getrandbits(128):032x}"
        if self.topology is None:
            from mockdcp.model import Cluster
            from mockdcp.producer._topology import Topology

            self.topology = Topology(Cluster(self.bucket, (self.name,)))
        if self.name not in self.topology.nodes:
            self.topology.join(self)
        if self.buckets is None:
            from mockdcp.model import BucketSpec
            from mockdcp.producer._buckets import Buckets

            spec = BucketSpec(name=self.bucket.name, storage=self.bucket.storage)
            self.buckets = Buckets(self.topology, spec)

    @classmethod
    def cluster(
        cls,
        bucket: Bucket,
        users: Mapping[str, str] | Users,
        *,
        nodes: int = 1,
        replicas: int = 0,
    ) -> Node:
        """The first of ``nodes`` nodes of a new cluster serving ``bucket`` with
        ``replicas`` (no ports: the pure model a scenario's oracle is computed on);
        the others are in its ``topology``."""
        from mockdcp.model import Cluster
        from mockdcp.producer._topology import Topology

        names = [f"node{i}" for i in range(nodes)]
        cluster = Cluster(bucket, names, replicas)
        cluster.auto_replicate = True
        first = cls(bucket=bucket, users=users, topology=Topology(cluster))
        for name in names[1:]:
            first.topology.join(first.sibling(name, host=first.host, kv_port=0, http_port=0))
        return first

    def sibling(
        self,
        name: str,
        *,
        host: str,
        kv_port: int,
        http_port: int,
        network: NodeNetwork | None = None,
    ) -> Node:
        """Another node of this node's cluster: its own name, ports and connections,
        everything else shared (see the class docstring). Not yet joined: the shell
        joins it (``Topology.join`` or ``add_node``)."""
        node = Node(
            bucket=self.bucket,
            users=self.users,
            name=name,
            host=host,
            kv_port=kv_port,
            http_port=http_port,
            network=network or NodeNetwork(),
            profile=self.profile,
            idle_timeout=self.idle_timeout,
            bucket_uuid=self.bucket_uuid,
            wake=self.wake,
            topology=self.topology,
            buckets=self.buckets,
            holds=self.holds,
            rejections=self.rejections,
            events=self.events,
            subscribers=self.subscribers,
            counts=self.counts,
            retired=self.retired,
        )
        node._checkers = self.checkers
        self.topology.nodes.pop(name, None)  # joined by the caller, in its own order
        return node

    def for_bucket(self, topology: Topology) -> Node:
        """This data node's node for another bucket, ``topology``'s (``Buckets.create``):
        its name, address, users and timings; that bucket's model and map; connections,
        event log and protocol checkers of its own. Joins ``topology``."""
        return Node(
            bucket=topology.cluster.bucket,
            users=self.users,
            name=self.name,
            host=self.host,
            kv_port=self.kv_port,
            http_port=self.http_port,
            network=self.network,
            profile=self.profile,
            idle_timeout=self.idle_timeout,
            wake=self.wake,
            topology=topology,
            buckets=self.buckets,
        )

    @property
    def version(self) -> str:
        """What VERSION and ``/pools`` report: the profile's version string."""
        return self.profile.version

    @property
    def view(self) -> NodeView:
        """The bucket as this node holds it: its copies (``NodeView``)."""
        if self._view is None:
            self._view = self.topology.cluster.view(self.name)
        return self._view

    @property
    def config_rev(self) -> int:
        return self.topology.rev

    @property
    def config_epoch(self) -> int:
        return self.topology.epoch

    @property
    def refusing(self) -> bool:
        """New connections (to any node) are closed at once while set (the
        refuse_connections step)."""
        return self.topology.refusing

    @refusing.setter
    def refusing(self, value: bool) -> None:
        self.topology.refusing = value

    def service_ports(self) -> ServicePorts:
        """This node's ports as ``nodesExt[].services`` lists them."""
        net = self.network
        return ServicePorts(
            kv=self.kv_port, mgmt=self.http_port, kv_ssl=net.kv_ssl, mgmt_ssl=net.mgmt_ssl
        )

    # -- connections ----------------------------------------------------------------

    def open_connection(
        self, now: float, peer_host: str = "", certificate_user: str | None = None
    ) -> Connection:
        """A new KV connection, owned by this node (the shell feeds it bytes);
        ``certificate_user``: the user its TLS client certificate maps to."""
        from mockdcp.producer._connection import Connection  # loaded after "ready"

        conn = Connection(
            self,
            conn_id=self.topology.next_conn_id(),
            now=now,
            peer_host=peer_host,
            certificate_user=certificate_user,
        )
        self.connections[conn.conn_id] = conn
        if self.refusing:
            conn.close("connections refused by a scenario step")
        elif self.topology.status(self) in CLOSED_STATUSES:
            conn.close(f"node {self.name} is {self.topology.status(self).value}")
        return conn

    def select_bucket(self, conn: Connection, bucket: str) -> bool:
        """SELECT_BUCKET ``bucket`` on this data node (``Buckets.select``)."""
        return self.buckets.select(conn, bucket)

    @property
    def deleted(self) -> bool:
        """This node's bucket was deleted (``delete_bucket``) and not made again."""
        return self.buckets.deleted(self.bucket.name)

    def replace_bucket(self, bucket: Bucket) -> None:
        """The bucket was made again under its name (``Buckets.create``): a new model,
        a new uuid; the connections, the event log and the steps stay this node's."""
        self.bucket = bucket
        self.bucket_uuid = f"{bucket.rng.getrandbits(128):032x}"
        self._view = None

    def forget(self, conn: Connection) -> None:
        """A connection closed: it leaves the node and frees its producer name."""
        if self.connections.pop(conn.conn_id, None) is not None:
            stats = attrs.asdict(conn.statistics())
            self.retired.update({k: stats[k] for k in RETIRED_COUNTERS})
            self.retired["connections"] += 1
        if self.producers.get(conn.name) is conn:
            del self.producers[conn.name]

    @property
    def checkers(self) -> CheckerRegistry:
        """The protocol checkers, one per DCP connection name (made on first use)."""
        if self._checkers is None:
            from mockdcp.producer._checker import CheckerRegistry

            self._checkers = CheckerRegistry(self.bucket.num_vbuckets, self._initial_limits)
        return self._checkers

    @property
    def checker_limits(self) -> CheckerLimits:
        """The times and counts of the protocol checker's rules: the registry's, shared
        by every node of the cluster (a name's checker takes them when it is made), so
        that a consumer's verdict never depends on which node it reached (issue 45)."""
        return self.checkers.limits

    @checker_limits.setter
    def checker_limits(self, limits: CheckerLimits) -> None:
        self.checkers.limits = limits

    def claim_producer_name(self, name: bytes, conn: Connection) -> None:
        """A new producer with a live name disconnects the old one (kv_engine
        ``DcpConnMap::newProducer``)."""
        old = self.producers.get(name)
        if old is not None and old is not conn and not old.closed:
            old.close("replaced by a new producer connection with the same name")
            self.wake(old)
        self.producers[name] = conn

    def all_connections(self) -> list[Connection]:
        """The live connections of every node of the cluster, in the order they
        connected."""
        nodes = self.topology.nodes.values()
        return sorted((c for n in nodes for c in n.connections.values()), key=lambda c: c.conn_id)

    def matching(self, name: str | None = None) -> list[Connection]:
        """Live connections to any node of the cluster, in the order they connected;
        with ``name``, only those whose DCP_OPEN name is ``name`` (the steps act on the
        cluster's connections, as a consumer has one per node)."""
        conns = self.all_connections()
        if name is None:
            return conns
        return [c for c in conns if c.name.decode(errors="replace") == name]

    def vbucket_changed(self, vbid: int, *, reset: bool = False) -> None:
        """This node's copy of ``vbid`` changed: its streams look again, or end when
        the copy was ``reset`` (its history cut or its state changed)."""
        for conn in list(self.connections.values()):
            if conn.on_vbucket_change(vbid, reset=reset):
                self.wake(conn)

    def push_config(self) -> None:
        """A new config revision: pushed to this node's connections that negotiated
        cluster map change notifications."""
        for conn in list(self.connections.values()):
            if conn.push_config():
                self.wake(conn)

    def holds_output(self) -> bool:
        """Whether a connection of this node has bytes not yet written or a stream
        that will write more (``Stream.holds_output``); ``mockdcp check`` takes a
        matching output as final only once none has."""
        conns = self.connections.values()
        return any(c.unsent_bytes or any(s.holds_output for s in c.streams) for c in conns)

    def close_own(self, reason: str) -> None:
        """Drop this node's connections only (it went down or left the cluster)."""
        for conn in sorted(self.connections.values(), key=lambda c: c.conn_id):
            conn.close(reason)
            self.wake(conn)

    # -- events ---------------------------------------------------------------------

    def record(self, event: ProducerEvent) -> None:
        """A connection observed something of its consumer."""
        self.events.append(event)
        self.counts[event.kind] += 1
        if getattr(event, "rollback_seqno", None) is not None:
            self.counts["rollback"] += 1
        if self.subscribers:  # (most nodes have none: no copy made)
            for subscriber in list(self.subscribers):
                subscriber(event)

    # -- the cluster map ------------------------------------------------------------

    def config(self, host: str | None = None) -> dict[str, object]:
        """The current cluster config as this node serves it; ``host`` as the client
        addressed us (``Topology.config``)."""
        return self.topology.config(self, host)

    def config_bytes(self, host: str | None = None) -> bytes:
        return encode_config(self.config(host))

    # -- steps that act on connections ----------------------------------------------

    def cut_branch(
        self,
        vbucket: int | None = None,
        *,
        lose_after: int | None = None,
        lose_unpersisted: bool = True,
        disconnect: bool = False,
    ) -> None:
        """A failover of ``vbucket`` (all when None) as a node shows it to its clients.

        The model cuts history and opens a new branch (``Bucket.cut_branch``, which
        raises ``ModelError`` before changing anything); each connection ends the
        affected streams with STREAM_END(STATE_CHANGED) ahead of any later response
        (``Connection.on_vbucket_change``). With ``disconnect`` every connection drops
        instead, as when the failed node itself goes away: nothing more is written to
        them. Either way this happens in one step, before any request can observe the
        new branch.
        """
        self.bucket.cut_branch(vbucket, lose_after=lose_after, lose_unpersisted=lose_unpersisted)
        if disconnect:
            self.disconnect("failover")

    def disconnect(self, reason: str, name: str | None = None) -> int:
        """Drop the connections (those named ``name``, or all); how many."""
        conns = self.matching(name)
        for conn in conns:
            conn.close(reason)
            self.wake(conn)
        return len(conns)

    def close_all(self, reason: str) -> None:
        """Drop every connection (a node restart or shutdown)."""
        self.disconnect(reason)

    def restart(self, vbuckets: Iterable[int] | None = None) -> None:
        """A node restart: unpersisted items are lost and every connection drops."""
        for vb in [None] if vbuckets is None else vbuckets:
            self.bucket.restart(vb)
        self.close_all("node restarted")

    def move_vbuckets(self, vbuckets: Iterable[int]) -> None:
        """The vbuckets move to another node: they become dead here (their streams end
        with STATE_CHANGED, requests get NOT_MY_VBUCKET) and the config revision
        advances, as after a rebalance."""
        for vb in vbuckets:
            self.bucket.set_vbucket_state(vb, VBucketState.DEAD)
        self.topology.changed()

    # -- holds (triggers on consumer progress) --------------------------------------

    def hold(self, vbucket: int, seqno: int) -> None:
        """Streams of ``vbucket`` send nothing past ``seqno`` until ``release``; a
        connection reports ``SeqnoWritten`` once everything up to it is written. The
        streams of ``vbucket`` look at the hold at once: one that already read past
        ``seqno`` with nothing left to send (its filter's collections had nothing there:
        kv_engine ``ActiveStream::processItemsInner`` sends nothing for a memory snapshot
        filtered away) reports it reached on its next write, an empty one too, rather
        than at its vbucket's next change, which may never come."""
        self.holds[vbucket] = seqno
        for conn in self.all_connections():
            if conn.streams.mark_vbucket_ready(vbucket):
                self.wake(conn)

    def release(self) -> None:
        """Lift every hold: the streams go on."""
        if not self.holds:
            return
        self.holds.clear()
        for conn in self.all_connections():
            conn.holds_released()
            self.wake(conn)
