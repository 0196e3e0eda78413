"""Ports the bench names for a server before the server binds them, drawn below the
kernel's ephemeral range.

``bench startup`` polls the KV port of the ``mockdcp serve`` it spawns before the ready
line names it, so it chooses the port and holds it until the server listens
(``held_port``). Drawn from the ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``)
by a bind to port 0, the held port was still found with another process's socket on it
when the server bound it: beside the full tier's benches and explore runs, 40 spawns in
610 met a client connection of a test on 127.0.0.1 and that very port, in TIME_WAIT (38)
or established (4), as ``/proc/net/tcp`` showed (CI failed twice: ``cannot listen on
127.0.0.1:33016: Address already in use``); drawn below the range, none in 1,385. Every
outgoing connection's port comes from the ephemeral range; below it, from ``FLOOR`` up,
a port is taken only by a bind that names it. The tests draw the ports they name for
servers there too (go-dcp's API, a container's published ports).
"""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

#: where Linux keeps the ephemeral range: two numbers, its first and last port
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: Linux's default ephemeral range, where the file cannot be read
DEFAULT_EPHEMERAL = (32_768, 60_999)
#: the lowest port drawn: above the registered ports services are configured with
#: (Couchbase's 8091-8096, 11210, 18091-18096 among them)
FLOOR = 20_000
#: ports tried before giving up (a port here is taken only by another bind naming it)
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
    """A free port outside the ephemeral range, for a server named a port before it
    binds it (see the module docstring)."""
    ports = unclaimed_range(ephemeral_range())
    draw = random.SystemRandom()
    for _ in range(TRIES):
        port = draw.choice(ports)
        if is_free(port):
            return port
    raise RuntimeError(f"no free port among {TRIES} drawn from {ports.start}-{ports.stop - 1}")


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A free port of 127.0.0.1 outside the ephemeral range (``unclaimed_port``) for a
    server the bench spawns, held until the block ends: bound with ``SO_REUSEADDR``, not
    listening. A bind of it without the option is refused, while ``serve`` (which sets
    it) binds and listens on it (a bound socket that does not listen shares its port so;
    ``mockdcp.server``'s ``_ports.hold`` keeps a down node's ports the same way); a
    connection to it is refused until ``serve`` listens. Picked and let go before the
    spawn, as it once was, the port was another process's by the time ``serve`` bound it
    (``cannot listen on 127.0.0.1:48696``)."""
    for _ in range(TRIES):
        with socket.socket() as holder:
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                holder.bind(("127.0.0.1", unclaimed_port()))
            except OSError:  # bound by another since it was found free: draw again
                continue
            yield int(holder.getsockname()[1])
            return
    raise RuntimeError(f"no port held in {TRIES} draws")


__all__ = ["ephemeral_range", "held_port", "is_free", "unclaimed_port", "unclaimed_range"]
