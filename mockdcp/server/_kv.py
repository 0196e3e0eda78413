"""The KV listener: one trio task pair per connection, feeding a sans-IO ``Connection``.

The reader task feeds received bytes to the connection; the writer task sends what the
connection has (responses, then stream data under flow control) and sleeps until woken
by the reader, by a model change (through ``Node.wake``) or by the noop deadline. A
consumer that stops reading blocks only its own writer in ``send_all``; its reader goes on
taking acks. A connection that fails, for any reason, is closed alone and logged.

While the writer is parked with nothing left to send and the connection has no stream
yet (its bootstrap), the reader writes the replies of what it read itself, with one
non-blocking ``writev`` (``DirectWrite``), so that a request is one trip through the
event loop rather than three (the reader's, the writer's, and the writer's parking
again); what the socket does not take goes to the writer, which sends it before anything
else. The reader never waits on a write.

Limits a data node has (issue 18): at most ``max_connections`` at once (one more is closed
as soon as it is accepted, and logged); a connection that has not authenticated within
``auth_timeout`` seconds is closed; a connection whose unsent output reaches its output
limit is not read until the client drains it (``Connection.input_paused``), so a client
that pipelines requests and never reads costs a bounded amount of memory. A connection
that closes writes the replies already due first, for at most ``CLOSE_GRACE`` seconds.

With a ``PcapWriter`` (``mockdcp serve --pcap``), each connection's bytes, as received and
as sent, are also written to the capture as one TCP flow; on the TLS port those are the
decrypted bytes (the flow is on that port: ``tshark -d tcp.port==TLS_PORT,couchbase``).

The TLS port (``handle_tls``) runs the handshake first (``_tls.TlsSetup.accept``); a
client refused there (plaintext, a failed or slow handshake, a certificate that maps to
no user) is closed and logged, and never becomes a connection of the node. A client
certificate that maps to a user authenticates the connection from its first byte.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import TYPE_CHECKING

import trio

from mockdcp.server._tls_stream import TlsStream

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.producer import Connection, Node
    from mockdcp.server._pcap import PcapFlow, PcapWriter
    from mockdcp.server._tls import TlsSetup

log = logging.getLogger("mockdcp.server")

RECEIVE_SIZE = 256 * 1024
#: memcached's default ``max_connections`` (user connections on a data node).
DEFAULT_MAX_CONNECTIONS = 60_000
#: Seconds a connection may stay unauthenticated (``None``: for ever). A real node
#: drops idle connections after its ``connection_idle_time``; before authentication a
#: client has no reason to idle.
DEFAULT_AUTH_TIMEOUT = 120.0
#: Seconds a closing connection gets to take the replies already due.
CLOSE_GRACE = 2.0
#: seconds a closing connection reads (and drops) what the peer still sends
CLOSE_DRAIN = 1.0
#: buffers per sendmsg call (Linux IOV_MAX is 1024)
_IOV_MAX = 512


class Wakeups:
    """One trio event per connection: set when the connection must be looked at
    again from outside its own I/O. ``wake`` is the node's callback."""

    def __init__(self) -> None:
        self.events: dict[Connection, trio.Event] = {}
        #: the scope of the connection's tasks: once the connection is closed, its
        #: deadline bounds the last writes (``CLOSE_GRACE``)
        self.closing: dict[Connection, trio.CancelScope] = {}
        #: a reader paused at the output limit waits on it; set after each write
        self.drained: dict[Connection, trio.Event] = {}

    def wake(self, conn: Connection) -> None:
        event = self.events.get(conn)
        if event is not None:
            event.set()
        closing = self.closing.get(conn)
        if closing is not None and conn.closed and closing.deadline == math.inf:
            closing.deadline = trio.current_time() + CLOSE_GRACE

    def add(self, conn: Connection, scope: trio.CancelScope | None = None) -> None:
        """Watch ``conn``; ``scope`` (its tasks') ends ``CLOSE_GRACE`` seconds after it
        closes, so that a client that does not read its last replies cannot hold it
        open."""
        self.events[conn] = trio.Event()
        if scope is not None:
            self.closing[conn] = scope

    def remove(self, conn: Connection) -> None:
        for table in (self.events, self.closing, self.drained):
            table.pop(conn, None)

    def wake_all(self) -> None:
        for event in self.events.values():
            event.set()


