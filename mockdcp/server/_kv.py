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


class Wakeups:
    """One trio event per connection: set when the connection must be looked at
    again from outside its own I/O. ``wake`` is the node's callback."""

    def __init__(self) -> None:
        self.events: dict[Connection, trio.Event] = {}

    def wake(self, conn: Connection) -> None:
        event = self.events.get(conn)
        if event is not None:
            event.set()

    def wake_all(self) -> None:
        for event in self.events.values():
            event.set()


class KvService:
    """Accepts KV connections for one ``Node``."""

    def __init__(self, node: Node, wakeups: Wakeups, *, pcap: PcapWriter | None = None) -> None:
        self.node = node
        self.wakeups = wakeups
        #: ``mockdcp serve --pcap``: every connection's bytes, both ways, as a TCP flow
        self.pcap = pcap
        #: connections accepted while unset wait here before any byte is read: the
        #: initial data is still loading (``hold``/``release``, ``mockdcp serve --docs``)
        self.ready = trio.Event()
        self.ready.set()

    def hold(self) -> None:
        """Until ``release``, accepted connections wait before bootstrap."""
        if self.ready.is_set():
            self.ready = trio.Event()

    def release(self) -> None:
        self.ready.set()

    async def handle(self, stream: trio.abc.Stream) -> None:
        """Serve one accepted connection until either side closes it.

        Any trio stream works: tests hand it one end of an in-memory stream pair.
        """
        await self.ready.wait()
        try:
            local_host = stream.socket.getsockname()[0]  # type: ignore[attr-defined]
        except (OSError, AttributeError):
            local_host = self.node.host
        conn = self.node.open_connection(trio.current_time(), local_host)
        if conn.closed:  # refused
            await stream.aclose()
            return
        self.wakeups.events[conn] = trio.Event()
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
            self.wakeups.events.pop(conn, None)
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
                self.wakeups.wake(conn)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            conn.close(f"receive failed: {exc}")
        self.wakeups.wake(conn)

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
                conn.data_written(trio.current_time())
                if flow is not None and self.pcap is not None:
                    now = time.time()
                    for part in parts:
                        self._record(flow.server_sent, part, now)
                continue
            if conn.closed:
                return
            events = self.wakeups.events
            event = events[conn]
            if event.is_set():
                events[conn] = trio.Event()
                continue
            deadline = conn.next_deadline()
            with trio.move_on_at(deadline if deadline is not None else math.inf):
                await event.wait()
            if events.get(conn) is event:
                events[conn] = trio.Event()
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
