from __future__ import annotations

import time
from typing import TYPE_CHECKING

import trio

from mockdcp.client import DcpConsumer
from mockdcp.model import Bucket
from mockdcp.protocol import (
    DcpBufferAck,
    DcpCloseStream,
    DcpControl,
    Magic,
    Opcode,
    Response,
    Status,
    StreamEndReason,
)
from mockdcp.server import serve

from ._raw import wait_until
from .test_bad_input import _opened

if TYPE_CHECKING:
    from mockdcp.protocol import Frame
    from mockdcp.server import MockDcpServer

    from ._raw import RawClient


async def _drain(c: RawClient, seconds: float) -> list[Frame]:
    frames = []
    with trio.move_on_after(seconds):
        while True:
            frames.append(await c.frame(seconds + 1))
    return frames


async def test_flow_control_stops_at_the_window_and_resumes_on_ack(server: MockDcpServer) -> None:
    for i in range(2000):
        server.bucket.set(f"fc::{i}", b'{"pad":"' + b"x" * 200 + b'"}')
    c = await _opened(server)
    assert (
        await c.call(DcpControl(opaque=c.next_opaque(), key="connection_buffer_size", value="4096"))
    ).status == 0
    for v in range(64):
        assert (await c.call(c.stream_request(vb=v))).status == Status.SUCCESS
    frames = c.skipped + await _drain(c, 0.5)
    sent = sum(f.size for f in frames if f.magic is Magic.REQUEST)
    # a message may start while outstanding < window: overshoot by at most one message
    assert 4096 <= sent < 4096 + 400
    await c.send(DcpBufferAck(opaque=0, nbytes=sent))
    more = await _drain(c, 0.5)
    assert sum(f.size for f in more) >= 4096


async def test_consumer_that_stops_acking_stalls_only_its_own_connection(
    server: MockDcpServer,
) -> None:
    for i in range(500):
        server.bucket.set(f"s::{i}", b'{"v":1}')
    stalled = await _opened(server)
    await stalled.call(
        DcpControl(opaque=stalled.next_opaque(), key="connection_buffer_size", value="1000")
    )
    for v in range(64):
        await stalled.call(stalled.stream_request(vb=v))
    healthy = DcpConsumer(server.host, server.kv_port, vbuckets=range(64), buffer_size=2000)
    async with trio.open_nursery() as nursery:
        await nursery.start(healthy.run)
        with trio.fail_after(10):
            await wait_until(lambda: healthy.state.items >= 500)
        nursery.cancel_scope.cancel()
    stats = {s.name: s for s in server.connections()}
    assert stats["raw"].unacked_bytes >= 1000
    assert healthy.state.violations == []


async def test_noop_sent_at_interval_and_silent_consumer_disconnected() -> None:
    bucket = Bucket("default", 4, seed=1, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket, idle_timeout=1.0) as server:
        c = await _opened(server)
        await c.call(DcpControl(opaque=c.next_opaque(), key="enable_noop", value="true"))
        await c.call(DcpControl(opaque=c.next_opaque(), key="set_noop_interval", value="0.2"))
        noop = await c.frame(2)
        assert (noop.magic, noop.opcode, noop.opaque) == (
            Magic.REQUEST,
            Opcode.DCP_NOOP,
            10_000_001,
        )
        # unanswered: no second noop; after the idle timeout the producer disconnects
        assert await c.closed_by_server(3)


async def test_answered_noops_keep_the_connection_and_count_up() -> None:
    bucket = Bucket("default", 4, seed=1, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket, idle_timeout=1.0) as server:
        c = await _opened(server)
        await c.call(DcpControl(opaque=c.next_opaque(), key="enable_noop", value="true"))
        await c.call(DcpControl(opaque=c.next_opaque(), key="set_noop_interval", value="0.2"))
        opaques = []
        for _ in range(8):
            noop = await c.frame(2)
            opaques.append(noop.opaque)
            await c.send(
                Response(opcode=Opcode.DCP_NOOP, status=Status.SUCCESS, opaque=noop.opaque)
            )
        assert opaques == list(range(10_000_001, 10_000_009))


async def test_close_stream_with_stream_end_control_sends_closed(server: MockDcpServer) -> None:
    c = await _opened(server)
    await c.call(
        DcpControl(
            opaque=c.next_opaque(), key="send_stream_end_on_client_close_stream", value="true"
        )
    )
    req = c.stream_request(vb=5)
    assert (await c.call(req)).status == Status.SUCCESS
    r = await c.call(DcpCloseStream(opaque=c.next_opaque(), vbucket=5))
    assert r.status == Status.SUCCESS
    end = await c.frame()
    assert (end.opcode, end.opaque, int.from_bytes(end.extras, "big")) == (
        Opcode.DCP_STREAM_END,
        req.opaque,
        StreamEndReason.CLOSED,
    )
    assert (
        await c.call(DcpCloseStream(opaque=c.next_opaque(), vbucket=5))
    ).status == Status.KEY_ENOENT
    assert (await c.call(c.stream_request(vb=5))).status == Status.SUCCESS


async def test_close_stream_without_control_sends_no_stream_end(server: MockDcpServer) -> None:
    c = await _opened(server)
    await c.call(c.stream_request(vb=6))
    assert (
        await c.call(DcpCloseStream(opaque=c.next_opaque(), vbucket=6))
    ).status == Status.SUCCESS
    assert [f for f in await _drain(c, 0.3) if f.opcode == Opcode.DCP_STREAM_END] == []


async def test_stream_to_end_seqno_ends_ok(server: MockDcpServer) -> None:
    for i in range(400):
        server.bucket.set(f"e::{i}", b"{}")
    vb = server.bucket.vbucket(0)
    end_seqno = vb.high_seqno
    c = await _opened(server)
    req = c.stream_request(vb=0, end_seqno=end_seqno)
    assert (await c.call(req)).status == Status.SUCCESS
    frames = await _drain(c, 0.5)
    ends = [f for f in frames if f.opcode == Opcode.DCP_STREAM_END]
    assert len(ends) == 1
    assert int.from_bytes(ends[0].extras, "big") == StreamEndReason.OK
    items = [f for f in frames if f.opcode == Opcode.DCP_MUTATION]
    assert len(items) == end_seqno
    assert frames[-1].opcode == Opcode.DCP_STREAM_END
