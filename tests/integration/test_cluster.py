"""Several data nodes on 127.0.0.1 (``serve(nodes=3, replicas=1)``): one map on every
node, replicas that answer, rebalance by takeover, hard failover and node down/up, as a
raw client meets them."""

from __future__ import annotations

import base64
import json
import socket
import struct
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import trio

import mockdcp
from mockdcp.client import ClusterConsumer
from mockdcp.protocol import (
    DcpGetFailoverLog,
    DcpOpen,
    DcpOpenFlag,
    Frame,
    GetClusterConfig,
    Hello,
    HelloFeature,
    Magic,
    ObserveSeqno,
    SaslAuth,
    SelectBucket,
    Status,
    StreamFlag,
    decode_failover_log,
    decode_rollback_value,
)
from mockdcp.scenario import ScenarioProblems, StepFailed
from mockdcp.util import ServerError

from ._raw import RawClient, wait_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from mockdcp.server import MockDcpServer

AUTH = b"\0Administrator\0password"
FEATURES = (HelloFeature.XERROR, HelloFeature.JSON, HelloFeature.SELECT_BUCKET)
NOTIFY = (*FEATURES, HelloFeature.DUPLEX, HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION)


async def _client(port: int, features: tuple[int, ...] = FEATURES, dcp: bool = True) -> RawClient:
    c = await RawClient.connect(port)
    await c.call(Hello(opaque=c.next_opaque(), agent=b"cluster", features=features))
    await c.call(SaslAuth(opaque=c.next_opaque(), mechanism="PLAIN", payload=AUTH))
    assert (await c.call(SelectBucket(opaque=c.next_opaque(), bucket="default"))).status == 0
    if dcp:
        flags = int(DcpOpenFlag.PRODUCER)
        r = await c.call(DcpOpen(opaque=c.next_opaque(), name=b"cluster", flags=flags))
        assert r.status == Status.SUCCESS
    return c


def _port(server: MockDcpServer, node: str | None) -> int:
    assert node is not None
    return next(n.kv_port for n in server.nodes if n.name == node)


@pytest.fixture
async def cluster() -> AsyncIterator[MockDcpServer]:
    async with mockdcp.serve(
        port=0, http_port=0, vbuckets=8, nodes=3, replicas=1, flush_interval=None
    ) as server:
        for i in range(40):
            server.bucket.set(f"doc::{i}", f'{{"i":{i}}}')
        server.bucket.persist()
        yield server


async def test_every_node_serves_one_map_with_its_own_ports_and_a_replica_a_vbucket(
    cluster: MockDcpServer,
) -> None:
    nodes = cluster.nodes
    assert [n.number for n in nodes] == [0, 1, 2]
    assert len({p for n in nodes for p in (n.kv_port, n.http_port)}) == 6
    configs = []
    async with httpx.AsyncClient(auth=("Administrator", "password")) as http:
        for n in nodes:
            r = await http.get(f"http://127.0.0.1:{n.http_port}/pools/default/b/default")
            configs.append(r.json())
    maps = [c["vBucketServerMap"] for c in configs]
    assert all(m == maps[0] for m in maps)
    assert maps[0]["numReplicas"] == 1
    assert maps[0]["serverList"] == [f"127.0.0.1:{n.kv_port}" for n in nodes]
    for chain in maps[0]["vBucketMap"]:
        assert len(chain) == 2
        assert chain[0] != chain[1]
        assert -1 not in chain
    assert [[e.get("thisNode", False) for e in c["nodesExt"]] for c in configs] == [
        [True, False, False],
        [False, True, False],
        [False, False, True],
    ]
    # CCCP answers the same map
    c = await _client(nodes[2].kv_port, dcp=False)
    cccp = await c.call(GetClusterConfig(opaque=c.next_opaque()))
    assert json.loads(cccp.value)["vBucketServerMap"] == maps[0]


