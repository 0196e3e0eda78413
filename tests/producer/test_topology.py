"""The cluster the nodes make, without sockets: one map on every node, its revision,
the pushes, and the topology steps' effects on connections."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from mockdcp.model import Bucket
from mockdcp.producer import CheckerLimits, Connection, Node, NodeStatus
from mockdcp.protocol import (
    ClusterMapChangeNotification,
    FrameReader,
    Hello,
    HelloFeature,
    SaslAuth,
    SelectBucket,
)
from mockdcp.util import ModelError


def cluster(nodes: int = 3, replicas: int = 1, vbuckets: int = 8) -> Node:
    bucket = Bucket("default", vbuckets, seed=3, clock=lambda: 0.0)
    first = Node.cluster(bucket, {"u": "p"}, nodes=nodes, replicas=replicas)
    for i, node in enumerate(first.topology.nodes.values()):
        node.kv_port, node.http_port = 11210 + i, 8091 + i
    return first


def test_every_node_serves_one_map_in_server_list_order_with_itself_marked() -> None:
    first = cluster()
    nodes = list(first.topology.nodes.values())
    configs: list[dict[str, Any]] = [n.config() for n in nodes]
    maps = [c["vBucketServerMap"] for c in configs]
    assert all(m == maps[0] for m in maps)
    assert maps[0]["serverList"] == ["127.0.0.1:11210", "127.0.0.1:11211", "127.0.0.1:11212"]
    assert maps[0]["numReplicas"] == 1
    for i, config in enumerate(configs):
        ext = config["nodesExt"]
        assert [e["services"]["kv"] for e in ext] == [11210, 11211, 11212]
        assert [e.get("thisNode", False) for e in ext] == [j == i for j in range(3)]
    assert [n["ports"]["direct"] for n in configs[0]["nodes"]] == [11210, 11211, 11212]


def test_a_one_node_cluster_serves_the_one_node_config_as_before() -> None:
    node = Node(bucket=Bucket("default", 4, seed=1, clock=lambda: 0.0), users={})
    config: dict[str, Any] = node.config()
    assert config["vBucketServerMap"]["serverList"] == [f"$HOST:{node.kv_port}"]
    assert config["vBucketServerMap"]["vBucketMap"] == [[0]] * 4


def test_each_move_of_a_rebalance_is_a_new_revision_and_the_leaving_node_goes() -> None:
    first = cluster()
    topology = first.topology
    topology.remove_node(2)
    moves = topology.plan_rebalance()
    rev = topology.rev
    for move in moves:
        topology.prepare_move(move)
        topology.apply_move(move)
    assert topology.rev == rev + len(moves)
    topology.finish_rebalance()
    assert topology.status("node2") is NodeStatus.REMOVED
    config: dict[str, Any] = first.config()
    assert config["vBucketServerMap"]["serverList"] == [
        "127.0.0.1:11210",
        "127.0.0.1:11211",
    ]


def test_a_takeover_keeps_the_vbucket_uuid_and_a_hard_failover_makes_a_new_one() -> None:
    first = cluster()
    cluster_model = first.topology.cluster
    topology = first.topology
    topology.add_node()
    move = next(m for m in topology.plan_rebalance() if m.takeover)
    uuid = cluster_model.active(move.vbucket).failover.newest_uuid
    topology.prepare_move(move)
    topology.apply_move(move)
    assert cluster_model.active(move.vbucket).failover.newest_uuid == uuid
    vb = cluster_model.map.actives_on("node0")[0]
    before = cluster_model.active(vb).failover.newest_uuid
    topology.failover_node(0)
    assert cluster_model.active(vb).failover.newest_uuid != before
    assert topology.status("node0") is NodeStatus.FAILED_OVER


def _bootstrap(node: Node, features: tuple[int, ...]) -> tuple[Connection, FrameReader]:
    conn = node.open_connection(0.0)
    data = Hello(opaque=1, agent=b"t", features=features).encode()
    data += SaslAuth(opaque=2, mechanism="PLAIN", payload=b"\0u\0p").encode()
    data += SelectBucket(opaque=3, bucket="default").encode()
    conn.receive_data(data, 0.0)
    reader = FrameReader()
    reader.feed(bytes(conn.data_to_send(0.0)))
    while reader.next_frame() is not None:
        pass
    return conn, reader


@pytest.mark.parametrize("brief", [False, True])
def test_a_new_revision_is_pushed_to_connections_that_asked(brief: bool) -> None:
    first = cluster()
    feature = (
        HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF
        if brief
        else HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION
    )
    asked, reader = _bootstrap(first, (HelloFeature.DUPLEX, feature))
    plain, plain_reader = _bootstrap(first, ())
    first.topology.add_node()
    reader.feed(bytes(asked.data_to_send(0.0)))
    frame = reader.next_frame()
    assert frame is not None
    push = ClusterMapChangeNotification.decode(frame)
    assert push.revision == first.config_rev
    if brief:
        assert push.config == b""
    else:
        assert json.loads(push.config)["rev"] == first.config_rev
    plain_reader.feed(bytes(plain.data_to_send(0.0)))
    assert plain_reader.next_frame() is None


def test_bad_topology_steps_change_nothing() -> None:
    first = cluster(nodes=2)
    topology = first.topology
    rev = topology.rev
    with pytest.raises(ModelError, match="no node 5"):
        topology.node_down(5)
    topology.remove_node(1)
    with pytest.raises(ModelError, match="last node"):
        topology.remove_node(0)
    assert topology.rev == rev


def test_streams_of_a_replica_that_rolls_back_end_state_changed_then_roll_back() -> None:
    """A replica ahead of the one a hard failover promotes rolls back under its streams:
    kv_engine ``KVBucket::rollback`` closes them (``DcpConnMap::closeStreamsDueToRollback``,
    reason Rollback, written STATE_CHANGED by ``StreamEndResponse::statusToFlags``); the
    consumer asks again and is answered ROLLBACK to the new branch point."""
    from mockdcp.protocol import (
        DcpStreamRequest,
        Response,
        Status,
        StreamEnd,
        StreamEndReason,
    )
    from tests.producer._session import Session, from_zero

    bucket = Bucket("default", 4, seed=3, clock=lambda: 0.0)
    first = Node.cluster(bucket, {"Administrator": "password"}, nodes=3, replicas=2)
    topology, model = first.topology, first.topology.cluster
    vb = 0
    active, behind, ahead = model.map.chain(vb)
    assert active is not None
    assert behind is not None
    assert ahead is not None
    model.pause_replication(node=behind, vbucket=vb)
    for i in range(6):
        bucket.set(f"k{i}", b"v", vbucket=vb)
    copy = model.copy(ahead, vb)
    assert copy is not None
    assert copy.high_seqno == 6
    uuid = copy.failover.newest_uuid
    session = Session(bucket, node=topology.nodes[ahead])
    session.open_dcp()
    request = from_zero(vb, opaque=5)  # a replica streams without ACTIVE_VB_ONLY
    assert any(
        isinstance(m, Response) and m.status == Status.SUCCESS for m in session.call(request)
    )
    session.read()
    topology.failover_node(list(topology.nodes).index(active))
    assert model.map.active(vb) == behind
    ends = [m for m in session.read() if isinstance(m, StreamEnd)]
    assert [(m.vbucket, m.reason) for m in ends] == [(vb, StreamEndReason.STATE_CHANGED)]
    again = DcpStreamRequest(
        opaque=6,
        vbucket=vb,
        flags=0,
        start_seqno=6,
        end_seqno=2**64 - 1,
        vbucket_uuid=uuid,
        snap_start_seqno=6,
        snap_end_seqno=6,
    )
    [reply] = session.call(again)
    assert isinstance(reply, Response)
    assert reply.status == Status.ROLLBACK


def test_the_checker_limits_set_on_one_node_hold_on_every_node_of_the_cluster() -> None:
    # issue 45: `check` sets its limits on the first node; the others share its
    # checker registry and must not put their own (the defaults) back when they use it
    first = cluster()
    others = [node for node in first.topology.nodes.values() if node is not first]
    assert others
    quick = CheckerLimits(ack_stall=2.0, reopen_within=2.0)
    first.checker_limits = quick
    for node in others:
        assert node.checkers is first.checkers
        assert node.checker_limits == quick
        assert node.checkers.checker(f"from-{node.name}").limits == quick
    assert first.checkers.checker("from-the-first").limits == quick
    joined = first.sibling("node9", host=first.host, kv_port=0, http_port=0)
    assert joined.checker_limits == quick


def test_the_old_node_answers_the_failover_log_from_its_dead_copy_until_the_move_ends() -> None:
    """kv_engine ``EventuallyPersistentEngine::getFailoverLog``: NOT_MY_VBUCKET only for
    a vbucket the node does not have; ``observe_seqno``: NOT_MY_VBUCKET for a dead one;
    a stream request: NOT_MY_VBUCKET unless active or replica (``DcpProducer::streamRequest``);
    ``getAllVBucketSequenceNumbers`` lists the vbuckets the node has in the state asked
    for, a dead one included. ns_server deletes the dead copy when the move is done
    (``ns_single_vbucket_mover:on_move_done``, ``end_move``)."""
    from mockdcp.protocol import (
        DcpCloseStream,
        DcpGetFailoverLog,
        GetAllVbSeqnos,
        ObserveSeqno,
        Response,
        Status,
        VBucketState,
        decode_all_vb_seqnos,
        decode_failover_log,
    )
    from tests.producer._session import Session, from_zero

    bucket = Bucket("default", 4, seed=3, clock=lambda: 0.0)
    first = Node.cluster(bucket, {"Administrator": "password"}, nodes=2, replicas=0)
    topology = first.topology
    old = topology.nodes["node1"]
    topology.remove_node(1)
    move = topology.plan_rebalance()[0]
    assert move.source[0] == "node1"
    vb = move.vbucket
    bucket.set("k", b"v", vbucket=vb)
    high = bucket.vbucket(vb).high_seqno
    uuid = bucket.vbucket(vb).failover.newest_uuid
    session = Session(bucket, node=old)
    session.open_dcp()

    def ask() -> tuple[Status, Status, Status, dict[int, int]]:
        [log] = session.call(DcpGetFailoverLog(opaque=1, vbucket=vb))
        [seen] = session.call(ObserveSeqno(opaque=2, vbucket=vb, vbucket_uuid=uuid))
        request = from_zero(vb, opaque=3)
        stream = next(m for m in session.call(request) if isinstance(m, Response))
        [dead] = session.call(GetAllVbSeqnos(opaque=4, state=int(VBucketState.DEAD)))
        session.read()
        assert isinstance(log, Response)
        assert isinstance(seen, Response)
        assert isinstance(dead, Response)
        if log.status == Status.SUCCESS:
            assert decode_failover_log(log.value)[0][0] == uuid
        statuses = (Status(log.status), Status(seen.status), Status(stream.status))
        return (*statuses, dict(decode_all_vb_seqnos(dead.value)))

    assert ask()[:2] == (Status.SUCCESS, Status.SUCCESS)
    session.call(DcpCloseStream(opaque=5, vbucket=vb))
    topology.prepare_move(move)
    topology.apply_move(move)  # the takeover: node1's copy is dead
    assert ask() == (Status.SUCCESS, Status.NOT_MY_VBUCKET, Status.NOT_MY_VBUCKET, {vb: high})
    topology.end_move(move)  # ns_server deletes it
    assert ask() == (Status.NOT_MY_VBUCKET, Status.NOT_MY_VBUCKET, Status.NOT_MY_VBUCKET, {})


def test_a_dropped_replica_streams_until_ns_server_deletes_it() -> None:
    """The replica a move drops stays a replica (``update_replication_post_move`` only
    stops what fed it) until ``delete_vbucket_copies`` when the move is done; ns_memcached
    sets it dead then (``delete_vbucket``), and kv_engine ends its streams STATE_CHANGED
    (``DcpProducer::closeStreamDueToVbStateChange``)."""
    from mockdcp.protocol import Response, Status, StreamEnd, StreamEndReason
    from tests.producer._session import Session, from_zero

    bucket = Bucket("default", 4, seed=3, clock=lambda: 0.0)
    first = Node.cluster(bucket, {"Administrator": "password"}, nodes=3, replicas=1)
    topology, model = first.topology, first.topology.cluster
    topology.remove_node(2)
    move = next(m for m in topology.plan_rebalance() if m.source[1] == "node2")
    assert "node2" in move.dropped
    vb = move.vbucket
    session = Session(bucket, node=topology.nodes["node2"])
    session.open_dcp()
    request = from_zero(vb, opaque=7)  # a replica streams without ACTIVE_VB_ONLY
    assert any(
        isinstance(m, Response) and m.status == Status.SUCCESS for m in session.call(request)
    )
    session.read()
    topology.prepare_move(move)
    topology.apply_move(move)
    assert model.copy("node2", vb) is None, "out of the map"
    assert not [m for m in session.read() if isinstance(m, StreamEnd)], "still a replica"
    topology.end_move(move)
    ends = [m for m in session.read() if isinstance(m, StreamEnd)]
    assert [(m.vbucket, m.reason) for m in ends] == [(vb, StreamEndReason.STATE_CHANGED)]


def test_nodes_leaving_stay_up_for_the_out_delay_answering_not_my_vbucket_with_the_map() -> None:
    """ns_server ``ns_rebalancer.erl`` ``run_mover``: after the moves of a rebalance out it
    sleeps ``rebalance_out_delay_seconds`` (``sleep_for_sdk_clients``) before the nodes
    leave the bucket and are ejected, so that a client still sending to such a node meets
    NOT_MY_VBUCKET with the new map, not a closed connection (go-dcp's heartbeat to a
    moved vbucket did: tests/interop/test_cluster.py, rebalance_out). Only when nodes
    leave; ``out_delay`` 0 goes at once, as before."""
    from mockdcp.producer import DataNodes
    from mockdcp.protocol import ObserveSeqno, Response, Status
    from tests.producer._session import Session

    bucket = Bucket("default", 4, seed=3, clock=lambda: 0.0)
    first = Node.cluster(bucket, {"Administrator": "password"}, nodes=2, replicas=0)
    topology = first.topology
    vb = topology.cluster.map.actives_on("node1")[0]
    uuid = bucket.vbucket(vb).failover.newest_uuid
    session = Session(bucket, node=topology.nodes["node1"])
    topology.remove_node(1)
    nodes = DataNodes(first.buckets, topology)
    waits = []
    for seconds in nodes.rebalance(interval=0.02, out_delay=10.0):
        waits.append(seconds)
        if seconds != 10.0:
            continue
        assert topology.status("node1") is NodeStatus.ACTIVE
        [answer] = session.call(ObserveSeqno(opaque=1, vbucket=vb, vbucket_uuid=uuid))
        assert isinstance(answer, Response)
        assert answer.status == Status.NOT_MY_VBUCKET
        config = json.loads(answer.value)
        assert config["rev"] == first.config_rev
        assert config["vBucketServerMap"]["vBucketMap"][vb][0] == 0  # node0 has it now
    assert waits[-1] == 10.0
    assert waits.count(10.0) == 1
    assert topology.status("node1") is NodeStatus.REMOVED
    # no node leaves: no wait
    topology.add_node()
    assert 10.0 not in list(nodes.rebalance(interval=0.02, out_delay=10.0))


def test_a_graceful_failover_keeps_the_node_up_for_the_out_delay_after_its_handovers() -> None:
    """ns_server ``ns_rebalancer.erl`` ``run_graceful_failover``: every bucket's moves,
    then ``sleep_for_sdk_clients("graceful failover")`` (``rebalance_out_delay_seconds``)
    before ``failover:orchestrate`` fails the node over: meanwhile it is up, in the map
    (a replica of what it handed over), and answers NOT_MY_VBUCKET with the new map for
    a vbucket it was active for, whose stream ended STATE_CHANGED at the handover; then
    it is failed over as before. ``out_delay`` 0 goes at once, as before."""
    from mockdcp.producer import DataNodes
    from mockdcp.protocol import (
        Response,
        Status,
        StreamEnd,
        StreamEndReason,
        StreamFlag,
    )
    from tests.producer._session import Session, from_zero

    bucket = Bucket("default", 4, seed=3, clock=lambda: 0.0)
    first = Node.cluster(bucket, {"Administrator": "password"}, nodes=2, replicas=1)
    topology = first.topology
    vb = topology.cluster.map.actives_on("node1")[0]
    session = Session(bucket, node=topology.nodes["node1"])
    session.open_dcp()
    request = from_zero(vb, opaque=5)
    assert any(
        isinstance(m, Response) and m.status == Status.SUCCESS for m in session.call(request)
    )
    session.read()
    nodes = DataNodes(first.buckets, topology)
    waits = []
    for seconds in nodes.failover_node(1, graceful=True, out_delay=10.0):
        waits.append(seconds)
        assert topology.status("node1") is NodeStatus.ACTIVE
        assert not session.conn.closed
        ends = [m for m in session.read() if isinstance(m, StreamEnd)]
        assert [(m.vbucket, m.reason) for m in ends] == [(vb, StreamEndReason.STATE_CHANGED)]
        reopen = attrs.evolve(request, opaque=6, flags=StreamFlag.ACTIVE_VB_ONLY)
        [answer] = session.call(reopen)  # as a consumer re-opens it
        assert isinstance(answer, Response)
        assert answer.status == Status.NOT_MY_VBUCKET
        config = json.loads(answer.value)
        assert config["rev"] == first.config_rev
        assert config["vBucketServerMap"]["vBucketMap"][vb] == [0, 1]  # node1 a replica
    assert waits == [10.0]
    assert topology.status("node1") is NodeStatus.FAILED_OVER
    assert session.conn.closed
    assert topology.cluster.map.nodes == ("node0",)
    # without the field nothing waits
    other = Node.cluster(Bucket("default", 4, seed=3, clock=lambda: 0.0), {}, nodes=3, replicas=1)
    assert list(DataNodes(other.buckets, other.topology).failover_node(1, graceful=True)) == []
    assert other.topology.status("node1") is NodeStatus.FAILED_OVER


def test_a_replica_stream_carries_nothing_while_replication_is_held_then_catches_up() -> None:
    """A stream request without ACTIVE_VB_ONLY on a replica is served (kv_engine
    ``DcpProducer::checkConditionsForStreamRequest``) and streams what replication brings
    that copy: nothing while it is held, the writes once it resumes (the library's
    ``stream-reopened-on-a-replica-after-a-move``); with the flag, NOT_MY_VBUCKET."""
    from mockdcp.protocol import Mutation, Response, Status, StreamFlag
    from tests.producer._session import Session, from_zero

    bucket = Bucket("default", 4, seed=3, clock=lambda: 0.0)
    first = Node.cluster(bucket, {"Administrator": "password"}, nodes=2, replicas=1)
    topology, model = first.topology, first.topology.cluster
    vb = 0
    replica = model.map.replicas(vb)[0]
    assert replica is not None
    session = Session(bucket, node=topology.nodes[replica])
    session.open_dcp()
    [refused] = session.call(from_zero(vb, opaque=4, flags=StreamFlag.ACTIVE_VB_ONLY))
    assert isinstance(refused, Response)
    assert refused.status == Status.NOT_MY_VBUCKET
    served = session.call(from_zero(vb, opaque=5))
    assert any(isinstance(m, Response) and m.status == Status.SUCCESS for m in served)
    session.read()
    model.pause_replication()
    for i in range(3):
        bucket.set(f"k{i}", b"v", vbucket=vb)
    model.replicate()
    assert not [m for m in session.read() if isinstance(m, Mutation)]
    model.resume_replication()
    model.replicate()
    assert [m.by_seqno for m in session.read() if isinstance(m, Mutation)] == [1, 2, 3]
