"""How the benches spawn ``mockdcp serve``. ``bench startup`` polls the KV port before the
ready line names it, so it chooses the port: it picked one free and let it go, and under
parallel load another process took it before the server bound it (a CI failure of
``bench startup``: ``cannot listen on 127.0.0.1:48696: Address already in use``; a start
tried again on other ports met a taken port again, this file's own test among them). The
bench then held the port until the server listened on it (``held_port``), and ``bench
compare`` lets the server choose both of its ports. Held, a port drawn by a bind to port
0 was still found with a test's client connection on it (CI failed twice more; 40
spawns in 610 under the full tier's load): the port is now drawn below the ephemeral
range, and a spawn that meets a taken port all the same says what was on it and tries
another (``LISTEN_ATTEMPTS``)"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
from typing import TYPE_CHECKING, Any

import pytest

from mockdcp.cli.bench import _startup
from mockdcp.cli.bench._ports import held_port
from mockdcp.cli.bench._startup import serve_failed

if TYPE_CHECKING:
    from collections.abc import Iterator

#: binds to port 0 that may not return a held port (about a second of this machine)
BINDS = 20_000


def test_a_held_port_is_nobody_elses() -> None:
    with held_port() as port:
        # a plain bind of it is refused; a bind to port 0, with the option or without,
        # never gets it; nothing accepts on it yet
        with socket.socket() as other, pytest.raises(OSError, match="in use"):
            other.bind(("127.0.0.1", port))
        for reuse in (0, 1):
            for _ in range(BINDS // 2):
                with socket.socket() as other:
                    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, reuse)
                    other.bind(("127.0.0.1", 0))
                    assert other.getsockname()[1] != port
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_serve_binds_the_port_the_bench_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    ports: list[int] = []
    real = _startup._serve_times

    def recorded(python: str, docs: int | None, port: int) -> dict[str, Any]:
        ports.append(port)
        return real(python, docs, port)

    monkeypatch.setattr(_startup, "_serve_times", recorded)
    times = _startup.serve_times(sys.executable)
    # one start, its KV port polled until it accepted: the server listened on the port
    # the bench held
    assert len(ports) == 1
    assert times["kv_listening_s"] <= times["ready_s"]
    assert times["http_up"]


def test_a_start_failure_is_raised_with_the_end_of_the_servers_stderr() -> None:
    with tempfile.TemporaryFile() as stderr:
        stderr.write(b"mockdcp: --docs must be at least 0\n")
        error = serve_failed("serve exited (2) before listening", stderr)
    assert type(error) is RuntimeError
    assert str(error).endswith("its stderr ends:\nmockdcp: --docs must be at least 0")


@contextlib.contextmanager
def _taken_port() -> Iterator[int]:
    """The port of a client connection, established: serve cannot bind it and a
    connection to it is refused, as CI saw (a test's connection on the held port)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname()) as client:
            accepted, _ = server.accept()
            with accepted:
                yield client.getsockname()[1]


def test_a_taken_port_is_said_with_its_sockets_and_another_is_held(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    holds = iter([_taken_port(), held_port()])
    monkeypatch.setattr(_startup, "held_port", lambda: next(holds))
    times = _startup.serve_times(sys.executable)
    assert times["http_up"]
    said = capsys.readouterr().err
    assert "before listening" in said
    assert "Address already in use" in said
    # the socket in the way is this very process's connection
    assert f" ESTABLISHED pid {os.getpid()}: " in said
    assert said.rstrip().endswith("trying another port")


def test_a_port_taken_every_time_fails_the_bench_with_its_sockets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_startup, "held_port", _taken_port)
    with pytest.raises(_startup.PortTaken, match=f" ESTABLISHED pid {os.getpid()}: "):
        _startup.serve_times(sys.executable)
    assert _startup.LISTEN_ATTEMPTS == 3
