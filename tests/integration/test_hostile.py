"""Hostile inputs (issue 18): each bad input is that request's error, never the
connection's death, and a client that never reads costs a bounded amount of memory."""

from __future__ import annotations

import gc
import json
import logging
import os
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import psutil
import pytest
import trio

from mockdcp.model import Bucket
from mockdcp.producer import _dispatch
from mockdcp.protocol import (
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    Frame,
    GetErrorMap,
    Hello,
    HelloFeature,
    Magic,
    Noop,
    SaslAuth,
    SelectBucket,
    Status,
    Version,
    encode_frame,
)
from mockdcp.server import serve

from ._raw import RawClient, wait_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mockdcp.server import MockDcpServer

FEATURES = (HelloFeature.XERROR, HelloFeature.JSON, HelloFeature.SELECT_BUCKET)
PLAIN = b"\0Administrator\0password"


def _logged_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("mockdcp") and r.levelno >= logging.ERROR
    ]


def _bootstrap(*, collections: bool = False) -> list[bytes]:
    features = (*FEATURES, HelloFeature.COLLECTIONS) if collections else FEATURES
    return [
        Hello(opaque=1, agent=b"hostile", features=features).encode(),
        SaslAuth(opaque=2, mechanism="PLAIN", payload=PLAIN).encode(),
        SelectBucket(opaque=3, bucket="default").encode(),
        DcpOpen(opaque=4, name=b"hostile", flags=int(DcpOpenFlag.PRODUCER)).encode(),
    ]


async def _opened(server: MockDcpServer, *, collections: bool = False) -> RawClient:
    c = await RawClient.connect(server.kv_port)
    await c.send(b"".join(_bootstrap(collections=collections)))
    for opaque in (1, 2, 3, 4):
        r = await c.frame()
        assert (r.opaque, r.status) == (opaque, Status.SUCCESS)
    c.opaque = 1000
    if collections:  # a collection-aware stream needs noop (kv_engine refuses it without)
        assert (await _control(c, "enable_noop", "true")).status == Status.SUCCESS
    return c


async def _still_serves(c: RawClient) -> None:
    r = await c.call(Noop(opaque=c.next_opaque()))
    assert r.status == Status.SUCCESS


async def _control(c: RawClient, key: str, value: str) -> Frame:
    frame = encode_frame(
        Magic.REQUEST, 0x5E, opaque=c.next_opaque(), key=key.encode(), value=value.encode()
    )
    await c.send(frame)
    return await c.frame()


