"""What the node is doing, as plain JSON data: ``GET /mock/state``, ``GET /metrics`` and
the live view of ``mockdcp serve`` all read these snapshots.

Nothing here keeps state or does I/O: each function reads the node's connections (their
``statistics()`` records), its streams and the bucket's vbuckets at the moment it is
called, and returns dicts and lists of numbers and strings.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp.producer import DEFAULT_OUTPUT_LIMIT, RETIRED_COUNTERS

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mockdcp.model import Bucket, VBucket
    from mockdcp.producer import Connection, Node
    from mockdcp.server._serve import MockDcpServer

#: every stream state (mockdcp/producer/_state.py ``StreamState``), so a state with no
#: stream still shows (as 0) in the snapshot and in /metrics
STREAM_STATES = ("pending", "backfilling", "in_memory", "ending", "dead")


def _live(node: Node) -> list[Connection]:
    return node.matching()


def connection_state(conn: Connection) -> dict[str, Any]:
    """One connection: its ``ConnectionStatistics`` fields, with ``streams`` the list of
    its streams' ``StreamStatistics`` (by vbucket), each with ``written_seqno``: the
    seqno of the last item on the socket."""
    row = attrs.asdict(conn.statistics())
    written = conn.streams.written
    streams = [
        {
            **attrs.asdict(s.statistics()),
            "written_seqno": written.get((s.vbucket, s.stream_id), 0),
        }
        for s in list(conn.streams)
    ]
    row["streams"] = sorted(streams, key=lambda st: (st["vbucket"], st["stream_id"] or 0))
    return row


def _vbucket_state(
    vb: VBucket, sent: Mapping[int, int], acked: Mapping[int, int], streams: Mapping[int, int]
) -> dict[str, Any]:
    return {
        "vbucket": vb.vbid,
        "state": vb.state.name.lower(),
        "uuid": vb.failover.newest_uuid,
        "high_seqno": vb.high_seqno,
        "persisted_seqno": vb.persisted_seqno,
        "purge_seqno": vb.purge_seqno,
        "streams": streams.get(vb.vbid, 0),
        "sent_seqno": sent.get(vb.vbid),
        "acked_seqno": acked.get(vb.vbid),
    }


def node_state(node: Node, *, scenario: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The snapshot behind ``GET /mock/state`` and ``MockDcpServer.state()``.

    ``vbuckets[i].sent_seqno`` is the highest seqno any live stream of the vbucket has
    written to its socket (None without a stream): a consumer that is caught up has it equal to
    ``high_seqno``. ``acked_seqno`` is the highest one known to be acknowledged: buffer
    acknowledgements count a connection's bytes, not seqnos, so it is known (equal to
    the sent seqno) when the connection uses flow control and has every byte it was
    sent acknowledged, and None otherwise. ``scenario`` (the runner's progress) is
    passed through.
    """
    connections = [connection_state(c) for c in _live(node)]
    sent: dict[int, int] = {}
    acked: dict[int, int] = {}
    per_vb: Counter[int] = Counter()
    for conn in connections:
        # acknowledgements count bytes of the whole connection: a stream's seqnos are
        # known to be acknowledged only once every byte sent is
        all_acked = conn["buffer_size"] > 0 and conn["unacked_bytes"] == 0
        for st in conn["streams"]:
            vb = st["vbucket"]
            per_vb[vb] += 1
            sent[vb] = max(sent.get(vb, 0), st["written_seqno"])
            if all_acked:
                acked[vb] = max(acked.get(vb, 0), st["written_seqno"])
    bucket = node.bucket
    return {
        "bucket": bucket.name,
        "server_version": {"release": node.profile.name, "reports": node.version},
        "num_vbuckets": bucket.num_vbuckets,
        "kv_port": node.kv_port,
        "http_port": node.http_port,
        "connections": connections,
        "streams": {"total": sum(per_vb.values()), "by_state": streams_by_state(node)},
        "vbuckets": [
            {**_vbucket_state(vb, sent, acked, per_vb), **_copies(node, vb.vbid)}
            for vb in bucket.vbuckets
        ],
        "cluster": cluster_state(node),
        "totals": totals(node),
        "scenario": dict(scenario) if scenario is not None else None,
    }


def _copies(node: Node, vbid: int) -> dict[str, Any]:
    """Where a vbucket's copies are: its active node, and each replica's seqnos."""
    cluster = node.topology.cluster
    return {
        "active_node": cluster.map.active(vbid),
        "replicas": [
            {
                "node": name,
                "high_seqno": copy.high_seqno,
                "persisted_seqno": copy.persisted_seqno,
                "paused": cluster.is_paused(name, vbid),
            }
            for name, copy in cluster.replicas(vbid).items()
        ],
    }


