"""A raw memcached-binary client for integration tests: send frames, read frames."""

from __future__ import annotations

from typing import Any

import trio

from mockdcp.protocol import Frame, FrameReader, Magic


OPEN: list[RawClient] = []


class RawClient:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.reader = FrameReader()
        self.opaque = 100
        self.skipped: list[Frame] = []

    @classmethod
    async def connect(cls, port: int) -> RawClient:
        client = cls(await trio.open_tcp_stream("127.0.0.1", port))
        OPEN.append(client)
        return client

    def next_opaque(self) -> int:
        self.opaque += 1
        return self.opaque

    async def send(self, data: bytes | Any) -> None:
        await self.stream.send_all(data if isinstance(data, bytes | bytearray) else data.encode())

    async def frame(self, timeout: float = 5) -> Frame:
        with trio.fail_after(timeout):
            while True:
                frame = self.reader.next_frame()
                if frame is not None:
                    return frame
                data = await self.stream.receive_some(65536)
                if not data:
                    raise EOFError("server closed the connection")
                self.reader.feed(data)

    async def call(self, message: Any) -> Frame:
        await self.send(message)
        while True:
            frame = await self.frame()
            if frame.magic is Magic.RESPONSE and frame.opaque == message.opaque:
                return frame
            self.skipped.append(frame)

    async def closed_by_server(self, timeout: float = 5) -> bool:
        with trio.move_on_after(timeout):
            try:
                while True:
                    await self.frame(timeout)
            except (EOFError, trio.BrokenResourceError):
                return True
        return False

    async def aclose(self) -> None:
        await self.stream.aclose()
