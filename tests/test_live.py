from __future__ import annotations

import io
import json
import logging
import os
import pty
import select
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import trio
from rich.console import Console

from mockdcp.cli import _live

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _state() -> dict[str, Any]:
    streams = [
        {
            "vbucket": vb,
            "stream_id": None,
            "state": "in_memory",
            "items_sent": 10,
            "markers_sent": 1,
            "backfills": 0,
            "last_sent_seqno": 25 if vb < 3 else 10,
        }
        for vb in range(4)
    ]
    return {
        "bucket": "travel",
        "num_vbuckets": 4,
        "kv_port": 11210,
        "http_port": 8091,
        "connections": [
            {
                "conn_id": 7,
                "name": "kafka-connector",
                "state": "dcp_open",
                "bytes_received": 900,
                "bytes_sent": 3 * 1024 * 1024,
                "messages_sent": 88,
                "acked_bytes": 2048,
                "unacked_bytes": 512,
                "buffer_size": 20 * 1024 * 1024,
                "acks": 2,
                "noops_sent": 3,
                "noops_answered": 2,
                "streams": streams,
            }
        ],
        "streams": {"total": 4, "by_state": {"backfilling": 0, "in_memory": 4}},
        "vbuckets": [
            {
                "vbucket": vb,
                "state": "active",
                "uuid": 1,
                "high_seqno": 25,
                "persisted_seqno": 20,
                "purge_seqno": 0,
                "streams": 1,
                "sent_seqno": 25 if vb < 3 else 10,
                "acked_seqno": 25 if vb < 2 else None,
            }
            for vb in range(4)
        ],
        "totals": {},
        "scenario": {
            "applied": 5,
            "current": "6/9 failover",
            "label": "after the load",
            "expectations": [
                {"name": "rollback of vbucket 0 to 40", "passed": False, "detail": "none"},
                {"name": "no duplicate", "passed": True, "detail": ""},
            ],
            "failure": None,
            "finished": False,
        },
    }


def _text(renderable: object) -> str:
    console = Console(file=io.StringIO(), record=True, width=120, force_terminal=True)
    console.print(renderable)
    return console.export_text()


def test_render_shows_connections_streams_seqnos_step_and_expectations() -> None:
    text = _text(_live.render(_state()))
    assert "bucket travel (4 vbuckets)" in text
    assert "streams 4: in_memory 4" in text
    assert "kafka-connector" in text
    assert "dcp_open" in text
    assert "3.0 MiB" in text  # bytes sent
    assert "512 B / 20.0 MiB" in text  # unacked against the buffer size
    assert "2/3" in text  # noops answered / sent
    assert "seqnos sent 85 of high 100: 3/4 vbuckets caught up" in text
    assert "step: 6/9 failover  (5 applied)  label after the load" in text
    assert "expect rollback of vbucket 0 to 40  failed: none" in text
    assert "expect no duplicate  met" in text


def test_render_lists_the_vbuckets_furthest_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_live, "VBUCKET_ROWS", 1)
    text = _text(_live.render(_state()))
    rows = [line.split() for line in text.splitlines() if "active" in line]
    assert rows == [
        [
            "│",
            "3",
            "│",
            "active",
            "│",
            "25",
            "│",
            "20",
            "│",
            "10",
            "│",
            "-",
            "│",
            "15",
            "│",
            "1",
            "│",
        ]
    ]


def test_render_of_an_idle_server_says_no_connection() -> None:
    state = _state()
    state.update(connections=[], scenario=None)
    state["streams"] = {"total": 0, "by_state": {"in_memory": 0}}
    text = _text(_live.render(state))
    assert "no connection" in text
    assert "streams 0: none" in text
    assert "step:" not in text


def test_view_is_wanted_only_on_a_terminal_without_json() -> None:
    assert not _live.wanted(io.StringIO(), json_logs=False)

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert _live.wanted(Tty(), json_logs=False)
    assert not _live.wanted(Tty(), json_logs=True)


async def test_run_live_view_redraws_when_the_snapshot_changes_until_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    states = [_state() for _ in range(3)]
    states[1]["bucket"] = "second"
    states[2]["bucket"] = "third"
    looks = 0
    drawn: list[str] = []
    render = _live.render

    def snapshot() -> dict[str, Any]:
        nonlocal looks
        looks += 1
        return states[min(looks - 1, 2)]

    def counting_render(state: dict[str, Any]) -> object:
        drawn.append(state["bucket"])
        return render(state)

    monkeypatch.setattr(_live, "render", counting_render)
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True)
    with trio.move_on_after(0.55):
        await _live.run_live_view(snapshot, console=console, refresh=0.1)
    assert looks >= 4
    assert drawn == ["travel", "second", "third"]  # not again while unchanged
    assert "bucket third" in out.getvalue()


def test_json_lines_formatter_writes_one_object_per_record() -> None:
    record = logging.LogRecord("mockdcp.server", logging.INFO, "f", 1, "conn %d", (3,), None)
    row = json.loads(_live.JsonLinesFormatter().format(record))
    assert (row["level"], row["logger"], row["message"]) == ("info", "mockdcp.server", "conn 3")


_SERVE = [
    sys.executable,
    "-m",
    "mockdcp",
    "serve",
    "--port",
    "0",
    "--http-port",
    "0",
    "--vbuckets",
    "4",
    "--docs",
    "0",
]


def test_serve_with_stdout_not_a_terminal_prints_only_the_ready_line() -> None:
    proc = subprocess.Popen(_SERVE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(b"mockdcp ready")
    time.sleep(4 * _live.REFRESH)  # several redraws, had there been a view
    proc.terminate()
    rest = proc.stdout.read()
    proc.wait(10)
    proc.stdout.close()
    assert rest == b""


def test_serve_on_a_terminal_draws_the_live_view() -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen(_SERVE, stdout=follower, stderr=subprocess.DEVNULL)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 20
    try:
        while b"vbuckets caught up" not in seen and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.5)[0]:
                seen += os.read(leader, 65536)
    finally:
        proc.terminate()
        proc.wait(10)
        os.close(leader)
    assert b"mockdcp ready" in seen
    assert b"vbuckets caught up" in seen


_SCENARIO = """
name: live-view
bucket: {vbuckets: 4}
steps:
  - set: {key: a, value: {n: 1}}
  - wait: {seconds: 1.2}
"""


def _pty_output(argv: list[str]) -> bytes:
    """Everything ``argv`` writes to a terminal until it exits."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdout=follower, stderr=subprocess.DEVNULL)
    os.close(follower)
    out = b""
    try:
        while True:
            if select.select([leader], [], [], 0.5)[0]:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the child closed the terminal
                    break
                out += data
            elif proc.poll() is not None:
                break
    finally:
        proc.wait(30)
        os.close(leader)
    return out


def test_run_on_a_terminal_draws_the_live_view_then_the_report(tmp_path: Path) -> None:
    scenario = tmp_path / "live.yaml"
    scenario.write_text(_SCENARIO)
    out = _pty_output([sys.executable, "-m", "mockdcp", "run", str(scenario)])
    assert b"vbuckets caught up" in out
    assert out.rindex(b"PASSED") > out.index(b"vbuckets caught up")


def test_run_into_a_pipe_prints_only_the_report(tmp_path: Path) -> None:
    scenario = tmp_path / "live.yaml"
    scenario.write_text(_SCENARIO)
    argv = [sys.executable, "-m", "mockdcp", "run", str(scenario)]
    done = subprocess.run(argv, capture_output=True, timeout=30, check=True)
    assert b"vbuckets caught up" not in done.stdout
    assert b"PASSED" in done.stdout
