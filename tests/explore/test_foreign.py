"""Explore's in-process runs judge only the consumer they started (issue 39 item 6): the
server has a password of the run's own, given to a factory that takes credentials, so
another process's client that reaches the run's free ports with the usual credentials
is refused at login, never streamed to nor judged."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import trio

import mockdcp.server
from mockdcp.cli._explore_inprocess import run_in_process
from mockdcp.explore import reference_consumer, takes_credentials
from mockdcp.protocol import FrameReader, Hello, SaslAuth, Status
from mockdcp.scenario import parse_scenario
from tests.explore import wrong

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import pytest

    from mockdcp.server import MockDcpServer

SCENARIO = """
name: a-few-documents
bucket: {vbuckets: 4}
steps:
  - generate: {docs: 12}
  - wait: {consumer: {seqno: high}, timeout: 8s}
"""


async def _login(server: MockDcpServer, user: str, password: str) -> int:
    """The status a login over TCP gets from the server's first node."""
    stream = await trio.open_tcp_stream(server.host, server.kv_port)
    async with stream:
        reader = FrameReader()
        await stream.send_all(Hello(opaque=1, agent=b"foreign").encode())
        payload = b"\0" + user.encode() + b"\0" + password.encode()
        await stream.send_all(SaslAuth(opaque=2, mechanism="PLAIN", payload=payload).encode())
        statuses: list[int] = []
        while len(statuses) < 2:
            data = await stream.receive_some(65536)
            if not data:
                return -1
            reader.feed(data)
            statuses += [int(f.status) for f in reader.frames()]
        return statuses[1]


def test_a_client_with_the_usual_credentials_cannot_log_in_to_an_in_process_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert takes_credentials(reference_consumer)
    assert not takes_credentials(wrong.drop_deletions)  # keeps the usual users
    original = mockdcp.server.serve
    statuses: list[int] = []

    @contextlib.asynccontextmanager
    async def serve(**options: Any) -> AsyncIterator[MockDcpServer]:  # noqa: ANN401
        async with original(**options) as server:
            statuses.append(await _login(server, "Administrator", "password"))
            yield server

    monkeypatch.setattr(mockdcp.server, "serve", serve)
    scenario = parse_scenario(SCENARIO)
    result = trio.run(lambda: run_in_process(scenario, reference_consumer, limit=60))
    assert statuses == [Status.AUTH_ERROR]
    assert result.verdict == "pass", (result.reason, result.evidence)


def test_the_schedules_of_one_process_share_their_run_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each schedule's server has the process's run users (``process_users``): not the
    usual passwords, the same for every schedule, so a user's SCRAM keys are made once
    and not for each schedule."""
    from mockdcp.cli._explore_inprocess import process_users
    from mockdcp.server import DEFAULT_USERS

    original = mockdcp.server.serve
    given: list[object] = []

    @contextlib.asynccontextmanager
    async def serve(**options: Any) -> AsyncIterator[MockDcpServer]:  # noqa: ANN401
        given.append(options["users"])
        async with original(**options) as server:
            yield server

    monkeypatch.setattr(mockdcp.server, "serve", serve)
    scenario = parse_scenario(SCENARIO)
    for _ in range(2):
        result = trio.run(lambda: run_in_process(scenario, reference_consumer, limit=60))
        assert result.verdict == "pass", (result.reason, result.evidence)
    assert given == [process_users(), process_users()]
    users = process_users()
    assert set(users) == set(DEFAULT_USERS)
    assert all(users[name] != DEFAULT_USERS[name] for name in users)
