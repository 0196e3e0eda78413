"""How the benches spawn ``mockdcp serve``: a port picked free beforehand can be taken
by another process before the server binds it (a CI failure of ``bench startup``:
``cannot listen on 127.0.0.1:48696: Address already in use`` while another bench ran
beside it); the start is then tried again on other ports, any other failure is raised
with the end of the server's stderr."""

from __future__ import annotations

import socket
import sys
import tempfile

import pytest

from mockdcp.cli.bench import _startup
from mockdcp.cli.bench._startup import PortTaken, on_free_ports, serve_failed


def test_serve_is_started_again_on_other_ports_when_a_picked_port_was_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = socket.socket()  # bound, not listening: the server's bind fails, nothing accepts
    taken.bind(("127.0.0.1", 0))
    taken_port = taken.getsockname()[1]
    picks: list[int] = []
    real = _startup.free_port

    def pick() -> int:
        port = taken_port if not picks else real()
        picks.append(port)
        return port

    monkeypatch.setattr(_startup, "free_port", pick)
    with taken:
        times = _startup.serve_times(sys.executable)
    assert times["kv_listening_s"] <= times["ready_s"]
    # the first start's KV port was the taken one; the second start picked two more
    assert len(picks) == 4
    assert picks[0] == taken_port not in picks[2:]


def test_a_port_in_use_is_told_apart_from_other_start_failures() -> None:
    with tempfile.TemporaryFile() as stderr:
        stderr.write(b"mockdcp: cannot listen on 127.0.0.1:1: [Errno 98] Address already in use\n")
        error = serve_failed("serve exited (1) before listening", stderr)
    assert isinstance(error, PortTaken)
    assert "Address already in use" in str(error)
    with tempfile.TemporaryFile() as stderr:
        stderr.write(b"mockdcp: --docs must be at least 0\n")
        error = serve_failed("serve exited (2) before listening", stderr)
    assert type(error) is RuntimeError
    assert str(error).endswith("its stderr ends:\nmockdcp: --docs must be at least 0")


def test_a_start_that_keeps_meeting_taken_ports_fails_after_three_tries() -> None:
    tries: list[int] = []

    def start() -> int:
        tries.append(1)
        raise PortTaken("taken")

    with pytest.raises(PortTaken):
        on_free_ports(start)
    assert len(tries) == 3
    assert on_free_ports(lambda: 7) == 7
