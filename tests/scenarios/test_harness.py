"""The in-process scenario harness (``_harness.run_scenario``) judges the consumer's
final state once it has read what the server wrote, not at a moment it happens to match
the bucket."""

from __future__ import annotations

import trio

from mockdcp.client import DcpConsumer
from mockdcp.scenario import parse_scenario
from tests.scenarios._harness import run_scenario

#: four documents read, then a write and its deletion as the scenario's last steps (the
#: checkpoint between keeps both in the stream): the bucket's documents are as they
#: were, so a consumer that has read neither matches them
WRITE_THEN_DELETE = """\
name: write-then-delete
description: a write and its deletion in flight when the scenario ends
seed: 1
bucket: {name: default, vbuckets: 2}
steps:
  - generate: {docs: 4}
  - wait: {consumer: {seqno: high}, timeout: 10s}
  - wait: {seconds: 0.05}
  - set: {key: k0, value: {n: 0}}
  - checkpoint: {}
  - delete: {key: k0}
"""

#: bytes a receive of ``Trickle`` returns at most: the marker, the mutation and the
#: deletion of k0 come in several reads
TRICKLE = 48


class Trickle(trio.abc.Stream):
    """A TCP stream read at most ``TRICKLE`` bytes a receive (a consumer that reads in
    small pieces)."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(TRICKLE)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _trickling(host: str, port: int) -> DcpConsumer:
    async def connect() -> trio.abc.Stream:
        return Trickle(await trio.open_tcp_stream(host, port))

    return DcpConsumer(host, port, vbuckets=None, connect=connect)


async def test_a_write_and_its_deletion_in_flight_at_the_end_are_read_before_judging() -> None:
    """The consumer matched the bucket before it read k0's mutation and deletion; the
    harness took that for converged and cancelled it, which caught it between the two,
    k0 held (about half the runs; trio orders the tasks woken together at random). It
    now judges once the server and the consumer have nothing left to do."""
    scenario = parse_scenario(WRITE_THEN_DELETE, "<write-then-delete>")
    for _ in range(10):
        outcome = await run_scenario(scenario, _trickling)
        assert outcome.passed, outcome.explain()
        assert outcome.converged, outcome.explain()