async def test_a_replica_answers_observe_and_streams_without_active_only_but_not_writes(
    cluster: MockDcpServer,
) -> None:
    topo = cluster.topology.cluster
    vb = 0
    active = topo.active(vb)
    replica_node = topo.map.replicas(vb)[0]
    replica = topo.replicas(vb)[replica_node]
    assert replica.high_seqno == active.high_seqno > 0
    c = await _client(_port(cluster, replica_node))
    uuid = active.failover.newest_uuid
    r = await c.call(ObserveSeqno(opaque=c.next_opaque(), vbucket=vb, vbucket_uuid=uuid))
    assert r.status == Status.SUCCESS
    current = struct.unpack(">Q", r.value[19:27])[0]
    assert current == active.high_seqno
    r = await c.call(DcpGetFailoverLog(opaque=c.next_opaque(), vbucket=vb))
    assert decode_failover_log(r.value)[0][0] == uuid
    r = await c.call(c.stream_request(vb, flags=int(StreamFlag.ACTIVE_VB_ONLY)))
    assert r.status == Status.NOT_MY_VBUCKET
    assert json.loads(r.value)["vBucketServerMap"]["numReplicas"] == 1
    r = await c.call(c.stream_request(vb))
    assert r.status == Status.SUCCESS
    # a node without a copy answers NOT_MY_VBUCKET with the config
    others = [n.name for n in cluster.nodes if n.name not in (replica_node, topo.map.active(vb))]
    c2 = await _client(_port(cluster, others[0]))
    r = await c2.call(c2.stream_request(vb))
    assert r.status == Status.NOT_MY_VBUCKET


async def test_a_rebalance_moves_a_vbucket_by_takeover_without_rollback_and_pushes_the_map(
    cluster: MockDcpServer,
) -> None:
    topo = cluster.topology
    vb = 0
    old = topo.cluster.map.active(vb)
    c = await _client(_port(cluster, old), features=NOTIFY)
    r = await c.call(c.stream_request(vb))
    uuid = decode_failover_log(r.value)[0][0]
    high = topo.cluster.active(vb).high_seqno
    await cluster.apply({"add_node": {}})
    assert [n.status for n in cluster.nodes] == ["active", "active", "active", "added"]
    rev = cluster.node.config_rev
    await cluster.apply({"rebalance": {}})
    assert cluster.node.config_rev > rev + 1  # a revision per move
    assert [n.status for n in cluster.nodes] == ["active"] * 4
    frames: list[Frame] = []
    with trio.move_on_after(2):
        while True:
            frames.append(await c.frame())
    new = topo.cluster.map.active(vb)
    pushes = [f for f in frames if f.magic is Magic.SERVER_REQUEST]
    assert pushes
    assert json.loads(pushes[-1].value)["rev"] == cluster.node.config_rev
    if new != old:  # the old node's stream ended STATE_CHANGED, the new one resumes
        ends = [f for f in frames if f.opcode == 0x55]
        assert ends
        assert struct.unpack(">I", ends[-1].extras)[0] == 2
        c2 = await _client(_port(cluster, new))
        r = await c2.call(
            c2.stream_request(
                vb,
                start_seqno=high,
                vbucket_uuid=uuid,
                snap_start_seqno=high,
                snap_end_seqno=high,
            )
        )
        assert r.status == Status.SUCCESS  # same uuid, same history: no rollback
        assert decode_failover_log(r.value)[0][0] == uuid


