from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from mockdcp.client import ConsumerState, DcpConsumer
from mockdcp.protocol import SnapshotFlag, SnapshotMarker, StreamEndReason

from ._raw import wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.server import MockDcpServer


def _expected(server: MockDcpServer) -> dict[tuple[int, bytes], bytes]:
    return {k: it.value for k, it in server.bucket.oracle().items()}


def _got(state: ConsumerState) -> dict[tuple[int, bytes], bytes]:
    return {k: v.value for k, v in state.documents().items()}


async def _until(predicate: Callable[[], bool], seconds: float = 15) -> None:
    with trio.fail_after(seconds):
        await wait_until(predicate)


async def test_consumer_rolls_back_after_failover_and_converges(server: MockDcpServer) -> None:
    server.bucket.flusher.pause()  # the b:: writes stay unpersisted until the failover
    for i in range(400):
        server.bucket.set(f"a::{i}", f'{{"v":{i}}}')
    server.bucket.persist()
    for i in range(200):
        server.bucket.set(f"b::{i}", b'{"lost":true}')
    state = ConsumerState()
    consumer = DcpConsumer(server.host, server.kv_port, vbuckets=range(64), state=state)
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: state.items >= 600)
        server.bucket.failover()  # everything unpersisted is lost: the b:: keys
        await _until(lambda: len(state.rollbacks) > 0 and _got(state) == _expected(server))
        for i in range(50):
            server.bucket.set(f"c::{i}", b'{"new":true}')
        await _until(lambda: _got(state) == _expected(server))
        nursery.cancel_scope.cancel()
    assert state.violations == []
    assert not any(k[1].startswith(b"b::") for k in _got(state))
    assert any(seqno > 0 for _, seqno in state.rollbacks)


async def test_consumer_resumes_across_a_restart(server: MockDcpServer) -> None:
    for i in range(300):
        server.bucket.set(f"r::{i}", b'{"v":1}')
    server.bucket.persist()
    state = ConsumerState()
    consumer = DcpConsumer(server.host, server.kv_port, vbuckets=range(64), state=state)
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        await _until(lambda: state.items >= 300)
        server.restart()
        for i in range(100):
            server.bucket.set(f"after::{i}", b'{"v":2}')
        await _until(lambda: _got(state) == _expected(server))
        nursery.cancel_scope.cancel()
    assert consumer.connects >= 2
    assert state.violations == []
    assert state.rollbacks == []  # everything it had was persisted: no rollback needed


async def test_drop_cursor_switches_a_live_stream_to_disk_and_back(server: MockDcpServer) -> None:
    bucket = server.bucket
    markers: list[tuple[int, SnapshotMarker]] = []

    def on_event(vb: int, ev: object) -> None:
        if isinstance(ev, SnapshotMarker):
            markers.append((vb, ev))

    state = ConsumerState()
    consumer = DcpConsumer(
        server.host, server.kv_port, vbuckets=range(64), state=state, on_event=on_event
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        for i in range(300):
            bucket.set(f"m::{i}", b'{"v":1}')
        await _until(lambda: state.items >= 300)
        for i in range(300):
            bucket.set(f"m::{i}", b'{"v":2}')  # dedup target: rewritten keys
        bucket.persist()
        bucket.checkpoint()
        dropped = server.drop_cursor()
        assert dropped
        for i in range(100):
            bucket.set(f"n::{i}", b'{"v":3}')
        await _until(lambda: _got(state) == _expected(server))
        nursery.cancel_scope.cancel()
    assert state.violations == []
    disk = [m for _, m in markers if m.flags & SnapshotFlag.DISK]
    assert disk, "a disk snapshot follows the cursor drop"
    assert all(m.flags & SnapshotFlag.CHECKPOINT for m in disk)
    assert not [e for e in state.stream_ends if e[1] != StreamEndReason.OK]


async def test_purge_below_consumer_position_forces_rollback_to_zero(server: MockDcpServer) -> None:
    bucket = server.bucket
    for i in range(200):
        bucket.set(f"p::{i}", b"{}")
    state = ConsumerState()
    consumer = DcpConsumer(
        server.host, server.kv_port, vbuckets=range(64), state=state, reconnect=False
    )
    await _run_until(consumer, lambda: state.items >= 200)
    for i in range(0, 200, 2):
        bucket.delete(f"p::{i}")
    for i in range(200, 260):
        bucket.set(f"p::{i}", b"{}")
    bucket.persist()
    bucket.purge()
    second = DcpConsumer(server.host, server.kv_port, vbuckets=range(64), state=state)
    await _run_until(second, lambda: _got(state) == _expected(server))
    assert any(seqno == 0 for _, seqno in state.rollbacks)
    assert state.violations == []


async def _run_until(consumer: DcpConsumer, predicate: Callable[[], bool]) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer.run)
        await _until(predicate)
        nursery.cancel_scope.cancel()
