"""Triggers on consumer progress act between exactly the frames they name, whatever the
batch and piece sizes, and whether the stream reads memory or disk."""

from __future__ import annotations

from typing import TYPE_CHECKING
from unittest import mock

import pytest
import trio

from mockdcp import serve
from mockdcp.producer import _stream
from mockdcp.protocol import Magic, Opcode, Status, stream_frame_seqno
from mockdcp.scenario import ConsumerProgress, Disconnect, Set, Wait

from ._raw import wait_until
from .test_bad_input import _opened

if TYPE_CHECKING:
    from mockdcp.server import MockDcpServer

ITEMS = 2000
WAIT_FOR = 500


async def _stream_until_closed(server: MockDcpServer) -> list[int]:
    """Stream vbucket 0 from zero with a raw client; the seqnos of the items received."""
    c = await _opened(server)
    r = await c.call(c.stream_request())
    assert r.status == Status.SUCCESS
    seqnos: list[int] = []
    try:
        while True:
            frame = await c.frame(10)
            if frame.magic is Magic.REQUEST and frame.opcode == Opcode.DCP_MUTATION:
                seqnos.append(stream_frame_seqno(frame.encode(), 0))
    except (EOFError, trio.BrokenResourceError):
        pass
    return seqnos


@pytest.mark.parametrize("piece_bytes", [1, 256 * 1024], ids=["one-frame-pieces", "256KiB"])
@pytest.mark.parametrize("from_disk", [False, True], ids=["memory", "disk"])
async def test_a_seqno_wait_disconnects_right_after_that_frame(
    piece_bytes: int, from_disk: bool
) -> None:
    with mock.patch.object(_stream, "PIECE_BYTES", piece_bytes):
        async with serve(port=0, http_port=0, vbuckets=1) as server:
            await server.apply(*(Set(key=f"k{i:05d}", value={"i": i}) for i in range(ITEMS)))
            if from_disk:
                server.bucket.persist()
                server.bucket.checkpoint()
                server.drop_cursor()
            async with trio.open_nursery() as nursery:
                received: list[list[int]] = []

                async def consume() -> None:
                    received.append(await _stream_until_closed(server))

                nursery.start_soon(consume)
                await server.apply(
                    Wait(consumer=ConsumerProgress(vbucket=0, seqno=WAIT_FOR), timeout=20),
                    Disconnect(),
                )
    assert received == [list(range(1, WAIT_FOR + 1))]


async def test_a_wait_for_the_high_seqno_of_every_vbucket_sees_every_item() -> None:
    async with serve(port=0, http_port=0, vbuckets=4) as server:
        await server.apply(*(Set(key=f"k{i}", value="v") for i in range(100)))
        async with trio.open_nursery() as nursery:
            from mockdcp.client import DcpConsumer

            consumer = DcpConsumer(server.host, server.kv_port, vbuckets=range(4))
            nursery.start_soon(consumer.run)
            await server.wait(ConsumerProgress(seqno="high"), limit=20)
            # every item is on the wire: the consumer reads them without more writes
            with trio.fail_after(5):
                await wait_until(lambda: consumer.state.items == 100)
            nursery.cancel_scope.cancel()


async def test_a_wait_that_is_never_met_times_out_and_the_server_goes_on() -> None:
    from mockdcp.scenario import StepFailed

    async with serve(port=0, http_port=0, vbuckets=2) as server:
        await server.apply(Set(key="k", value="v"))
        with pytest.raises(StepFailed, match="timed out"):
            await server.wait(ConsumerProgress(connections=1), limit=0.2)
        await server.apply(Set(key="k2", value="v"))
        assert server.state()["scenario"] is not None
        assert sum(vb.high_seqno for vb in server.bucket.vbuckets) == 2


async def test_a_seqno_wait_for_frames_written_before_it_began_is_met_at_once() -> None:
    from mockdcp.client import DcpConsumer

    async with serve(port=0, http_port=0, vbuckets=2) as server:
        await server.apply(*(Set(key=f"k{i}", value="v") for i in range(20)))
        async with trio.open_nursery() as nursery:
            consumer = DcpConsumer(server.host, server.kv_port, vbuckets=range(2))
            nursery.start_soon(consumer.run)
            await server.wait(ConsumerProgress(seqno="high"), limit=20)
            await server.wait(0.2)
            with trio.fail_after(2):
                await server.wait(ConsumerProgress(seqno="high"), limit=20)
            nursery.cancel_scope.cancel()
