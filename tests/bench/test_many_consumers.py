"""Many consumers and a stalled one against a ``mockdcp serve`` process (issue 18).

The server runs as its own process (``mockdcp serve --vbuckets 64 --docs N``) so its
resident memory is its own; the consumers are the reference consumer, in this process.
The bucket is the seeded Faker data set, rebuilt here from the same seed as the oracle.
Figures go to stdout (``-s`` shows them).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from typing import TYPE_CHECKING

import psutil
import pytest
import trio

from mockdcp.client import DcpConsumer
from mockdcp.data._dataset import faker_documents
from mockdcp.protocol import (
    DcpControl,
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    FrameReader,
    Hello,
    HelloFeature,
    SaslAuth,
    SelectBucket,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

# a bench's smoke run: the full tier (python -m pytest --full-only)
pytestmark = pytest.mark.full

VBUCKETS = 64

#: 2,000 documents (not the issue's 20,000): 200 consumers of 20,000 would be 4 million
#: events through the Python reference consumer, minutes on a 2-core machine.
DOCS = 2_000
CONSUMERS = 200
MiB = 1024 * 1024
OUTPUT_LIMIT = 4 * MiB


class ServeProcess:
    """``mockdcp serve`` on free ports, its KV port and its resident memory."""

    def __init__(self, *args: str) -> None:
        cmd = [sys.executable, "-m", "mockdcp", "serve", "--port", "0", "--http-port", "0"]
        self.proc = subprocess.Popen(
            [*cmd, "--json", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self.kv_port = int(json.loads(self.proc.stdout.readline())["kv_port"])
        assert "loaded" in self.proc.stderr.readline()  # the documents are in the model
        self.ps = psutil.Process(self.proc.pid)

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def stop(self) -> str:
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=30)
        return err


@pytest.fixture
def serve_process() -> Iterator[ServeProcess]:
    server = ServeProcess(
        "--vbuckets", str(VBUCKETS), "--docs", str(DOCS), "--output-limit", str(OUTPUT_LIMIT)
    )
    try:
        yield server
    finally:
        err = server.stop()
        assert "Traceback" not in err, err


def _oracle() -> dict[tuple[int, bytes], bytes]:
    return {(0, key.encode()): body for key, body in faker_documents(DOCS, 0)}


async def _stream_all(port: int, expected: dict[tuple[int, bytes], bytes], name: str) -> None:
    """One reference consumer streams every vbucket until it holds ``expected``."""
    consumer = DcpConsumer("127.0.0.1", port, vbuckets=range(VBUCKETS), name=name)
    done = trio.Event()

    def on_event(vb: int, event: object) -> None:
        if consumer.state.items >= len(expected):
            done.set()

    consumer.on_event = on_event
    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer.run)
        await done.wait()
        nursery.cancel_scope.cancel()
    got = {k: v.value for k, v in consumer.state.documents().items()}
    assert got == expected, name
    assert consumer.state.violations == []


async def _settled_rss(server: ServeProcess) -> int:
    """The server's resident memory once it stopped changing (after connections left)."""
    last = server.rss()
    for _ in range(20):
        await trio.sleep(0.25)
        now = server.rss()
        if abs(now - last) < 256 * 1024:
            return now
        last = now
    return last


async def _round(server: ServeProcess, expected: dict[tuple[int, bytes], bytes]) -> int:
    """``CONSUMERS`` consumers at once, each streaming every vbucket; the peak RSS."""
    peak = server.rss()
    with trio.fail_after(240):
        async with trio.open_nursery() as nursery:
            for i in range(CONSUMERS):
                nursery.start_soon(_stream_all, server.kv_port, expected, f"consumer-{i}")
            while len(nursery.child_tasks) > 0:
                peak = max(peak, server.rss())
                await trio.sleep(0.2)
    return peak


