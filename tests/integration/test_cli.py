from __future__ import annotations

import json
import subprocess
import sys
import types
from typing import TYPE_CHECKING, Any

import pytest
import trio

from mockdcp.protocol import GetAllVbSeqnos, StreamEndReason, decode_all_vb_seqnos

from .test_bad_input import _opened

if TYPE_CHECKING:
    from pathlib import Path

    from mockdcp.server import MockDcpServer


def _serve(*args: str) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mockdcp",
            "serve",
            "--port",
            "0",
            "--http-port",
            "0",
            "--json",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    return proc, ready


def test_serve_prints_a_ready_line_and_tail_streams_its_faker_documents() -> None:
    proc, ready = _serve("--docs", "200", "--vbuckets", "16")
    try:
        assert ready["event"] == "ready"
        assert ready["vbuckets"] == 16
        assert ready["connection_string"] == f"couchbase://127.0.0.1:{ready['kv_port']}"
        tail = subprocess.run(
            [
                sys.executable,
                "-m",
                "mockdcp",
                "tail",
                "--port",
                str(ready["kv_port"]),
                "--vbuckets",
                "0-15",
                "--json",
                "--limit",
                "200",
            ],
            capture_output=True,
            timeout=60,
            check=True,
        )
        rows = [json.loads(line) for line in tail.stdout.splitlines()]
        keys = {r["key"] for r in rows if r["event"] == "Mutation"}
        assert len(keys) == 200
        assert all(k.startswith("user::") for k in keys)
        assert any(r["event"] == "SnapshotMarker" for r in rows)
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert proc.returncode == 0


def test_serve_is_ready_only_when_its_documents_are_in() -> None:
    proc, ready = _serve("--docs", "30000", "--vbuckets", "64")

    async def high_seqnos() -> list[tuple[int, int]]:
        c = await _opened(types.SimpleNamespace(kv_port=ready["kv_port"]))  # type: ignore[arg-type]
        r = await c.call(GetAllVbSeqnos(opaque=c.next_opaque()))
        return decode_all_vb_seqnos(r.value)

    try:
        seqnos = trio.run(high_seqnos)
        assert len(seqnos) == 64
        assert sum(seqno for _, seqno in seqnos) == 30000
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert proc.returncode == 0


def test_serve_on_a_taken_port_fails_with_a_clear_error() -> None:
    proc, ready = _serve("--docs", "0")
    try:
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "mockdcp",
                "serve",
                "--port",
                str(ready["kv_port"]),
                "--http-port",
                "0",
            ],
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert second.returncode == 1
        assert b"cannot listen" in second.stderr
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_tail_against_nothing_fails_cleanly() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mockdcp", "tail", "--port", "1", "--limit", "1"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert b"mockdcp tail:" in result.stderr


async def test_vbucket_state_change_ends_streams_with_state_changed(server: MockDcpServer) -> None:
    from mockdcp.protocol import Opcode, Status, VBucketState

    server.bucket.set("x", "{}", vbucket=2)
    c = await _opened(server)
    req = c.stream_request(vb=2)
    assert (await c.call(req)).status == Status.SUCCESS
    server.bucket.set_vbucket_state(2, VBucketState.REPLICA)
    frames = list(c.skipped)
    with trio.move_on_after(1):
        while True:
            frames.append(await c.frame(2))
            if frames[-1].opcode == Opcode.DCP_STREAM_END:
                break
    end = frames[-1]
    assert end.opcode == Opcode.DCP_STREAM_END
    assert end.opaque == req.opaque
    assert int.from_bytes(end.extras, "big") == StreamEndReason.STATE_CHANGED
    # a replica still streams without ACTIVE_VB_ONLY, and refuses with it
    assert (await c.call(c.stream_request(vb=2))).status == Status.SUCCESS
    assert (await c.call(c.stream_request(vb=3, flags=0x10))).status == Status.SUCCESS
    server.bucket.set_vbucket_state(3, VBucketState.DEAD)
    assert (await c.call(c.stream_request(vb=3))).status == Status.NOT_MY_VBUCKET
    markers = [f for f in frames if f.opcode == Opcode.DCP_SNAPSHOT_MARKER]
    assert markers


