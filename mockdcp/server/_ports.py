"""A down node's ports, held: bound, not listening.

A real node that restarts comes back on its configured ports, and its clients reconnect
there. A node that ``node_down`` (or a failover, a rebalance out) takes down must refuse
connections, as a stopped process's ports do; it must also keep its ports, so that
``node_up`` can serve them again: a port closed meanwhile may be taken by any socket of
the machine (issue 39's 10,000-schedule run, schedule 4538: another process's socket
took it, and ``node_up`` failed with EADDRINUSE, a server error).

``hold`` swaps a listening socket for one bound to the same address that does not listen:
a TCP connection to it is refused (the kernel answers a SYN to a port nobody listens on
with a reset), and the port stays taken: the kernel gives it to no ``connect`` nor bind
to port 0 (it skips the ports that a bind holds) and refuses a bind of it without
``SO_REUSEADDR``. (A bind of that very port with ``SO_REUSEADDR`` could still share it,
as with any socket that is not listening; the holder needs the option itself, to bind
past the node's connections in TIME_WAIT.) The
new socket is made before the listener is closed and bound right after, in one call with
no wait between: the port is free for the time between two system calls, not while the
node is down. ``listen_again`` makes it listen (``node_up``).

A process forked a moment before the listener is closed has the listener too, until it
execs (Python's sockets close on exec): a consumer that ``mockdcp run`` spawns in a
thread (``trio.run_process``) while the first steps take a node down. Closing ours then
leaves the listener listening in the child, and the kernel refuses the bind with
EADDRINUSE (a listening socket on the port); the port is nobody else's meanwhile. The
bind is tried again until the child's copy is gone (``HOLD_WAIT`` at most; the clean
clone CI of 8fa063c failed ``docs/cluster.md``'s tour once so, and 5 runs in 640 of it
under load did before this).
"""

from __future__ import annotations

import errno
import socket
import time
from typing import TYPE_CHECKING

from mockdcp.util import ServerError

if TYPE_CHECKING:
    import trio

#: the listen backlog of a node's ports (as ``_http.bind_sockets``)
BACKLOG = 128
#: seconds ``hold`` tries to bind a port again while a forked child still has its
#: listener (module docstring)
HOLD_WAIT = 2.0
#: seconds between two of those tries
_RETRY = 0.001


def hold(listening: socket.socket | trio.socket.SocketType) -> socket.socket:
    """A socket bound to ``listening``'s address, not listening, in place of it (closed
    here); ``ServerError`` if the port could not be bound again (module docstring)."""
    address = listening.getsockname()
    holder = socket.socket(listening.family, socket.SOCK_STREAM)
    try:
        # the node's own connections, closed as it went down, wait in TIME_WAIT on the
        # port: without SO_REUSEADDR they would keep it from being bound again
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if listening.family == socket.AF_INET6:
            holder.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        listening.close()
        _bind_once_free(holder, address)
    except OSError as exc:
        holder.close()
        raise ServerError(f"cannot hold port {address[1]} of a node that is down: {exc}") from exc
    holder.setblocking(False)
    return holder


def _bind_once_free(sock: socket.socket, address: tuple[str, int]) -> None:
    """Bind ``sock`` to ``address``, its listener just closed: again while the kernel
    says a socket listens there (a child forked with the listener that has not exec'd
    yet, module docstring), for ``HOLD_WAIT`` seconds at most."""
    deadline = time.monotonic() + HOLD_WAIT
    while True:
        try:
            sock.bind(address)
            return
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or time.monotonic() >= deadline:
                raise
        time.sleep(_RETRY)  # the child's exec is a matter of milliseconds


def listen_again(held: socket.socket) -> socket.socket:
    """``held`` listening again (``node_up``): the same port, never given up."""
    try:
        held.listen(BACKLOG)
    except OSError as exc:
        port = held.getsockname()[1]
        held.close()
        raise ServerError(f"cannot listen on port {port} again: {exc}") from exc
    return held


__all__ = ["BACKLOG", "hold", "listen_again"]