def cluster_state(node: Node) -> dict[str, Any]:
    """The nodes (numbered in join order, with their ports and status), the map's
    revision and replica count, and the rebalance under way (moves done of all)."""
    topology = node.topology
    cluster = topology.cluster
    counts = cluster.map.counts()
    nodes = []
    for number, (name, n) in enumerate(topology.nodes.items()):
        actives, replicas = counts.get(name, (0, 0))
        nodes.append(
            {
                "number": number,
                "name": name,
                "status": topology.status(n).value,
                "host": n.host,
                "kv_port": n.kv_port,
                "http_port": n.http_port,
                "tls_port": n.network.kv_ssl,
                "https_port": n.network.mgmt_ssl,
                "active_vbuckets": actives,
                "replica_vbuckets": replicas,
                "connections": len(n.connections),
            }
        )
    moving = topology.rebalancing
    return {
        "nodes": nodes,
        "replicas": cluster.map.num_replicas,
        "rev": topology.rev,
        "rebalance": None if moving is None else {"done": moving[0], "moves": moving[1]},
    }


def nodes_by_status(node: Node) -> dict[str, int]:
    """The cluster's data nodes by status (every status named): every bucket spans the
    same nodes, so ``node``'s bucket's topology counts them."""
    from mockdcp.producer import NodeStatus

    topology = node.topology
    by_status = dict.fromkeys((s.value for s in NodeStatus), 0)
    for n in topology.nodes.values():
        by_status[topology.status(n).value] += 1
    return by_status


def bucket_metrics(node: Node) -> dict[str, int]:
    """``node``'s bucket's map revision, its replicas' lag (seqnos behind their
    actives, in all) and the moves its rebalance under way has left."""
    topology = node.topology
    cluster = topology.cluster
    lag = 0
    for vb in range(node.bucket.num_vbuckets):
        high = cluster.active(vb).high_seqno
        lag += sum(max(0, high - c.high_seqno) for c in cluster.replicas(vb).values())
    moving = topology.rebalancing
    left = 0 if moving is None else moving[1] - moving[0]
    return {"rev": topology.rev, "replica_lag": lag, "rebalance_moves_left": left}


def clock_state(bucket: Bucket) -> dict[str, Any]:
    """The bucket's clock: ``wall`` or ``virtual`` with its time (ISO 8601), and the
    intervals of the node's timed tasks in seconds."""
    from mockdcp.model import iso_time

    virtual = bucket.virtual_clock
    timers = attrs.asdict(bucket.timers)
    if virtual is None:
        return {"kind": "wall", "timers": timers}
    return {"kind": "virtual", "now": iso_time(virtual.now), "timers": timers}


def server_state(server: MockDcpServer, bucket: str | None = None) -> dict[str, Any]:
    """``node_state`` of a running server's ``bucket`` (None: the first), with its
    steps' progress, whether its background flusher is held, and every bucket's name
    (``buckets``). ``ModelError`` for a bucket there is not."""
    node = server.bucket_node(bucket)
    runner = server._runner if node is server.node else server.runner_for(bucket)
    state = node_state(node, scenario=None if runner is None else runner.progress.as_dict())
    state["buckets"] = server.buckets.names
    state["persistence_paused"] = node.bucket.flusher.paused
    state["clock"] = clock_state(node.bucket)
    if server.corpus is not None:
        state["corpus"] = server.corpus
    kv = server.kv
    state["limits"] = {
        "max_connections": kv.max_connections,
        "auth_timeout": kv.auth_timeout,
        "output_limit": DEFAULT_OUTPUT_LIMIT if kv.output_limit is None else kv.output_limit,
    }
    return state


def streams_by_state(node: Node) -> dict[str, int]:
    """How many streams are in each state (every state named, 0 included)."""
    by_state: Counter[str] = Counter(dict.fromkeys(STREAM_STATES, 0))
    for conn in _live(node):
        by_state.update(s.state.value for s in list(conn.streams))
    return dict(by_state)


def totals(node: Node) -> dict[str, int]:
    """Counters since the node started, closed connections included (``/metrics``)."""
    out = {k: node.retired[k] for k in RETIRED_COUNTERS}
    live = _live(node)
    for conn in live:
        s = conn.statistics()
        for k in RETIRED_COUNTERS:
            out[k] += getattr(s, k)
    out["connections_opened"] = node.retired["connections"] + len(live)
    out["connections_open"] = len(live)
    out["streams_opened"] = node.counts["stream_opened"]
    out["rollbacks"] = node.counts["rollback"]
    out["protocol_violations"] = node.counts["protocol_violation"]
    return out
