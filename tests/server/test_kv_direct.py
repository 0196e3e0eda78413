"""The reader's own writes (``_kv.DirectWrite``): a request answered while the writer is
parked costs no trip through the writer, what the socket does not take goes to the
writer in order, and the reader never waits on a write."""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING

import pytest
import trio

from mockdcp.model import Bucket
from mockdcp.protocol import (
    DcpBufferAck,
    DcpControl,
    DcpOpen,
    DcpOpenFlag,
    Hello,
    HelloFeature,
    Noop,
    SaslAuth,
    SelectBucket,
    Status,
)
from mockdcp.server import serve
from mockdcp.server._kv import DirectWrite
from tests.integration._raw import RawClient, wait_until

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mockdcp.producer import Connection
    from mockdcp.server import MockDcpServer

PLAIN = b"\0Administrator\0password"


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected pair with small buffers, the writing end non-blocking (as trio's)."""
    a, b = socket.socketpair()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    a.setblocking(False)
    yield a, b
    a.close()
    b.close()


def _fills(s: socket.socket) -> bool:
    """Send into ``s`` until its buffers are full (False then)."""
    try:
        s.send(b"x" * 65536)
    except BlockingIOError:
        return False
    return True


def _drain(s: socket.socket) -> bytes:
    s.setblocking(False)
    got = bytearray()
    while True:
        try:
            chunk = s.recv(1 << 20)
        except BlockingIOError:
            return bytes(got)
        if not chunk:
            return bytes(got)
        got += chunk


def test_a_reply_that_fits_is_written_at_once(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    direct = DirectWrite(a.fileno())
    assert direct.write([b"head", memoryview(b"body"), b"", b"tail"])
    assert _drain(b) == b"headbodytail"
    assert direct.rest == []


def test_what_the_socket_does_not_take_waits_in_order_for_the_writer(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    parts: list[bytes | memoryview] = [bytes([i]) * 1000 for i in range(200)]
    direct = DirectWrite(a.fileno())
    assert not direct.write(parts)  # 200,000 bytes: more than the socket's buffers take
    assert direct.parts is parts  # captured and counted written once the rest is sent
    assert direct.rest
    assert not direct.ready  # the reader writes nothing more before the writer sends it
    sent = _drain(b)
    assert sent + b"".join(bytes(p) for p in direct.rest) == b"".join(parts)


def test_a_write_on_a_full_socket_never_waits_and_leaves_it_all_to_the_writer(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, _ = pair
    while _fills(a):
        pass
    direct = DirectWrite(a.fileno())
    assert not direct.write([b"reply"])
    assert [bytes(p) for p in direct.rest] == [b"reply"]


def _count_wakes(server: MockDcpServer) -> list[Connection]:
    """The connections the reader woke the writer of, one entry a wake."""
    woken: list[Connection] = []
    wakeups = server.kv.wakeups
    wake = wakeups.wake

    def counted(conn: Connection) -> None:
        woken.append(conn)
        wake(conn)

    wakeups.wake = counted  # type: ignore[method-assign]
    return woken


async def test_requests_answered_one_at_a_time_do_not_wake_the_writer() -> None:
    async with serve(port=0, http_port=0, vbuckets=4) as server:
        woken = _count_wakes(server)
        c = await RawClient.connect(server.kv_port)
        features = (HelloFeature.XERROR, HelloFeature.SELECT_BUCKET)
        bootstrap = [
            Hello(opaque=1, agent=b"direct", features=features),
            SaslAuth(opaque=2, mechanism="PLAIN", payload=PLAIN),
            SelectBucket(opaque=3, bucket="default"),
            DcpOpen(opaque=4, name=b"direct", flags=int(DcpOpenFlag.PRODUCER)),
            DcpControl(opaque=5, key="enable_noop", value="true"),
        ]
        for request in bootstrap:
            assert (await c.call(request)).status == Status.SUCCESS
        for opaque in range(10, 30):
            assert (await c.call(Noop(opaque=opaque))).status == Status.SUCCESS
        # the writer parked before the first request and each reply went from the
        # reader: no wake a request (enable_noop sets a deadline, later than none)
        assert len(woken) <= 2, len(woken)
        await c.aclose()


async def test_a_consumer_that_does_not_read_still_has_its_acks_taken() -> None:
    bucket = Bucket("default", 16, seed=1, clock=time.time)
    bucket.set_many([b"k%06d" % i for i in range(20_000)], [b"v" * 512] * 20_000)
    async with serve(port=0, http_port=0, bucket_obj=bucket) as server:
        c = await RawClient.connect(server.kv_port)
        bootstrap = [
            Hello(opaque=1, agent=b"direct", features=(HelloFeature.SELECT_BUCKET,)),
            SaslAuth(opaque=2, mechanism="PLAIN", payload=PLAIN),
            SelectBucket(opaque=3, bucket="default"),
            DcpOpen(opaque=4, name=b"direct", flags=int(DcpOpenFlag.PRODUCER)),
            DcpControl(opaque=5, key="connection_buffer_size", value=str(1 << 30)),
        ]
        for request in bootstrap:
            assert (await c.call(request)).status == Status.SUCCESS
        conn = next(iter(server.node.connections.values()))
        for vb in range(16):  # about 10 MB of stream data, never read
            await c.send(c.stream_request(vb))
        with trio.fail_after(10):  # the socket is full: the writer waits in its send
            await wait_until(lambda: conn.statistics().unsent_bytes > 0)
        await trio.sleep(0.2)
        assert conn.statistics().unsent_bytes > 0
        for _ in range(5):
            await c.send(DcpBufferAck(opaque=0, nbytes=1000))
        with trio.fail_after(10):
            await wait_until(lambda: conn.statistics().acks == 5)
        await c.aclose()
