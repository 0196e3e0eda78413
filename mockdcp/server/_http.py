"""The management (HTTP) port: its sockets and the ASGI server that answers on them.

The listening sockets are bound (and listening) before ``serve()`` reports ready, so
port 0 works and the node knows its port for the cluster map; hypercorn's trio worker,
with the Starlette application of ``_asgi.py``, is imported in a worker thread and started
afterwards (about 0.3 s of imports kept off the event loop, so off ``mockdcp serve``'s
path to "ready" and off the KV port). A request that arrives before then waits in the
listen backlog.

Limits (a bad client costs its own connection, never the server's):

* request head: hypercorn's h11 ``h11_max_incomplete_size`` (16 KiB);
* a connection that has not sent a whole request head within ``KEEP_ALIVE_TIMEOUT``
  seconds (hypercorn's idle timer: a partial head does not stop it) is closed. There is
  no read timeout once a request is in (``READ_TIMEOUT`` is None): the streaming config
  (``/pools/default/bs/{bucket}``) is a request the client sends nothing after, for as
  long as it wants configs, and a node keeps it open (a read timeout cut it every 10 s:
  gocbcore then logged "Config block decode failure (unexpected EOF)" and reconnected);
* a request body: ``_control.MAX_BODY`` bytes within ``_control.BODY_TIMEOUT`` seconds.

With TLS, the same application is also served over HTTPS on a port of its own (a node's
18091). Each connection there goes through ``_tls.TlsSetup.accept`` first (client
certificates verified and mapped as on the KV port; a refused client is closed), then to
hypercorn's connection handler (``hypercorn.trio.tcp_server.TCPServer``, what its trio
worker runs per connection). A connection whose client certificate maps to a user is
that user's for every request on it (``certificate_users``, read by the guard of
``_asgi.py``), as ns_server authenticates REST calls by certificate.
"""

from __future__ import annotations

import errno
import importlib
import ipaddress
import logging
import socket
import sys
from typing import TYPE_CHECKING, Any, cast

import trio

from mockdcp.server._ports import hold, listen_again
from mockdcp.util import ServerError

if TYPE_CHECKING:
    from hypercorn.config import Config
    from hypercorn.typing import AppWrapper, Framework

    from mockdcp.producer import Node
    from mockdcp.server._serve import MockDcpServer
    from mockdcp.server._tls import TlsSetup

#: (client address, server address) of an HTTPS connection -> its certificate's user
CertificateUsers = dict[tuple[tuple[str, int], tuple[str, int]], str]

log = logging.getLogger("mockdcp.http")

#: seconds a read may bring nothing before hypercorn drops the connection: none (the
#: module docstring); a slow request head is cut by the idle timer, a slow body by
#: ``_control.BODY_TIMEOUT``
READ_TIMEOUT: int | None = None
#: seconds an idle keep-alive connection stays open
KEEP_ALIVE_TIMEOUT = 5
#: seconds hypercorn gives open requests (a streaming config) when the server stops
GRACEFUL_TIMEOUT = 0.5


