from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest
import trio

from mockdcp.client import ConsumerCore, ConsumerState, DcpConsumer, StreamFilter
from mockdcp.model import Bucket
from mockdcp.protocol import DcpStreamRequest, StreamEnd, StreamEndReason
from mockdcp.server import serve

from ._raw import wait_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from mockdcp.server import MockDcpServer

VBUCKETS = 4
HOTEL, AIRLINE = 8, 9  # inventory.hotel, inventory.airline
INVENTORY = 8


@pytest.fixture
async def server() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket(
        "default",
        VBUCKETS,
        seed=5,
        clock=time.time,
        collections={"inventory": ["hotel", "airline"]},
    )
    for i in range(30):
        bucket.set(f"d{i}", b'{"c":0}')
        bucket.set(f"h{i}", b'{"c":8}', collection_id=HOTEL)
        bucket.set(f"a{i}", b'{"c":9}', collection_id=AIRLINE)
    async with serve(port=0, http_port=0, bucket_obj=bucket) as srv:
        yield srv


class CountingCore(ConsumerCore):
    """The reference consumer's core, counting the stream requests it makes."""

    requests = 0

    def stream_request(self, vb: int, sid: int | None = None) -> DcpStreamRequest:
        self.requests += 1
        return super().stream_request(vb, sid)


class CountingConsumer(DcpConsumer):
    """The reference consumer, counting the stream requests it sends."""

    @property
    def requests(self) -> int:
        assert isinstance(self.core, CountingCore)
        return self.core.requests


def _expected(server: MockDcpServer, *cids: int) -> dict[tuple[int, bytes], bytes]:
    return {k: it.value for k, it in server.bucket.oracle().items() if k[0] in cids}


def _got(state: ConsumerState) -> dict[tuple[int, bytes], bytes]:
    return {k: v.value for k, v in state.documents().items()}


async def _until(predicate: Callable[[], bool], seconds: float = 15) -> None:
    with trio.fail_after(seconds):
        await wait_until(predicate)


def _consumer(server: MockDcpServer, *streams: StreamFilter) -> CountingConsumer:
    core = CountingCore(vbuckets=range(VBUCKETS), streams=streams)
    return CountingConsumer(server.host, server.kv_port, vbuckets=None, core=core)


async def test_a_collection_filter_streams_only_that_collection(server: MockDcpServer) -> None:
    consumer = _consumer(server, StreamFilter(collections=[HOTEL]))
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL))
        server.bucket.set("late", b"{}", collection_id=HOTEL)
        server.bucket.set("other", b"{}", collection_id=AIRLINE)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL))
        nursery.cancel_scope.cancel()
    assert consumer.state.violations == []
    view = consumer.state.manifest(0)
    assert set(view.collections) == {HOTEL}


async def test_two_filtered_streams_per_vbucket_with_stream_ids(server: MockDcpServer) -> None:
    consumer = _consumer(
        server, StreamFilter(collections=[HOTEL], sid=1), StreamFilter(collections=[AIRLINE], sid=2)
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL, AIRLINE))
        nursery.cancel_scope.cancel()
    state = consumer.state
    assert state.violations == []
    by_stream = {(v.sid, k[0]) for k, v in state.documents().items()}
    assert by_stream == {(1, HOTEL), (2, AIRLINE)}
    high = {vb: server.bucket.vbuckets[vb].high_seqno for vb in range(VBUCKETS)}
    # each stream reaches its vbucket's high seqno (SEQNO_ADVANCED or its own items)
    for vb in range(VBUCKETS):
        assert {state.position(vb, sid).seqno for sid in (1, 2)} <= set(range(high[vb] + 1))


async def test_streams_with_stream_ids_resume_each_from_its_own_position(
    server: MockDcpServer,
) -> None:
    consumer = _consumer(
        server, StreamFilter(collections=[HOTEL], sid=1), StreamFilter(scope=INVENTORY, sid=2)
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL, AIRLINE))
        before = {key: pos.seqno for key, pos in consumer.state.positions.items()}
        await server.apply({"disconnect": {}})
        for i in range(10):
            server.bucket.set(f"late-h{i}", b"{}", collection_id=HOTEL)
            server.bucket.set(f"late-a{i}", b"{}", collection_id=AIRLINE)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL, AIRLINE))
        nursery.cancel_scope.cancel()
    state = consumer.state
    assert consumer.connects == 2
    assert state.violations == []
    assert state.rollbacks == []
    # nothing came twice: each stream resumed where it was
    for versions in state.versions.values():
        sids = [v.sid for v in versions]
        assert len(sids) == len(set(sids))
    assert all(state.positions[key].seqno >= seqno for key, seqno in before.items())
    # the two filters overlap on hotel: both streams brought it
    received = {(v.sid, k[0]) for k, versions in state.versions.items() for v in versions}
    assert received == {(1, HOTEL), (2, HOTEL), (2, AIRLINE)}


