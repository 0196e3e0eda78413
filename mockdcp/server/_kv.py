"""The KV listener: one trio task pair per connection, feeding a sans-IO ``Connection``.

The reader task feeds received bytes to the connection; the writer task sends what the
connection has (responses, then stream data under flow control) and sleeps until woken
by the reader, by a model change (through ``Node.wake``) or by the noop deadline. A
consumer that stops reading blocks only its own writer in ``send_all``; its reader goes on
taking acks. A connection that fails, for any reason, is closed alone and logged.

With a ``PcapWriter`` (``mockdcp serve --pcap``), each connection's bytes, as received and
as sent, are also written to the capture as one TCP flow.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp._pcap import PcapFlow, PcapWriter
    from mockdcp.producer import Connection, Node

log = logging.getLogger("mockdcp.server")

RECEIVE_SIZE = 256 * 1024
#: buffers per sendmsg call (Linux IOV_MAX is 1024)
_IOV_MAX = 512


class KvService:
    """Accepts KV connections for one ``Node``."""

    def __init__(self, node: Node, *, pcap: PcapWriter | None = None) -> None:
        self.node = node
        #: ``mockdcp serve --pcap``: every connection's bytes, both ways, as a TCP flow
        self.pcap = pcap
        self._ids = itertools.count(1)
        self._wake: dict[Connection, trio.Event] = {}
        self.refuse_connections = False
        #: connections accepted while unset wait here before any byte is read: the
        #: initial data is still loading (``hold``/``release``, ``mockdcp serve --docs``)
        self.ready = trio.Event()
        self.ready.set()
        node.wake = self._wake_conn

    def hold(self) -> None:
        """Until ``release``, accepted connections wait before bootstrap."""
        if self.ready.is_set():
            self.ready = trio.Event()

    def release(self) -> None:
        self.ready.set()

    def _wake_conn(self, conn: Connection) -> None:
        event = self._wake.get(conn)
        if event is not None:
            event.set()

    def wake_all(self) -> None:
        for event in self._wake.values():
            event.set()

    async def handle(self, stream: trio.abc.Stream) -> None:
        """Serve one accepted connection until either side closes it.

        Any trio stream works: tests hand it one end of an in-memory stream pair.
        """
        if self.refuse_connections:
            await stream.aclose()
            return
        await self.ready.wait()
        from mockdcp.producer._connection import Connection  # loaded once, after "ready"

        try:
            local_host = stream.socket.getsockname()[0]  # type: ignore[attr-defined]
        except (OSError, AttributeError):
            local_host = self.node.host
        conn = Connection(
            self.node, conn_id=next(self._ids), now=trio.current_time(), peer_host=local_host
        )
        self._wake[conn] = trio.Event()
        log.debug("connection %d accepted", conn.conn_id)
        flow = self._open_flow(stream)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._reader, stream, conn, flow)
                await self._writer(stream, conn, flow)
                nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
            conn.close(f"socket error: {group.exceptions[0]}")
        except* Exception:
            log.exception("connection %d failed", conn.conn_id)
            conn.close("internal error (logged)")
        finally:
            conn.close("connection finished")
            self._wake.pop(conn, None)
            if flow is not None:
                self._record(flow.close, time.time())
            with trio.move_on_after(1) as scope:
                scope.shield = True
                await stream.aclose()

    def _open_flow(self, stream: trio.abc.Stream) -> PcapFlow | None:
        if self.pcap is None or not isinstance(stream, trio.SocketStream):
            return None
        try:
            peer, local = stream.socket.getpeername(), stream.socket.getsockname()
        except OSError:
            return None
        return self.pcap.flow(peer, local, time.time())

    def _record(self, write: Callable[..., None], *args: object) -> None:
        """Write to the capture; a failing capture stops, the connection goes on."""
        try:
            write(*args)
        except (OSError, ValueError) as exc:
            log.error("packet capture stopped: %s", exc)
            self.pcap = None

    async def _reader(
        self, stream: trio.abc.Stream, conn: Connection, flow: PcapFlow | None
    ) -> None:
        try:
            while not conn.closed:
                data = await stream.receive_some(RECEIVE_SIZE)
                if not data:
                    conn.close("peer closed the connection")
                    break
                if flow is not None and self.pcap is not None:
                    self._record(flow.client_sent, data, time.time())
                conn.receive_data(data, trio.current_time())
                self._wake_conn(conn)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            conn.close(f"receive failed: {exc}")
        self._wake_conn(conn)

    async def _writer(
        self, stream: trio.abc.Stream, conn: Connection, flow: PcapFlow | None
    ) -> None:
        sock = stream.socket if isinstance(stream, trio.SocketStream) else None
        while True:
            parts = conn.buffers_to_send(trio.current_time())
            if parts:
                if sock is not None and len(parts) > 1:
                    await _send_gathered(sock, parts)
                else:
                    await stream.send_all(parts[0] if len(parts) == 1 else b"".join(parts))
                if flow is not None and self.pcap is not None:
                    now = time.time()
                    for part in parts:
                        self._record(flow.server_sent, part, now)
                continue
            if conn.closed:
                return
            event = self._wake[conn]
            if event.is_set():
                self._wake[conn] = trio.Event()
                continue
            deadline = conn.next_deadline()
            with trio.move_on_at(deadline if deadline is not None else math.inf):
                await event.wait()
            if self._wake.get(conn) is event:
                self._wake[conn] = trio.Event()
            conn.check_idle(trio.current_time())


async def _send_gathered(sock: trio.socket.SocketType, parts: list[bytes | memoryview]) -> None:
    """Write all of ``parts`` with ``sendmsg`` (no joined copy), resuming partial writes."""
    views = [memoryview(p) for p in parts if len(p)]
    i = 0
    while i < len(views):
        sent = await sock.sendmsg(views[i : i + _IOV_MAX])
        while sent:
            n = views[i].nbytes
            if sent < n:
                views[i] = views[i][sent:]
                break
            sent -= n
            i += 1
