"""``--server-version`` end to end: a node of each release on 127.0.0.1 (free ports)
answers HELLO, DCP_CONTROL and stream requests as that release does and reports it over
HTTP; an unknown version is refused by name by the CLI, ``serve`` and a scenario, with
nothing started."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from mockdcp.model import Bucket
from mockdcp.protocol import (
    PROFILES,
    DcpControl,
    DcpOpen,
    DcpOpenFlag,
    Hello,
    HelloFeature,
    SaslAuth,
    SelectBucket,
    Status,
    StreamFlag,
    Version,
    decode_hello_features,
)
from mockdcp.server import serve
from mockdcp.util import ServerError

from ._raw import OPEN, RawClient

F = HelloFeature
ASKED = (
    F.XERROR,
    F.JSON,
    F.COLLECTIONS,
    F.DUPLEX,
    F.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF,
    F.GET_CLUSTER_CONFIG_WITH_KNOWN_VERSION,
    F.SUBDOC_BINARY_XATTR,
)
#: per release: HELLO features granted of ASKED beyond XERROR, JSON, COLLECTIONS, DUPLEX;
#: change_streams, max_marker_version; FROM_LATEST, IGNORE_PURGED_TOMBSTONES, CACHE_TRANSFER
EXPECTED = {
    "7.0": (
        set(),
        (Status.EINVAL, Status.EINVAL),
        (Status.SUCCESS, Status.SUCCESS, Status.SUCCESS),
    ),
    "7.2": (
        set(),
        (Status.SUCCESS, Status.EINVAL),
        (Status.EINVAL, Status.SUCCESS, Status.EINVAL),
    ),
    "7.6": (
        {F.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF, F.GET_CLUSTER_CONFIG_WITH_KNOWN_VERSION},
        (Status.SUCCESS, Status.EINVAL),
        (Status.SUCCESS, Status.SUCCESS, Status.EINVAL),
    ),
    "8.0": (
        {
            F.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF,
            F.GET_CLUSTER_CONFIG_WITH_KNOWN_VERSION,
            F.SUBDOC_BINARY_XATTR,
        },
        (Status.SUCCESS, Status.SUCCESS),
        (Status.SUCCESS, Status.SUCCESS, Status.EINVAL),
    ),
}


async def _dcp(port: int) -> tuple[RawClient, set[int]]:
    c = await RawClient.connect(port)
    hello = await c.call(Hello(opaque=c.next_opaque(), agent=b"raw", features=ASKED))
    granted = set(decode_hello_features(hello.value))
    auth = SaslAuth(opaque=c.next_opaque(), mechanism="PLAIN", payload=b"\0Administrator\0password")
    assert (await c.call(auth)).status == Status.SUCCESS
    assert (await c.call(SelectBucket(opaque=c.next_opaque(), bucket="default"))).status == 0
    r = await c.call(DcpOpen(opaque=c.next_opaque(), name=b"v", flags=int(DcpOpenFlag.PRODUCER)))
    assert r.status == Status.SUCCESS
    r = await c.call(DcpControl(opaque=c.next_opaque(), key="enable_noop", value="true"))
    assert r.status == Status.SUCCESS
    return c, granted


@pytest.mark.parametrize("version", list(PROFILES))
async def test_a_node_of_each_release(version: str) -> None:
    features, controls, flags = EXPECTED[version]
    bucket = Bucket("default", 4, seed=2, clock=time.time, storage="magma")
    if version == "7.0":  # no history retention before 7.2
        bucket = Bucket(
            "default", 4, seed=2, clock=time.time, storage="magma", history_retention_bytes=0
        )
    try:
        async with serve(port=0, http_port=0, bucket_obj=bucket, server_version=version) as srv:
            c, granted = await _dcp(srv.kv_port)
            assert granted == {F.XERROR, F.JSON, F.COLLECTIONS, F.DUPLEX} | features
            v = await c.call(Version(opaque=c.next_opaque()))
            assert v.value.decode() == PROFILES[version].version
            answers = []
            for key, value in (("change_streams", "true"), ("max_marker_version", "2.2")):
                r = await c.call(DcpControl(opaque=c.next_opaque(), key=key, value=value))
                answers.append(r.status)
            assert tuple(answers) == controls
            statuses = []
            for vb, flag in enumerate(
                (
                    StreamFlag.FROM_LATEST,
                    StreamFlag.IGNORE_PURGED_TOMBSTONES,
                    StreamFlag.CACHE_TRANSFER,
                )
            ):
                statuses.append((await c.call(c.stream_request(vb, flags=int(flag)))).status)
            assert tuple(statuses) == flags
            async with httpx.AsyncClient(
                base_url=srv.http_url, auth=("Administrator", "password"), timeout=10
            ) as http:
                pools = (await http.get("/pools")).json()
                assert pools["implementationVersion"] == PROFILES[version].version
                default = (await http.get("/pools/default")).json()
                assert default["clusterCompatVersion"] == version
                (node,) = default["nodes"]
                assert node["clusterCompatibility"] == PROFILES[version].cluster_compatibility
                state = (await http.get("/mock/state")).json()
                assert state["server_version"] == {
                    "release": version,
                    "reports": PROFILES[version].version,
                }
                terse = (await http.get("/pools/default/terseClusterInfo")).json()
                assert terse["clusterCompatVersion"] == version
                config = (await http.get("/pools/default/b/default")).json()
                caps = config["bucketCapabilities"]
                assert ("dcp.IgnorePurgedTombstones" in caps) is (version != "7.0")
                assert ("subdoc.BinaryXattr" in caps) is (version == "8.0")
    finally:
        while OPEN:
            await OPEN.pop().aclose()


async def test_serve_refuses_an_unknown_version_and_history_before_72() -> None:
    with pytest.raises(ServerError, match=r"unknown server version '7\.1'"):
        async with serve(port=0, http_port=0, server_version="7.1"):
            pass
    with pytest.raises(ServerError, match=r"7\.2 or later, not 7\.0"):
        async with serve(port=0, http_port=0, server_version="7.0", storage="magma"):
            pass


def test_the_cli_refuses_an_unknown_version_by_name() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mockdcp", "serve", "--port", "0", "--server-version", "6.6"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert b"unknown server version '6.6'" in result.stderr
    assert b"7.0, 7.2, 7.6, 8.0" in result.stderr


async def test_every_node_of_a_cluster_is_of_the_version() -> None:
    async with serve(port=0, http_port=0, nodes=2, server_version="7.2") as srv:
        second = srv.nodes[1]
        c, granted = await _dcp(second.kv_port)
        try:
            assert F.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF not in granted  # 7.6's
            v = await c.call(Version(opaque=c.next_opaque()))
            assert v.value.decode() == PROFILES["7.2"].version
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{second.http_port}",
                auth=("Administrator", "password"),
                timeout=10,
            ) as http:
                nodes = (await http.get("/pools/default")).json()["nodes"]
                assert [n["clusterCompatibility"] for n in nodes] == [0x70002, 0x70002]
        finally:
            while OPEN:
                await OPEN.pop().aclose()