class KvService:
    """Accepts KV connections for one ``Node``."""

    def __init__(
        self,
        node: Node,
        wakeups: Wakeups,
        *,
        pcap: PcapWriter | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        auth_timeout: float | None = DEFAULT_AUTH_TIMEOUT,
        output_limit: int | None = None,
        tls: TlsSetup | None = None,
        trim: MemoryTrim | None = None,
    ) -> None:
        self.node = node
        #: the TLS port's contexts (``handle_tls``)
        self.tls = tls
        self.wakeups = wakeups
        #: ``mockdcp serve --pcap``: every connection's bytes, both ways, as a TCP flow
        self.pcap = pcap
        self.max_connections = max_connections
        self.auth_timeout = auth_timeout
        #: bytes of unsent output per connection past which it is not read (None: default)
        self.output_limit = output_limit
        self.active = 0  # connections being served (the max_connections count)
        #: the process's heap trimmer, one for every node the process runs (``MemoryTrim``)
        self._trim = trim if trim is not None else MemoryTrim()
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

    async def handle(self, stream: trio.abc.Stream, certificate_user: str | None = None) -> None:
        """Serve one accepted connection until either side closes it; with
        ``certificate_user``, authenticated as that user (its TLS client certificate).

        Any trio stream works: tests hand it one end of an in-memory stream pair.
        """
        if self.active >= self.max_connections:
            log.warning("connection refused: max_connections (%d) reached", self.max_connections)
            await stream.aclose()
            return
        self.active += 1
        self._trim.connection_joined()
        try:
            await self.ready.wait()
            await self._serve_connection(stream, certificate_user)
        finally:
            self.active -= 1
            self._trim.connection_left()

    async def handle_tls(self, transport: trio.SocketStream) -> None:
        """Serve one connection accepted on the TLS port: the handshake, then ``handle``."""
        from mockdcp.server._tls import TlsRefused, log_refusal

        assert self.tls is not None
        try:
            accepted = await self.tls.accept(transport, self.node.users)
        except TlsRefused as exc:
            log_refusal(_peer(transport), "TLS KV", exc)
            with trio.move_on_after(CLOSE_DRAIN) as scope:
                scope.shield = True
                await close_gracefully(exc.stream)
            return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.info("TLS KV connection from %s lost in the handshake: %s", _peer(transport), exc)
            await transport.aclose()
            return
        await self.handle(accepted.stream, accepted.user)

    async def _serve_connection(
        self, stream: trio.abc.Stream, certificate_user: str | None
    ) -> None:
        sock = _socket_of(stream)
        try:
            local_host = sock.getsockname()[0] if sock is not None else self.node.host
        except OSError:
            local_host = self.node.host
        conn = self.node.open_connection(trio.current_time(), local_host, certificate_user)
        if conn.closed:  # refused
            await stream.aclose()
            return
        if self.output_limit is not None:
            conn.output_limit = self.output_limit
        log.debug("connection %d accepted", conn.conn_id)
        flow = self._open_flow(stream)
        direct = DirectWrite.of(stream)
        try:
            async with trio.open_nursery() as nursery:
                self.wakeups.add(conn, nursery.cancel_scope)
                nursery.start_soon(self._reader, stream, conn, flow, direct)
                if self.auth_timeout is not None:
                    nursery.start_soon(self._auth_deadline, conn, self.auth_timeout)
                await self._writer(stream, conn, flow, direct)
                nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
            conn.close(f"socket error: {group.exceptions[0]}")
        except* Exception:
            log.exception("connection %d failed", conn.conn_id)
            conn.close("internal error (logged)")
        finally:
            conn.close("connection finished")
            conn.release()
            self.wakeups.remove(conn)
            if flow is not None:
                self._record(flow.close, time.time())
            with trio.move_on_after(CLOSE_DRAIN) as scope:
                scope.shield = True
                await close_gracefully(stream)

    def _open_flow(self, stream: trio.abc.Stream) -> PcapFlow | None:
        sock = _socket_of(stream)
        if self.pcap is None or sock is None:
            return None
        try:
            peer, local = sock.getpeername(), sock.getsockname()
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
        self,
        stream: trio.abc.Stream,
        conn: Connection,
        flow: PcapFlow | None,
        direct: DirectWrite | None = None,
    ) -> None:
        try:
            while not conn.closed:
                if conn.input_paused:  # unsent output at the limit: wait for a write
                    drained = self.wakeups.drained[conn] = trio.Event()
                    await drained.wait()
                    conn.process_pending(trio.current_time())
                    self.wakeups.wake(conn)
                    continue
                data = await stream.receive_some(RECEIVE_SIZE)
                if not data:
                    conn.close("peer closed the connection")
                    break
                if flow is not None and self.pcap is not None:
                    self._record(flow.client_sent, data, time.time())
                now = trio.current_time()
                conn.receive_data(data, now)
                if (
                    direct is not None
                    and direct.ready
                    and not conn.closed
                    and self._write_directly(conn, flow, direct, now)
                ):
                    continue  # the parked writer has nothing new to do
                self.wakeups.wake(conn)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            conn.close(f"receive failed: {exc}")
        self.wakeups.wake(conn)

    def _write_directly(
        self, conn: Connection, flow: PcapFlow | None, direct: DirectWrite, now: float
    ) -> bool:
        """The reader writes what is due while the writer is parked (the module
        docstring); True if the writer need not be woken: all of it was written, nothing
        more is due and its deadline is not earlier than the one the writer waits for.
        A connection with a stream is the writer's alone, as before (stream data, ends
        and holds): the reader writes the bootstrap's replies, and those of a connection
        that streams nothing."""
        if len(conn.streams):
            return False
        parts = conn.buffers_to_send(now)
        if parts and not direct.write(parts):
            return False  # the writer sends the rest, then counts it written
        conn.data_written(now)
        if parts and flow is not None and self.pcap is not None:
            stamp = time.time()
            for part in parts:
                self._record(flow.server_sent, part, stamp)
        if conn.closed or conn.wants_write:
            return False
        deadline = conn.next_deadline()
        return deadline is None or deadline >= direct.deadline

    async def _writer(
        self,
        stream: trio.abc.Stream,
        conn: Connection,
        flow: PcapFlow | None,
        direct: DirectWrite | None = None,
    ) -> None:
        sock = stream.socket if isinstance(stream, trio.SocketStream) else None
        while True:
            if direct is not None and direct.rest:  # what the reader's write left, first
                assert sock is not None
                parts = direct.parts
                await _send_gathered(sock, direct.rest)
                direct.rest, direct.parts = [], []
            else:
                parts = conn.buffers_to_send(trio.current_time())
                if parts:
                    await _send(stream, sock, parts)
            if parts:
                conn.data_written(trio.current_time())
                drained = self.wakeups.drained.pop(conn, None)
                if drained is not None:  # the reader paused at the output limit goes on
                    drained.set()
                if flow is not None and self.pcap is not None:
                    now = time.time()
                    for part in parts:
                        self._record(flow.server_sent, part, now)
                continue
            if conn.closed:
                return
            # nothing to write is all written: the events of nothing (a hold reached
            # with its next frame past it, its seqno de-duplicated away) are true now
            conn.data_written(trio.current_time())
            events = self.wakeups.events
            event = events[conn]
            if event.is_set():
                events[conn] = trio.Event()
                continue
            deadline = conn.next_deadline()
            if direct is not None:  # the reader may write while this waits
                direct.park(deadline)
            try:
                with trio.move_on_at(deadline if deadline is not None else math.inf):
                    await event.wait()
            finally:
                if direct is not None:
                    direct.parked = False
            if events.get(conn) is event:
                events[conn] = trio.Event()
            conn.check_idle(trio.current_time())

    async def _auth_deadline(self, conn: Connection, seconds: float) -> None:
        """Close ``conn`` if it has not authenticated within ``seconds``."""
        await trio.sleep(seconds)
        if conn.user is None and not conn.closed:
            conn.close(f"not authenticated within {seconds:g}s")
            self.wakeups.wake(conn)


