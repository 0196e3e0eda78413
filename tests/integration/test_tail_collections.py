from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
import trio

from mockdcp.model import Bucket
from mockdcp.server import serve

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mockdcp.server import MockDcpServer

HOTEL_DOCS = 25


@pytest.fixture
async def server() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket(
        "default", 4, seed=6, clock=time.time, collections={"inventory": ["hotel", "airline"]}
    )
    for i in range(HOTEL_DOCS):
        bucket.set(f"d{i}", b"{}")
        bucket.set(f"h{i}", b"{}", collection_id=8)
        bucket.set(f"a{i}", b"{}", collection_id=9)
    async with serve(port=0, http_port=0, bucket_obj=bucket) as srv:
        yield srv


def _tail(server: MockDcpServer, *options: str) -> list[str]:
    return [sys.executable, "-m", "mockdcp", "tail", "--port", str(server.kv_port), *options]


async def _run(cmd: list[str]) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(30):
        return await trio.run_process(cmd, capture_stdout=True, capture_stderr=True, check=False)


def _rows(out: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize("name", ["inventory.hotel", "0x8", "8"])
async def test_tail_streams_one_collection_by_name_or_id(server: MockDcpServer, name: str) -> None:
    cmd = _tail(server, "--json", "--collection", name, "--limit", str(HOTEL_DOCS))
    result = await _run(cmd)
    assert result.returncode == 0, result.stderr
    items = [r for r in _rows(result.stdout) if "key" in r]
    assert len(items) == HOTEL_DOCS
    assert {r["collection"] for r in items} == {8}


async def test_tail_streams_a_scope(server: MockDcpServer) -> None:
    result = await _run(_tail(server, "--json", "--scope", "inventory", "--limit", "50"))
    assert result.returncode == 0, result.stderr
    items = [r for r in _rows(result.stdout) if "key" in r]
    assert {r["collection"] for r in items} == {8, 9}


async def test_tail_refuses_an_unknown_collection(server: MockDcpServer) -> None:
    result = await _run(_tail(server, "--collection", "inventory.nope"))
    assert result.returncode == 1
    assert b"no collection 'inventory.nope'" in result.stderr


async def test_tail_refuses_a_collection_and_a_scope_together(server: MockDcpServer) -> None:
    result = await _run(_tail(server, "--collection", "0x8", "--scope", "0x8"))
    assert result.returncode == 2
    assert b"not both" in result.stderr


async def test_tail_prints_the_end_of_a_dropped_collection_and_exits(
    server: MockDcpServer,
) -> None:
    cmd = _tail(server, "--json", "--collection", "inventory.hotel")
    proc = await trio.lowlevel.open_process(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stderr is not None
    out = b""
    with trio.fail_after(30):
        while out.count(b'"key"') < HOTEL_DOCS:
            out += await proc.stdout.receive_some(65536)
        await server.apply({"drop_collection": {"collection": "inventory.hotel"}})
        while chunk := await proc.stdout.receive_some(65536):
            out += chunk
        errors = b""
        while chunk := await proc.stderr.receive_some(65536):
            errors += chunk
        await proc.wait()
    assert proc.returncode == 0, errors
    assert b"every stream has ended" in errors
    rows = _rows(out)
    ends = [r for r in rows if r["event"] == "StreamEnd"]
    assert [r["reason_name"] for r in ends] == ["FILTER_EMPTY"] * 4
    drops = [r for r in rows if r.get("type") == "END_COLLECTION"]
    assert {(r["vb"], r["collection_id"]) for r in drops} == {(vb, 8) for vb in range(4)}