async def test_hard_failover_with_a_replica_behind_rolls_a_consumer_back_to_its_seqno(
    cluster: MockDcpServer,
) -> None:
    topo = cluster.topology
    vb = 1
    active_node = topo.cluster.map.active(vb)
    assert active_node is not None
    replica_node = topo.cluster.map.replicas(vb)[0]
    number = [n.name for n in cluster.nodes].index(replica_node)
    kept = topo.cluster.active(vb).high_seqno
    await cluster.apply({"replication": {"paused": True, "node": number}})
    key = next(f"late::{i}" for i in range(1000) if cluster.bucket.vbucket_of(f"late::{i}") == vb)
    cluster.bucket.set(key, b'{"late":1}')
    cluster.bucket.persist()
    high = topo.cluster.active(vb).high_seqno
    uuid = topo.cluster.active(vb).failover.newest_uuid
    assert high == kept + 1
    dead = [n.name for n in cluster.nodes].index(active_node)
    await cluster.apply({"failover_node": {"node": dead}})
    assert cluster.nodes[dead].status == "failed_over"
    with pytest.raises(OSError, match="connect"):
        await trio.open_tcp_stream("127.0.0.1", cluster.nodes[dead].kv_port)
    assert topo.cluster.map.active(vb) == replica_node
    c = await _client(_port(cluster, replica_node))
    r = await c.call(
        c.stream_request(
            vb, start_seqno=high, vbucket_uuid=uuid, snap_start_seqno=high, snap_end_seqno=high
        )
    )
    assert r.status == Status.ROLLBACK
    assert decode_rollback_value(r.value) == kept
    assert (0, key.encode()) not in cluster.oracle()


async def test_a_node_down_refuses_connections_and_comes_back_with_what_it_persisted(
    cluster: MockDcpServer,
) -> None:
    port = cluster.nodes[2].kv_port
    c = await _client(port)
    await cluster.apply({"node_down": {"node": 2}})
    assert await c.closed_by_server()
    with pytest.raises(OSError, match="connect"):
        await trio.open_tcp_stream("127.0.0.1", port)
    await cluster.apply({"node_up": {"node": 2}})
    with trio.fail_after(5):
        while True:
            try:
                c = await _client(port)
                break
            except OSError:
                await trio.sleep(0.05)
    vb = cluster.topology.cluster.map.actives_on("node2")[0]
    r = await c.call(c.stream_request(vb))
    assert r.status == Status.SUCCESS


async def _refused(port: int) -> bool:
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return True
    await stream.aclose()
    return False


def _taken(port: int) -> bool:
    """Another socket cannot bind ``port`` (one without SO_REUSEADDR: ``_ports``)."""
    other = socket.socket()
    try:
        other.bind(("127.0.0.1", port))
    except OSError:
        return True
    finally:
        other.close()
    return False


async def test_a_node_down_keeps_its_ports_and_comes_back_on_them(tmp_path: Path) -> None:
    """While a node is down its ports refuse connections and no other socket can take
    them (bound, not listening: ``_ports.hold``), so that ``node_up`` serves the same
    ports again: another process took a closed one in issue 39's 10,000-schedule run
    (schedule 4538), and ``node_up`` failed with EADDRINUSE. KV, TLS KV, HTTP, HTTPS."""
    tls: dict[str, Any] = {"tls": True, "tls_port": 0, "https_port": 0, "tls_dir": tmp_path}
    async with mockdcp.serve(
        port=0, http_port=0, vbuckets=4, nodes=2, flush_interval=None, **tls
    ) as server:
        node = server.nodes[1]
        ports = [node.kv_port, node.tls_port, node.http_port, node.https_port]
        assert all(isinstance(port, int) for port in ports)
        numbers = [port for port in ports if port is not None]
        assert not [port for port in numbers if await _refused(port)]
        await server.apply({"node_down": {"node": 1}})
        assert [await _refused(port) for port in numbers] == [True] * 4
        assert [_taken(port) for port in numbers] == [True] * 4
        await server.apply({"node_up": {"node": 1}})
        back = server.nodes[1]
        assert [back.kv_port, back.tls_port, back.http_port, back.https_port] == ports
        assert not [port for port in numbers if await _refused(port)]  # listening at once
        c = await _client(node.kv_port)
        assert (
            await c.call(c.stream_request(server.topology.cluster.map.actives_on("node1")[0]))
        ).status == Status.SUCCESS
        async with httpx.AsyncClient() as http:
            r = await http.get(f"http://127.0.0.1:{node.http_port}/pools/default")
        assert r.status_code in (200, 401)
        await server.apply({"node_down": {"node": 1}})  # and down again: held again
        assert [await _refused(port) for port in numbers] == [True] * 4
        assert [_taken(port) for port in numbers] == [True] * 4


