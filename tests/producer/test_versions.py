"""A node of each server version answers HELLO, DCP_CONTROL and stream requests as that
release does (``mockdcp.protocol.PROFILES``), sans-IO."""

from __future__ import annotations

import time

import pytest

from mockdcp.model import Bucket
from mockdcp.producer import Node
from mockdcp.protocol import (
    PROFILES,
    DcpControl,
    DcpStreamRequest,
    Hello,
    HelloFeature,
    Mutation,
    Response,
    ServerProfile,
    Status,
    StreamEnd,
    StreamFlag,
    Version,
    decode_hello_features,
)

from ._session import FEATURES, Session

F = HelloFeature
MAX = 0xFFFFFFFFFFFFFFFF


def node(version: str, *, storage: str = "couchstore") -> Node:
    bucket = Bucket("default", 4, seed=1, clock=time.time, storage=storage)
    return Node(bucket=bucket, users={"Administrator": "password"}, profile=PROFILES[version])


def session(version: str, *, storage: str = "couchstore") -> Session:
    n = node(version, storage=storage)
    s = Session(n.bucket, node=n, features=(*FEATURES, F.COLLECTIONS))
    s.open_dcp()
    s.call(DcpControl(opaque=0, key="enable_noop", value="true"))  # collections need it
    return s


def answer(s: Session, msg: DcpControl | DcpStreamRequest) -> Status:
    (reply,) = [m for m in s.call(msg) if isinstance(m, Response)]
    return Status(reply.status)


def control(s: Session, key: str, value: str = "true") -> Status:
    return answer(s, DcpControl(opaque=7, key=key, value=value))


def stream_request(s: Session, flags: int, start: int = 0, **kw: int) -> Status:
    req = DcpStreamRequest(
        opaque=9,
        vbucket=0,
        flags=flags,
        start_seqno=start,
        end_seqno=MAX,
        vbucket_uuid=kw.get("uuid", 0),
        snap_start_seqno=start,
        snap_end_seqno=start,
    )
    return answer(s, req)


@pytest.mark.parametrize(
    ("version", "granted"),
    [
        ("7.0", set()),
        ("7.2", set()),
        ("7.6", {F.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF, F.SUBDOC_REPLICA_READ}),
        ("8.0", {F.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF, F.SUBDOC_REPLICA_READ}),
    ],
)
def test_hello_grants_what_the_release_knows(version: str, granted: set[HelloFeature]) -> None:
    n = node(version)
    conn = n.open_connection(0.0)
    asked = (F.DUPLEX, F.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF, F.SUBDOC_REPLICA_READ, F.JSON)
    conn.receive_data(Hello(opaque=1, agent=b"t", features=asked).encode(), 0.0)
    s = Session.__new__(Session)
    s.conn, s.collections, s.now = conn, False, 0.0
    (reply,) = s.read()
    assert isinstance(reply, Response)
    assert set(decode_hello_features(reply.value)) == {F.DUPLEX, F.JSON} | granted


def test_a_70_node_grants_the_full_map_notification_the_brief_one_being_newer() -> None:
    n = node("7.0")
    s = Session(n.bucket, node=n, features=())
    asked = (F.DUPLEX, F.CLUSTERMAP_CHANGE_NOTIFICATION, F.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF)
    (reply,) = s.call(Hello(opaque=1, agent=b"t", features=asked))
    assert isinstance(reply, Response)
    assert set(decode_hello_features(reply.value)) == {F.DUPLEX, F.CLUSTERMAP_CHANGE_NOTIFICATION}


@pytest.mark.parametrize("version", list(PROFILES))
def test_version_reports_the_profiles_string(version: str) -> None:
    s = session(version)
    (reply,) = s.call(Version(opaque=3))
    assert isinstance(reply, Response)
    assert reply.value.decode() == PROFILES[version].version


@pytest.mark.parametrize(
    ("version", "statuses"),
    [
        # an unknown key is EINVAL; a known change_streams on couchstore NOT_SUPPORTED
        ("7.0", [Status.EINVAL, Status.EINVAL, Status.EINVAL, Status.EINVAL]),
        ("7.2", [Status.NOT_SUPPORTED, Status.SUCCESS, Status.EINVAL, Status.SUCCESS]),
        ("7.6", [Status.NOT_SUPPORTED, Status.SUCCESS, Status.EINVAL, Status.SUCCESS]),
        ("8.0", [Status.NOT_SUPPORTED, Status.SUCCESS, Status.SUCCESS, Status.SUCCESS]),
    ],
)
def test_controls_as_the_release_answers(version: str, statuses: list[Status]) -> None:
    s = session(version)
    assert [
        control(s, "change_streams"),
        control(s, "flatbuffers_system_events"),
        control(s, "max_marker_version", "2.2"),
        control(s, "enable_out_of_order_snapshots", "true_with_seqno_advanced"),
    ] == statuses
    assert control(s, "enable_noop") == Status.SUCCESS  # what every release knows
    assert control(s, "cache_transfer") == Status.EINVAL  # newer than 8.0


