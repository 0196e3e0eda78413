from __future__ import annotations

import base64
import gc
import json
import re
import time
from typing import TYPE_CHECKING

import httpx
import pytest
import trio

from mockdcp.model import Bucket
from mockdcp.server import serve
from mockdcp.server._asgi import STREAM_POLL

if TYPE_CHECKING:
    from mockdcp.server import MockDcpServer


async def test_pools_names_a_couchbase_version(http: httpx.AsyncClient) -> None:
    r = await http.get("/pools")
    assert r.status_code == 200
    assert r.json()["implementationVersion"].startswith("8.0.")  # the newest by default
    assert r.json()["pools"][0]["uri"] == "/pools/default"


async def test_pool_default_lists_this_node_with_its_kv_port(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    node = (await http.get("/pools/default")).json()["nodes"][0]
    assert node["hostname"] == f"127.0.0.1:{server.http_port}"
    assert node["ports"]["direct"] == server.kv_port


async def test_terse_config_has_the_vbucket_map_and_both_ports(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    config = (await http.get("/pools/default/b/default")).json()
    # a 7.x node serves and lists its TLS ports always (issue 42: gocbcore's ns_server://
    # mode sizes its endpoints from them)
    assert config["nodesExt"][0]["services"] == {
        "kv": server.kv_port,
        "mgmt": server.http_port,
        "kvSSL": server.tls_port,
        "mgmtSSL": server.https_port,
    }
    assert server.tls_port
    assert server.https_port
    assert len(config["vBucketServerMap"]["vBucketMap"]) == 8


async def test_without_tls_the_config_lists_the_plain_ports_only() -> None:
    async with (
        serve(port=0, http_port=0, vbuckets=4, tls=False) as plain,
        httpx.AsyncClient(base_url=plain.http_url, auth=("Administrator", "password")) as http,
    ):
        config = (await http.get("/pools/default/b/default")).json()
    assert config["nodesExt"][0]["services"] == {"kv": plain.kv_port, "mgmt": plain.http_port}


async def test_config_names_the_host_the_client_addressed(http: httpx.AsyncClient) -> None:
    r = await http.get("/pools/default/b/default", headers={"host": "mock.example:8091"})
    assert r.json()["nodesExt"][0]["hostname"] == "mock.example"
    r = await http.get("/pools/default", headers={"host": "[::1]:8091"})
    assert r.json()["nodes"][0]["hostname"].startswith("::1:")


@pytest.mark.parametrize("path", ["/pools/default/buckets/default", "/pools/default/buckets"])
async def test_bucket_info_is_a_couchstore_membase_bucket(
    http: httpx.AsyncClient, path: str
) -> None:
    info = (await http.get(path)).json()
    info = info[0] if isinstance(info, list) else info
    assert (info["bucketType"], info["storageBackend"]) == ("membase", "couchstore")
    assert info["name"] == "default"


@pytest.mark.parametrize("kind", ["b", "bs", "buckets", "bucketsStreaming"])
async def test_unknown_bucket_is_404(http: httpx.AsyncClient, kind: str) -> None:
    r = await http.get(f"/pools/default/{kind}/nosuch")
    assert r.status_code == 404
    assert r.text == "Requested resource not found.\r\n"


async def test_whoami_names_the_user(http: httpx.AsyncClient) -> None:
    assert (await http.get("/whoami")).json()["id"] == "Administrator"


@pytest.mark.parametrize("path", ["/pools", "/pools/default/b/default", "/whoami"])
async def test_couchbase_endpoints_need_credentials_even_on_loopback(
    anonymous: httpx.AsyncClient, path: str
) -> None:
    r = await anonymous.get(path)
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Basic")
    r = await anonymous.get(path, auth=("Administrator", "wrong"))
    assert r.status_code == 401


async def test_a_trailing_slash_is_ignored(http: httpx.AsyncClient) -> None:
    assert (await http.get("/pools/")).status_code == 200


async def test_head_answers_without_a_body(http: httpx.AsyncClient) -> None:
    r = await http.head("/pools")
    assert r.status_code == 200
    assert r.content == b""


async def test_a_write_method_on_a_config_endpoint_is_405(http: httpx.AsyncClient) -> None:
    r = await http.post("/pools", content=b"{}")
    assert r.status_code == 405
    assert r.headers["content-type"] == "application/problem+json"


async def test_streaming_config_sends_the_config_again_on_a_new_revision(
    server: MockDcpServer,
) -> None:
    # a raw socket: the response never ends, and an HTTP client's body iterator left
    # unfinished warns when it is collected
    auth = base64.b64encode(b"Administrator:password").decode()
    stream = await trio.open_tcp_stream("127.0.0.1", server.http_port)
    request = f"GET /pools/default/bs/default HTTP/1.1\r\nHost: h\r\nAuthorization: Basic {auth}"
    await stream.send_all(request.encode() + b"\r\n\r\n")
    data = b""
    with trio.fail_after(10):
        while data.count(b"\n\n\n\n") < 2:
            data += await stream.receive_some(65536)
            if data.count(b"\n\n\n\n") == 1 and server.node.config_rev == 1:
                server.topology.changed()
    await stream.aclose()
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding: chunked" in head.lower()
    revs = [json.loads(part)["rev"] for part in re.findall(rb"\{.*?\}\n\n\n\n", body, re.S)]
    assert revs == [1, 2]


async def _first_config(port: int) -> trio.SocketStream:
    auth = base64.b64encode(b"Administrator:password").decode()
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    request = f"GET /pools/default/bs/default HTTP/1.1\r\nHost: h\r\nAuthorization: Basic {auth}"
    await stream.send_all(request.encode() + b"\r\n\r\n")
    data = b""
    with trio.fail_after(10):
        while b"\n\n\n\n" not in data:
            data += await stream.receive_some(65536)
    return stream


async def test_streaming_config_ends_cleanly_when_the_client_leaves_or_the_server_stops() -> None:
    bucket = Bucket("default", 4, seed=1, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket) as server:
        leaving = await _first_config(server.http_port)
        await leaving.aclose()
        staying = await _first_config(server.http_port)
        server.topology.changed()
        await trio.sleep(2 * STREAM_POLL)
    await staying.aclose()
    gc.collect()  # anything of the responses left unfinalized would warn now


async def test_a_magma_bucket_reports_its_backend_history_and_version() -> None:
    import httpx

    from mockdcp import ServerError

    async with (
        serve(
            port=0,
            http_port=0,
            vbuckets=8,
            storage="magma",
            history_retention_seconds=600,
            server_version="7.2.4-7070-enterprise",
            docs=0,
        ) as srv,
        httpx.AsyncClient(
            base_url=srv.http_url, auth=("Administrator", "password"), timeout=10
        ) as client,
    ):
        info = (await client.get("/pools/default/buckets/default")).json()
        assert info["storageBackend"] == "magma"
        assert (info["historyRetentionSeconds"], info["historyRetentionBytes"]) == (600, 0)
        assert info["historyRetentionCollectionDefault"] is True
        assert (await client.get("/pools")).json()["implementationVersion"].startswith("7.2.4")
        config = (await client.get("/pools/default/b/default")).json()
        assert "nonDedupedHistory" in config["bucketCapabilities"]
    with pytest.raises(ServerError, match="magma"):
        async with serve(port=0, http_port=0, history_retention_bytes=1 << 30):
            pass


async def test_a_couchstore_bucket_advertises_no_history(http: httpx.AsyncClient) -> None:
    info = (await http.get("/pools/default/buckets/default")).json()
    assert "historyRetentionSeconds" not in info
    config = (await http.get("/pools/default/b/default")).json()
    assert "nonDedupedHistory" not in config["bucketCapabilities"]