async def test_a_node_taken_down_before_it_ever_served_refuses_too() -> None:
    """``node_down`` as the server starts (before the node's shell first ran): its
    ports, bound and listening since ``serve`` made them, are held all the same, and the
    step returns once they refuse (a connection was taken into the listen queue)."""
    async with mockdcp.serve(port=0, http_port=0, vbuckets=4, nodes=2) as server:
        await server.apply({"node_down": {"node": 1}})
        assert await _refused(server.nodes[1].kv_port)
        assert _taken(server.nodes[1].kv_port)


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([{"node_down": {"node": 7}}], "no node 7"),
        (
            [
                {"remove_node": {"node": 0}},
                {"remove_node": {"node": 1}},
                {"remove_node": {"node": 2}},
            ],
            "last node",
        ),
        ([{"node_down": {"node": 1}}, {"rebalance": {}}], "down"),
        ([{"rebalance": {"vbuckets": [0]}}], "already where"),
        ([{"remove_node": {"node": 2}}, {"rebalance": {"out_delay": -1}}], "rebalance.out_delay"),
        (
            [{"failover_node": {"node": 2, "graceful": True, "out_delay": -1}}],
            "failover_node.out_delay",
        ),
        ([{"failover_node": {"node": 2, "out_delay": "10s"}}], "out_delay needs graceful"),
    ],
)
async def test_a_bad_topology_step_is_refused_before_anything_changes(
    cluster: MockDcpServer, steps: list[dict[str, Any]], message: str
) -> None:
    rev = cluster.node.config_rev
    with pytest.raises(ScenarioProblems, match=message):
        await cluster.apply(*steps)
    assert cluster.node.config_rev == rev
    assert [n.status for n in cluster.nodes] == ["active"] * 3


@pytest.mark.parametrize(
    ("steps", "after"),
    [
        ([{"failover_node": {"node": 2, "graceful": True, "out_delay": "2s"}}], "failed_over"),
        ([{"remove_node": {"node": 2}}, {"rebalance": {"out_delay": "2s"}}], "removed"),
    ],
)
async def test_a_node_on_its_way_out_stays_up_for_the_out_delay(
    cluster: MockDcpServer, steps: list[dict[str, Any]], after: str
) -> None:
    """The runner sleeps ``out_delay`` (ns_server ``ns_rebalancer.erl``
    ``sleep_for_sdk_clients``) with the node still up, before it goes: a graceful
    failover's, and a rebalance's without an ``interval`` (whose moves the runner
    applied at once, ``out_delay`` with them)."""
    done = trio.Event()

    async def run() -> None:
        await cluster.apply(*steps)
        done.set()

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.sleep(0.2)
        assert not done.is_set()
        assert cluster.nodes[2].status == "active"
        assert not await _refused(cluster.nodes[2].kv_port)
        await done.wait()
    assert trio.current_time() - start >= 2.0
    assert cluster.nodes[2].status == after
    assert await _refused(cluster.nodes[2].kv_port)


async def test_more_replicas_than_nodes_allow_is_a_clear_error() -> None:
    with pytest.raises(ServerError, match="need 3 nodes"):
        async with mockdcp.serve(port=0, http_port=0, vbuckets=4, nodes=2, replicas=2):
            pass


async def test_the_streaming_config_stays_open_and_pushes_each_new_revision(
    cluster: MockDcpServer,
) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", cluster.nodes[1].http_port)
    auth = base64.b64encode(b"Administrator:password").decode()
    head = f"GET /pools/default/bs/default HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}"
    await stream.send_all(f"{head}\r\n\r\n".encode())
    data = b""

    async def configs(count: int) -> None:
        nonlocal data
        with trio.fail_after(10):
            while data.count(b"\n\n\n\n") < count:
                data += await stream.receive_some(65536)

    try:
        await configs(1)
        await cluster.apply({"add_node": {}})
        await configs(2)
    finally:
        await stream.aclose()
    revs = [json.loads(part[part.index(b"{") :])["rev"] for part in data.split(b"\n\n\n\n")[:2]]
    assert revs[1] > revs[0]


