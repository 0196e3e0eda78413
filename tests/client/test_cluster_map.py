"""``ClusterConsumer``'s reading of the cluster map (``mockdcp.client._cluster``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from mockdcp.client import ClusterConsumer, ConsumerCore, ConsumerError
from mockdcp.client._cluster import LOGIN_TIMEOUT, MAP_TIMEOUT
from mockdcp.server import serve

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import pytest

    from mockdcp.client import Action, StreamKey


async def test_the_first_map_read_waits_for_a_node_slow_to_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first reading of the map also connects and authenticates, in a consumer that
    may be starting on a loaded machine: connecting and logging in are given
    ``LOGIN_TIMEOUT``, not the half second the map's reply gets (``mockdcp check``
    failed its cluster scenarios at times with "no node answered with a cluster map")."""
    real = ClusterConsumer._map_client
    slow = 2 * MAP_TIMEOUT
    assert slow < LOGIN_TIMEOUT

    async def slow_to_log_in(self: ClusterConsumer, host: str, port: int) -> bool:
        await trio.sleep(slow)
        return await real(self, host, port)

    monkeypatch.setattr(ClusterConsumer, "_map_client", slow_to_log_in)
    async with serve(port=0, http_port=0, nodes=3, replicas=1) as server:
        consumer = ClusterConsumer("127.0.0.1", server.kv_port)
        with trio.fail_after(LOGIN_TIMEOUT + 5):
            async with trio.open_nursery() as nursery:
                await nursery.start(consumer.run)
                assert consumer.members  # it follows the map it read
                nursery.cancel_scope.cancel()


#: issue 39's 10,000-schedule run, schedule 935 shrunk by hand: the nodes restart (every
#: stream ended STATE_CHANGED, every connection closed) and refuse connections a while;
#: the consumer's connections come back and ask for every vbucket before its map
#: connection does, and the map then read routes each vbucket to the node it is
#: already streamed from
RESTART_REFUSED = """
name: restart-refused
bucket: {vbuckets: 2, nodes: 2, replicas: 1}
steps:
  - generate: {docs: 4, prefix: g1}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - restart: {}
  - refuse_connections: {}
  - wait: {seconds: 0.08}
  - refuse_connections: {enabled: false}
  - generate: {docs: 4, prefix: g2}
  - wait: {consumer: {seqno: high}, timeout: 10s}
  - expect: {conformant: true, within: 0.2}
"""


class _NoSecondRequest(ConsumerCore):
    """A stream request answered KEY_EEXISTS is a failure (the reference consumer takes
    it as "already open", which would hide a second request)."""

    def on_already_open(self, key: StreamKey) -> list[Action]:
        raise ConsumerError(f"stream {key} asked for again while open")


def _strict(
    host: str,
    port: int,
    nodes: int,
    *,
    connect: Callable[[str, int], Awaitable[trio.abc.Stream]] | None = None,
    user: str = "Administrator",
    password: str = "password",
) -> ClusterConsumer:
    consumer = ClusterConsumer(host, port, connect=connect, user=user, password=password)
    consumer.rules = _NoSecondRequest
    return consumer


def test_a_map_read_after_a_reconnect_does_not_ask_for_an_open_stream_again() -> None:
    """A vbucket the map routes back to the node it is streamed from is not asked for
    again on that connection (``_Member.add``): the second request was answered
    KEY_EEXISTS (kv_engine ``DcpProducer::streamRequest``), and the consumer exited
    on it (issue 39, ten schedules of the 10,000)."""
    from mockdcp.cli._explore_inprocess import run_in_process, virtual_clock
    from mockdcp.scenario import parse_scenario

    scenario = parse_scenario(RESTART_REFUSED)
    result = trio.run(
        lambda: run_in_process(scenario, _strict, limit=60), clock=virtual_clock(_strict)
    )
    assert result.verdict == "pass", (result.reason, result.evidence)
