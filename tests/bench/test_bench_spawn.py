"""How the benches spawn ``mockdcp serve``. ``bench startup`` polls the KV port before the
ready line names it, so it chooses the port: it picked one free and let it go, and under
parallel load another process took it before the server bound it (a CI failure of
``bench startup``: ``cannot listen on 127.0.0.1:48696: Address already in use``; a start
tried again on other ports met a taken port again, this file's own test among them). The
bench now holds the port until the server listens on it (``held_port``), and ``bench
compare`` lets the server choose both of its ports. A held port is still open to a
listener that sets ``SO_REUSEADDR`` (go-dcp's API on a port a test picked so failed the
bench once more: ``cannot listen on 127.0.0.1:33422``); the ports tests name for servers
before they bind are drawn outside the ephemeral range since (``tests/_ports.py``)."""

from __future__ import annotations

import socket
import sys
import tempfile
from typing import Any

import pytest

from mockdcp.cli.bench import _startup
from mockdcp.cli.bench._startup import held_port, serve_failed

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
