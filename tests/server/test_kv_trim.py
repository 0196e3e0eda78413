"""The heap trimmer (``_kv.MemoryTrim``): one per process, whatever its nodes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import trio

from mockdcp.server import _kv, serve
from mockdcp.server._kv import MemoryTrim
from tests.integration._raw import wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    import pytest


def counting(calls: list[int]) -> Callable[[], Callable[[int], int]]:
    """A stand-in for ``_malloc_trim`` whose trim counts its calls."""

    def trim(pad: int) -> int:
        calls.append(pad)
        return 1

    return lambda: trim


def test_a_trimmer_trims_when_the_last_of_its_connections_leaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_kv, "_malloc_trim", counting(calls))
    trim = MemoryTrim()
    for _ in range(3):
        trim.connection_joined()
    trim.connection_left()
    trim.connection_left()  # one is still open
    assert calls == []
    trim.connection_left()  # the last
    assert calls == [0]


def test_a_trimmer_trims_a_batch_of_leavers_while_others_stay_at_most_once_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_kv, "_malloc_trim", counting(calls))
    clock = [100.0]
    monkeypatch.setattr(_kv, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    trim = MemoryTrim()
    trim.connection_joined()  # stays open throughout
    for _ in range(MemoryTrim.BATCH - 1):
        trim.connection_joined()
        trim.connection_left()
    assert calls == []
    trim.connection_joined()
    trim.connection_left()  # the batch's last
    assert calls == [0]
    for _ in range(MemoryTrim.BATCH):  # a second batch within the second
        trim.connection_joined()
        trim.connection_left()
    assert calls == [0]
    clock[0] += MemoryTrim.INTERVAL
    trim.connection_joined()
    trim.connection_left()
    assert calls == [0, 0]


async def test_the_nodes_of_a_cluster_trim_the_heap_once_when_a_consumer_leaves_them_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(_kv, "_malloc_trim", counting(calls))
    async with serve(port=0, http_port=0, nodes=3) as server:
        kvs = [shell.kv for shell in server.shells]
        # a connection to each node, all open at once (a cluster consumer)
        streams = [await trio.open_tcp_stream("127.0.0.1", node.kv_port) for node in server.nodes]
        with trio.fail_after(10):
            await wait_until(lambda: sum(kv.active for kv in kvs) == len(streams))
        for stream in streams:
            await stream.aclose()
        with trio.fail_after(10):
            await wait_until(lambda: not sum(kv.active for kv in kvs) and bool(calls))
        await trio.sleep(0.05)
    # the heap is the process's: the last connection of all three nodes trims it, not
    # each node's last
    assert calls == [0]
