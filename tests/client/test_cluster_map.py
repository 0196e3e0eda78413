"""``ClusterConsumer``'s reading of the cluster map (``mockdcp.client._cluster``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from mockdcp.client import ClusterConsumer
from mockdcp.client._cluster import FIRST_MAP_TIMEOUT, MAP_TIMEOUT
from mockdcp.server import serve

if TYPE_CHECKING:
    import pytest


async def test_the_first_map_read_waits_for_a_node_slow_to_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first reading of the map also connects and authenticates, in a consumer that
    may be starting on a loaded machine: it is given ``FIRST_MAP_TIMEOUT``, not the half
    second of the readings that follow (``mockdcp check`` failed its cluster scenarios
    at times with "no node answered with a cluster map")."""
    real = ClusterConsumer._fetch_from
    slow = 2 * MAP_TIMEOUT
    assert slow < FIRST_MAP_TIMEOUT

    async def slow_to_answer(self: ClusterConsumer, host: str, port: int) -> dict[str, Any] | None:
        await trio.sleep(slow)
        return await real(self, host, port)

    monkeypatch.setattr(ClusterConsumer, "_fetch_from", slow_to_answer)
    async with serve(port=0, http_port=0, nodes=3, replicas=1) as server:
        consumer = ClusterConsumer("127.0.0.1", server.kv_port)
        with trio.fail_after(FIRST_MAP_TIMEOUT + 5):
            async with trio.open_nursery() as nursery:
                await nursery.start(consumer.run)
                assert consumer.members  # it follows the map it read
                nursery.cancel_scope.cancel()
