"""The listeners of each node of the cluster one process runs (``serve(nodes=N)``).

A ``NodeShell`` owns one node's sockets: KV (and TLS KV) and the management port (and
HTTPS). It serves them while the node is up and closes them while it is down, failed over
or rebalanced out, so a client gets a refused connection, never a hang (a node that is
down does not answer on its ports); it holds them meanwhile, bound but not listening
(``_ports``), and ``node_up`` serves the same ports again. The
topology tells the shells after each change (``Topology.on_change``); the shell of a node
the ``add_node`` step makes is built by ``ClusterShell.spawn`` with ports next to the
others'.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs
import trio

from mockdcp.producer import CLOSED_STATUSES
from mockdcp.server._ports import hold, listen_again
from mockdcp.util import ServerError

if TYPE_CHECKING:
    import socket

    from mockdcp.producer import Node
    from mockdcp.server._http import HttpService
    from mockdcp.server._kv import KvService
    from mockdcp.server._serve import MockDcpServer

log = logging.getLogger("mockdcp.server")


async def listen(host: str, port: int) -> list[trio.SocketListener]:
    """TCP listeners on ``host``:``port`` (0: a free port); ``ServerError`` if taken."""
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise ServerError(f"cannot listen on {host}:{port}: {exc}") from exc


def _listener(sock: socket.socket) -> trio.SocketListener:
    return trio.SocketListener(trio.socket.from_stdlib_socket(sock))


def port_of(listeners: list[trio.SocketListener]) -> int:
    return int(listeners[0].socket.getsockname()[1])


@attrs.define(eq=False)
class NodeShell:
    """One node's listeners (see the module docstring)."""

    node: Node
    kv: KvService
    http: HttpService
    kv_listeners: list[trio.SocketListener]
    tls_listeners: list[trio.SocketListener]
    #: the management service of the node back up (for ``node_up``), on the ports
    #: the one it is given held
    rebind_http: Any
    #: the KV (and TLS KV) ports held while the node is down (``_ports.hold``)
    held: list[socket.socket] = attrs.field(factory=list)
    held_tls: list[socket.socket] = attrs.field(factory=list)
    _changed: trio.Event = attrs.field(factory=trio.Event)
    #: set while the listeners are as the node's status wants them (``settled``)
    _stable: trio.Event = attrs.field(factory=trio.Event)
    #: the node's ports are open (listening)
    listening: bool = False

    @property
    def wanted(self) -> bool:
        return self.node.topology.status(self.node) not in CLOSED_STATUSES

    def close(self) -> None:
        """Close the sockets this shell holds (what ``supervise`` did not get to serve:
        a node added just before the server stopped)."""
        for listener in [*self.kv_listeners, *self.tls_listeners]:
            listener.socket.close()
        for sock in [*self.held, *self.held_tls]:
            sock.close()
        self.kv_listeners, self.tls_listeners = [], []
        self.held, self.held_tls = [], []
        self.http.close()

    def poke(self) -> None:
        """The topology changed: look again at whether to listen."""
        if self.listening != self.wanted and self._stable.is_set():
            self._stable = trio.Event()
        self._changed.set()

    async def settled(self) -> None:
        """Wait until the ports are open or closed as the node's status wants (a step
        that takes a node down returns once its ports refuse)."""
        if self.listening != self.wanted or (not self.wanted and self.kv_listeners):
            await self._stable.wait()

    async def _changes(self) -> None:
        self._stable.set()
        await self._changed.wait()
        self._changed = trio.Event()

    async def supervise(self, server: MockDcpServer) -> None:
        """Serve the node's ports while it is wanted; close them while it is not."""
        host = self.node.host
        while True:
            if not self.wanted:
                if self.kv_listeners:  # down before it ever served: held all the same
                    self._hold()
                await self._changes()
                continue
            if not self.kv_listeners:  # back up: the same ports again
                await self._listen_again(host)
            try:
                async with trio.open_nursery() as nursery:
                    self.listening = True
                    nursery.start_soon(
                        partial(trio.serve_listeners, self.kv.handle, self.kv_listeners)
                    )
                    if self.tls_listeners:
                        nursery.start_soon(
                            partial(trio.serve_listeners, self.kv.handle_tls, self.tls_listeners)
                        )
                    nursery.start_soon(partial(self.http.run, server, self.node))
                    while self.wanted:
                        await self._changes()
                    nursery.cancel_scope.cancel()
                    # now, while the serving tasks (cancelled, not yet unwound) have
                    # not closed their listeners: they would free the ports
                    self._hold()
            except BaseException:  # the server stops: every port closed
                self.listening = False
                for listener in [*self.kv_listeners, *self.tls_listeners]:
                    with trio.CancelScope(shield=True):
                        await listener.aclose()
                self.kv_listeners, self.tls_listeners = [], []
                self.http.close()
                raise
            self.listening = False
            log.info("node %s: ports closed (%s)", self.node.name, self._status())

    def _hold(self) -> None:
        """The node went down: its ports refuse connections and stay its own (bound,
        not listening: ``_ports.hold``), the KV and TLS KV ports and the management
        ones (HTTP, HTTPS)."""
        try:
            self.held = [hold(listener.socket) for listener in self.kv_listeners]
            self.held_tls = [hold(listener.socket) for listener in self.tls_listeners]
            self.http.hold()
        finally:
            for listener in [*self.kv_listeners, *self.tls_listeners]:
                listener.socket.close()  # those ``hold`` did not get to (an error)
            self.kv_listeners, self.tls_listeners = [], []

    async def _listen_again(self, host: str) -> None:
        """The node is back up: its held ports listen again (bound anew only when not
        held: a shell never served)."""
        if self.held:
            held, self.held = self.held, []
            self.kv_listeners = [_listener(listen_again(sock)) for sock in held]
        else:
            self.kv_listeners = await listen(host, self.node.kv_port)
        if self.held_tls:
            held, self.held_tls = self.held_tls, []
            self.tls_listeners = [_listener(listen_again(sock)) for sock in held]
        elif self.node.network.kv_ssl is not None:
            self.tls_listeners = await listen(host, self.node.network.kv_ssl)
        self.http = self.rebind_http(self.http)

    def _status(self) -> str:
        return self.node.topology.status(self.node).value