async def test_a_filter_empty_end_is_not_asked_again(server: MockDcpServer) -> None:
    ends: list[StreamEnd] = []
    consumer = _consumer(server, StreamFilter(collections=[HOTEL]))
    consumer.on_event = lambda vb, ev: ends.append(ev) if isinstance(ev, StreamEnd) else None
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL))
        await server.apply({"end_stream": {"vbuckets": "all", "reason": "filter_empty"}})
        with trio.fail_after(15):
            await consumer.finished.wait()
        server.bucket.set("after", b"{}", collection_id=HOTEL)
        await trio.sleep(0.3)  # long enough for a re-opened stream to deliver it
        nursery.cancel_scope.cancel()
    assert consumer.requests == VBUCKETS
    assert [e.reason for e in ends] == [StreamEndReason.FILTER_EMPTY] * VBUCKETS
    assert (HOTEL, b"after") not in _got(consumer.state)
    assert all(consumer.state.position(vb).ended for vb in range(VBUCKETS))


async def test_dropping_the_filtered_collection_ends_the_stream_for_good(
    server: MockDcpServer,
) -> None:
    consumer = _consumer(server, StreamFilter(collections=[HOTEL]))
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL))
        await server.apply({"drop_collection": {"collection": "inventory.hotel"}})
        with trio.fail_after(15):
            await consumer.finished.wait()
        await trio.sleep(0.2)  # a re-opened stream would be asked for within 50 ms
        nursery.cancel_scope.cancel()
    state = consumer.state
    assert consumer.requests == VBUCKETS
    assert _got(state) == {}  # the drop took the collection's documents with it
    assert {pos.end_reason for pos in state.positions.values()} == {StreamEndReason.FILTER_EMPTY}
    assert all(HOTEL not in state.manifest(vb).collections for vb in range(VBUCKETS))


async def test_a_scope_filter_follows_collections_created_later(server: MockDcpServer) -> None:
    consumer = _consumer(server, StreamFilter(scope=INVENTORY))
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL, AIRLINE))
        rail = server.bucket.create_collection("inventory", "rail")
        for i in range(10):
            server.bucket.set(f"r{i}", b"{}", collection_id=rail)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL, AIRLINE, rail))
        await server.apply({"drop_scope": {"name": "inventory"}})
        with trio.fail_after(15):
            await consumer.finished.wait()
        nursery.cancel_scope.cancel()
    assert consumer.requests == VBUCKETS
    assert consumer.state.violations == []
    assert _got(consumer.state) == {}


@pytest.mark.parametrize("mode", ["true", "true_with_seqno_advanced"])
async def test_an_oso_backfill_converges_and_resumes_from_its_highest_seqno(
    server: MockDcpServer, mode: str
) -> None:
    from mockdcp.protocol import OsoSnapshot, OsoSnapshotFlag

    bucket = server.bucket
    for vb in range(VBUCKETS):  # on disk: the first stream of each vbucket is a backfill
        bucket.checkpoint(vb)
        bucket.persist(vb)
    oso: list[tuple[int, int]] = []
    consumer = _consumer(server, StreamFilter(collections=[HOTEL]))
    consumer.core.extra_controls = [("enable_out_of_order_snapshots", mode)]

    def on_event(vb: int, ev: object) -> None:
        if isinstance(ev, OsoSnapshot):
            oso.append((vb, ev.flags))

    consumer.on_event = on_event
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: len(oso) == 2 * VBUCKETS)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL))
        bucket.set("after-oso", b"{}", collection_id=HOTEL)
        await _until(lambda: _got(consumer.state) == _expected(server, HOTEL))
        nursery.cancel_scope.cancel()
    assert sorted(oso) == sorted(
        (vb, flag)
        for vb in range(VBUCKETS)
        for flag in (OsoSnapshotFlag.START, OsoSnapshotFlag.END)
    )
    assert consumer.state.violations == []
    for vb in range(VBUCKETS):
        pos = consumer.state.position(vb)
        assert pos.snap_start == pos.snap_end == pos.seqno  # a complete snapshot
        assert pos.seqno >= max((v.seqno for v in _versions(consumer.state, vb)), default=0)


def _versions(state: ConsumerState, vb: int) -> list[Any]:
    return [v for vs in state.versions.values() for v in vs if v.vbucket == vb]
