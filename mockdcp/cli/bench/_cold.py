"""``mockdcp bench cold``: ``--items`` documents loaded into the cold tier
(``Bucket.cold_load``, as ``serve --docs`` and a corpus load them): its resident bytes
per item beyond key and value, the load rate, and events/s of one connection
(``--legacy``: not collection-aware) backfilling them all from disk.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import TYPE_CHECKING, Any

from mockdcp.cli.bench._harness import bench_value, emit, rss, stream_once
from mockdcp.util import collector_paused, release_freed_memory

if TYPE_CHECKING:
    import argparse

#: documents per ``ColdLoad.add`` batch while loading the cold tier
COLD_BATCH = 200_000


def load_cold_bucket(items: int, value_size: int, vbuckets: int) -> tuple[Any, int, float, float]:
    """A bucket holding ``items`` documents in the cold tier (``Bucket.cold_load``), the
    bytes of memory it grew by, and the wall and CPU seconds the load took (batches of
    ``COLD_BATCH`` keys and values made, framed, then installed)."""
    from mockdcp.model import Bucket

    gc.collect()
    release_freed_memory()  # a freed earlier bucket is not counted as before
    before = rss()
    bucket = Bucket("default", vbuckets, seed=1, clock=time.time, pause_collector=collector_paused)
    pad = bench_value(0, value_size)
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
    return bucket, rss() - before, wall, cpu


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    import trio

    key_value = len(b"key::%09d" % 0) + len(bench_value(0, args.value_size))
    mem, loads, cpus, rates, complete = [], [], [], [], []
    cpu_rates: list[float] = []
    for _ in range(args.runs):
        bucket, grown, wall, cpu = load_cold_bucket(args.items, args.value_size, args.vbuckets)
        mem.append(grown / args.items - key_value)
        loads.append(args.items / wall)
        cpus.append(cpu)
        result = trio.run(stream_once, bucket, args.items, args.vbuckets, args.legacy)
        rates.append(result["events"] / result["seconds"])
        cpu_rates.append(result["events"] / result["server_cpu_s"])
        complete.append(bool(result["complete"]))
        del bucket
        gc.collect()
    params = {
        "items": args.items,
        "value_size": args.value_size,
        "vbuckets": args.vbuckets,
        "legacy": args.legacy,
    }
    figures = {
        "bytes_per_item_beyond_key_value": statistics.median(mem),
        "load_items_per_s": statistics.median(loads),
        "load_cpu_s": statistics.median(cpus),
        "disk_events_per_s": statistics.median(rates),
        "disk_events_per_server_cpu_s": statistics.median(cpu_rates),
    }
    samples = {"bytes_beyond": mem, "load_items_per_s": loads, "events_per_s": rates}
    return emit(args, "cold", params, figures, samples, all(complete))