async def test_a_step_on_a_failed_over_node_fails_clearly(cluster: MockDcpServer) -> None:
    await cluster.apply({"failover_node": {"node": 1, "graceful": True}})
    with pytest.raises((ScenarioProblems, StepFailed), match="failed over"):
        await cluster.apply({"node_down": {"node": 1}})


async def test_state_and_metrics_show_the_nodes_the_map_and_the_replicas(
    cluster: MockDcpServer,
) -> None:
    await cluster.apply({"replication": {"paused": True, "node": 1}})
    vb = next(v for v in range(8) if "node1" in cluster.topology.cluster.map.replicas(v))
    key = next(f"s::{i}" for i in range(1000) if cluster.bucket.vbucket_of(f"s::{i}") == vb)
    cluster.bucket.set(key, b"{}")
    state = cluster.state()
    nodes = state["cluster"]["nodes"]  # type: ignore[index]
    assert [(n["number"], n["status"]) for n in nodes] == [
        (0, "active"),
        (1, "active"),
        (2, "active"),
    ]
    assert [n["kv_port"] for n in nodes] == [n.kv_port for n in cluster.nodes]
    assert sum(n["active_vbuckets"] for n in nodes) == 8
    row = state["vbuckets"][vb]  # type: ignore[index]
    behind = next(r for r in row["replicas"] if r["node"] == "node1")
    assert behind["paused"]
    assert behind["high_seqno"] == row["high_seqno"] - 1
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{cluster.http_url}/metrics")).text
    assert 'mockdcp_nodes{status="active"} 3' in text
    assert 'mockdcp_replica_lag_items{bucket="default"} 1' in text
    assert f'mockdcp_config_revision{{bucket="default"}} {cluster.node.config_rev}' in text


class _CountingConsumer(ClusterConsumer):
    """A ``ClusterConsumer`` that counts its readings of the map, and whether its last
    wait between two began waiting for a push (a node granted them) or for a poll."""

    fetches = 0
    for_push = False

    async def _fetch(self) -> dict[str, Any] | None:
        self.fetches += 1
        return await super()._fetch()

    async def _next_change(self) -> None:
        self.for_push = self.pushes
        await super()._next_change()


async def _quiet_fetches(consumer: _CountingConsumer, seconds: float) -> int:
    before = consumer.fetches
    await trio.sleep(seconds)
    return consumer.fetches - before


async def _stall(after: float, seconds: float) -> None:
    """The whole process stalls (a loaded machine's scheduler, a long collection)."""
    await trio.sleep(after)
    time.sleep(seconds)  # noqa: ASYNC251 - blocking the loop is the point


