from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.request
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from mockdcp.model import Bucket
from mockdcp.protocol import (
    AlternateAddress,
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    GetClusterConfig,
    Hello,
    HelloFeature,
    NodeNetwork,
    SaslAuth,
    SelectBucket,
    ServicePorts,
    Status,
    cluster_config,
)
from mockdcp.protocol._cluster_config import node_ext
from mockdcp.server import MockDcpServer, serve

from ._raw import RawClient

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

FEATURES = (HelloFeature.XERROR, HelloFeature.JSON, HelloFeature.SELECT_BUCKET)
EXTERNAL: dict[str, Any] = {
    "external_host": "localhost",
    "external_kv_port": 32768,
    "external_http_port": 32769,
}


@pytest.fixture
async def mapped() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 16, seed=9, clock=time.time)
    # the plain ports mapped only (no TLS: its ports would need mappings of their own)
    async with serve(port=0, http_port=0, bucket_obj=bucket, tls=False, **EXTERNAL) as server:
        yield server


async def _opened(server: MockDcpServer) -> RawClient:
    c = await RawClient.connect(server.kv_port)
    await c.call(Hello(opaque=c.next_opaque(), agent=b"alt", features=FEATURES))
    auth = b"\0Administrator\0password"
    await c.call(SaslAuth(opaque=c.next_opaque(), mechanism="PLAIN", payload=auth))
    assert (await c.call(SelectBucket(opaque=c.next_opaque(), bucket="default"))).status == 0
    return c


def _external(config: dict[str, Any]) -> dict[str, Any]:
    (node,) = config["nodesExt"]
    external: dict[str, Any] = node["alternateAddresses"]["external"]
    return external


# -- the config's shape ---------------------------------------------------------------------


def test_without_an_alternate_address_the_config_has_none() -> None:
    config = cluster_config(
        bucket="b", bucket_uuid="u", host="h", kv_port=1, http_port=2, num_vbuckets=4, rev=1
    )
    assert config["nodesExt"] == [
        {"hostname": "h", "thisNode": True, "services": {"kv": 1, "mgmt": 2}}
    ]


def test_a_node_entry_maps_every_port_it_has_and_keeps_its_own_for_the_rest() -> None:
    own = ServicePorts(kv=11210, mgmt=8091, kv_ssl=11207, mgmt_ssl=18091)
    network = NodeNetwork(
        kv_ssl=11207,
        mgmt_ssl=18091,
        alternate={"external": AlternateAddress(hostname="ext", kv=32768, kv_ssl=32770)},
    )
    entry = node_ext("10.0.0.5", own, network, this_node=False)
    assert entry == {
        "hostname": "10.0.0.5",
        "services": {"kv": 11210, "mgmt": 8091, "kvSSL": 11207, "mgmtSSL": 18091},
        "alternateAddresses": {
            "external": {
                "hostname": "ext",
                "ports": {"kv": 32768, "mgmt": 8091, "kvSSL": 32770, "mgmtSSL": 18091},
            }
        },
    }


def test_an_alternate_host_alone_has_no_ports_and_tls_ports_need_tls() -> None:
    plain = ServicePorts(kv=1, mgmt=2)
    assert AlternateAddress(hostname="ext").as_json(plain) == {"hostname": "ext"}
    mapped = AlternateAddress(hostname="ext", kv=5, kv_ssl=6, mgmt_ssl=7).as_json(plain)
    assert mapped == {"hostname": "ext", "ports": {"kv": 5, "mgmt": 2}}


# -- every config the node sends ---------------------------------------------------------------


async def test_cccp_config_carries_the_external_address(mapped: MockDcpServer) -> None:
    c = await _opened(mapped)
    r = await c.call(GetClusterConfig(opaque=c.next_opaque()))
    config = json.loads(r.value)
    assert config["nodesExt"][0]["hostname"] == "127.0.0.1"
    assert config["nodesExt"][0]["services"] == {"kv": mapped.kv_port, "mgmt": mapped.http_port}
    assert _external(config) == {"hostname": "localhost", "ports": {"kv": 32768, "mgmt": 32769}}


async def test_not_my_vbucket_config_carries_the_external_address(mapped: MockDcpServer) -> None:
    c = await _opened(mapped)
    r = await c.call(DcpOpen(opaque=c.next_opaque(), name=b"alt", flags=int(DcpOpenFlag.PRODUCER)))
    assert r.status == Status.SUCCESS
    request = DcpStreamRequest(
        opaque=c.next_opaque(),
        vbucket=999,
        flags=0,
        start_seqno=0,
        end_seqno=0xFFFFFFFFFFFFFFFF,
        vbucket_uuid=0,
        snap_start_seqno=0,
        snap_end_seqno=0,
    )
    r = await c.call(request)
    assert r.status == Status.NOT_MY_VBUCKET
    assert _external(json.loads(r.value))["ports"]["kv"] == 32768


async def test_http_configs_carry_the_external_address(mapped: MockDcpServer) -> None:
    async with httpx.AsyncClient(
        base_url=mapped.http_url, auth=("Administrator", "password"), timeout=10
    ) as http:
        terse = (await http.get("/pools/default/b/default")).json()
        info = (await http.get("/pools/default/buckets/default")).json()
        pools = (await http.get("/pools/default")).json()
    assert _external(terse) == _external(info)
    assert _external(terse)["ports"]["mgmt"] == 32769
    assert pools["nodes"][0]["alternateAddresses"]["external"]["hostname"] == "localhost"


async def test_with_tls_the_external_address_maps_the_tls_ports(tmp_path: Path) -> None:
    options: dict[str, Any] = {"tls": True, "tls_port": 0, "https_port": 0, "tls_dir": tmp_path}
    async with serve(
        port=0,
        http_port=0,
        vbuckets=4,
        external_host="cb.example.com",
        external_kv_tls_port=32770,
        external_https_port=32771,
        **options,
    ) as server:
        c = await _opened(server)
        config = json.loads((await c.call(GetClusterConfig(opaque=c.next_opaque()))).value)
    assert _external(config) == {
        "hostname": "cb.example.com",
        "ports": {
            "kv": server.kv_port,
            "mgmt": server.http_port,
            "kvSSL": 32770,
            "mgmtSSL": 32771,
        },
    }


def test_serve_reads_the_external_address_from_the_environment(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "MOCKDCP_EXTERNAL_HOST": "docker-host",
        "MOCKDCP_EXTERNAL_KV_PORT": "41000",
        "MOCKDCP_EXTERNAL_HTTP_PORT": "41001",
        "MOCKDCP_EXTERNAL_KV_TLS_PORT": "41002",
        "MOCKDCP_EXTERNAL_HTTPS_PORT": "41003",
        "MOCKDCP_TLS": "1",
        "MOCKDCP_TLS_DIR": str(tmp_path),
    }
    args = ["--port", "0", "--http-port", "0", "--tls-port", "0", "--https-port", "0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mockdcp", "serve", *args, "--docs", "0", "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        auth = base64.b64encode(b"Administrator:password").decode()
        request = urllib.request.Request(
            ready["http"] + "/pools/default/b/default", headers={"Authorization": f"Basic {auth}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            config = json.loads(response.read())
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert ready["ca_file"] == str(tmp_path / "ca.pem")
    assert _external(config) == {
        "hostname": "docker-host",
        "ports": {"kv": 41000, "mgmt": 41001, "kvSSL": 41002, "mgmtSSL": 41003},
    }
