"""A TCP forwarder: a port mapping (``docker run -p``) simulated in the test's process.

The forwarder listens on a free port and relays each connection, both ways, to a target
port of the node. It remembers the local port of every connection it opens to the node,
so a test can tell the node's connections that came through it from any other.
"""

from __future__ import annotations

import trio

RELAY_SIZE = 256 * 1024


class Forwarder:
    """One mapped port: ``listen`` first (its port goes into the node's options), then
    ``serve`` to the node's real port once the node runs."""

    def __init__(self) -> None:
        self.port = 0
        self.target = 0
        #: local ports of the connections opened to the node
        self.sources: set[int] = set()
        self._listeners: list[trio.SocketListener] = []

    async def listen(self) -> int:
        self._listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = int(self._listeners[0].socket.getsockname()[1])
        return self.port

    async def serve(self, target: int) -> None:
        """Relay every accepted connection to ``target`` until cancelled."""
        self.target = target
        await trio.serve_listeners(self._relay, self._listeners)

    async def _relay(self, client: trio.SocketStream) -> None:
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", self.target)
        except OSError:
            await client.aclose()
            return
        self.sources.add(int(upstream.socket.getsockname()[1]))
        async with client, upstream, trio.open_nursery() as nursery:
            nursery.start_soon(_pump, client, upstream, nursery.cancel_scope)
            nursery.start_soon(_pump, upstream, client, nursery.cancel_scope)


async def _pump(src: trio.SocketStream, dst: trio.SocketStream, scope: trio.CancelScope) -> None:
    """Copy ``src`` to ``dst`` until its end (passed on as a half-close); a broken
    connection ends both directions."""
    try:
        while data := await src.receive_some(RELAY_SIZE):
            await dst.send_all(data)
        await dst.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        scope.cancel()
