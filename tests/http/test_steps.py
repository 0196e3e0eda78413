from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import pytest
import trio

from mockdcp.client import DcpConsumer
from mockdcp.server import _control

from ..integration._raw import wait_until

if TYPE_CHECKING:
    import httpx

    from mockdcp.server import MockDcpServer

SET = {"set": {"key": "user::1", "value": {"name": "Ada"}}}


def _highs(server: MockDcpServer) -> list[int]:
    return [vb.high_seqno for vb in server.bucket.vbuckets]


async def test_posted_steps_are_applied_before_the_reply(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    r = await http.post("/mock/steps", json=[SET, {"persist": {}}])
    assert r.status_code == 200
    assert r.json()["applied"] == 2
    item = server.bucket.oracle()[(0, b"user::1")]
    assert json.loads(item.value) == {"name": "Ada"}
    vb = (await http.get("/mock/state")).json()["vbuckets"][item.vbucket]
    assert vb["high_seqno"] == vb["persisted_seqno"] == item.seqno
    metrics = (await http.get("/metrics")).text
    assert 'mockdcp_steps_applied_total{bucket="default"} 2' in metrics.splitlines()


async def test_a_list_with_one_bad_step_is_422_naming_it_and_changes_nothing(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    r = await http.post("/mock/steps", json=[SET, {"persist": {"upto": "lots"}}])
    assert r.status_code == 422
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["status"] == 422
    [error] = problem["errors"]
    assert (error["step"], error["field"]) == (1, "persist.upto")
    assert error["pointer"] == "/1/persist/upto"
    assert server.bucket.oracle() == {}
    assert _highs(server) == [0] * 8
    assert server.runner.progress.applied == 0


async def test_an_unknown_step_is_422_listing_the_known_ones(http: httpx.AsyncClient) -> None:
    r = await http.post("/mock/steps", json=[{"explode": {}}])
    assert r.status_code == 422
    assert r.json()["errors"][0]["step"] == 0
    assert "persist" in r.json()["errors"][0]["detail"]


async def test_a_step_the_bucket_cannot_take_is_422_before_anything_runs(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    r = await http.post("/mock/steps", json=[SET, {"failover": {"vbuckets": 99}}])
    assert r.status_code == 422
    assert r.json()["errors"][0]["step"] == 1
    assert server.bucket.oracle() == {}


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (b"{not json", "application/json", 400),
        (b"\xff\xfe", "application/json", 400),
        (b"[]", "text/csv", 415),
        (b'{"set": {}}', "application/json", 422),
        (b"42", "application/json", 422),
    ],
)
async def test_a_body_that_is_not_a_step_list_gets_its_4xx(
    http: httpx.AsyncClient, server: MockDcpServer, body: bytes, content_type: str, status: int
) -> None:
    r = await http.post("/mock/steps", content=body, headers={"content-type": content_type})
    assert r.status_code == status
    assert r.json()["status"] == status
    assert _highs(server) == [0] * 8


async def _raw_post(server: MockDcpServer, head: bytes, *pieces: bytes) -> bytes:
    """Send a request head and body pieces on a raw socket; the server's first reply
    bytes (an HTTP client would stop sending, and warn, when the reply comes first)."""
    stream = await trio.open_tcp_stream("127.0.0.1", server.http_port)
    try:
        await stream.send_all(b"POST /mock/steps HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n")
        with trio.fail_after(5):
            for piece in pieces:
                await stream.send_all(piece)
            return await stream.receive_some(65536)
    finally:
        await stream.aclose()


async def test_a_huge_body_is_413_before_it_is_read(server: MockDcpServer) -> None:
    size = _control.MAX_BODY + 1
    head = f"Content-Type: application/json\r\nContent-Length: {size}\r\n".encode()
    reply = await _raw_post(server, head, b"[" * 1000)
    assert reply.startswith(b"HTTP/1.1 413")
    assert _highs(server) == [0] * 8


async def test_a_huge_chunked_body_is_cut_at_the_limit(
    server: MockDcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_control, "MAX_BODY", 1000)
    head = b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
    chunk = b"64\r\n" + b" " * 100 + b"\r\n"  # 20 x 100 bytes, no end: cut at 1000
    reply = await _raw_post(server, head, *[chunk] * 20)
    assert reply.startswith(b"HTTP/1.1 413")
    assert _highs(server) == [0] * 8


async def test_a_body_that_never_arrives_is_408(
    server: MockDcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_control, "BODY_TIMEOUT", 0.3)
    head = b"Content-Type: application/json\r\nContent-Length: 100\r\n"
    reply = await _raw_post(server, head, b"[{")
    assert reply.startswith(b"HTTP/1.1 408")
    assert _highs(server) == [0] * 8


async def test_bad_requests_leave_a_streaming_consumer_untouched(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    consumer = DcpConsumer(server.host, server.kv_port, vbuckets=range(8), reconnect=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await http.post("/mock/steps", json=[SET])
        with trio.fail_after(10):
            await wait_until(lambda: consumer.state.items >= 1)
        for body in (b"nope", b"[{}]", b'[{"set": {"key": 1}}]'):
            r = await http.post(
                "/mock/steps", content=body, headers={"content-type": "application/json"}
            )
            assert 400 <= r.status_code < 500
        assert (await http.get("/mock/nosuch")).status_code == 404
        await http.post("/mock/steps", json=[{"set": {"key": "user::2", "value": "x"}}])
        with trio.fail_after(10):
            await wait_until(lambda: consumer.state.items >= 2)
        [conn] = (await http.get("/mock/state")).json()["connections"]
        nursery.cancel_scope.cancel()
    assert consumer.connects == 1
    assert conn["state"] == "dcp_open"
    assert consumer.state.violations == []


async def test_a_wait_step_holds_the_reply_until_it_is_met(http: httpx.AsyncClient) -> None:
    start = time.monotonic()
    r = await http.post("/mock/steps", json=[{"wait": {"seconds": 0.3}}, SET])
    assert r.status_code == 200
    assert time.monotonic() - start >= 0.3


async def test_a_wait_that_times_out_is_409_and_says_how_far_it_got(
    http: httpx.AsyncClient,
) -> None:
    wait = {"wait": {"consumer": {"connections": 1}, "timeout": "200ms"}}
    r = await http.post("/mock/steps", json=[SET, wait, SET])
    assert r.status_code == 409
    problem = r.json()
    assert (problem["applied"], problem["failed_step"]) == (1, 1)


async def test_expectations_report_each_expect_step(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    assert (await http.get("/mock/expectations")).json() == {"expectations": [], "passed": True}
    expect = {"expect": {"noops_answered": 1, "within": "100ms", "name": "noops"}}
    r = await http.post("/mock/steps", json=[expect])
    assert r.status_code in (200, 409)
    body = (await http.get("/mock/expectations")).json()
    assert body["passed"] is False
    [result] = body["expectations"]
    assert (result["name"], result["passed"]) == ("noops", False)
    assert body["expectations"] == [e.as_dict() for e in server.expectations()]


async def test_oracle_rows_hold_every_live_document(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    server.bucket.set("bin", b"\xff\x00")
    await http.post("/mock/steps", json=[SET, {"set": {"key": "gone", "value": "x"}}])
    await http.post("/mock/steps", json=[{"delete": {"key": "gone"}}])
    rows = (await http.get("/mock/oracle")).json()["rows"]
    assert [r["key"] for r in rows] == ["bin", "user::1"]
    binary, user = rows
    assert binary["value_base64"] == "/wA="
    assert "value" not in binary
    assert json.loads(user["value"]) == {"name": "Ada"}
    item = server.bucket.oracle()[(0, b"user::1")]
    assert (user["scope"], user["collection"]) == ("_default", "_default")
    assert (user["seqno"], user["vbucket"], user["rev"]) == (
        item.seqno,
        item.vbucket,
        item.rev_seqno,
    )
    assert user["cas"] == item.cas


#: its wait outlasts the test's three requests made meanwhile, on a loaded machine too
#: (0.2 s did not, under load 8: the second POST found the scenario over)
SCENARIO = """
name: posted
steps:
  - set: {key: a, value: {n: 1}}
  - wait: {seconds: 2}
  - set: {key: b, value: {n: 2}}
"""


async def test_a_posted_scenario_runs_in_the_background(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    r = await http.post(
        "/mock/scenario", content=SCENARIO, headers={"content-type": "application/yaml"}
    )
    assert r.status_code == 202
    assert r.json() == {"scenario": "posted", "steps": 3, "state": "/mock/state"}
    again = await http.post(
        "/mock/scenario", content=SCENARIO, headers={"content-type": "application/yaml"}
    )
    assert again.status_code == 409
    # steps posted meanwhile do not wait for the scenario
    assert (await http.post("/mock/steps", json=[SET])).status_code == 200
    assert not server.runner.progress.finished
    with trio.fail_after(10):
        await wait_until(lambda: server.runner.progress.finished)
    assert {k for _, k in server.bucket.oracle()} == {b"a", b"b", b"user::1"}
    state = (await http.get("/mock/state")).json()
    assert state["scenario"]["applied"] == 4


async def test_a_scenario_for_an_unknown_server_version_is_422_and_nothing_runs(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    text = "name: v\nbucket: {server_version: '6.6'}\nsteps:\n  - set: {key: a, value: 1}\n"
    r = await http.post("/mock/scenario", content=text, headers={"content-type": "text/yaml"})
    assert r.status_code == 422
    assert "unknown server version '6.6'" in r.text
    assert server.bucket.oracle() == {}


async def test_a_bad_scenario_is_422_with_the_line(
    http: httpx.AsyncClient, server: MockDcpServer
) -> None:
    text = "name: bad\nsteps:\n  - set: {key: a, value: 1}\n  - persist: {upto: x}\n"
    r = await http.post("/mock/scenario", content=text, headers={"content-type": "text/yaml"})
    assert r.status_code == 422
    errors = r.json()["errors"]
    assert any(e["step"] == 1 and e.get("line") == 4 for e in errors), errors
    assert server.bucket.oracle() == {}
    r = await http.post("/mock/scenario", content="a: [", headers={"content-type": "text/yaml"})
    assert r.status_code == 422


async def test_a_persistence_step_on_an_ephemeral_bucket_is_422_and_nothing_applied() -> None:
    import httpx

    from mockdcp.model import Bucket
    from mockdcp.server import serve

    bucket = Bucket("cache", 4, clock=time.time, bucket_type="ephemeral")
    async with (
        serve(port=0, http_port=0, bucket_obj=bucket) as srv,
        httpx.AsyncClient(
            base_url=srv.http_url, auth=("Administrator", "password"), timeout=10
        ) as client,
    ):
        r = await client.post("/mock/steps", json=[SET, {"persistence": {"paused": True}}])
        assert r.status_code == 422
        [error] = r.json()["errors"]
        assert error["step"] == 1
        assert "persistence: the bucket is ephemeral" in error["detail"]
        assert srv.bucket.oracle() == {}
        assert not srv.bucket.flusher.paused
        assert srv.bucket.flusher.interval is None  # no flusher at all
        r = await client.post("/mock/steps", json=[SET, {"ephemeral_purge": {"age": 0}}])
        assert r.status_code == 200
        info = (await client.get("/pools/default/buckets/cache")).json()
        assert (info["bucketType"], info["evictionPolicy"]) == ("ephemeral", "noEviction")
        assert "storageBackend" not in info
        assert info["purgeInterval"] == 1