# -- numeric control values: one strict parser ---------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("9" * 5000, id="5000-digits"),
        pytest.param("²", id="superscript-two"),
        pytest.param("٣", id="arabic-indic-three"),
        pytest.param("+1024", id="sign"),
        pytest.param(" 1024", id="blank"),
        pytest.param("4294967296", id="u32-overflow"),
    ],
)
async def test_connection_buffer_size_that_is_not_ascii_digits_in_range_gets_einval(
    server: MockDcpServer, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    c = await _opened(server)
    r = await _control(c, "connection_buffer_size", value)
    assert r.status == Status.EINVAL
    await _still_serves(c)
    conn = next(iter(server.node.connections.values()))
    assert conn.settings.buffer_size == 0
    assert _logged_errors(caplog) == []


@pytest.mark.parametrize("value", ["1_0", "1e309", "inf", "nan", "1e2", "٣", "1" * 400, "0.05"])
async def test_noop_interval_that_is_not_a_plain_decimal_in_range_gets_einval(
    server: MockDcpServer, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    c = await _opened(server)
    r = await _control(c, "set_noop_interval", value)
    assert r.status == Status.EINVAL
    await _still_serves(c)
    assert _logged_errors(caplog) == []


@pytest.mark.parametrize(("value", "seconds"), [("1", 1.0), ("2.5", 2.5), ("120", 120.0)])
async def test_noop_interval_in_plain_decimal_is_taken(
    server: MockDcpServer, value: str, seconds: float
) -> None:
    c = await _opened(server)
    r = await _control(c, "set_noop_interval", value)
    assert r.status == Status.SUCCESS
    conn = next(iter(server.node.connections.values()))
    assert conn.settings.noop_interval == seconds


# -- JSON values: depth and size limits -----------------------------------------------------


def _stream_request(opaque: int, value: bytes) -> bytes:
    req = DcpStreamRequest(
        opaque=opaque,
        vbucket=0,
        flags=0,
        start_seqno=0,
        end_seqno=0xFFFFFFFFFFFFFFFF,
        vbucket_uuid=0,
        snap_start_seqno=0,
        snap_end_seqno=0,
        value=value,
    )
    return req.encode()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b"[" * 3000, id="3000-open-brackets"),
        pytest.param(b'{"uid":' + b"[" * 3000 + b"]" * 3000 + b"}", id="3000-deep-array"),
        pytest.param(b'{"purge_seqno":"' + b"1" * 5000 + b'"}', id="5000-digit-purge-seqno"),
        pytest.param(b'{"sid":' + b"7" * 5000 + b"}", id="5000-digit-sid"),
        pytest.param(b'{"uid":"0","x":"' + b"a" * 200_000 + b'"}', id="200k-value"),
    ],
)
async def test_hostile_stream_request_value_gets_einval_and_connection_stays(
    server: MockDcpServer, caplog: pytest.LogCaptureFixture, value: bytes
) -> None:
    c = await _opened(server, collections=True)
    opaque = c.next_opaque()
    await c.send(_stream_request(opaque, value))
    r = await c.frame()
    assert (r.opaque, r.status) == (opaque, Status.EINVAL)
    await _still_serves(c)
    assert _logged_errors(caplog) == []


# -- replies already due are written before a close -------------------------------------


async def _frame_or_eof(c: RawClient) -> Frame | None:
    try:
        return await c.frame()
    except EOFError:
        return None


async def test_pipelined_replies_are_written_before_the_connection_closes(
    server: MockDcpServer,
) -> None:
    c = await RawClient.connect(server.kv_port)
    bad_magic = b"\x42" + bytes(23)
    await c.send(b"".join(_bootstrap()) + bad_magic)
    got = []
    while (reply := await _frame_or_eof(c)) is not None:
        got.append((reply.magic, reply.opaque, reply.status))
    assert got == [(Magic.RESPONSE, n, Status.SUCCESS) for n in (1, 2, 3, 4)]


async def test_replies_before_a_dcp_add_stream_are_written_before_the_close(
    server: MockDcpServer,
) -> None:
    c = await _opened(server)
    add_stream = encode_frame(Magic.REQUEST, 0x51, opaque=9, extras=bytes(4), vbucket_or_status=0)
    await c.send(Version(opaque=7).encode() + Noop(opaque=8).encode() + add_stream)
    assert [(await c.frame()).opaque for _ in range(2)] == [7, 8]
    assert await c.closed_by_server()


# -- an unexpected exception in a handler ------------------------------------------------


async def test_handler_exception_answers_einternal_with_context_and_connection_goes_on(
    server: MockDcpServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(conn: object, frame: Frame, msg: object, now: float) -> None:
        raise RuntimeError("boom")

    monkeypatch.setitem(_dispatch.HANDLERS, Version, broken)
    c = await _opened(server)
    opaque = c.next_opaque()
    await c.send(Version(opaque=opaque).encode())
    r = await c.frame()
    assert (r.opaque, r.status) == (opaque, Status.EINTERNAL)
    assert b"RuntimeError" in r.value
    await _still_serves(c)
    assert any("boom" in (r.exc_text or "") or r.exc_info for r in caplog.records)


# -- bounded output per connection -------------------------------------------------------


def _rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


@pytest.fixture
async def small_server() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 64, seed=3, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket) as srv:
        yield srv


