"""Several buckets on one server (issue 42): SELECT_BUCKET picks one, each streams only
its own writes, the config endpoints answer per bucket, and a bucket deleted and made
again closes its connections and comes back with new uuids and seqnos from 0."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx
import pytest
import trio

import mockdcp
from mockdcp.client import ConsumerState, DcpConsumer
from mockdcp.model import Bucket
from mockdcp.protocol import (
    DcpOpen,
    DcpOpenFlag,
    Hello,
    HelloFeature,
    SaslAuth,
    SelectBucket,
    Status,
    decode_failover_log,
    decode_rollback_value,
)
from mockdcp.scenario import Set, StepFailed
from mockdcp.util import ModelError, ServerError

from ._raw import RawClient, wait_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mockdcp.server import MockDcpServer

AUTH = b"\0Administrator\0password"
FEATURES = (HelloFeature.XERROR, HelloFeature.JSON, HelloFeature.SELECT_BUCKET)
BASIC = ("Administrator", "password")


@pytest.fixture
async def two() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 8, seed=3, clock=time.time)
    async with mockdcp.serve(
        port=0, http_port=0, bucket_obj=bucket, buckets=["default", "other"]
    ) as srv:
        yield srv


async def _client(port: int, bucket: str) -> tuple[RawClient, int]:
    c = await RawClient.connect(port)
    await c.call(Hello(opaque=c.next_opaque(), agent=b"buckets", features=FEATURES))
    await c.call(SaslAuth(opaque=c.next_opaque(), mechanism="PLAIN", payload=AUTH))
    status = (await c.call(SelectBucket(opaque=c.next_opaque(), bucket=bucket))).status
    return c, status


async def test_select_bucket_picks_a_bucket_and_each_streams_only_its_own(
    two: MockDcpServer,
) -> None:
    other = two.buckets.first_node("other").bucket
    assert other is not two.bucket
    assert other.num_vbuckets == 8
    for i in range(20):
        two.bucket.set(f"d::{i}", b"{}")
        other.set(f"o::{i}", b"{}")
    got: dict[str, ConsumerState] = {}
    async with trio.open_nursery() as nursery:
        for name in ("default", "other"):
            got[name] = ConsumerState()
            consumer = DcpConsumer(
                two.host, two.kv_port, bucket=name, vbuckets=range(8), state=got[name]
            )
            await nursery.start(consumer.run)
        with trio.fail_after(20):
            await wait_until(lambda: all(s.items >= 20 for s in got.values()))
        nursery.cancel_scope.cancel()
    keys = {name: {k for _, k in s.documents()} for name, s in got.items()}
    assert keys["default"] == {f"d::{i}".encode() for i in range(20)}
    assert keys["other"] == {f"o::{i}".encode() for i in range(20)}
    assert two.oracle("other").rows() != two.oracle().rows()


async def test_select_bucket_of_no_bucket_is_key_enoent_and_dcp_cannot_change_bucket(
    two: MockDcpServer,
) -> None:
    _, status = await _client(two.kv_port, "nope")
    assert status == Status.KEY_ENOENT
    c, status = await _client(two.kv_port, "other")
    assert status == Status.SUCCESS
    r = await c.call(DcpOpen(opaque=c.next_opaque(), name=b"b", flags=int(DcpOpenFlag.PRODUCER)))
    assert r.status == Status.SUCCESS
    # kv_engine select_bucket_executor.cc: "DCP connections cannot change bucket"
    again = await c.call(SelectBucket(opaque=c.next_opaque(), bucket="default"))
    assert again.status == Status.NOT_SUPPORTED
    assert [conn.name for conn in two.buckets.first_node("other").connections.values()] == [b"b"]


async def test_the_config_endpoints_answer_per_bucket(two: MockDcpServer) -> None:
    async with httpx.AsyncClient(base_url=two.http_url, auth=BASIC) as http:
        listed = (await http.get("/pools/default/buckets")).json()
        assert [b["name"] for b in listed] == ["default", "other"]
        for name in ("default", "other"):
            terse = (await http.get(f"/pools/default/b/{name}")).json()
            assert terse["name"] == name
            info = (await http.get(f"/pools/default/buckets/{name}")).json()
            assert info["bucketType"] == "membase"
            assert info["quota"]["rawRAM"] == 100 * 2**20
        uuids = {(await http.get(f"/pools/default/b/{n}")).json()["uuid"] for n in _names(listed)}
        assert len(uuids) == 2
        assert (await http.get("/pools/default/b/nope")).status_code == 404


def _names(listed: list[dict[str, object]]) -> list[str]:
    return [str(b["name"]) for b in listed]


async def test_a_bucket_deleted_under_a_connection_closes_it_and_comes_back_new(
    two: MockDcpServer,
) -> None:
    other = two.buckets.first_node("other")
    for i in range(30):
        other.bucket.set(f"o::{i}", b"{}")
    c, _ = await _client(two.kv_port, "other")
    r = await c.call(DcpOpen(opaque=c.next_opaque(), name=b"b", flags=int(DcpOpenFlag.PRODUCER)))
    assert r.status == Status.SUCCESS
    vb = other.bucket.vbucket_of("o::0")
    old = other.bucket.vbucket(vb)
    high, uuid = old.high_seqno, old.failover.entries[0][0]
    await two.apply({"delete_bucket": {"name": "other"}})
    with trio.fail_after(5):
        await wait_until(lambda: not other.connections)
    assert (await _client(two.kv_port, "other"))[1] == Status.KEY_ENOENT
    await two.apply({"create_bucket": {"name": "other"}})
    fresh = other.bucket.vbucket(vb)
    assert fresh.high_seqno == 0
    assert fresh.failover.entries[0][0] != uuid
    # the consumer's checkpoint lies above the new high seqno: a rollback to 0
    c, status = await _client(two.kv_port, "other")
    assert status == Status.SUCCESS
    r = await c.call(DcpOpen(opaque=c.next_opaque(), name=b"b", flags=int(DcpOpenFlag.PRODUCER)))
    request = c.stream_request(
        vb, start_seqno=high, vbucket_uuid=uuid, snap_start_seqno=high, snap_end_seqno=high
    )
    answer = await c.call(request)
    assert answer.status == Status.ROLLBACK
    assert decode_rollback_value(answer.value) == 0
    assert (
        decode_failover_log((await c.call(c.stream_request(vb))).value)[0][0]
        == fresh.failover.entries[0][0]
    )


async def test_steps_on_a_deleted_bucket_fail_and_bad_bucket_steps_change_nothing(
    two: MockDcpServer,
) -> None:
    with pytest.raises(mockdcp.scenario.ScenarioProblems, match="already exists"):
        await two.apply({"create_bucket": {"name": "other"}})
    with pytest.raises(mockdcp.scenario.ScenarioProblems, match="Bucket name can only"):
        await two.apply({"create_bucket": {"name": "b@d"}})
    with pytest.raises(mockdcp.scenario.ScenarioProblems, match="unknown bucket type"):
        await two.apply({"create_bucket": {"name": "third", "type": "memcached"}})
    with pytest.raises(mockdcp.scenario.ScenarioProblems, match="is deleted by then"):
        await two.apply(
            {"delete_bucket": {"name": "other"}},
            {"set": {"key": "k", "value": "v"}},
            bucket="other",
        )
    assert two.buckets.names == ["default", "other"]
    await two.apply({"delete_bucket": {"name": "other"}})
    with pytest.raises(ModelError, match="no bucket 'other'"):
        await two.apply({"set": {"key": "k", "value": "v"}}, bucket="other")
    failed: list[str] = []

    async def later() -> None:  # checked while the bucket is there, applied after
        try:
            await two.apply({"wait": {"seconds": 0.3}}, Set(key="k", value="v"))
        except StepFailed as exc:
            failed.append(str(exc))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(later)
        await trio.sleep(0.05)
        two.buckets.delete("default")
    assert failed == ["set: bucket 'default' was deleted"]
    await two.apply({"create_bucket": {"name": "default"}})
    await two.apply({"set": {"key": "k", "value": "v"}})
    assert two.bucket.vbucket(two.bucket.vbucket_of("k")).high_seqno == 1


async def test_a_bad_bucket_option_is_a_clear_error_before_anything_listens() -> None:
    with pytest.raises(ServerError, match="unknown bucket type 'memcached'"):
        async with mockdcp.serve(port=0, http_port=0, vbuckets=4, buckets=["a:memcached"]):
            pass
    with pytest.raises(ServerError, match="given twice"):
        async with mockdcp.serve(port=0, http_port=0, vbuckets=4, buckets=["a", "a"]):
            pass


async def test_a_step_with_a_bucket_field_acts_on_that_bucket(two: MockDcpServer) -> None:
    await two.apply(
        {"create_bucket": {"name": "third"}},
        {"generate": {"docs": 10, "bucket": "third"}},
        {"set": {"key": "o", "value": "v", "bucket": "other"}},
        {"persist": {"bucket": "other"}},
    )
    assert len(two.oracle("third").rows()) == 10
    assert [r["key"] for r in two.oracle("other").rows()] == ["o"]
    assert not two.oracle().rows()
    other = two.buckets.first_node("other").bucket
    assert other.vbucket(other.vbucket_of("o")).persisted_seqno == 1
    for steps, problem in (
        ([{"set": {"key": "k", "value": "v", "bucket": "nope"}}], "no bucket 'nope'"),
        ([{"wait": {"seconds": 0, "bucket": "other"}}], "wait takes no bucket field"),
        (
            [
                {"delete_bucket": {"name": "other"}},
                {"set": {"key": "k", "value": "v", "bucket": "other"}},
            ],
            r"no bucket 'other' \(the buckets then: \['default', 'third'\]\)",
        ),
        ([{"delete": {"key": "absent", "bucket": "other"}}], "absent"),
    ):
        with pytest.raises(mockdcp.scenario.ScenarioProblems, match=problem):
            await two.apply(*steps)
    assert two.buckets.names == ["default", "other", "third"]


def test_serve_takes_several_buckets_and_refuses_an_unknown_type_by_name() -> None:
    import json
    import subprocess
    import sys

    command = [sys.executable, "-m", "mockdcp", "serve", "--port", "0", "--http-port", "0"]
    proc = subprocess.Popen(
        [
            *command,
            "--json",
            "--vbuckets",
            "4",
            "--bucket",
            "orders",
            "--bucket",
            "audit:couchbase",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["bucket"] == "orders"
        assert ready["buckets"] == ["orders", "audit"]
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    refused = subprocess.run(
        [*command, "--bucket", "x:memcached"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2
    assert "unknown bucket type 'memcached'" in refused.stderr


async def test_a_deleted_buckets_streaming_config_ends(two: MockDcpServer) -> None:
    async with httpx.AsyncClient(base_url=two.http_url, auth=BASIC) as http:
        chunks: list[bytes] = []
        with trio.fail_after(10):
            async with http.stream("GET", "/pools/default/bs/other") as streamed:
                async for chunk in streamed.aiter_bytes():
                    chunks.append(chunk)
                    if len(chunks) == 1:
                        two.buckets.delete("other")  # the response then ends
    assert chunks[0].endswith(b"\n\n\n\n")
