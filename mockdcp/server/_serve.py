"""Running a mock node: the listeners, the bucket, and the handle tests hold.

``serve(...)`` is the async context manager of design.md ("Python and pytest"): inside a
trio program, ``async with mockdcp.serve(port=0) as server:`` starts both listeners on
free ports, and ``server.bucket`` is the model to write to; every open stream sees each
write as it happens.
"""

from __future__ import annotations

import contextlib
import logging
import time
from functools import partial
from typing import TYPE_CHECKING

import attrs
import trio

from mockdcp._errors import ServerError, raise_unwrapped
from mockdcp.model import Bucket
from mockdcp.producer import Node
from mockdcp.server._http import HttpService
from mockdcp.server._kv import DEFAULT_AUTH_TIMEOUT, DEFAULT_MAX_CONNECTIONS, KvService

if TYPE_CHECKING:
    import os
    from collections.abc import AsyncIterator, Mapping

    from mockdcp._pcap import PcapWriter
    from mockdcp.producer import ConnectionStatistics
    from mockdcp.protocol import StreamEndReason

log = logging.getLogger("mockdcp.server")

DEFAULT_USERS: Mapping[str, str] = {"Administrator": "password"}


@attrs.define(kw_only=True)
class MockDcpServer:
    """A running mock node: its ports, its bucket, and the steps that need the shell."""

    node: Node
    kv: KvService
    host: str
    kv_port: int
    http_port: int

    @property
    def bucket(self) -> Bucket:
        return self.node.bucket

    @property
    def connection_string(self) -> str:
        """What a Couchbase SDK or java-dcp-client takes: ``couchbase://host:kv_port``."""
        return f"couchbase://{self.host}:{self.kv_port}"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def restart(self, vbucket: int | None = None) -> None:
        """A node restart: unpersisted items are lost and every connection drops."""
        self.bucket.restart(vbucket)
        self.node.close_all("node restarted")

    def disconnect_all(self, reason: str = "disconnect step") -> None:
        """Drop every client connection (the ``disconnect`` fault)."""
        self.node.close_all(reason)

    def drop_cursor(
        self, vbucket: int | None = None, connection: str | None = None
    ) -> list[tuple[int, str]]:
        """The memory-to-disk switch (producer.md §5) for chosen streams, now.

        Drops the cursors of the streams of ``vbucket`` (all when None) on the
        connections named ``connection`` (DCP_OPEN name; all when None) that allowed
        cursor dropping. Returns the (vbucket, cursor) pairs dropped.
        """
        dropped: list[tuple[int, str]] = []
        for conn in list(self.node.connections):
            if connection is not None and conn.name.decode(errors="replace") != connection:
                continue
            if not conn.settings.cursor_dropping:
                continue
            for stream in list(conn.streams.values()):
                if vbucket is None or stream.vbucket == vbucket:
                    dropped += self.bucket.drop_cursor(stream.vbucket, stream.cursor_name)
        return dropped

    def end_stream(self, vbucket: int, reason: StreamEndReason) -> int:
        """End the live streams of ``vbucket`` on every connection with ``reason``."""
        n = sum(conn.end_streams(vbucket, reason) for conn in list(self.node.connections))
        self.kv.wake_all()
        return n

    def connections(self) -> list[ConnectionStatistics]:
        return [c.statistics() for c in sorted(self.node.connections, key=lambda c: c.conn_id)]


async def _listen(host: str, port: int) -> list[trio.SocketListener]:
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise ServerError(f"cannot listen on {host}:{port}: {exc}") from exc


def _port_of(listeners: list[trio.SocketListener]) -> int:
    return int(listeners[0].socket.getsockname()[1])


@contextlib.asynccontextmanager
async def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 11210,
    http_port: int = 8091,
    bucket: str = "default",
    vbuckets: int = 1024,
    users: Mapping[str, str] | None = None,
    seed: int = 0,
    idle_timeout: float | None = None,
    bucket_obj: Bucket | None = None,
    pcap: str | os.PathLike[str] | None = None,
    # -- connection limits (issue 18) --
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    output_limit: int | None = None,
    auth_timeout: float | None = DEFAULT_AUTH_TIMEOUT,
) -> AsyncIterator[MockDcpServer]:
    """Run a mock node until the block exits. Raises ``ServerError`` if a port is taken.

    ``pcap``: a file to record every KV connection into, as TCP flows (``tshark -r FILE
    -d tcp.port==KV_PORT,couchbase`` decodes it).

    Limits a data node has: ``max_connections`` at once (one more is closed at once);
    ``output_limit`` bytes of unsent output per connection before it is no longer read
    (None: 8 MiB); ``auth_timeout`` seconds to authenticate (None: no limit).
    """
    if max_connections < 1 or (output_limit is not None and output_limit < 1):
        raise ServerError("max_connections and output_limit must be positive")
    if auth_timeout is not None and not auth_timeout > 0:
        raise ServerError(f"auth_timeout must be positive (or None), not {auth_timeout}")
    model = bucket_obj or Bucket(bucket, vbuckets, seed=seed, clock=time.time)
    with contextlib.ExitStack() as files:
        capture = _open_capture(pcap, host, files) if pcap is not None else None
        async with _serve(host, port, http_port, users, model, idle_timeout, capture) as server:
            # -- connection limits (issue 18) --
            server.kv.max_connections = max_connections
            server.kv.output_limit = output_limit
            server.kv.auth_timeout = auth_timeout
            yield server


def _open_capture(
    path: str | os.PathLike[str], host: str, files: contextlib.ExitStack
) -> PcapWriter:
    from mockdcp._pcap import PcapWriter

    try:
        out = files.enter_context(open(path, "wb"))  # noqa: SIM115 - closed by the stack
        return PcapWriter(out, ipv6=":" in host)
    except OSError as exc:
        raise ServerError(f"cannot write the packet capture {path}: {exc}") from exc


@contextlib.asynccontextmanager
async def _serve(
    host: str,
    port: int,
    http_port: int,
    users: Mapping[str, str] | None,
    model: Bucket,
    idle_timeout: float | None,
    capture: PcapWriter | None,
) -> AsyncIterator[MockDcpServer]:
    kv_listeners = await _listen(host, port)
    http_listeners = await _listen(host, http_port)
    node = Node(
        bucket=model,
        users=dict(users or DEFAULT_USERS),
        host=host if host not in ("0.0.0.0", "::") else "127.0.0.1",
        kv_port=_port_of(kv_listeners),
        http_port=_port_of(http_listeners),
    )
    if idle_timeout is not None:
        node.idle_timeout = idle_timeout
    kv = KvService(node, pcap=capture)
    http = HttpService(node)
    server = MockDcpServer(
        node=node, kv=kv, host=node.host, kv_port=node.kv_port, http_port=node.http_port
    )
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(trio.serve_listeners, kv.handle, kv_listeners))
            nursery.start_soon(partial(trio.serve_listeners, http.handle, http_listeners))
            try:
                yield server
            finally:
                node.close_all("server shutting down")
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise_unwrapped(group)  # the block's own exception, not a group around it
