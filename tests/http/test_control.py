from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx
import pytest
import trio

from mockdcp.client import DcpConsumer
from mockdcp.model import Bucket
from mockdcp.server import serve
from mockdcp.server._control_openapi import openapi_document

from ..integration._raw import wait_until
from .conftest import AUTH

if TYPE_CHECKING:
    from mockdcp.server import MockDcpServer


def _metrics(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


async def _stream_everything(server: MockDcpServer, items: int) -> DcpConsumer:
    for i in range(items):
        server.bucket.set(f"doc::{i}", b'{"v": "' + b"x" * 200 + b'"}')
    consumer = DcpConsumer(
        server.host, server.kv_port, vbuckets=range(8), buffer_size=4096, reconnect=False
    )
    return consumer


async def test_health_is_open_and_ok(anonymous: httpx.AsyncClient) -> None:
    r = await anonymous.get("/mock/health")
    assert (r.status_code, r.json()) == (200, {"status": "ok"})


async def test_state_shows_connections_streams_and_seqnos_while_streaming(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    consumer = await _stream_everything(server, 200)
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        with trio.fail_after(10):
            await wait_until(lambda: consumer.state.items >= 200)
        state = (await http.get("/mock/state")).json()
        nursery.cancel_scope.cancel()
    assert (state["bucket"], state["num_vbuckets"]) == ("default", 8)
    assert (state["kv_port"], state["http_port"]) == (server.kv_port, server.http_port)
    [conn] = state["connections"]
    assert conn["name"] == "mockdcp-consumer"
    assert conn["state"] == "dcp_open"
    assert sorted(s["vbucket"] for s in conn["streams"]) == list(range(8))
    assert state["streams"]["total"] == 8
    assert state["streams"]["by_state"]["in_memory"] == 8
    for vb in state["vbuckets"]:
        assert (
            vb["sent_seqno"] == vb["high_seqno"] == server.bucket.vbucket(vb["vbucket"]).high_seqno
        )
    assert sum(vb["high_seqno"] for vb in state["vbuckets"]) == 200


async def test_state_of_an_idle_server_has_no_connections(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    state = (await http.get("/mock/state")).json()
    assert state == server.state()
    assert state["connections"] == []
    assert state["scenario"] is None  # no step yet
    assert state["streams"]["total"] == 0
    assert all(vb["sent_seqno"] is None for vb in state["vbuckets"])


async def test_metrics_count_frames_bytes_acks_and_outlive_the_connection(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    consumer = await _stream_everything(server, 300)
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        with trio.fail_after(10):
            await wait_until(lambda: consumer.state.items >= 300)
        live = _metrics((await http.get("/metrics")).text)
        nursery.cancel_scope.cancel()
    with trio.fail_after(5):
        await wait_until(lambda: not server.node.connections)
    r = await http.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    after = _metrics(r.text)
    b = '{bucket="default"}'
    assert live[f"mockdcp_connections{b}"] == 1
    assert live['mockdcp_streams{bucket="default",state="in_memory"}'] == 8
    assert after[f"mockdcp_connections{b}"] == 0
    assert after[f"mockdcp_connections_total{b}"] == 1
    assert after[f"mockdcp_streams_opened_total{b}"] == 8
    # 300 mutations and at least one snapshot marker per vbucket
    assert after[f"mockdcp_frames_sent_total{b}"] >= 308
    assert after[f"mockdcp_bytes_sent_total{b}"] > 300 * 200
    assert after[f"mockdcp_acks_total{b}"] >= 1
    assert after[f"mockdcp_acked_bytes_total{b}"] > 0
    assert after[f"mockdcp_rollbacks_total{b}"] == 0
    for name in ("frames_sent", "bytes_sent", "acks"):
        assert after[f"mockdcp_{name}_total{b}"] >= live[f"mockdcp_{name}_total{b}"]


async def test_metrics_count_a_rollback(http: httpx.AsyncClient, server: MockDcpServer) -> None:
    from mockdcp.client import ConsumerState

    server.bucket.flusher.pause()  # "a" stays unpersisted: the failover loses it
    server.bucket.set("a", b"1")
    state = ConsumerState()
    first = DcpConsumer(server.host, server.kv_port, vbuckets=range(8), state=state)
    async with trio.open_nursery() as nursery:
        await nursery.start(first.run)
        with trio.fail_after(10):
            await wait_until(lambda: state.items >= 1)
        nursery.cancel_scope.cancel()
    vb = server.bucket.vbucket_of("a")
    server.bucket.failover(vb)
    second = DcpConsumer(server.host, server.kv_port, vbuckets=[vb], state=state)
    async with trio.open_nursery() as nursery:
        await nursery.start(second.run)
        with trio.fail_after(10):
            await wait_until(lambda: bool(state.rollbacks))
        nursery.cancel_scope.cancel()
    metrics = _metrics((await http.get("/metrics")).text)
    assert metrics['mockdcp_rollbacks_total{bucket="default"}'] >= 1


async def test_metrics_label_each_buckets_series_with_its_name(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    """Every bucket's series, not only the first's, each labelled ``bucket``."""
    from mockdcp.model import BucketSpec

    travel = server.buckets.create(BucketSpec(name="travel"))
    for i in range(5):
        travel.bucket.set(f"t{i}", b"{}")
    await http.post("/mock/steps?bucket=travel", json=[{"set": {"key": "x", "value": {}}}])
    consumer = DcpConsumer(
        server.host, server.kv_port, vbuckets=range(8), bucket="travel", reconnect=False
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        with trio.fail_after(10):
            await wait_until(lambda: consumer.state.items >= 6)
        text = (await http.get("/metrics")).text
        nursery.cancel_scope.cancel()
    metrics = _metrics(text)
    assert metrics['mockdcp_streams_opened_total{bucket="travel"}'] == 8
    assert metrics['mockdcp_streams_opened_total{bucket="default"}'] == 0
    assert metrics['mockdcp_streams{bucket="travel",state="in_memory"}'] == 8
    assert metrics['mockdcp_connections{bucket="travel"}'] == 1
    assert metrics['mockdcp_steps_applied_total{bucket="travel"}'] == 1
    assert metrics['mockdcp_steps_applied_total{bucket="default"}'] == 0
    assert metrics['mockdcp_config_revision{bucket="travel"}'] == travel.config_rev
    assert metrics['mockdcp_nodes{status="active"}'] == 1  # the cluster's: no bucket
    assert not [line for line in text.splitlines() if line.startswith("mockdcp_frames_sent_total ")]


@pytest.mark.parametrize("path", ["/mock/state", "/metrics", "/mock/openapi.json"])
async def test_control_api_is_open_on_loopback(anonymous: httpx.AsyncClient, path: str) -> None:
    assert (await anonymous.get(path)).status_code == 200


@pytest.mark.parametrize("control_open", [False, True])
async def test_control_api_off_loopback_needs_credentials_unless_control_open(
    control_open: bool,
) -> None:
    bucket = Bucket("default", 4, seed=1, clock=time.time)
    async with (
        serve(
            host="0.0.0.0", port=0, http_port=0, bucket_obj=bucket, control_open=control_open
        ) as server,
        httpx.AsyncClient(base_url=server.http_url, timeout=10) as client,
    ):
        assert (await client.get("/mock/health")).status_code == 200
        for path in ("/mock/state", "/metrics", "/mock/openapi.json"):
            r = await client.get(path)
            assert r.status_code == (200 if control_open else 401), path
            assert (await client.get(path, auth=AUTH)).status_code == 200
        assert (await client.get("/pools")).status_code == 401  # the Couchbase rule stays


async def test_an_unknown_route_is_a_404_problem(http: httpx.AsyncClient) -> None:
    r = await http.get("/mock/nosuch")
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["status"] == 404
    assert body["title"] == "Not Found"
    assert "/mock/nosuch" in body["detail"]


async def test_a_wrong_method_is_a_405_problem_naming_the_allowed_ones(
    http: httpx.AsyncClient,
) -> None:
    r = await http.delete("/mock/state")
    assert r.status_code == 405
    assert "GET" in r.headers["allow"]
    assert r.json()["status"] == 405


async def test_the_openapi_document_describes_every_control_route(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    from mockdcp.server._control import ControlApi

    served = (await http.get("/mock/openapi.json")).json()
    assert served == openapi_document()
    assert served["openapi"].startswith("3.1")
    from mockdcp.server._rest_buckets import BucketRest
    from mockdcp.server._rest_rbac import RbacEndpoints

    async with trio.open_nursery() as tasks:
        control = ControlApi(server, tasks)
        routes = (
            control.routes()
            + RbacEndpoints(server.node.users, control.apply_steps, "").routes()
            + BucketRest(server, server.node).routes()  # issue 42 item 6
        )
    for route in routes:
        assert route.methods is not None
        for method in route.methods - {"HEAD"}:
            assert method.lower() in served["paths"][route.path], (method, route.path)


async def test_a_client_that_never_finishes_its_request_is_cut_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mockdcp.server import _http

    monkeypatch.setattr(_http, "READ_TIMEOUT", 0.5)
    monkeypatch.setattr(_http, "KEEP_ALIVE_TIMEOUT", 0.5)
    bucket = Bucket("default", 4, seed=1, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket) as server:
        slow = await trio.open_tcp_stream("127.0.0.1", server.http_port)
        await slow.send_all(b"GET /mock/state HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        try:
            with trio.fail_after(3):
                while await slow.receive_some(1024):
                    pass  # whatever comes (nothing, or a 408), the server then closes
        finally:
            await slow.aclose()
        async with httpx.AsyncClient(base_url=server.http_url) as client:
            assert (await client.get("/mock/health")).status_code == 200


def test_serve_control_open_and_json_logs_from_the_command_line() -> None:
    import json
    import subprocess
    import sys

    argv = [sys.executable, "-m", "mockdcp", "--log-level", "INFO", "serve", "--json"]
    argv += ["--host", "0.0.0.0", "--control-open", "--port", "0", "--http-port", "0"]
    proc = subprocess.Popen(
        [*argv, "--docs", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        ready = json.loads(proc.stdout.readline())
        url = ready["http"]
        assert httpx.get(f"{url}/mock/state", timeout=10).status_code == 200
        assert httpx.get(f"{url}/pools", timeout=10).status_code == 401
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()
    lines = [json.loads(line) for line in proc.stderr.read().splitlines() if line]
    proc.stderr.close()
    assert {"event": "loaded", "docs": 3} in lines
    assert any(row.get("logger") == "mockdcp.http" for row in lines)
