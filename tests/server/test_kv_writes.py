"""The KV shell's gathering write: every byte once, in order, whatever ``sendmsg`` takes."""

from __future__ import annotations

from typing import cast

import pytest
import trio

from mockdcp.server._kv import _send_gathered


class _Socket:
    """Takes at most ``limit`` bytes per ``sendmsg``, like a socket whose buffer is full."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.received = bytearray()
        self.calls = 0

    async def sendmsg(self, buffers: list[memoryview]) -> int:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        taken = b"".join(bytes(b) for b in buffers)[: self.limit]
        self.received += taken
        return len(taken)


@pytest.mark.parametrize("limit", [1, 7, 100, 4096, 1 << 20])
async def test_partial_sendmsg_writes_resume_where_they_stopped(limit: int) -> None:
    parts: list[bytes | memoryview] = [
        b"header",
        memoryview(bytearray(range(256)) * 9)[5:2000],
        b"",
        bytes(range(100, 200)),
        memoryview(b"x" * 5000),
    ]
    sock = _Socket(limit)
    await _send_gathered(cast("trio.socket.SocketType", sock), parts)
    assert bytes(sock.received) == b"".join(bytes(p) for p in parts)
    assert sock.calls >= -(-len(sock.received) // limit)


async def test_more_buffers_than_one_sendmsg_takes_are_sent_in_turn() -> None:
    parts: list[bytes | memoryview] = [bytes([i % 256]) * 3 for i in range(2000)]
    sock = _Socket(1 << 30)
    await _send_gathered(cast("trio.socket.SocketType", sock), parts)
    assert bytes(sock.received) == b"".join(parts)
    assert sock.calls == 4  # 512 buffers per call (Linux allows 1024)
