"""``mockdcp.cli.bench._ports``: the ports the bench holds for the ``mockdcp serve`` it
spawns, and those the tests name for servers before they bind them, are drawn below the
kernel's ephemeral range, where no connection's port and no bind to port 0 lands."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

from mockdcp.cli.bench._ports import (
    DEFAULT_EPHEMERAL,
    FLOOR,
    ephemeral_range,
    held_port,
    is_free,
    unclaimed_port,
    unclaimed_range,
)

if TYPE_CHECKING:
    from pathlib import Path


def test_a_listener_with_reuseaddr_takes_a_held_port_and_serve_cannot_listen() -> None:
    # what a held port does not stop: a bind naming it with SO_REUSEADDR (go's
    # listeners, docker-proxy); hence the ports tests name are drawn free too
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


def test_a_held_port_is_below_the_ephemeral_range_and_refuses_connections() -> None:
    first, _ = ephemeral_range()
    with held_port() as port:
        assert FLOOR <= port < first
        assert not is_free(port)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


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
