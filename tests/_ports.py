"""Ports for servers a test names before they bind: go-dcp's API, a container's published
ports. Such a port is picked free and let go, and the server binds it later; in between it
is anybody's.

Picked by a bind to port 0, it came from the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``), the range every ``bind(("127.0.0.1", 0))``
and every outgoing connection draws from. ``bench startup`` holds such a port for the
``mockdcp serve`` it spawns (``held_port``: bound with ``SO_REUSEADDR``, not listening);
a listener that sets ``SO_REUSEADDR`` too (Go's ``net.Listen``, docker-proxy) can still
bind and listen on a held port, and then the server cannot (a CI failure of ``bench
startup`` in the full tier: ``cannot listen on 127.0.0.1:33422: Address already in use``,
beside go-dcp's API on a port picked so). The ports here are drawn at random below the
ephemeral range, where neither a bind to port 0 nor a connection ever lands.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: where Linux keeps the ephemeral range: two numbers, its first and last port
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: Linux's default ephemeral range, where the file cannot be read
DEFAULT_EPHEMERAL = (32_768, 60_999)
#: the lowest port drawn: above the registered ports services are configured with
#: (Couchbase's 8091-8096, 11210, 18091-18096 among them)
FLOOR = 20_000
#: ports tried before giving up (a port here is taken only by another test's pick)
TRIES = 100


def ephemeral_range(path: Path = EPHEMERAL_RANGE) -> tuple[int, int]:
    """The kernel's ephemeral range, first and last port."""
    try:
        first, last = (int(field) for field in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return first, last


def unclaimed_range(ephemeral: tuple[int, int]) -> range:
    """The ports drawn from: ``FLOOR`` up to the ephemeral range, or, where the range
    starts lower, the ports above it."""
    first, last = ephemeral
    if first - FLOOR >= 1_000:
        return range(FLOOR, first)
    if 65_535 - last >= 1_000:
        return range(last + 1, 65_536)
    raise RuntimeError(f"the ephemeral range {first}-{last} leaves too few ports outside it")


def is_free(port: int) -> bool:
    """Nothing is bound to ``port`` on any address (a bind without ``SO_REUSEADDR`` to
    every address is refused while any socket, listening or not, holds it)."""
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def unclaimed_port() -> int:
    """A free port outside the ephemeral range, for a server a test names before it binds
    (see the module docstring)."""
    ports = unclaimed_range(ephemeral_range())
    draw = random.SystemRandom()
    for _ in range(TRIES):
        port = draw.choice(ports)
        if is_free(port):
            return port
    raise RuntimeError(f"no free port among {TRIES} drawn from {ports.start}-{ports.stop - 1}")