async def test_non_reading_pipelining_client_is_bounded_and_others_are_served(
    small_server: MockDcpServer,
) -> None:
    server = small_server
    before = _rss()
    hog = await RawClient.connect(server.kv_port)
    request = GetErrorMap(opaque=1, version=2).encode()
    async with trio.open_nursery() as nursery:
        # 100,000 requests before authenticating, never reading a reply
        nursery.start_soon(hog.send, request * 100_000)
        with trio.fail_after(30):
            await wait_until(lambda: bool(server.node.connections))
            conn = next(iter(server.node.connections.values()))
            await wait_until(lambda: conn.statistics().unsent_bytes >= conn.output_limit)
        await trio.sleep(0.5)  # a server that kept reading would queue more meanwhile
        stats = conn.statistics()
        assert stats.output_limit == conn.output_limit
        conns = server.state()["connections"]
        assert isinstance(conns, list)
        (reported,) = conns
        assert reported["output_limit"] == stats.output_limit
        assert reported["unsent_bytes"] >= stats.output_limit
        assert stats.unsent_bytes < stats.output_limit + 64 * 1024
        grown = _rss() - before
        assert grown < 3 * stats.output_limit + 32 * 1024 * 1024, grown
        other = await _opened(server)
        await _still_serves(other)
        nursery.cancel_scope.cancel()
    await hog.aclose()


async def test_paused_client_that_starts_reading_gets_every_reply(
    small_server: MockDcpServer,
) -> None:
    hog = await RawClient.connect(small_server.kv_port)
    n = 10_000  # ~22 MB of error maps: more than twice the 8 MiB output limit
    requests = b"".join(GetErrorMap(opaque=i, version=2).encode() for i in range(n))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hog.send, requests)
        await trio.sleep(0.5)
        opaques = [(await hog.frame(10)).opaque for _ in range(n)]
    assert opaques == list(range(n))


# -- limits a node has ---------------------------------------------------------------------


async def test_connection_beyond_max_connections_is_closed_at_once_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mockdcp")
    async with serve(port=0, http_port=0, vbuckets=4, max_connections=2) as server:
        first = await RawClient.connect(server.kv_port)
        second = await RawClient.connect(server.kv_port)
        await _still_serves(first)
        await _still_serves(second)
        third = await RawClient.connect(server.kv_port)
        assert await third.closed_by_server(2)
        assert any("max_connections" in r.getMessage() for r in caplog.records)
        await _still_serves(first)
        await first.aclose()
        with trio.fail_after(5):
            await wait_until(lambda: server.kv.active < 2)
        fourth = await RawClient.connect(server.kv_port)
        await _still_serves(fourth)
        for c in (second, third, fourth):
            await c.aclose()


async def test_unauthenticated_connection_is_closed_after_the_auth_timeout() -> None:
    async with serve(port=0, http_port=0, vbuckets=4, auth_timeout=0.3) as server:
        idle = await RawClient.connect(server.kv_port)
        authed = await RawClient.connect(server.kv_port)
        r = await authed.call(SaslAuth(opaque=1, mechanism="PLAIN", payload=PLAIN))
        assert r.status == Status.SUCCESS
        start = trio.current_time()
        assert await idle.closed_by_server(5)
        assert trio.current_time() - start < 2
        await trio.sleep(0.3)
        await _still_serves(authed)
        for c in (idle, authed):
            await c.aclose()


def test_serve_command_takes_the_connection_limits() -> None:
    cmd = [sys.executable, "-m", "mockdcp", "serve", "--port", "0", "--http-port", "0"]
    limits = ["--max-connections", "1", "--auth-timeout", "0.5", "--output-limit", "65536"]
    proc = subprocess.Popen(
        [*cmd, "--json", "--vbuckets", "4", "--docs", "0", *limits],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert proc.stdout is not None
        port = json.loads(proc.stdout.readline())["kv_port"]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as first:
            time.sleep(0.1)
            with socket.create_connection(("127.0.0.1", port), timeout=5) as second:
                assert second.recv(1) == b""  # beyond --max-connections: closed at once
            started = time.monotonic()
            assert first.recv(1) == b""  # not authenticated within --auth-timeout
            assert time.monotonic() - started < 3
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert b"max_connections (1) reached" in err
