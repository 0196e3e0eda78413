"""``ClusterConsumer``'s reading of the cluster map (``mockdcp.client._cluster``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from mockdcp.client import ClusterConsumer
from mockdcp.client._cluster import LOGIN_TIMEOUT, MAP_TIMEOUT
from mockdcp.server import serve

if TYPE_CHECKING:
    import pytest


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