def test_faker_data_set_is_the_same_for_the_same_seed() -> None:
    from mockdcp.data._dataset import faker_documents

    assert list(faker_documents(20, 5)) == list(faker_documents(20, 5))
    assert list(faker_documents(20, 5)) != list(faker_documents(20, 6))


async def test_tail_into_a_pipe_that_closes_exits_quietly(server: MockDcpServer) -> None:
    # `mockdcp tail | head -1`: the closed pipe is the reader leaving, not a lost
    # connection to resume (it once made tail reconnect for ever)
    for i in range(200):
        server.bucket.set(f"k{i}", "{}")
    cmd = [sys.executable, "-m", "mockdcp", "tail", "--port", str(server.kv_port), "--json"]
    proc = await trio.lowlevel.open_process(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stderr is not None
    with trio.fail_after(20):
        first = await proc.stdout.receive_some(1)
        await proc.stdout.aclose()
        await proc.wait()
        errors = b""
        while chunk := await proc.stderr.receive_some(65536):
            errors += chunk
    assert first
    assert proc.returncode == 0, errors
    assert b"Traceback" not in errors


def test_serve_clock_virtual_starts_the_bucket_clock_at_clock_start() -> None:
    import httpx

    proc, ready = _serve("--docs", "0", "--vbuckets", "4", "--clock", "virtual", "--clock-start",
                         "2024-01-01T00:00:00Z")  # fmt: skip
    try:
        url = f"http://127.0.0.1:{ready['http_port']}/mock/state"
        state = httpx.get(url, auth=("Administrator", "password"), timeout=10).json()
        assert state["clock"]["kind"] == "virtual"
        assert state["clock"]["now"] == "2024-01-01T00:00:00Z"
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    bad = subprocess.run(
        [sys.executable, "-m", "mockdcp", "serve", "--clock-start", "2024-01-01T00:00:00Z"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0
    assert "clock_start needs clock='virtual'" in bad.stderr


@pytest.mark.full  # three processes (the fast tier covers the same through serve())
def test_serve_bucket_type_ephemeral_is_reported_and_its_options_checked() -> None:
    import httpx

    proc, ready = _serve("--docs", "50", "--vbuckets", "4", "--bucket-type", "ephemeral",
                         "--eviction-policy", "nruEviction", "--memory-quota", "64MiB")  # fmt: skip
    try:
        url = f"http://127.0.0.1:{ready['http_port']}/pools/default/buckets/default"
        info = httpx.get(url, auth=("Administrator", "password"), timeout=10).json()
        assert (info["bucketType"], info["evictionPolicy"]) == ("ephemeral", "nruEviction")
        assert info["quota"]["ram"] == 64 * 1024 * 1024
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    for argv, message in (
        (["--eviction-policy", "noEviction"], "are an ephemeral bucket's"),
        (["--bucket-type", "ephemeral", "--memory-quota", "lots"], "not a byte count"),
    ):
        bad = subprocess.run(
            [sys.executable, "-m", "mockdcp", "serve", "--port", "0", *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode != 0
        assert message in bad.stderr


async def test_tail_says_how_far_its_output_goes(server: MockDcpServer, tmp_path: Path) -> None:
    """``tail --output --progress`` (``MOCKDCP_OUTPUT``, ``MOCKDCP_PROGRESS``, as
    ``check`` sets them): once it has read a deletion, the last item written, its
    report reaches every vbucket's high seqno on the active branch, which is what
    ``check`` waits for to judge a matching output at once."""
    from mockdcp.cli._check import _reported_all

    for i in range(20):
        server.bucket.set(f"k{i}", "{}")
    server.bucket.delete("k3")
    output, progress = tmp_path / "out.jsonl", tmp_path / "out.progress"
    cmd = [sys.executable, "-m", "mockdcp", "tail", "--port", str(server.kv_port),
           "--output", str(output), "--progress", str(progress)]  # fmt: skip
    proc = await trio.lowlevel.open_process(cmd, stdout=subprocess.DEVNULL)
    try:
        with trio.fail_after(30):
            while True:  # a file another process writes: polled
                if _reported_all(server, progress):
                    break
                await trio.sleep(0.05)
    finally:
        proc.terminate()
        with trio.fail_after(10):
            await proc.wait()
    assert proc.returncode == 0
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted(r["key"] for r in rows) == sorted(f"k{i}" for i in range(20) if i != 3)
    assert _reported_all(server, progress)  # its last write, at the stop, too