async def test_200_consumers_stream_every_vbucket_and_memory_returns(
    serve_process: ServeProcess,
) -> None:
    expected = _oracle()
    await _stream_all(serve_process.kv_port, expected, "warm-up")  # first-use imports
    before = await _settled_rss(serve_process)
    peak = await _round(serve_process, expected)
    after = await _settled_rss(serve_process)
    rounds = [after]
    for _ in range(3):
        await _round(serve_process, expected)
        rounds.append(await _settled_rss(serve_process))
    print(
        f"\n{CONSUMERS} consumers x {VBUCKETS} vbuckets x {DOCS} docs: server RSS "
        f"before {before / MiB:.1f} MiB, peak {peak / MiB:.1f} MiB, "
        f"after {after / MiB:.1f} MiB ({(after - before) / CONSUMERS / 1024:.0f} KiB "
        f"per connection kept), after each further round "
        + ", ".join(f"{r / MiB:.1f}" for r in rounds[1:])
        + " MiB"
    )
    # Was ~0.6 MiB per connection kept (115 MiB for 200), and more with every round.
    # Part of what stays is the node's event log (the last 100,000 events, ~20 MB when
    # full, which two rounds of 200 consumers nearly fill); the rest is heap high water,
    # which varies with the machine's load: 27-42 MiB in runs of this commit and of the
    # one before collections streaming on a busy 2-core machine. The protocol checker
    # keeps the histories of names gone idle (at most ``max_idle_streams``, 2 MiB) and
    # the heap it fragments: 56-61 MiB kept where it was 44-55 without it on this
    # machine.
    assert after - before < 80 * MiB
    assert rounds[-1] - before < 100 * MiB
    # A leak grows with every round; high water does not. The second round alone grew
    # 15-29 MiB (the event log filling, the heap's high water rising under load: CI
    # failed a 24 MiB bound on one round at 1c4f482), then rounds level off: 120, 124,
    # 135, 133 MiB after rounds 2-5 in one run here. The last two rounds together, after
    # the event log is full, keep little (13 MiB in that run); the leak kept ~115 MiB per
    # round. With serve's collector thresholds (``SERVE_COLLECTOR_THRESHOLDS``: full runs
    # rare) each closed connection waited in its cycles for one: 122, 160, 162 MiB after
    # rounds 2-4 (CI failed this bound), against 113, 121, 127 at the thresholds' commit's
    # parent; the shell now releases each (``Connection.release``): 104, 113, 113.
    assert rounds[-1] - rounds[1] < 32 * MiB


# -- a stalled consumer -------------------------------------------------------------------

WINDOW = 1 * MiB


async def _stalled_consumer(port: int) -> trio.SocketStream:
    """Bootstraps, opens a stream on every vbucket with a 1 MiB window, then reads
    nothing more (the replies it waited for at the start are all it ever reads)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    features = (HelloFeature.XERROR, HelloFeature.JSON, HelloFeature.SELECT_BUCKET)
    requests = [
        Hello(opaque=1, agent=b"stalled", features=features),
        SaslAuth(opaque=2, mechanism="PLAIN", payload=b"\0Administrator\0password"),
        SelectBucket(opaque=3, bucket="default"),
        DcpOpen(opaque=4, name=b"stalled", flags=int(DcpOpenFlag.PRODUCER)),
        DcpControl(opaque=5, key="connection_buffer_size", value=str(WINDOW)),
    ]
    await stream.send_all(b"".join(r.encode() for r in requests))
    reader = FrameReader()
    answered = 0
    while answered < len(requests):
        reader.feed(await stream.receive_some(65536))
        answered += sum(1 for _ in reader.frames())
    extras = struct.Struct(">IIQQQQQ")
    for vb in range(VBUCKETS):
        req = DcpStreamRequest(
            opaque=0x100 + vb,
            vbucket=vb,
            flags=0,
            start_seqno=0,
            end_seqno=0xFFFFFFFFFFFFFFFF,
            vbucket_uuid=0,
            snap_start_seqno=0,
            snap_end_seqno=0,
        )
        assert len(req.encode()) == 24 + extras.size
        await stream.send_all(req.encode())
    return stream


async def _time_consumers(port: int, expected: dict[tuple[int, bytes], bytes], n: int) -> float:
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(_stream_all, port, expected, f"timed-{i}")
    return trio.current_time() - start


async def test_stalled_consumer_costs_its_window_and_does_not_slow_the_others(
    serve_process: ServeProcess,
) -> None:
    expected = _oracle()
    port = serve_process.kv_port
    await _stream_all(port, expected, "warm-up")
    with trio.fail_after(120):
        alone = min([await _time_consumers(port, expected, 4) for _ in range(2)])
        before = await _settled_rss(serve_process)
        stalled = await _stalled_consumer(port)
        await trio.sleep(1)  # the server sends up to the window, then waits for acks
        stalled_rss = await _settled_rss(serve_process)
        beside = min([await _time_consumers(port, expected, 4) for _ in range(2)])
        await stalled.aclose()
    cost = stalled_rss - before
    print(
        f"\nstalled consumer: server RSS +{cost / MiB:.1f} MiB (window {WINDOW / MiB:.0f} MiB,"
        f" output limit 4 MiB); 4 consumers took {alone:.2f} s alone, {beside:.2f} s beside it"
    )
    assert cost < WINDOW + OUTPUT_LIMIT
    assert beside < 3 * alone + 0.5