async def test_the_cluster_consumer_follows_pushes_and_polls_only_without_them(
    cluster: MockDcpServer,
) -> None:
    """kv_engine ``docs/BinaryProtocol.md`` "0x01 Clustermap Change Notification": a
    consumer whose HELLO the nodes granted pushes reads the map when a newer revision
    is pushed, not on a timer; one without them polls every 0.1 s."""
    pushed = _CountingConsumer(cluster.host, cluster.kv_port, vbuckets=range(8))
    polled = _CountingConsumer(  # a name of its own: one name's producers replace each other
        cluster.host,
        cluster.kv_port,
        vbuckets=range(8),
        clustermap_notification=False,
        name="polled",
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(pushed.run)
        await nursery.start(polled.run)
        with trio.fail_after(10):
            await wait_until(lambda: pushed.pushes and len(polled.members) == 3)
        assert not polled.pushes
        # a poll timed before the grants were known ends first: the consumer is waiting
        # for a push once it began a wait after them (a quiet 0.3 s of no reads did not
        # show it: a stall of the process longer than the poll, under six test processes
        # on two cores, let that poll's read come after the test's quiet spell ended)
        with trio.fail_after(10):
            await wait_until(lambda: pushed.for_push)
        nursery.start_soon(_stall, 0.05, 0.3)  # a timer, were one set, would fire in it
        assert await _quiet_fetches(pushed, 1.0) == 0
        # about 10 a second; 3 in the fast tier once under load: it polls, no more
        assert await _quiet_fetches(polled, 1.0) >= 2
        rev = pushed.rev
        await cluster.apply({"add_node": {}}, {"rebalance": {}})
        with trio.fail_after(10):
            await wait_until(lambda: pushed.rev > rev and len(pushed.members) == 4)
        assert pushed.rev == cluster.topology.rev
        nursery.cancel_scope.cancel()


class _SlowFirstMaps(ClusterConsumer):
    """A ``ClusterConsumer`` whose first readings of the map come back empty, as they do
    when a loaded machine takes longer than ``MAP_TIMEOUT`` to connect, log in and read."""

    empty = 2

    async def _fetch(self) -> dict[str, Any] | None:
        if self.empty:
            self.empty -= 1
            return None
        return await super()._fetch()


async def test_the_cluster_consumer_asks_again_when_its_first_map_is_late(
    cluster: MockDcpServer,
) -> None:
    consumer = _SlowFirstMaps(cluster.host, cluster.kv_port, vbuckets=range(8))
    async with trio.open_nursery() as nursery:
        with trio.fail_after(10):
            await nursery.start(consumer.run)
            await wait_until(lambda: len(consumer.members) == 3)
        assert consumer.empty == 0
        nursery.cancel_scope.cancel()


@pytest.fixture
async def two_buckets() -> AsyncIterator[MockDcpServer]:
    """Three nodes, one replica, buckets ``default`` and ``travel``: each holds
    documents."""
    from mockdcp.model import BucketSpec

    async with mockdcp.serve(
        port=0,
        http_port=0,
        vbuckets=8,
        nodes=3,
        replicas=1,
        flush_interval=None,
        buckets=["default", BucketSpec(name="travel", replicas=1)],
    ) as server:
        for name in ("default", "travel"):
            bucket = server.bucket_node(name).bucket
            for i in range(40):
                bucket.set(f"{name}::{i}", f'{{"i":{i}}}')
            bucket.persist()
        yield server


async def _stream_all(port: int, bucket: str, expected: dict[int, int]) -> dict[int, int]:
    """Stream each vbucket of ``bucket`` that ``expected`` names from 0 on the node at
    ``port`` (a connection each), until it has sent its expected mutations: vbucket ->
    mutations."""
    got = dict.fromkeys(expected, 0)
    for vb in expected:
        c = await RawClient.connect(port)
        await c.call(Hello(opaque=c.next_opaque(), agent=b"cluster", features=FEATURES))
        await c.call(SaslAuth(opaque=c.next_opaque(), mechanism="PLAIN", payload=AUTH))
        assert (await c.call(SelectBucket(opaque=c.next_opaque(), bucket=bucket))).status == 0
        flags = int(DcpOpenFlag.PRODUCER)
        assert (await c.call(DcpOpen(opaque=c.next_opaque(), name=b"b", flags=flags))).status == 0
        r = await c.call(c.stream_request(vb))
        assert r.status == Status.SUCCESS, (bucket, vb, r.status)
        with trio.move_on_after(5):
            while got[vb] < expected[vb]:
                if (await c.frame()).opcode == 0x57:  # DCP_MUTATION
                    got[vb] += 1
    return got


async def test_every_bucket_spans_a_node_added_and_rebalanced_in(
    two_buckets: MockDcpServer,
) -> None:
    """ns_server rebalances each bucket: after add_node and rebalance both buckets'
    maps (their configs, nodes and nodesExt) list the new node, and it streams both
    buckets' vbuckets it is now active for."""
    server = two_buckets
    await server.apply({"add_node": {}})
    await server.apply({"rebalance": {}})
    assert [n.status for n in server.nodes] == ["active"] * 4
    new = server.nodes[3]
    async with httpx.AsyncClient(auth=("Administrator", "password")) as http:
        for name in ("default", "travel"):
            node = server.bucket_node(name)
            cmap = node.topology.cluster.map
            assert "node3" in cmap.nodes
            mine = cmap.actives_on("node3")
            assert mine, name
            info = (await http.get(f"{server.http_url}/pools/default/buckets/{name}")).json()
            assert f"127.0.0.1:{new.kv_port}" in info["vBucketServerMap"]["serverList"]
            assert len(info["nodesExt"]) == 4
            config = json.loads(node.buckets.node(name, "node3").config_bytes())  # type: ignore[union-attr]
            assert config["rev"] == node.config_rev
            expected = {vb: node.topology.cluster.active(vb).high_seqno for vb in mine}
            assert sum(expected.values()) > 0
            assert await _stream_all(new.kv_port, name, expected) == expected


async def test_a_failover_promotes_the_replicas_of_every_bucket(two_buckets: MockDcpServer) -> None:
    server = two_buckets
    before = {
        name: server.bucket_node(name).topology.cluster.map.actives_on("node1")
        for name in ("default", "travel")
    }
    assert all(before.values())
    await server.apply({"failover_node": {"node": 1}})
    for name in ("default", "travel"):
        cluster = server.bucket_node(name).topology.cluster
        assert "node1" not in cluster.map.nodes
        for vb in before[name]:
            promoted = cluster.map.active(vb)
            assert promoted in ("node0", "node2")
            assert cluster.copy(promoted, vb) is cluster.active(vb)
            assert cluster.active(vb).high_seqno > 0
        assert server.bucket_node(name).topology.status("node1").value == "failed_over"
    state = server.state(bucket="travel")
    statuses = [n["status"] for n in state["cluster"]["nodes"]]  # type: ignore[index]
    assert statuses == ["active", "failed_over", "active"]


async def test_a_bucket_made_on_a_cluster_spans_its_nodes_as_they_stand(
    two_buckets: MockDcpServer,
) -> None:
    """A bucket created after a node was added (not rebalanced in) and another failed
    over: the added node is added for it too, the failed-over one is gone, numbers as
    the cluster's; recreated under its name on several nodes, the same."""
    server = two_buckets
    await server.apply({"add_node": {}})
    await server.apply({"failover_node": {"node": 2}})
    await server.apply({"create_bucket": {"name": "late"}})
    topology = server.bucket_node("late").topology
    assert list(topology.nodes) == ["node0", "node1", "node2", "node3"]
    assert [topology.status(n).value for n in topology.nodes] == [
        "active",
        "active",
        "failed_over",
        "added",
    ]
    state = server.state(bucket="late")
    assert [n["status"] for n in state["cluster"]["nodes"]] == [  # type: ignore[index]
        "active",
        "active",
        "failed_over",
        "added",
    ]
    await server.apply({"rebalance": {}})
    assert topology.cluster.map.actives_on("node3")
    await server.apply({"delete_bucket": {"name": "travel"}})
    await server.apply({"create_bucket": {"name": "travel"}})
    travel = server.bucket_node("travel").topology
    assert set(travel.cluster.map.nodes) == {"node0", "node1", "node3"}
    assert travel.cluster.map.actives_on("node3")


async def test_a_bucket_made_by_step_has_one_replica_unless_told_as_the_rest_call(
    two_buckets: MockDcpServer,
) -> None:
    """``create_bucket`` without ``replicas`` places one replica, as ns_server's ``POST
    /pools/default/buckets`` without ``replicaNumber`` does (``DEFAULT_MEMBASE_NUM_REPLICAS``);
    ``replicas: 0`` places none."""
    from mockdcp.scenario import CreateBucket
    from mockdcp.server._rest_buckets import DEFAULT_REPLICAS

    assert CreateBucket(name="x").replicas == DEFAULT_REPLICAS == 1
    server = two_buckets
    await server.apply({"create_bucket": {"name": "one"}})
    await server.apply({"create_bucket": {"name": "none", "replicas": 0}})
    one = server.bucket_node("one").topology.cluster.map
    none = server.bucket_node("none").topology.cluster.map
    assert all(len(one.replicas(vb)) == 1 for vb in range(8))
    assert not any(none.replicas(vb) for vb in range(8))
