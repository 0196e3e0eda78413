"""The bench harness every mode shares: loading a bucket, serving it and streaming it to
the bench consumer (a separate process, ``_consumer``), timing a ``mockdcp serve`` to
its ready line, resident memory, and the report every mode writes (``emit``).

The report (``--json``: one line) has the same shape in every mode::

    {"mode": "stream", "runs": 3, "params": {...}, "figures": {...},
     "samples": {...}, "complete": true}

``params`` are the options the figures were measured with, ``figures`` the medians
over the runs (the figure a table quotes), ``samples`` each run's values, ``complete``
whether every stream brought every item it had to (the exit status is 1 when not).
Streaming rates are events (items the consumer receives) per second of the consumer's
wall clock from its first stream request; system events and seqno advances are counted
apart.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from mockdcp.cli._procfs import CSTIME, PPID, STIME, UTIME, every_stat, stat_fields
from mockdcp.util import collector_paused

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator, Mapping, Sequence
    from contextlib import AbstractAsyncContextManager

    from mockdcp.model import Bucket
    from mockdcp.server import MockDcpServer


#: documents per ``Bucket.set_many`` call while loading
LOAD_BATCH = 10_000
#: collections of the ``--filter`` bucket (scope ``bench``; ids 8 up)
BENCH_COLLECTIONS = 4
FIRST_COLLECTION_ID = 8


@contextlib.contextmanager
def bytecode_cached() -> Iterator[str]:
    """Within: the processes started write and read their bytecode (``.pyc``) in a
    cache directory of the bench's (``$MOCKDCP_CACHE/bench-pycache``), as an installed
    package reads the bytecode pip compiled, even where the environment says not to
    write any (``PYTHONDONTWRITEBYTECODE``: every start would compile mockdcp's source
    again, about 0.3 s that no installed copy pays). Yields the directory."""
    from mockdcp.data import cache_root

    pycache = str(cache_root() / "bench-pycache")
    saved = {k: os.environ.get(k) for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = pycache
    try:
        yield pycache
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def cpu_seconds_of(pid: int) -> float:
    """The CPU seconds (user and system) a running process has used (Linux's
    ``/proc/<pid>/stat``)."""
    fields = stat_fields(pid)
    return (int(fields[UTIME]) + int(fields[STIME])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """The CPU seconds a running process and every process it started have used: its
    own, its children's that it waited for, and those of its descendants still there
    (or not yet waited for), from one read of ``/proc``. ``serve --docs`` draws large
    loads in worker processes: their CPU is the start's too, and a load drawn in the
    server's process instead must not look dearer for it."""
    table = dict(every_stat())
    if pid not in table:  # (read apart: ``OSError`` when it is gone)
        table[pid] = stat_fields(pid)
    children: dict[int, list[int]] = {}
    for child, fields in table.items():
        children.setdefault(int(fields[PPID]), []).append(child)
    ticks, stack = 0, [pid]
    while stack:
        member = stack.pop()
        ticks += sum(int(f) for f in table[member][UTIME : CSTIME + 1])
        stack += children.get(member, [])
    return ticks / os.sysconf("SC_CLK_TCK")


