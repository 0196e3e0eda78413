"""The cluster's buckets, sans-IO (``mockdcp/producer/_buckets.py``): each bucket its own
model and nodes, SELECT_BUCKET moving a connection, delete closing the bucket's
connections, a bucket made again under its name starting anew."""

from __future__ import annotations

import pytest

from mockdcp.model import Bucket, BucketSpec, BucketType, bucket_name_error
from mockdcp.producer import Node
from mockdcp.protocol import Response, SelectBucket, Status
from mockdcp.util import ModelError

from ._session import Session

USERS = {"Administrator": "password"}


def _node() -> Node:
    return Node(bucket=Bucket("default", 4, seed=1, clock=lambda: 0.0), users=USERS)


def test_a_second_bucket_has_its_own_model_uuids_and_nodes() -> None:
    node = _node()
    other = node.buckets.create(BucketSpec(name="other"))
    assert node.buckets.names == ["default", "other"]
    assert other.bucket is not node.bucket
    assert other.bucket.num_vbuckets == 4
    assert other.topology is not node.topology
    assert other.bucket_uuid != node.bucket_uuid
    assert other.name == node.name
    node.bucket.set("k", b"{}")
    assert other.bucket.oracle().rows() == []
    assert node.topology.next_conn_id() != other.topology.next_conn_id()  # one sequence


def test_select_bucket_moves_the_connection_to_its_buckets_node() -> None:
    node = _node()
    other = node.buckets.create(BucketSpec(name="other"))
    session = Session(node.bucket, node=node)
    (answer,) = session.call(SelectBucket(opaque=1, bucket="other"))
    assert isinstance(answer, Response)
    assert answer.status == Status.SUCCESS
    assert session.conn.node is other
    assert session.conn.conn_id in other.connections
    assert session.conn.conn_id not in node.connections
    (missing,) = session.call(SelectBucket(opaque=2, bucket="nope"))
    assert isinstance(missing, Response)
    assert missing.status == Status.KEY_ENOENT
    assert session.conn.node is other


def test_deleting_a_bucket_closes_its_connections_and_a_new_one_starts_anew() -> None:
    node = _node()
    other = node.buckets.create(BucketSpec(name="other"))
    for i in range(20):
        other.bucket.set(f"k{i}", b"{}")
    uuid = other.bucket.vbucket(0).failover.newest_uuid
    session = Session(node.bucket, node=node)
    session.call(SelectBucket(opaque=1, bucket="other"))
    closed = node.buckets.delete("other")
    assert closed == 1
    assert session.conn.closed
    assert node.buckets.names == ["default"]
    assert node.buckets.node("other", node.name) is None
    with pytest.raises(ModelError, match=r"The bucket to be deleted was not found\."):
        node.buckets.delete("other")
    again = node.buckets.create(BucketSpec(name="other"))
    assert again is other  # the same node: its event log and steps go on
    assert other.bucket.vbucket(0).high_seqno == 0
    assert other.bucket.vbucket(0).failover.newest_uuid != uuid


def test_the_bucket_directory_refuses_what_ns_server_refuses() -> None:
    node = _node()
    with pytest.raises(ModelError, match="Bucket with given name already exists"):
        node.buckets.create(BucketSpec(name="default"))
    with pytest.raises(ModelError, match="RAM quota cannot be less than 100 MiB"):
        node.buckets.create(BucketSpec(name="small", ram_quota_mb=99))
    assert node.buckets.names == ["default"]


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("", "Bucket name cannot be empty"),
        ("x" * 101, "Bucket name cannot exceed 100 characters"),
        (".dot", "Bucket name cannot start with dot."),
        ("sp ace", "Bucket name can only contain"),
        ("_users.couch.x", "This name is reserved for the internal use."),
    ],
)
def test_bucket_names_are_checked_as_ns_server_checks_them(name: str, error: str) -> None:
    assert (bucket_name_error(name) or "").startswith(error)


def test_a_bucket_option_parses_name_and_type_and_refuses_an_unknown_type_by_name() -> None:
    assert BucketSpec.parse("orders") == BucketSpec(name="orders")
    assert BucketSpec.parse("orders:couchbase").type is BucketType.COUCHBASE
    assert BucketSpec.parse("orders:membase").type is BucketType.COUCHBASE
    with pytest.raises(ModelError, match="unknown bucket type 'memcached'"):
        BucketSpec.parse("orders:memcached")
    with pytest.raises(ModelError, match="a type after the colon"):
        BucketSpec.parse("orders:")
    assert bucket_name_error("default") is None


def test_the_topology_steps_keep_every_buckets_nodes_in_step() -> None:
    """Every bucket spans every data node (``_data_nodes``): add, rebalance, down, up
    and failover act on each bucket's map; a graceful failover one bucket cannot take
    (no replica) is refused before any bucket changes."""
    from mockdcp.producer._data_nodes import DataNodes

    node = Node.cluster(Bucket("default", 8, seed=1, clock=lambda: 0.0), USERS, nodes=2)
    other = node.buckets.create(BucketSpec(name="other", replicas=1))
    nodes = DataNodes(node.buckets, other.topology)
    added = nodes.add_node()
    assert added.name == "node2"
    assert list(other.topology.nodes) == ["node0", "node1", "node2"]
    assert list(nodes.rebalance()) == []
    for each in (node, other):
        assert each.topology.cluster.map.actives_on("node2")
        assert each.topology.status("node2").value == "active"
    nodes.node_down(2)
    assert other.topology.status("node2").value == "down"
    nodes.node_up(2)
    maps = (node.topology.cluster.map, other.topology.cluster.map)
    with pytest.raises(ModelError, match=r"bucket .default.: vbucket .* no replica"):
        list(nodes.failover_node(1, graceful=True))  # default has no replica
    assert (node.topology.cluster.map, other.topology.cluster.map) == maps
    assert list(nodes.failover_node(1)) == []
    for each in (node, other):
        assert "node1" not in each.topology.cluster.map.nodes
        assert each.topology.status("node1").value == "failed_over"


def test_a_restart_of_the_node_restarts_every_bucket() -> None:
    """memcached holds every bucket: ``restart`` (all vbuckets) loses each bucket's
    unpersisted writes and drops its connections; a vbucket list restarts only those
    vbuckets of the step's bucket."""
    from mockdcp.scenario import StepRunner, parse_steps

    node = _node()
    other = node.buckets.create(BucketSpec(name="other"))
    for i in range(8):
        node.bucket.set(f"d{i}", b"{}")
        other.bucket.set(f"o{i}", b"{}")
    session = Session(node.bucket, node=node)
    session.call(SelectBucket(opaque=1, bucket="other"))
    StepRunner(node).apply_now(parse_steps([{"restart": {}}], source="<test>"))
    assert session.conn.closed
    for each in (node, other):
        assert [vb.high_seqno for vb in each.bucket.vbuckets] == [0, 0, 0, 0]
    other.bucket.set("again", b"{}")
    vb = other.bucket.vbucket_of("again")
    StepRunner(node).apply_now(parse_steps([{"restart": {"vbuckets": [vb]}}], source="<t>"))
    assert other.bucket.vbucket(vb).high_seqno == 1  # the default bucket's step
