"""``mockdcp bench``: streaming throughput, startup time and memory per item.

Throughput: N items of ``value_size``-byte JSON over V vbuckets are loaded into a bucket,
the server streams them over loopback to one consumer in a separate process, which
counts events with a minimal frame walker (answering noops, acking the buffer) and
reports how long the N items took from its first stream request (with ``--from-disk``
the bucket is persisted first, so the stream is a disk backfill). Startup: the time from
spawning ``mockdcp serve --port 0 --docs 0`` to its ready line. Memory: resident memory
growth of loading the items, divided by N. Load: items per CPU second through
``Bucket.set_many``; generated documents (``mockdcp serve --docs``) drawn per CPU
second, written per CPU second, and loaded end to end per wall second (drawn in a
worker process while the server's writes), and the time from spawning ``mockdcp serve
--docs N`` to its ready line.
``--legacy``: the consumer does not negotiate collections. ``--consumers N``: N
connections (in one consumer process) stream every item at once; the events of all of
them are counted, and the server's peak resident memory is reported. ``--filter``: the
items are spread over ``BENCH_COLLECTIONS`` collections (round robin) and the consumer
streams one of them with a collection filter. ``--stream-ids N``: N streams per vbucket,
stream-ids 1..N; with ``--filter`` stream k filters the k-th collection, without it every
stream is pass-through (and gets every item). ``--tls``: each run also streams a bucket
loaded the same way over the TLS port (a CA of its own), and its events/s is reported
with its ratio to the plaintext figure. Events are the items the consumer receives
(system events and seqno advances are reported apart). Every figure is the median of
``runs`` runs.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from mockdcp.util import collector_paused, release_freed_memory

if TYPE_CHECKING:
    import argparse

    from mockdcp.model import Bucket


#: ``--nodes``: streams of one node and of the cluster per run (the median pass counts)
CLUSTER_PASSES = 3

#: documents per ``Bucket.set_many`` call while loading
LOAD_BATCH = 10_000
#: collections of the ``--filter`` bucket (scope ``bench``; ids 8 up)
BENCH_COLLECTIONS = 4
FIRST_COLLECTION_ID = 8


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _value(i: int, size: int) -> bytes:
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
    before = _rss()
    bucket = Bucket(
        "default",
        vbuckets,
        seed=1,
        clock=time.time,
        checkpoint_max_items=10_000,
        pause_collector=collector_paused,
        collections={"bench": [f"c{k}" for k in range(collections)]} if collections else None,
    )
    pad = _value(0, value_size)
    t0 = time.process_time()
    for start in range(0, items, LOAD_BATCH):
        keys = [b"key::%09d" % i for i in range(start, min(start + LOAD_BATCH, items))]
        cids = _collection_ids(start, len(keys), collections)
        bucket.set_many(keys, [pad] * len(keys), datatypes=1, collection_ids=cids)
    seconds = time.process_time() - t0
    gc.collect()
    return bucket, _rss() - before, seconds


#: documents per ``ColdLoad.add`` batch while loading the cold tier
COLD_BATCH = 200_000


def load_cold_bucket(items: int, value_size: int, vbuckets: int) -> tuple[Any, int, float, float]:
    """A bucket holding ``items`` documents in the cold tier (``Bucket.cold_load``), the
    bytes of memory it grew by, and the wall and CPU seconds the load took (batches of
    ``COLD_BATCH`` keys and values made, framed, then installed)."""
    from mockdcp.model import Bucket

    gc.collect()
    release_freed_memory()  # a freed earlier bucket is not counted as before
    before = _rss()
    bucket = Bucket("default", vbuckets, seed=1, clock=time.time, pause_collector=collector_paused)
    pad = _value(0, value_size)
    t0, c0 = time.perf_counter(), time.process_time()
    load = bucket.cold_load()
    with collector_paused():
        for start in range(0, items, COLD_BATCH):
            keys = [b"key::%09d" % i for i in range(start, min(start + COLD_BATCH, items))]
            load.add(keys, [pad] * len(keys), datatypes=1)
            del keys
        load.finish()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.collect()
    release_freed_memory()  # as serve does after a load: the batches' holes go back
    return bucket, _rss() - before, wall, cpu


def run_cold_bench(args: argparse.Namespace) -> int:
    """``mockdcp bench --cold``: the cold tier's resident bytes per item beyond key and
    value, load rate, and events/s of one connection backfilling it all from disk
    (medians of ``--runs``)."""
    import trio

    key_value = len(b"key::%09d" % 0) + len(_value(0, args.value_size))
    mem, loads, cpus, rates, complete = [], [], [], [], []
    cpu_rates: list[float] = []
    for _ in range(args.runs):
        bucket, grown, wall, cpu = load_cold_bucket(args.items, args.value_size, args.vbuckets)
        mem.append(grown / args.items - key_value)
        loads.append(args.items / wall)
        cpus.append(cpu)
        result = trio.run(_stream_once, bucket, args.items, args.vbuckets, args.legacy)
        rates.append(result["events"] / result["seconds"])
        cpu_rates.append(result["events"] / result["server_cpu_s"])
        complete.append(result["complete"])
        del bucket
        gc.collect()
    report = {
        "items": args.items,
        "value_size": args.value_size,
        "vbuckets": args.vbuckets,
        "runs": args.runs,
        "bytes_per_item_beyond_key_value": statistics.median(mem),
        "load_items_per_s": statistics.median(loads),
        "load_cpu_s": statistics.median(cpus),
        "disk_events_per_s": statistics.median(rates),
        "disk_events_per_server_cpu_s": statistics.median(cpu_rates),
        "complete": all(complete),
        "samples": {"bytes_beyond": mem, "load_items_per_s": loads, "events_per_s": rates},
    }
    print(json.dumps(report))
    return 0 if report["complete"] else 1


def _key_value_bytes(bucket: Bucket) -> int:
    """The bytes of every document's key and value the bucket holds (the cold tier's:
    its frames less their headers and collection prefixes)."""
    total = 0
    for vb in bucket.vbuckets:
        if vb.cold is not None:
            total += vb.cold.segment.key_value_bytes()
        total += sum(len(it.key) + len(it.value) for it in vb.items.values())
    return total


def run_docs_bench(args: argparse.Namespace) -> int:
    """``mockdcp bench --docs N``: ``N`` generated documents loaded as ``serve --docs``
    loads them (``load_documents``: the cold tier, drawn in a worker), and for each of
    ``--runs``: resident bytes per document beyond key and value, documents loaded per
    second (and the event loop's longest stall meanwhile), events/s of one
    collection-aware and one legacy connection streaming them all (from disk: a loaded
    corpus is persisted, in no checkpoint), and the process's whole resident size after
    the load; and the seconds from spawning ``mockdcp serve --docs N`` to its ready
    line, with that server's resident size then and its peak until then. Medians, with
    the samples (JSON)."""
    import trio

    from mockdcp.data import load_documents
    from mockdcp.model import Bucket

    docs = args.docs
    # imports, Faker's pools and the loader's first allocations before the baseline
    trio.run(
        partial(load_documents, Bucket("warm-up", 1, seed=1, clock=time.time), 100, worker=False)
    )
    mem, loads, stalls, complete = [], [], [], []
    resident: list[int] = []
    aware: list[float] = []
    legacy: list[float] = []
    aware_cpu: list[float] = []
    legacy_cpu: list[float] = []
    for _ in range(args.runs):
        gc.collect()
        release_freed_memory()
        before = _rss()
        bucket = Bucket(
            "default", args.vbuckets, seed=1, clock=time.time, pause_collector=collector_paused
        )
        stall = [0.0]

        async def load_and_watch(bucket: Bucket, stall: list[float]) -> float:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watch_loop, stall)
                t0 = time.perf_counter()
                await load_documents(bucket, docs)
                seconds = time.perf_counter() - t0
                nursery.cancel_scope.cancel()
            return seconds

        seconds = trio.run(load_and_watch, bucket, stall)
        gc.collect()
        release_freed_memory()
        resident.append(_rss())
        mem.append((resident[-1] - before - _key_value_bytes(bucket)) / docs)
        loads.append(docs / seconds)
        stalls.append(stall[0] * 1000)
        for legacy_consumer, rates, per_cpu in (
            (False, aware, aware_cpu),
            (True, legacy, legacy_cpu),
        ):
            result = trio.run(_stream_once, bucket, docs, args.vbuckets, legacy_consumer)
            rates.append(result["events"] / result["seconds"])
            per_cpu.append(result["events"] / result["server_cpu_s"])
            complete.append(result["complete"])
        del bucket
        gc.collect()
    ready_resident: list[tuple[int, int]] = []
    ready = measure_startup(args.runs, docs, ready_resident)
    report = {
        "docs": docs,
        "vbuckets": args.vbuckets,
        "runs": args.runs,
        "bytes_per_doc_beyond_key_value": statistics.median(mem),
        "resident_bytes": statistics.median(resident),
        "ready_resident_bytes": statistics.median(rss for rss, _ in ready_resident),
        "ready_peak_resident_bytes": statistics.median(peak for _, peak in ready_resident),
        "load_docs_per_s": statistics.median(loads),
        "load_max_stall_ms": statistics.median(stalls),
        "ready_s": statistics.median(ready),
        "disk_events_per_s": statistics.median(aware),
        "legacy_disk_events_per_s": statistics.median(legacy),
        "disk_events_per_server_cpu_s": statistics.median(aware_cpu),
        "legacy_disk_events_per_server_cpu_s": statistics.median(legacy_cpu),
        "complete": all(complete),
        "samples": {
            "bytes_beyond": mem,
            "load_docs_per_s": loads,
            "ready_s": ready,
            "resident_bytes": resident,
            "ready_resident_bytes": ready_resident,
            "events_per_s": aware,
            "legacy_events_per_s": legacy,
        },
    }
    print(json.dumps(report))
    return 0 if report["complete"] else 1


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


def measure_documents(count: int) -> dict[str, float]:
    """Generated user profiles (``mockdcp serve --docs``) per second: drawn (CPU
    seconds of one process), written by ``Bucket.set_many_steps`` (CPU seconds) and
    end to end (wall seconds of ``load_documents``, as ``serve`` runs it: drawn in a
    worker process from ``WORKER_MIN`` documents on while this one writes), each into
    an empty 1024-vbucket bucket."""
    import trio

    from mockdcp.data import JSON, LOAD_BATCH, STEP_ROWS, document_chunks, load_documents
    from mockdcp.model import Bucket

    t0 = time.process_time()
    chunks = list(document_chunks(count, 0))
    generation = count / (time.process_time() - t0)
    keys = [key for chunk_keys, _ in chunks for key in chunk_keys]
    values = [value for _, chunk_values in chunks for value in chunk_values]
    del chunks
    bucket = Bucket("default", 1024, seed=1, clock=time.time, pause_collector=collector_paused)
    t0 = time.process_time()
    for start in range(0, count, LOAD_BATCH):  # the batches load_documents writes
        batch = slice(start, start + LOAD_BATCH)
        steps = bucket.set_many_steps(
            keys[batch], values[batch], datatypes=JSON, rows_per_step=STEP_ROWS
        )
        for _ in steps:
            pass
        gc.freeze()  # as load_documents does after each batch
    load = count / (time.process_time() - t0)
    del bucket, keys, values
    gc.unfreeze()
    gc.collect()
    bucket = Bucket("default", 1024, seed=1, clock=time.time, pause_collector=collector_paused)
    stall = [0.0]

    async def load_and_watch(bucket: Bucket) -> float:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch_loop, stall)
            t0 = time.perf_counter()
            await load_documents(bucket, count)
            seconds = time.perf_counter() - t0
            nursery.cancel_scope.cancel()
        return seconds

    end_to_end = count / trio.run(load_and_watch, bucket)
    del bucket
    gc.unfreeze()
    gc.collect()
    return {"generate": generation, "load": load, "end_to_end": end_to_end, "stall": stall[0]}


async def _watch_loop(stall: list[float]) -> None:
    """The longest time (``stall[0]``, seconds) the event loop took to come back to
    this task, which asks to wake every millisecond."""
    import trio

    while True:
        t0 = time.perf_counter()
        await trio.sleep(0.001)
        stall[0] = max(stall[0], time.perf_counter() - t0 - 0.001)


def _resident_of(pid: int) -> tuple[int, int]:
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


async def _stream_once(
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

    from mockdcp.server import serve

    peak = [_rss()]

    async def sample() -> None:  # the server's resident memory while it streams
        while True:
            peak[0] = max(peak[0], _rss())
            await trio.sleep(0.1)

    # with TLS, a CA of its own in a temporary directory: the user's kept CA is not touched
    with tempfile.TemporaryDirectory(prefix="mockdcp-bench-") as private:
        ca_file = os.path.join(private, "ca.pem") if tls else None
        tls_options: dict[str, Any] = {}
        if tls:
            tls_options = {"tls": True, "tls_port": 0, "https_port": 0, "tls_dir": private}
        # no flusher: the bench measures streaming from memory, or from disk after persist()
        gc.collect()
        r0 = _rss()
        s0 = time.perf_counter()
        async with serve(
            port=0,
            http_port=0,
            bucket_obj=bucket,
            flush_interval=None,
            nodes=nodes,
            replicas=replicas,
            **tls_options,
        ) as server:
            setup_s = time.perf_counter() - s0  # with replicas: building their copies
            gc.collect()
            setup_rss = _rss() - r0
            port = server.tls_port if tls else server.kv_port
            plan = [] if nodes == 1 else _cluster_plan(server)
            cmd = [
                sys.executable,
                "-m",
                "mockdcp.cli._bench_consumer",
                "--port",
                str(port),
                "--items",
                str(items),
                "--vbuckets",
                str(vbuckets),
                *(["--legacy"] if legacy else []),
                "--connections",
                str(consumers),
                "--collections",
                ",".join(map(str, collections or [])),
                "--stream-ids",
                str(stream_ids),
                *(["--tls-ca", ca_file] if ca_file else []),
                *(["--plan", json.dumps(plan)] if plan else []),
                *consumer_args,
            ]
            reports = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sample)
                for _ in range(passes):  # the same bucket streamed again from the start
                    c0 = time.process_time()
                    result = await trio.run_process(cmd, capture_stdout=True, check=True)
                    report = json.loads(result.stdout.decode().strip().splitlines()[-1])
                    report["server_cpu_s"] = time.process_time() - c0
                    reports.append(report)
                nursery.cancel_scope.cancel()
            reports.sort(key=lambda r: r["events"] / r["seconds"])
            report = reports[len(reports) // 2]  # the median pass
            report["setup_s"] = setup_s
            report["setup_rss"] = setup_rss
            report["server_peak_rss"] = max(peak[0], _rss())
            return dict(report)
    raise AssertionError("unreachable")  # pragma: no cover - the block returns


def _cluster_plan(server: Any) -> list[dict[str, Any]]:  # noqa: ANN401 - MockDcpServer
    """Per node: its KV port, the vbuckets active there and the items they hold (each
    key written once: a vbucket's high seqno)."""
    cluster = server.topology.cluster
    plan = []
    for node in server.nodes:
        vbs = cluster.map.actives_on(node.name) if node.name in cluster.map.nodes else []
        items = sum(cluster.active(vb).high_seqno for vb in vbs)
        plan.append({"port": node.kv_port, "vbuckets": vbs, "items": items})
    return plan


def _tls_rate(args: argparse.Namespace, streamed: int, cids: list[int] | None) -> float:
    """Events/s of the run's stream over TLS, from a bucket loaded as the run's was."""
    import trio

    bucket, _, _ = load_bucket(
        args.items, args.value_size, args.vbuckets, BENCH_COLLECTIONS if args.filter else 0
    )
    if args.from_disk:
        expel_to_disk(bucket)
    result = trio.run(
        partial(
            _stream_once,
            bucket,
            streamed,
            args.vbuckets,
            args.legacy,
            args.consumers,
            cids,
            args.stream_ids,
            tls=True,
        )
    )
    del bucket
    gc.collect()
    return float(result["events"] / result["seconds"])


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
            resident.append(_resident_of(proc.pid))
        proc.terminate()
        proc.wait(10)
        if b"ready" not in line:
            raise RuntimeError(f"serve did not become ready: {line!r}")
    return times


async def _rebalance_once(bucket: Bucket, nodes: int, replicas: int) -> dict[str, float]:
    """A rebalance from ``nodes`` to ``nodes + 1`` nodes while the reference cluster
    consumer streams the bucket: seconds the rebalance took, then until the consumer
    held the oracle."""
    import trio

    from mockdcp.client import ClusterConsumer
    from mockdcp.server import serve

    async with serve(
        port=0, http_port=0, bucket_obj=bucket, flush_interval=None, nodes=nodes, replicas=replicas
    ) as server:
        consumer = ClusterConsumer(server.host, server.kv_port, name="mockdcp-bench-rebalance")
        async with trio.open_nursery() as nursery:
            await nursery.start(consumer.run)
            await trio.sleep(0.2)  # streaming under way
            t0 = time.perf_counter()
            await server.apply({"add_node": {}}, {"rebalance": {}})
            rebalance_s = time.perf_counter() - t0
            oracle = {k: item.seqno for k, item in server.oracle().items()}
            while True:
                held = {k: v.seqno for k, v in consumer.state.documents().items()}
                if held == oracle:
                    break
                await trio.sleep(0.5)
            converged_s = time.perf_counter() - t0
            nursery.cancel_scope.cancel()
        moved = server.topology.rev
    return {"rebalance_s": rebalance_s, "converged_s": converged_s, "config_rev": moved}


def run_rebalance_bench(args: argparse.Namespace) -> int:
    """``mockdcp bench --rebalance``: ``--nodes`` to one more, ``--vbuckets`` and
    ``--items``, with the reference cluster consumer streaming (medians of ``--runs``)."""
    import trio

    results = []
    for _ in range(args.runs):
        bucket, _, _ = load_bucket(args.items, args.value_size, args.vbuckets)
        results.append(trio.run(_rebalance_once, bucket, args.nodes, args.replicas))
        del bucket
        gc.collect()
    report = {
        "items": args.items,
        "vbuckets": args.vbuckets,
        "nodes": args.nodes,
        "replicas": args.replicas,
        "runs": args.runs,
        "rebalance_s": statistics.median(r["rebalance_s"] for r in results),
        "consumer_holds_oracle_after_s": statistics.median(r["converged_s"] for r in results),
        "all": results,
    }
    if args.json:
        print(json.dumps(report))
        return 0
    print(
        f"mockdcp bench --rebalance: {args.items:,} items, {args.vbuckets} vbuckets, "
        f"{args.nodes} -> {args.nodes + 1} nodes, {args.replicas} replica(s), median of "
        f"{args.runs}: rebalance {report['rebalance_s']:.2f} s (target < 10 s), the "
        f"consumer holds the oracle after {report['consumer_holds_oracle_after_s']:.2f} s"
    )
    return 0


#: what ``mockdcp bench`` says when psutil, its extra, is not installed
NEEDS_PSUTIL = (
    "mockdcp bench: measures memory with psutil, which `pip install mockdcp` leaves out: "
    "pip install 'mockdcp[bench]'"
)


def psutil_missing() -> bool:
    """Whether psutil (the ``bench`` extra: the bench alone reads process memory with it)
    cannot be imported."""
    try:
        import psutil  # noqa: F401
    except ImportError:
        return True
    return False


def run_bench(args: argparse.Namespace) -> int:
    import trio

    if psutil_missing():
        print(NEEDS_PSUTIL, file=sys.stderr)
        return 2
    if args.legacy and (args.filter or args.stream_ids):
        print(
            "mockdcp bench: --filter and --stream-ids need collections, not --legacy",
            file=sys.stderr,
        )
        return 2

    if args.rebalance:
        return run_rebalance_bench(args)
    if args.storage is not None and (args.storage == "magma") != bool(args.history):
        print(
            "mockdcp bench: --storage magma measures --history (a couchstore bucket keeps "
            "no history)",
            file=sys.stderr,
        )
        return 2
    if args.history or args.durable:
        if (args.history and args.durable) or not 0 <= args.durable <= 1:
            print(
                "mockdcp bench: --history or --durable (a fraction 0..1), not both",
                file=sys.stderr,
            )
            return 2
        from mockdcp.cli._bench_7x import run_7x_bench

        return run_7x_bench(args)
    if args.corpus or args.on_disk:
        if not (args.corpus and args.on_disk):
            print("mockdcp bench: --corpus DIR --on-disk go together", file=sys.stderr)
            return 2
        from mockdcp.cli._bench_ondisk import run_ondisk_bench

        return run_ondisk_bench(args)
    if args.cold:
        return run_cold_bench(args)
    if args.docs:
        return run_docs_bench(args)
    if args.nodes > 1 and (args.filter or args.stream_ids or args.consumers > 1 or args.tls):
        print(
            "mockdcp bench: --nodes measures one plain consumer (no --filter, --stream-ids,"
            " --consumers or --tls)",
            file=sys.stderr,
        )
        return 2
    if args.replicas > args.nodes - 1:
        print(f"mockdcp bench: {args.replicas} replica(s) need more nodes", file=sys.stderr)
        return 2
    # startup first, while this process is small: a 1M-item bucket in the parent slows
    # the spawn of the child being timed
    startup = measure_startup(max(args.runs, 5))
    ready = measure_startup(args.runs, args.items)
    rates, byte_rates, mem, disk, loads, peaks = [], [], [], [], [], []
    walked: list[float] = []  # the bucket's items per second of streaming
    tls_rates: list[float] = []  # --tls: events/s of the same stream over TLS
    server_cpu, consumer_cpu, complete = [], [], []
    cluster_rates: list[float] = []  # --nodes: events/s across the nodes
    # --nodes: events per CPU second of the server (all nodes) and of the consumer
    cluster_cpu: list[tuple[float, float]] = []
    replica_builds: list[float] = []  # --replicas: seconds building the replica copies
    replica_mem: list[float] = []  # --replicas: bytes a replica copy of an item costs
    load_seconds: list[float] = []
    cids, streamed = stream_plan(args.items, args.filter, args.stream_ids)
    for _ in range(args.runs):
        bucket, grown, load_s = load_bucket(
            args.items, args.value_size, args.vbuckets, BENCH_COLLECTIONS if args.filter else 0
        )
        mem.append(grown / args.items)
        loads.append(args.items / load_s)
        load_seconds.append(load_s)
        if args.from_disk:
            expel_to_disk(bucket)
        # --nodes: one node and the cluster each streamed CLUSTER_PASSES times a run (the
        # median pass of each): a single pass is a fraction of a second, within noise
        passes = CLUSTER_PASSES if args.nodes > 1 else 1
        result = trio.run(
            partial(
                _stream_once,
                bucket,
                streamed,
                args.vbuckets,
                args.legacy,
                args.consumers,
                cids,
                args.stream_ids,
                passes=passes,
            )
        )
        if args.nodes > 1:
            clustered = trio.run(
                partial(
                    _stream_once,
                    bucket,
                    streamed,
                    args.vbuckets,
                    args.legacy,
                    nodes=args.nodes,
                    replicas=args.replicas,
                    passes=passes,
                )
            )
            cluster_rates.append(clustered["events"] / clustered["seconds"])
            cluster_cpu.append(
                (
                    clustered["events"] / clustered["server_cpu_s"],
                    clustered["events"] / clustered["cpu_s"],
                )
            )
            replica_builds.append(clustered["setup_s"] - result["setup_s"])
            if args.replicas:
                grown_by = clustered["setup_rss"] - result["setup_rss"]
                replica_mem.append(grown_by / (args.items * args.replicas))
            complete.append(clustered["complete"])
        peaks.append(result["server_peak_rss"])
        server_cpu.append(result["events"] / result["server_cpu_s"])
        consumer_cpu.append(result["events"] / result["cpu_s"])
        rates.append(result["events"] / result["seconds"])
        walked.append(args.items / result["seconds"])
        byte_rates.append(result["bytes"] / result["seconds"])
        disk.append(result["disk_snapshots"])
        complete.append(result["complete"])
        del bucket
        gc.collect()
        if args.tls:
            tls_rates.append(_tls_rate(args, streamed, cids))
    documents = [measure_documents(args.items) for _ in range(args.runs)]

    def docs(figure: str) -> float:
        return statistics.median(d[figure] for d in documents)

    report = {
        "items": args.items,
        "value_size": args.value_size,
        "vbuckets": args.vbuckets,
        "runs": args.runs,
        "from_disk": args.from_disk,
        "legacy": args.legacy,
        "consumers": args.consumers,
        # in the worst run: the connections that got exactly every item
        "consumers_complete": min(complete),
        "filter": args.filter,
        "stream_ids": args.stream_ids,
        # items each consumer receives: a quarter of them with --filter, all of them per
        # pass-through stream
        "streamed_items": streamed,
        # the bucket's items over the streaming time: what a filtered stream walked past
        "bucket_items_per_s": statistics.median(walked),
        "system_events": result["system_events"],
        "seqno_advances": result["seqno_advances"],
        "events_per_s": statistics.median(rates),
        "bytes_per_s": statistics.median(byte_rates),
        "startup_s": statistics.median(startup),
        "memory_per_item_bytes": statistics.median(mem),
        "load_items_per_s": statistics.median(loads),
        # generated documents: drawn, written, and both as serve --docs runs them
        "generate_documents_per_s": docs("generate"),
        "write_documents_per_s": docs("load"),
        "load_documents_per_s": docs("end_to_end"),
        "ready_with_docs_s": statistics.median(ready),
        # the longest the event loop was kept from another task during that load
        "load_max_stall_ms": statistics.median(d["stall"] for d in documents) * 1000,
        "disk_snapshots": statistics.median(disk),
        "server_peak_rss_bytes": max(peaks),
        # events per CPU second of each process: what a machine whose cores are not
        # shared with other work would reach (the slower of the two bounds the rate)
        "events_per_server_cpu_s": statistics.median(server_cpu),
        "events_per_consumer_cpu_s": statistics.median(consumer_cpu),
        "nodes": args.nodes,
        "replicas": args.replicas,
        "cluster_events_per_s": statistics.median(cluster_rates) if cluster_rates else None,
        # where a cluster's events cost more: the server's nodes, or the consumer walking
        # a connection per node (compare events_per_server_cpu_s, _consumer_cpu_s)
        "cluster_events_per_server_cpu_s": (
            statistics.median(c[0] for c in cluster_cpu) if cluster_cpu else None
        ),
        "cluster_events_per_consumer_cpu_s": (
            statistics.median(c[1] for c in cluster_cpu) if cluster_cpu else None
        ),
        # across the nodes over one node, run by run (the target is 0.9)
        "cluster_ratio": (
            statistics.median(c / r for c, r in zip(cluster_rates, rates, strict=True))
            if cluster_rates
            else None
        ),
        "replica_build_s": statistics.median(replica_builds) if replica_builds else None,
        # resident bytes a replica copy of an item adds (the target: <= its active's,
        # memory_per_item_bytes)
        "replica_bytes_per_item": statistics.median(replica_mem) if replica_mem else None,
        # loading with the replicas built over loading alone (the target is <= 2)
        "load_with_replicas_ratio": (
            statistics.median(
                (ls + max(b, 0.0)) / ls for ls, b in zip(load_seconds, replica_builds, strict=True)
            )
            if replica_builds and args.replicas
            else None
        ),
        "tls": args.tls,
        "tls_events_per_s": statistics.median(tls_rates) if tls_rates else None,
        # TLS over plaintext, run by run (the target is 0.5)
        "tls_ratio": (
            statistics.median(t / r for t, r in zip(tls_rates, rates, strict=True))
            if tls_rates
            else None
        ),
        "all": {
            "events_per_s": rates,
            "startup_s": startup,
            "memory_per_item_bytes": mem,
            "load_items_per_s": loads,
            "documents": documents,
            "ready_with_docs_s": ready,
        },
    }
    if args.json:
        print(json.dumps(report))
        return 0
    from rich.console import Console
    from rich.table import Table

    source = "from disk" if args.from_disk else "from memory"
    if args.legacy:
        source += ", legacy consumer (no collections)"
    if args.filter:
        source += f", filtered on 1 of {BENCH_COLLECTIONS} collections"
    if args.stream_ids:
        source += f", {args.stream_ids} streams per vbucket (stream-ids)"
    table = Table(
        title=f"mockdcp bench: {args.items:,} items x {args.value_size} B, "
        f"{args.vbuckets} vbuckets, {source}, median of {args.runs}"
    )
    table.add_column("measure")
    table.add_column("median", justify="right")
    table.add_column("target", justify="right")
    who = "one connection" if args.consumers == 1 else f"{args.consumers} connections, in all"
    table.add_row(f"events/s ({who})", f"{report['events_per_s']:,.0f}", ">= 1,000,000")
    if report["tls_ratio"] is not None:
        table.add_row(
            f"events/s over TLS ({who})",
            f"{report['tls_events_per_s']:,.0f} ({report['tls_ratio']:.0%} of plaintext)",
            ">= 50% of plaintext",
        )
    if report["cluster_ratio"] is not None:
        table.add_row(
            f"events/s across {args.nodes} nodes (a connection each)",
            f"{report['cluster_events_per_s']:,.0f} ({report['cluster_ratio']:.0%} of one node)",
            ">= 90% of one node",
        )
    if report["replica_bytes_per_item"] is not None:
        table.add_row(
            "memory per replica copy of an item",
            f"{report['replica_bytes_per_item']:.0f} B",
            f"<= the active's ({report['memory_per_item_bytes']:.0f} B)",
        )
    if report["load_with_replicas_ratio"] is not None:
        table.add_row(
            f"load with {args.replicas} replica(s) / without",
            f"{report['load_with_replicas_ratio']:.2f}x ({report['replica_build_s']:.2f} s"
            " building replicas)",
            "<= 2x",
        )
    table.add_row(
        "connections that got every item, once",
        f"{report['consumers_complete']} of {args.consumers}",
        "all",
    )
    if args.filter:
        table.add_row(
            "bucket items/s (walked by the filter)", f"{statistics.median(walked):,.0f}", ""
        )
    table.add_row("bytes/s", f"{report['bytes_per_s'] / 1e6:,.1f} MB/s", "")
    table.add_row(
        "events per CPU second: server / consumer",
        f"{report['events_per_server_cpu_s']:,.0f} / {report['events_per_consumer_cpu_s']:,.0f}",
        "",
    )
    table.add_row("serve start to ready", f"{report['startup_s'] * 1000:.0f} ms", "< 500 ms")
    table.add_row("memory per item", f"{report['memory_per_item_bytes']:.0f} B", "< 1024 B")
    table.add_row(
        "server peak memory (streaming)", f"{report['server_peak_rss_bytes'] / 1e6:,.0f} MB", ""
    )
    table.add_row("load, Bucket.set_many", f"{report['load_items_per_s']:,.0f} items/s", "")
    table.add_row(
        "Faker profiles: drawn / written (one core each)",
        f"{report['generate_documents_per_s']:,.0f} / "
        f"{report['write_documents_per_s']:,.0f} docs/s",
        "",
    )
    table.add_row(
        "Faker profiles loaded, end to end (serve --docs)",
        f"{report['load_documents_per_s']:,.0f} docs/s",
        ">= 250,000",
    )
    table.add_row(
        "event loop's longest stall while loading", f"{report['load_max_stall_ms']:.1f} ms", ""
    )
    table.add_row(
        f"serve --docs {args.items:,} start to ready",
        f"{report['ready_with_docs_s']:.2f} s",
        "< 5 s" if args.items == 1_000_000 else "",
    )
    Console().print(table)
    return 0
