"""A raw memcached-binary client for integration tests: send frames, read frames.

Also ``wait_until``, the one place tests poll for a condition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from mockdcp.protocol import DcpStreamRequest, Frame, FrameReader, Magic

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.protocol import Message, Response

OPEN: list[RawClient] = []


async def wait_until(predicate: Callable[[], bool], *, poll: float = 0.02) -> None:
    """Poll ``predicate`` every ``poll`` seconds until it holds; bound it with ``trio.fail_after``.

    The conditions are state of a server or consumer that offers no event to wait on.
    """
    while not predicate():  # noqa: ASYNC110 - polling state that has no trio.Event to await
        await trio.sleep(poll)


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

    def stream_request(self, vb: int = 0, **fields: int) -> DcpStreamRequest:
        """A DCP_STREAM_REQ of ``vb`` from 0 to the end, with a new opaque; ``fields``
        replace the request's own (``start_seqno``, ``vbucket_uuid``, ``flags``...)."""
        request: dict[str, Any] = {
            "opaque": self.next_opaque(),
            "vbucket": vb,
            "flags": 0,
            "start_seqno": 0,
            "end_seqno": 0xFFFFFFFFFFFFFFFF,
            "vbucket_uuid": 0,
            "snap_start_seqno": 0,
            "snap_end_seqno": 0,
        }
        request.update(fields)
        return DcpStreamRequest(**request)

    async def send(self, data: bytes | bytearray | Message | Response) -> None:
        await self.stream.send_all(data if isinstance(data, bytes | bytearray) else data.encode())

    async def frame(self, seconds: float = 5) -> Frame:
        with trio.fail_after(seconds):
            while True:
                frame = self.reader.next_frame()
                if frame is not None:
                    return frame
                data = await self.stream.receive_some(65536)
                if not data:
                    raise EOFError("server closed the connection")
                self.reader.feed(data)

    async def call(self, message: Message) -> Frame:
        await self.send(message)
        while True:
            frame = await self.frame()
            if frame.magic is Magic.RESPONSE and frame.opaque == message.opaque:
                return frame
            self.skipped.append(frame)

    async def closed_by_server(self, seconds: float = 5) -> bool:
        with trio.move_on_after(seconds):
            try:
                while True:
                    await self.frame(seconds)
            except (EOFError, trio.BrokenResourceError):
                return True
        return False

    async def aclose(self) -> None:
        await self.stream.aclose()
