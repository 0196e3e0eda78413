"""A down node's ports are held (``mockdcp.server._ports``), also while a child process
forked a moment before still has the listener."""

from __future__ import annotations

import os
import socket
import time

import pytest

from mockdcp.server import _ports
from mockdcp.util import ServerError


def _listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def _refused(port: int) -> bool:
    with socket.socket() as client:
        try:
            client.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return True
    return False


def test_a_held_port_refuses_connections_and_listens_again() -> None:
    listening = _listener()
    port = listening.getsockname()[1]
    held = _ports.hold(listening)
    try:
        assert held.getsockname()[1] == port
        assert _refused(port)
        again = _ports.listen_again(held)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        held.close()
    assert again is held


def _fork_keeping(seconds: float) -> int:
    """A child that has this process's descriptors for ``seconds``, as one forked to
    spawn a consumer has them until it execs; then it exits."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        time.sleep(seconds)
        os._exit(0)
    return pid


def test_a_port_is_held_while_a_child_forked_before_still_has_its_listener() -> None:
    """The clean-clone CI of 8fa063c: ``mockdcp run`` spawned its consumer (a fork, in
    a thread) as the scenario's first step took a node down; the child still had the
    listener, and binding the port again failed with EADDRINUSE."""
    listening = _listener()
    port = listening.getsockname()[1]
    child = _fork_keeping(0.2)
    try:
        started = time.monotonic()
        held = _ports.hold(listening)
        waited = time.monotonic() - started
    finally:
        os.waitpid(child, 0)
    try:
        assert held.getsockname()[1] == port
        assert waited > 0.05  # it waited for the child's copy to go
        assert _refused(port)
    finally:
        held.close()


def test_a_port_that_stays_listening_is_a_clear_error_after_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listening = _listener()
    port = listening.getsockname()[1]
    keeper = os.dup(listening.fileno())  # the listener lives on past close()
    monkeypatch.setattr(_ports, "HOLD_WAIT", 0.05)
    try:
        with pytest.raises(ServerError, match=f"cannot hold port {port}"):
            _ports.hold(listening)
    finally:
        os.close(keeper)
