"""The heap trimmer (``_kv.MemoryTrim``): one per process, whatever its nodes, and only
once the heap has enough to give back."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest
import trio

from mockdcp.server import _kv, serve
from mockdcp.server._kv import MemoryTrim
from tests.integration._raw import wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

MiB = 1024 * 1024
#: the real reader of the heap's free bytes (the fixture below replaces it)
HEAP_FREE = _kv._heap_free


@pytest.fixture(autouse=True)
def _free_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """The heap's free bytes unknown (no ``mallinfo2``): every trim that is due runs;
    a test that measures them sets its own."""
    monkeypatch.setattr(_kv, "_heap_free", lambda: None)


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


def test_a_trim_waits_until_the_heap_has_min_freed_more_than_the_last_trim_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    free = [40 * MiB]

    def trim(pad: int) -> int:
        calls.append(pad)
        free[0] = 4 * MiB  # what it could not give back
        return 1

    monkeypatch.setattr(_kv, "_malloc_trim", lambda: trim)
    monkeypatch.setattr(_kv, "_heap_free", lambda: lambda: free[0])
    trimmer = MemoryTrim()
    trimmer.connection_joined()
    trimmer.connection_left()
    assert calls == [0]  # 40 MiB free: given back, 4 MiB left
    # a consumer's pass frees its buffers (12 MiB), the next one takes them again
    for _ in range(3):
        free[0] = 16 * MiB - 1
        trimmer.connection_joined()
        trimmer.connection_left()
    assert calls == [0]
    free[0] = 4 * MiB + MemoryTrim.MIN_FREED  # many consumers left: trimmed as before
    trimmer.connection_joined()
    trimmer.connection_left()
    assert calls == [0, 0]


def test_the_heap_free_bytes_count_what_was_freed_where_glibc_has_mallinfo2() -> None:
    free = HEAP_FREE()
    if free is None:
        pytest.skip("no glibc mallinfo2 here: every trim that is due runs")
    blocks = [bytearray(64 * 1024) for _ in range(512)]  # 32 MiB in the heap
    before = free()
    del blocks[::2]  # 16 MiB of holes between live blocks (not the heap's top)
    assert free() - before >= 12 * MiB
    assert len(blocks) == 256