class DirectWrite:
    """A connection's writes by its reader (the module docstring): while the writer is
    parked with nothing left to send, the reader writes what the socket takes at once
    (``write``: one non-blocking ``writev``, never a wait); the rest, ``rest``, is the
    writer's to send before anything else.

    kv_engine's connection is one state machine on one thread that executes the
    requests read and copies each reply into its output buffer in the same turn
    (``Connection::executeCommandsCallback``, ``Connection::sendResponse``, kv_engine's
    ``daemon/connection.cc``). Here a DCP consumer's bootstrap is eight requests answered
    one at a time, and a trip through the trio event loop for each of the reader, the
    writer and the writer's parking again was most of a short connection's CPU.
    """

    __slots__ = ("deadline", "fd", "parked", "parts", "rest")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        #: the writer waits for a wake-up with nothing left to send
        self.parked = False
        #: the deadline it waits for (``math.inf``: none)
        self.deadline = math.inf
        #: what a reader's write left unsent, the writer sends it first
        self.rest: list[bytes | memoryview] = []
        #: the buffers of that write, whole (counted written and captured once all are)
        self.parts: list[bytes | memoryview] = []

    @classmethod
    def of(cls, stream: trio.abc.Stream) -> DirectWrite | None:
        """For a plain TCP stream where ``os.writev`` exists (None for TLS, whose records
        the writer encrypts in order, and for the in-memory streams of tests)."""
        if not isinstance(stream, trio.SocketStream) or not hasattr(os, "writev"):
            return None
        return cls(stream.socket.fileno())

    @property
    def ready(self) -> bool:
        """The reader may write: the writer is parked and nothing of an earlier write waits."""
        return self.parked and not self.rest

    def park(self, deadline: float | None) -> None:
        self.parked = True
        self.deadline = math.inf if deadline is None else deadline

    def write(self, parts: list[bytes | memoryview]) -> bool:
        """Write what the socket takes now, never waiting; True if it took all of
        ``parts``, else the rest waits in ``rest`` (a socket error too: the writer meets
        it again and the connection closes as it would have)."""
        views = [memoryview(p) for p in parts if len(p)]
        try:
            sent = os.writev(self.fd, views[:_IOV_MAX])
        except OSError:  # BlockingIOError: the socket's buffer is full
            sent = 0
        i = _past_sent(views, 0, sent)
        if i == len(views):
            return True
        self.rest, self.parts = [*views[i:]], parts
        return False


