"""tests/_ports.py: the ports a test names for a server before it binds them are drawn
outside the kernel's ephemeral range, where a port the benches hold for ``mockdcp serve``
(a bind to port 0) never is."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

from mockdcp.cli.bench._startup import held_port
from tests._ports import (
    DEFAULT_EPHEMERAL,
    FLOOR,
    ephemeral_range,
    is_free,
    unclaimed_port,
    unclaimed_range,
)

if TYPE_CHECKING:
    from pathlib import Path


def test_a_listener_with_reuseaddr_takes_a_held_port_and_serve_cannot_listen() -> None:
    # why a picked port must not come from the ephemeral range: go's listeners and
    # docker-proxy set SO_REUSEADDR, and the held port is bound, not listening
    with held_port() as port, socket.socket() as taker:
        taker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taker.bind(("0.0.0.0", port))
        taker.listen()
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError, match="in use"):
                server.bind(("127.0.0.1", port))


def test_an_unclaimed_port_is_free_and_below_the_ephemeral_range() -> None:
    first, _ = ephemeral_range()
    for _ in range(50):
        port = unclaimed_port()
        assert FLOOR <= port < first
        with socket.socket() as server:
            server.bind(("0.0.0.0", port))
            server.listen()


def test_a_port_bound_on_loopback_only_is_not_free() -> None:
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 0))
        assert not is_free(holder.getsockname()[1])


def test_the_ephemeral_range_is_read_from_the_kernels_file(tmp_path: Path) -> None:
    path = tmp_path / "ip_local_port_range"
    path.write_text("40000\t50000\n")
    assert ephemeral_range(path) == (40_000, 50_000)
    path.write_text("garbage\n")
    assert ephemeral_range(path) == DEFAULT_EPHEMERAL
    assert ephemeral_range(tmp_path / "absent") == DEFAULT_EPHEMERAL


def test_ports_are_drawn_above_a_range_that_starts_too_low() -> None:
    assert unclaimed_range((32_768, 60_999)) == range(FLOOR, 32_768)
    assert unclaimed_range((1_024, 50_000)) == range(50_001, 65_536)
    with pytest.raises(RuntimeError, match="too few ports"):
        unclaimed_range((1_024, 65_000))