def emit(
    args: argparse.Namespace,
    mode: str,
    params: Mapping[str, Any],
    figures: Mapping[str, Any],
    samples: Mapping[str, Any],
    complete: bool = True,
    targets: Mapping[str, str] | None = None,
) -> int:
    """Print a mode's report: one JSON line with ``--json``, else a table of its
    figures (with the target of those that have one). The exit status: 0, or 1 when a
    stream did not bring every item."""
    report = {
        "mode": mode,
        "runs": args.runs,
        "params": dict(params),
        "figures": dict(figures),
        "samples": dict(samples),
        "complete": complete,
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(render(report, targets or {}))
    return 0 if complete else 1


def _shown(value: Any) -> str:  # noqa: ANN401 - any JSON value
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render(report: Mapping[str, Any], targets: Mapping[str, str]) -> str:
    """A report as text: its mode and parameters, then a figure a line."""
    params = ", ".join(f"{k} {_shown(v)}" for k, v in report["params"].items())
    lines = [f"mockdcp bench {report['mode']}: {params}; median of {report['runs']} run(s)"]
    width = max((len(name) for name in report["figures"]), default=0)
    for name, value in report["figures"].items():
        target = f"   (target {targets[name]})" if name in targets else ""
        lines.append(f"  {name:<{width}}  {_shown(value):>16}{target}")
    if not report["complete"]:
        lines.append("  INCOMPLETE: a stream did not bring every item")
    return "\n".join(lines)


def rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def bench_value(i: int, size: int) -> bytes:
    head = f'{{"id":{i},"pad":"'.encode()
    return head + b"x" * max(0, size - len(head) - 2) + b'"}'


def load_bucket(
    items: int, value_size: int, vbuckets: int, collections: int = 0
) -> tuple[Any, int, float]:
    """A bucket holding ``items`` documents, the bytes of memory it grew by, and the
    CPU seconds ``Bucket.set_many`` took to load them (in batches of ``LOAD_BATCH``).
    With ``collections``, item i goes to collection ``FIRST_COLLECTION_ID + i % collections``."""
    from mockdcp.model import Bucket

    gc.collect()
    before = rss()
    bucket = Bucket(
        "default",
        vbuckets,
        seed=1,
        clock=time.time,
        checkpoint_max_items=10_000,
        pause_collector=collector_paused,
        collections={"bench": [f"c{k}" for k in range(collections)]} if collections else None,
    )
    pad = bench_value(0, value_size)
    t0 = time.process_time()
    for start in range(0, items, LOAD_BATCH):
        keys = [b"key::%09d" % i for i in range(start, min(start + LOAD_BATCH, items))]
        cids = _collection_ids(start, len(keys), collections)
        bucket.set_many(keys, [pad] * len(keys), datatypes=1, collection_ids=cids)
    seconds = time.process_time() - t0
    gc.collect()
    return bucket, rss() - before, seconds


def expel_to_disk(bucket: Bucket) -> None:
    """Close and flush every vbucket's checkpoints, so that they are expelled and a
    stream backfills from disk (``--from-disk``)."""
    for vb in range(bucket.num_vbuckets):
        bucket.checkpoint(vb)
        bucket.persist(vb)


def _collection_ids(start: int, count: int, collections: int) -> list[int] | None:
    """Round robin over the bench collections (None: all in ``_default``)."""
    if not collections:
        return None
    return [FIRST_COLLECTION_ID + i % collections for i in range(start, start + count)]


def stream_plan(items: int, filtered: bool, stream_ids: int) -> tuple[list[int], int]:
    """The collection ids the consumer filters on (``--filter``: one, or one per
    stream-id) and how many items it must receive from a bucket ``load_bucket`` filled
    with ``BENCH_COLLECTIONS`` collections."""
    streams = max(stream_ids, 1)
    if not filtered:
        return [], items * streams
    per = [len(range(k, items, BENCH_COLLECTIONS)) for k in range(streams)]
    return [FIRST_COLLECTION_ID + k for k in range(streams)], sum(per)


async def watch_loop(stall: list[float]) -> None:
    """The longest time (``stall[0]``, seconds) the event loop took to come back to
    this task, which asks to wake every millisecond."""
    import trio

    while True:
        t0 = time.perf_counter()
        await trio.sleep(0.001)
        stall[0] = max(stall[0], time.perf_counter() - t0 - 0.001)


def resident_of(pid: int) -> tuple[int, int]:
    """A process's resident bytes and its peak resident bytes so far (Linux's
    ``VmHWM``; the resident bytes where there is none)."""
    import psutil

    rss = int(psutil.Process(pid).memory_info().rss)
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return rss, int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, rss


async def stream_once(
    bucket: Bucket,
    items: int,
    vbuckets: int,
    legacy: bool = False,
    consumers: int = 1,
    collections: list[int] | None = None,
    stream_ids: int = 0,
    tls: bool = False,
    nodes: int = 1,
    replicas: int = 0,
    passes: int = 1,
    consumer_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Serve ``bucket`` and stream it with the bench consumer ``passes`` times (the
    report of the median pass)."""
    import tempfile

    import trio

    peak = [rss()]

    async def sample() -> None:  # the server's resident memory while it streams
        while True:
            peak[0] = max(peak[0], rss())
            await trio.sleep(0.1)

    # with TLS, a CA of its own in a temporary directory: the user's kept CA is not touched
    with tempfile.TemporaryDirectory(prefix="mockdcp-bench-") as private:
        ca_file = os.path.join(private, "ca.pem") if tls else None
        tls_options: dict[str, Any] = {}
        if tls:
            tls_options = {"tls": True, "tls_port": 0, "https_port": 0, "tls_dir": private}
        # made (the server's modules imported) before the resident memory is read
        starting = bench_server(bucket, nodes, replicas, **tls_options)
        gc.collect()
        r0 = rss()
        s0 = time.perf_counter()
        async with starting as server:
            setup_s = time.perf_counter() - s0  # with replicas: building their copies
            gc.collect()
            setup_rss = rss() - r0
            port = server.tls_port if tls else server.kv_port
            assert port is not None  # TLS asked for: its port is served
            plan = [] if nodes == 1 else cluster_plan(server)
            cmd = consumer_command(
                port,
                items,
                vbuckets,
                legacy=legacy,
                plan=plan,
                extra=(
                    *("--connections", str(consumers)),
                    *("--collections", ",".join(map(str, collections or []))),
                    *("--stream-ids", str(stream_ids)),
                    *(("--tls-ca", ca_file) if ca_file else ()),
                    *consumer_args,
                ),
            )
            await management_ready(server)
            reports = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sample)
                for _ in range(passes):  # the same bucket streamed again from the start
                    c0, f0 = time.process_time(), minor_faults()
                    result = await trio.run_process(cmd, capture_stdout=True, check=True)
                    report = json.loads(result.stdout.decode().strip().splitlines()[-1])
                    report["server_cpu_s"] = time.process_time() - c0
                    report["server_page_faults"] = minor_faults() - f0
                    reports.append(report)
                nursery.cancel_scope.cancel()
            report = median_pass(reports)
            report["setup_s"] = setup_s
            report["setup_rss"] = setup_rss
            report["server_peak_rss"] = max(peak[0], rss())
            return report
    raise AssertionError("unreachable")  # pragma: no cover - the block returns


def consumer_command(
    port: int,
    items: int,
    vbuckets: int,
    *,
    legacy: bool = False,
    plan: list[dict[str, Any]] | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The bench consumer (``_consumer``, this interpreter's) streaming ``items`` of
    ``vbuckets`` from ``port`` (or from the nodes of ``plan``), then ``extra``."""
    return [
        *(sys.executable, "-m", "mockdcp.cli.bench._consumer", "--port", str(port)),
        *("--items", str(items), "--vbuckets", str(vbuckets)),
        *(["--legacy"] if legacy else []),
        *(["--plan", json.dumps(plan)] if plan else []),
        *extra,
    ]


def median_pass(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The report of the pass of median rate, with the median of the passes' server CPU
    seconds (and page faults): which pass has the median rate depends on the machine's
    other load, and its CPU was any pass's (one with a gen-1 collection, say, which
    lands in one pass of several whatever is measured)."""
    server_cpu_s = statistics.median(r["server_cpu_s"] for r in reports)
    report = dict(sorted(reports, key=lambda r: r["events"] / r["seconds"])[len(reports) // 2])
    report["server_cpu_s"] = server_cpu_s
    if all("server_page_faults" in r for r in reports):
        report["server_page_faults"] = statistics.median(r["server_page_faults"] for r in reports)
    return report


def minor_faults() -> int:
    """The page faults this process took so far that read no disk (``getrusage``'s
    ``ru_minflt``): a page the heap gave back and takes again is one, about 3 µs of
    kernel CPU each on a virtual machine, counted where CPU seconds are noise."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def bench_server(
    bucket: Bucket,
    nodes: int = 1,
    replicas: int = 0,
    **options: Any,  # noqa: ANN401 - serve()'s (TLS ports)
) -> AbstractAsyncContextManager[MockDcpServer]:
    """``serve`` of a bench's loaded ``bucket`` on free ports, as ``nodes`` nodes with
    ``replicas`` replicas, and no flusher: a bench measures streaming from memory, or
    from disk after ``persist()``."""
    from mockdcp.server import serve

    return serve(
        port=0,
        http_port=0,
        bucket_obj=bucket,
        flush_interval=None,
        nodes=nodes,
        replicas=replicas,
        **options,
    )


async def management_ready(server: Any) -> list[bytes]:  # noqa: ANN401 - MockDcpServer
    """Wait until every node answers on its management port (the status line of each
    answer). A server reports ready with those ports bound and starts their HTTP stack
    afterwards (``_http``: the first server of a process imports hypercorn and
    Starlette in a worker thread, about 0.25 CPU seconds; each node then builds its
    application): the CPU of a pass is the process's (every thread's), and that start
    is no part of streaming."""
    import trio

    status_lines = []
    for node in server.nodes:
        stream = await trio.open_tcp_stream(node.host, node.http_port)
        try:
            request = b"GET /pools HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            await stream.send_all(request)
            answer = b""
            while b"\r\n\r\n" not in answer:  # any answer's head: the stack serves
                data = await stream.receive_some(4096)
                if not data:
                    break
                answer += data
        finally:
            await stream.aclose()
        status_lines.append(answer.split(b"\r\n", 1)[0])
    return status_lines


def cluster_plan(server: Any) -> list[dict[str, Any]]:  # noqa: ANN401 - MockDcpServer
    """Per node: its KV port, the vbuckets active there and the items they hold (each
    key written once: a vbucket's high seqno)."""
    cluster = server.topology.cluster
    plan = []
    for node in server.nodes:
        vbs = cluster.map.actives_on(node.name) if node.name in cluster.map.nodes else []
        items = sum(cluster.active(vb).high_seqno for vb in vbs)
        plan.append({"port": node.kv_port, "vbuckets": vbs, "items": items})
    return plan


def measure_startup(
    runs: int, docs: int = 0, resident: list[tuple[int, int]] | None = None
) -> list[float]:
    """Seconds from spawning ``mockdcp serve --docs DOCS`` to its ready line; with
    ``resident``, the server's resident bytes at its ready line and its peak resident
    bytes until then are added to it, a pair a run."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mockdcp",
                "serve",
                "--port",
                "0",
                "--http-port",
                "0",
                "--docs",
                str(docs),
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ},
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        times.append(time.perf_counter() - t0)
        if resident is not None:
            resident.append(resident_of(proc.pid))
        proc.terminate()
        proc.wait(10)
        if b"ready" not in line:
            raise RuntimeError(f"serve did not become ready: {line!r}")
    return times
