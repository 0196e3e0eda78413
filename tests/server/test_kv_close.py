"""A connection that closes writes the replies already due for at most ``CLOSE_GRACE``
seconds: a client that never reads them cannot hold it (or its memory) open."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import trio

from mockdcp.producer import Node
from mockdcp.protocol import GetErrorMap
from mockdcp.server import _kv, serve
from tests.integration._raw import RawClient, wait_until

if TYPE_CHECKING:
    import pytest

    from mockdcp.producer import Connection


async def test_a_closed_connection_whose_client_does_not_read_ends_after_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_kv, "CLOSE_GRACE", 0.3)
    async with serve(port=0, http_port=0, vbuckets=4, auth_timeout=0.5) as server:
        opened: list[Connection] = []
        open_connection = Node.open_connection

        def kept(
            node: Node, now: float, peer_host: str = "", certificate_user: str | None = None
        ) -> Connection:
            conn = open_connection(node, now, peer_host, certificate_user)
            opened.append(conn)
            return conn

        monkeypatch.setattr(Node, "open_connection", kept)
        hog = await RawClient.connect(server.kv_port)
        request = GetErrorMap(opaque=1, version=2).encode()
        async with trio.open_nursery() as nursery:
            # requests before authenticating, never reading a reply: the writer waits
            # in its send when the auth timeout closes the connection
            nursery.start_soon(hog.send, request * 20_000)
            # kept as the node takes it: the server may read, time out and forget the
            # connection in one stretch of this task's sleep (the first 256 KiB read
            # answers some 10,000 requests in a go: 0.4 s here, seconds on a loaded
            # machine, past the auth timeout and the grace)
            with trio.fail_after(10):
                await wait_until(lambda: bool(opened))
            [conn] = opened
            with trio.fail_after(10):
                await wait_until(lambda: conn.closed)
            closed = time.monotonic()
            assert conn.statistics().unsent_bytes > 0  # replies due it never reads
            with trio.fail_after(10):
                await wait_until(lambda: server.kv.active == 0)
            # the grace, and CLOSE_DRAIN's second reading what the client still sends
            assert time.monotonic() - closed < 0.3 + _kv.CLOSE_DRAIN + 1.0
            nursery.cancel_scope.cancel()
        await hog.aclose()
