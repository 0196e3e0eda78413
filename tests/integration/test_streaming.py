from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, Unpack

import trio
import trio.lowlevel

from mockdcp.client import ConsumerState, DcpConsumer
from mockdcp.protocol import SnapshotMarker

from ._raw import wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.server import MockDcpServer


class _ConsumerOptions(TypedDict, total=False):
    """The ``DcpConsumer`` keywords these tests vary."""

    mechanism: str
    state: ConsumerState
    on_event: Callable[[int, object], None]


def _load(server: MockDcpServer, n: int, prefix: str = "doc") -> None:
    for i in range(n):
        server.bucket.set(f"{prefix}::{i}", f'{{"i":{i}}}')


async def _stream_until(
    consumer: DcpConsumer, predicate: Callable[[], bool], seconds: float = 20
) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer.run)
        with trio.fail_after(seconds):
            await wait_until(predicate)
        nursery.cancel_scope.cancel()


def _consumer(server: MockDcpServer, **kw: Unpack[_ConsumerOptions]) -> DcpConsumer:
    return DcpConsumer(server.host, server.kv_port, vbuckets=range(64), **kw)


async def test_scram_sha512_consumer_streams_10000_items_once_each_inside_a_snapshot(
    server: MockDcpServer,
) -> None:
    _load(server, 10_000)
    consumer = _consumer(server, mechanism="SCRAM-SHA512")
    await _stream_until(consumer, lambda: consumer.state.items >= 10_000)
    state = consumer.state
    assert state.violations == []
    assert state.items == 10_000
    assert all(len(v) == 1 for v in state.versions.values())
    expected = {(k[0], k[1]): it.value for k, it in server.bucket.oracle().items()}
    assert {k: v.value for k, v in state.documents().items()} == expected


async def test_items_written_while_streaming_reach_the_open_stream(server: MockDcpServer) -> None:
    consumer = _consumer(server)
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        for i in range(500):
            server.bucket.set(f"live::{i}", b'{"live":true}')
            if i % 100 == 0:
                await trio.lowlevel.checkpoint()
        with trio.fail_after(10):
            await wait_until(lambda: consumer.state.items >= 500)
        nursery.cancel_scope.cancel()
    assert consumer.state.violations == []
    assert len(consumer.state.documents()) == 500


async def test_deletions_and_expirations_stream_as_tombstones(server: MockDcpServer) -> None:
    _load(server, 20)
    server.bucket.delete("doc::3")
    server.bucket.expire("doc::4")
    consumer = _consumer(server)
    await _stream_until(consumer, lambda: consumer.state.items >= 20)
    docs = consumer.state.documents()
    assert (0, b"doc::3") not in docs
    assert (0, b"doc::4") not in docs
    assert len(docs) == 18


async def test_consumer_resumes_from_its_position_after_disconnect(server: MockDcpServer) -> None:
    _load(server, 1_000)
    state = ConsumerState()
    first = _consumer(server, state=state)
    await _stream_until(first, lambda: state.items >= 1_000)
    _load(server, 300, prefix="more")
    server.bucket.set("doc::1", b'{"i":"updated"}')
    second = _consumer(server, state=state)
    await _stream_until(second, lambda: state.items >= 1_301)
    assert state.violations == []
    assert state.rollbacks == []
    assert state.items == 1_301
    got = {k: v.value for k, v in state.documents().items()}
    assert got == {k: it.value for k, it in server.bucket.oracle().items()}


async def test_server_disconnect_is_survived_by_reconnecting_consumer(
    server: MockDcpServer,
) -> None:
    _load(server, 200)
    consumer = _consumer(server)
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        with trio.fail_after(10):
            await wait_until(lambda: consumer.state.items >= 200)
        server.disconnect_all()
        _load(server, 100, prefix="after")
        with trio.fail_after(10):
            await wait_until(lambda: consumer.state.items >= 300)
        nursery.cancel_scope.cancel()
    assert consumer.connects >= 2
    assert consumer.state.violations == []
    assert len(consumer.state.documents()) == 300


async def test_first_marker_of_a_stream_from_zero_starts_at_zero(server: MockDcpServer) -> None:
    _load(server, 50)
    markers: list[SnapshotMarker] = []
    consumer = _consumer(
        server,
        on_event=lambda vb, ev: markers.append(ev) if isinstance(ev, SnapshotMarker) else None,
    )
    await _stream_until(consumer, lambda: consumer.state.items >= 50)
    assert markers
    assert all(m.start_seqno == 0 for m in markers)