@pytest.mark.parametrize(("version", "status"), [("7.0", Status.EINVAL), ("7.2", Status.SUCCESS)])
def test_change_streams_on_magma_from_72(version: str, status: Status) -> None:
    assert control(session(version, storage="magma"), "change_streams") == status


@pytest.mark.parametrize(
    ("version", "from_latest", "ignore_purged", "cache_transfer"),
    [
        ("7.0", Status.SUCCESS, Status.SUCCESS, Status.SUCCESS),  # not looked at
        ("7.2", Status.EINVAL, Status.SUCCESS, Status.EINVAL),
        ("7.6", Status.SUCCESS, Status.SUCCESS, Status.EINVAL),
        ("8.0", Status.SUCCESS, Status.SUCCESS, Status.EINVAL),
    ],
)
def test_stream_flags_as_the_release_takes_them(
    version: str, from_latest: Status, ignore_purged: Status, cache_transfer: Status
) -> None:
    s = session(version)
    assert stream_request(s, StreamFlag.FROM_LATEST) == from_latest
    s = session(version)
    assert stream_request(s, StreamFlag.IGNORE_PURGED_TOMBSTONES) == ignore_purged
    s = session(version)
    assert stream_request(s, StreamFlag.CACHE_TRANSFER) == cache_transfer


def purged(version: str) -> tuple[Session, int]:
    """A session on a node of ``version`` whose vbucket 0 purged tombstones up to its
    high seqno, and the vbucket uuid."""
    s = session(version)
    b = s.node.bucket
    for i in range(8):
        key = f"k{i}"
        if b.vbucket_of(key) == 0:
            b.set(key, "v")
            b.delete(key)
    b.persist()
    b.purge(0)
    vb = b.vbucket(0)
    assert vb.purge_seqno > 1
    return s, vb.failover.newest_uuid


@pytest.mark.parametrize(("version", "status"), [("7.0", Status.ROLLBACK), ("7.2", Status.SUCCESS)])
def test_ignore_purged_tombstones_is_ignored_by_a_70_node(version: str, status: Status) -> None:
    """Below the purge seqno a consumer must roll back to 0, unless it says it does not
    care (IGNORE_PURGED_TOMBSTONES, from 7.2): a 7.0 node does not read the flag."""
    s, uuid = purged(version)
    assert stream_request(s, StreamFlag.IGNORE_PURGED_TOMBSTONES, 1, uuid=uuid) == status


def test_a_70_node_streams_from_the_start_despite_from_latest() -> None:
    s = session("7.0")
    b = s.node.bucket
    keys = [k for k in (f"k{i}" for i in range(40)) if b.vbucket_of(k) == 0][:3]
    for k in keys:
        b.set(k, "v")
    req = DcpStreamRequest(
        opaque=9,
        vbucket=0,
        flags=StreamFlag.FROM_LATEST | StreamFlag.TO_LATEST,
        start_seqno=0,
        end_seqno=MAX,
        vbucket_uuid=0,
        snap_start_seqno=0,
        snap_end_seqno=0,
    )
    out = s.call(req)
    for _ in range(5):
        out += s.read()
    assert any(isinstance(m, StreamEnd) for m in out)
    sent = [m.key for m in out if isinstance(m, Mutation)]
    assert sent == [k.encode() for k in keys]  # every write, not "from the latest"


def test_a_profile_is_one_frozen_record() -> None:
    p = PROFILES["7.0"]
    assert isinstance(p, ServerProfile)
    with pytest.raises(AttributeError):
        p.name = "7.1"  # type: ignore[misc]


@pytest.mark.parametrize("version", list(PROFILES))
def test_a_magma_bucket_lists_no_couchapi(version: str) -> None:
    """ns_server ``bucket_info_cache.erl`` lists ``couchapi`` when ``ns_bucket.erl``
    ``can_have_views`` holds: couchstore only (a Magma bucket has no views)."""
    magma = node(version, storage="magma").config()["bucketCapabilities"]
    couchstore = node(version).config()["bucketCapabilities"]
    assert isinstance(magma, list)
    assert isinstance(couchstore, list)
    assert "couchapi" not in magma
    assert "couchapi" in couchstore
    assert set(couchstore) - set(magma) <= {"couchapi"}
    assert "rangeScan" in magma or "rangeScan" not in couchstore  # persistent: kept