class MemoryTrim:
    """Gives freed heap memory back to the system after connections leave (glibc).

    A connection's buffers (256 KiB reads, encoded stream pieces) are freed when it
    closes, but glibc keeps freed heap pages, so a server that served 200 consumers kept
    about half a MiB per connection after they left. ``malloc_trim(0)`` returns them: it
    runs when the last connection leaves, and otherwise, while others stay open, once
    ``BATCH`` connections have left since the last trim, at most once a second (about
    16 MiB kept at most between trims, whatever the rate they come and go at).

    The heap is the process's, so one trimmer serves every node a process runs
    (``serve(nodes=N)``), counting the connections of them all: a trim walks the whole
    heap (1 to 2 ms with 300,000 items loaded), and a consumer leaving a three-node
    cluster closes its three connections at once, each the last of its node, so a
    trimmer per node trimmed the same heap three times, and one trimming at most once
    a second still twice (the first to leave, the last) where one node trims once.
    """

    INTERVAL = 1.0
    BATCH = 32

    def __init__(self) -> None:
        self._last = -math.inf
        self._trim: Callable[[int], int] | None = None
        self._loaded = False
        #: connections open on every node sharing this trimmer
        self.connections = 0
        #: connections that left since the last trim
        self.left = 0

    def connection_joined(self) -> None:
        self.connections += 1

    def connection_left(self) -> None:
        self.connections -= 1
        self.left += 1
        now = time.monotonic()
        if self.connections and (self.left < self.BATCH or now - self._last < self.INTERVAL):
            return
        if not self._loaded:  # on first use: serve's path to "ready" stays short
            self._trim, self._loaded = _malloc_trim(), True
        if self._trim is None:
            return
        self._last, self.left = now, 0
        self._trim(0)


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where there is none (macOS, musl)."""
    import ctypes

    try:
        trim: Callable[[int], int] = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def _socket_of(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    """The socket under ``stream`` (a TCP stream, or TLS over one), if any."""
    if isinstance(stream, TlsStream):
        return stream.socket
    if isinstance(stream, trio.SocketStream):
        return stream.socket
    return None


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "a closed socket"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def _send_gathered(sock: trio.socket.SocketType, parts: list[bytes | memoryview]) -> None:
    """Write all of ``parts`` with ``sendmsg`` (no joined copy), resuming partial writes."""
    views = [memoryview(p) for p in parts if len(p)]
    i = 0
    while i < len(views):
        i = _past_sent(views, i, await sock.sendmsg(views[i : i + _IOV_MAX]))


def _past_sent(views: list[memoryview], i: int, sent: int) -> int:
    """The first of ``views`` from ``i`` that a write of ``sent`` bytes did not take
    whole, cut to what it did not take (``len(views)``: it took them all)."""
    while sent:
        n = views[i].nbytes
        if sent < n:
            views[i] = views[i][sent:]
            break
        sent -= n
        i += 1
    return i


async def _send(
    stream: trio.abc.Stream, sock: trio.socket.SocketType | None, parts: list[bytes | memoryview]
) -> None:
    """Write ``parts`` on ``stream`` (``sock``: the socket under a plain TCP stream)."""
    if isinstance(stream, TlsStream):  # encrypted in order, one socket write
        await stream.send_parts(parts)
    elif sock is not None and len(parts) > 1:
        await _send_gathered(sock, parts)
    else:
        await stream.send_all(parts[0] if len(parts) == 1 else b"".join(parts))


async def close_gracefully(stream: trio.abc.Stream) -> None:
    """Half-close, drop what the peer still sends until it closes too, then close.

    Closing a socket whose input is unread makes the kernel send RST, and a peer's kernel
    that gets RST discards what it received and its application has not read yet: frames
    already written (which a seqno trigger counts as received) would be lost. A node's
    disconnect loses nothing it wrote; neither does this one. The caller bounds the wait.
    On TLS, ``close_notify`` goes first, then the same on the socket under it.
    """
    try:
        transport = stream
        if isinstance(stream, TlsStream):
            await stream.send_close_notify()
            transport = stream.transport_stream
        if isinstance(transport, trio.SocketStream):
            await transport.send_eof()
            while await transport.receive_some(RECEIVE_SIZE):
                pass
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        await stream.aclose()