def is_loopback(host: str) -> bool:
    """True for a bind address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_sockets(host: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets for every address of ``host``, all on one port (the first
    one's, when ``port`` is 0). Raises ``ServerError`` if the port is taken."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as exc:
        raise ServerError(f"cannot listen on {host}:{port}: {exc}") from exc
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, addr in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if sockets[0] is not sock:
                addr = (addr[0], sockets[0].getsockname()[1], *addr[2:])
            sock.bind(addr)
            sock.listen(128)
            sock.setblocking(False)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ServerError(f"cannot listen on {host}:{port}: {exc}") from exc
    return sockets


class HttpService:
    """The management port of one ``Node``: bound at construction, served by ``run``.

    ``control_open``: the control API (``/mock/...``, ``/metrics``) needs no credentials
    even when the port is reachable from other machines (``mockdcp serve
    --control-open``). On a loopback address it never does; ``/mock/health`` never does.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        control_open: bool = False,
        tls: TlsSetup | None = None,
        https_port: int | None = None,
        held: HttpService | None = None,
    ) -> None:
        """``https_port``: the HTTPS port (default: the TLS options'). ``held``: the
        service of a node that was down, whose ports it held (``hold``): they listen
        again here, none is bound anew (``_ports``)."""
        self.control_open = control_open or is_loopback(host)
        self.tls = tls
        self.certificate_users: CertificateUsers = {}
        #: the HTTPS port's sockets (none without TLS)
        self.https_sockets: list[socket.socket] = []
        self.https_port: int | None = None
        self.sockets: list[socket.socket]
        if held is not None:
            self.sockets = [listen_again(sock) for sock in held.sockets]
            self.https_sockets = [listen_again(sock) for sock in held.https_sockets]
            held.sockets, held.https_sockets = [], []
            self.port: int = held.port
            self.https_port = held.https_port
            return
        self.sockets = bind_sockets(host, port)
        self.port = int(self.sockets[0].getsockname()[1])
        if tls is not None:
            try:
                wanted = tls.options.https_port if https_port is None else https_port
                self.https_sockets = bind_sockets(host, wanted)
            except ServerError:
                self.close()
                raise
            self.https_port = int(self.https_sockets[0].getsockname()[1])

    def close(self) -> None:
        for sock in [*self.sockets, *self.https_sockets]:
            sock.close()

    def hold(self) -> None:
        """Its node went down: its ports refuse connections and stay its own (bound,
        not listening: ``_ports.hold``) until a service made ``held`` by it serves them."""
        self.sockets = [hold(sock) for sock in self.sockets]
        self.https_sockets = [hold(sock) for sock in self.https_sockets]

    async def run(
        self,
        server: MockDcpServer,
        node: Node | None = None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled (hypercorn's trio worker on the bound sockets), as
        ``node`` (default: the server's first)."""
        # imported in a worker thread: imported here, they held the event loop (and so
        # the KV port and ``mockdcp serve``'s ready line) for their 0.3 s; once imported
        # (a later server of the process) there is no thread to wait for. Not abandoned on
        # cancel: a server stopped while the thread imports waits for it (at most what is
        # left of the 0.3 s, once a process), so no import runs on once the server has
        # stopped (``serve()`` exited, ``Server.stop()`` returned) and the caller then does
        # what it likes with the modules (pytester's in-process runs take back from
        # ``sys.modules`` what a run imported: an import still running then crashed the
        # process or raised ImportError, in this run or a later one)
        modules = _http_stack(self.tls)
        if not all(_imported(name) for name in modules):
            await trio.to_thread.run_sync(_import_all, modules)
        from hypercorn.config import Config, Sockets
        from hypercorn.trio.run import worker_serve
        from hypercorn.utils import wrap_app

        from mockdcp.server._asgi import build_app

        config = Config()
        config.accesslog = None
        config.errorlog = log
        config.read_timeout = READ_TIMEOUT
        config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT
        config.graceful_timeout = GRACEFUL_TIMEOUT
        # hypercorn.trio.serve() binds its own sockets from ``config.bind``; worker_serve,
        # which it calls, also takes sockets already bound (as hypercorn's own workers do)
        sockets = Sockets(secure_sockets=[], insecure_sockets=self.sockets, quic_sockets=[])
        async with trio.open_nursery() as tasks:
            app = build_app(
                server,
                tasks,
                node=node,
                control_open=self.control_open,
                certificate_users=self.certificate_users,
            )
            wrapped = wrap_app(cast("Framework", app), config.wsgi_max_body_size, "asgi")
            if self.tls is not None:
                tasks.start_soon(self._serve_https, wrapped, config, server)
            task_status.started()
            try:
                await worker_serve(wrapped, config, sockets=sockets)
            except (OSError, BaseExceptionGroup) as exc:
                # its sockets were closed (the server stopped) or held (its node went
                # down, ``hold``) while hypercorn started, before it first served them:
                # nothing to serve, and no error of the server's
                rest = _unless_closed(exc, sockets.insecure_sockets)
                if rest is not None:
                    raise rest from None

    async def _serve_https(self, app: AppWrapper, config: Config, server: MockDcpServer) -> None:
        """Accept HTTPS connections until cancelled (module docstring)."""
        # cancelled before it first ran (its node went down at once), its sockets may be
        # held already (``hold``): not listening, nothing to serve
        await trio.lowlevel.checkpoint_if_cancelled()
        from hypercorn.trio.tcp_server import TCPServer
        from hypercorn.trio.worker_context import WorkerContext
        from hypercorn.typing import ConnectionState

        from mockdcp.server._kv import CLOSE_DRAIN, close_gracefully
        from mockdcp.server._tls import TlsRefused, log_refusal

        assert self.tls is not None
        tls, users = self.tls, server.node.users
        context = WorkerContext(None)

        async def connection(transport: trio.SocketStream) -> None:
            peer = _address(transport.socket.getpeername())
            try:
                accepted = await tls.accept(transport, users, https=True)
            except TlsRefused as exc:
                log_refusal(f"{peer[0]}:{peer[1]}", "HTTPS", exc)
                with trio.move_on_after(CLOSE_DRAIN) as scope:
                    scope.shield = True
                    await close_gracefully(exc.stream)
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await transport.aclose()
                return
            key = (peer, _address(transport.socket.getsockname()))
            if accepted.user is not None:
                self.certificate_users[key] = accepted.user
            try:
                stream: Any = accepted.stream  # hypercorn's handler takes it as its SSLStream
                await TCPServer(app, config, context, ConnectionState({}), stream)
            finally:
                self.certificate_users.pop(key, None)

        listeners = [
            trio.SocketListener(trio.socket.from_stdlib_socket(sock)) for sock in self.https_sockets
        ]
        await trio.serve_listeners(connection, listeners)


def _http_stack(tls: TlsSetup | None) -> list[str]:
    """The modules ``HttpService.run`` serves with (hypercorn, Starlette and the
    application; with TLS what ``_serve_https`` adds)."""
    modules = ["hypercorn.config", "hypercorn.trio.run", "hypercorn.utils", "mockdcp.server._asgi"]
    if tls is not None:
        modules += ["hypercorn.trio.tcp_server", "hypercorn.trio.worker_context"]
    return modules


def _imported(name: str) -> bool:
    """``name`` is imported, all of it: not still being imported by another server's
    thread (in ``sys.modules`` from its start), whose module lock importing it here
    would hold the event loop on."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def _import_all(modules: list[str]) -> None:
    for name in modules:
        importlib.import_module(name)


def _address(sockaddr: Any) -> tuple[str, int]:  # noqa: ANN401 - an AF_INET or AF_INET6 address
    """(host, port) as hypercorn puts it in the ASGI scope's ``client`` and ``server``."""
    return str(sockaddr[0]), int(sockaddr[1])


def _unless_closed(
    exc: OSError | BaseExceptionGroup[BaseException], sockets: list[socket.socket]
) -> BaseException | None:
    """``exc`` without the EBADF errors of ``sockets`` closed under hypercorn (None if
    that was all of it)."""

    def closed(error: BaseException) -> bool:
        return (
            isinstance(error, OSError)
            and error.errno == errno.EBADF
            and any(sock.fileno() == -1 for sock in sockets)
        )

    if isinstance(exc, BaseExceptionGroup):
        return exc.split(closed)[1]
    return None if closed(exc) else exc
