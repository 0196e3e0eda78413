from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
import trio

from mockdcp.client import ConsumerState, DcpConsumer
from mockdcp.model import Bucket
from mockdcp.protocol import SystemEvent, SystemEventType
from mockdcp.server import serve

from ._raw import wait_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from mockdcp.server import MockDcpServer


@pytest.fixture
async def server() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket(
        "default",
        16,
        seed=3,
        clock=time.time,
        collections={"inventory": ["hotel", {"name": "airline", "maxTTL": 3600}]},
    )
    async with serve(port=0, http_port=0, bucket_obj=bucket) as srv:
        yield srv


def _expected(server: MockDcpServer, only: int | None = None) -> dict[tuple[int, bytes], bytes]:
    return {k: it.value for k, it in server.bucket.oracle().items() if only is None or k[0] == only}


def _got(state: ConsumerState) -> dict[tuple[int, bytes], bytes]:
    return {k: v.value for k, v in state.documents().items()}


async def _until(predicate: Callable[[], bool], seconds: float = 15) -> None:
    with trio.fail_after(seconds):
        await wait_until(predicate)


def _write(bucket: Bucket, prefix: str) -> None:
    for i in range(40):
        bucket.set(f"{prefix}::d{i}", b'{"c":0}')
        bucket.set(f"{prefix}::h{i}", b'{"c":8}', collection_id=8)
        bucket.set(f"{prefix}::a{i}", b'{"c":9}', collection_id=9)


async def test_collection_aware_consumer_sees_the_manifest_and_converges(
    server: MockDcpServer,
) -> None:
    bucket = server.bucket
    _write(bucket, "one")
    events: list[SystemEvent] = []

    def on_event(vb: int, ev: object) -> None:
        if isinstance(ev, SystemEvent):
            events.append(ev)

    state = ConsumerState()
    consumer = DcpConsumer(
        server.host, server.kv_port, vbuckets=range(16), state=state, on_event=on_event
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: _got(state) == _expected(server))
        bucket.drop_collection("inventory", "hotel")
        bucket.create_collection("inventory", "rail")
        for i in range(20):
            bucket.set(f"r{i}", b"{}", collection_id=10)
        await _until(lambda: _got(state) == _expected(server))
        bucket.flush_collection("inventory", "airline")
        bucket.set("after-flush", b"{}", collection_id=9)
        await _until(lambda: _got(state) == _expected(server))
        nursery.cancel_scope.cancel()
    assert state.violations == []
    assert not any(k[0] == 8 for k in _got(state))
    assert [k for k in _got(state) if k[0] == 9] == [(9, b"after-flush")]
    per_vb = [e for e in events if e.vbucket == 0]
    assert [(e.event, e.by_seqno <= 3) for e in per_vb[:3]] == [
        (SystemEventType.CREATE_SCOPE, True),
        (SystemEventType.BEGIN_COLLECTION, True),
        (SystemEventType.BEGIN_COLLECTION, True),
    ]
    assert [e.event for e in per_vb[3:]] == [
        SystemEventType.END_COLLECTION,
        SystemEventType.BEGIN_COLLECTION,
        SystemEventType.BEGIN_COLLECTION,  # the flush of airline
    ]
    assert per_vb[-1].data().manifest_uid == 6


async def test_legacy_consumer_gets_the_default_collection_and_no_system_event(
    server: MockDcpServer,
) -> None:
    bucket = server.bucket
    _write(bucket, "one")
    seen: list[object] = []
    state = ConsumerState()
    consumer = DcpConsumer(
        server.host,
        server.kv_port,
        vbuckets=range(16),
        state=state,
        collections=False,
        on_event=lambda vb, ev: seen.append(ev),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: _got(state) == _expected(server, only=0))
        bucket.create_scope("more")
        bucket.set("late", b"{}")
        await _until(lambda: _got(state) == _expected(server, only=0))
        nursery.cancel_scope.cancel()
    assert state.violations == []
    assert not any(isinstance(ev, SystemEvent) for ev in seen)
    assert state.system_events == 0


async def test_a_scenarios_bucket_declares_its_collections(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "c.yaml"
    path.write_text(
        "name: c\nseed: 4\n"
        "bucket: {vbuckets: 4, collections: {inventory: [hotel, airline]}}\n"
        "steps:\n  - generate: {docs: 10, collection: inventory.airline}\n"
    )
    async with serve(port=0, http_port=0, scenario=path) as srv:
        assert srv.bucket.manifest.uid == 3
        assert all(vb.high_seqno >= 3 for vb in srv.bucket.vbuckets)
        assert {cid for cid, _ in srv.oracle()} == {9}
        assert len(srv.oracle()) == 10
