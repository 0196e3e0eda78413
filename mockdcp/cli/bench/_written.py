"""``mockdcp bench written``: ``--items`` documents written a batch at a time
(``Bucket.set_many``, batches of ``LOAD_BATCH``) and persisted after each, as the flusher
persists writes that arrive one at a time (KV, the steps): compaction folds them into
the cold tier (``mockdcp.model._compaction``). For each of ``--runs``: resident bytes
per item beyond key and value once written (the whole process's growth, the freed
objects' memory given back), the share of the items still in the hot tier, items written
and persisted per CPU second, and events/s of one connection (``--legacy``: not
collection-aware) backfilling them all.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import TYPE_CHECKING, Any

from mockdcp.cli.bench._harness import LOAD_BATCH, bench_value, emit, rss, stream_once
from mockdcp.util import collector_paused, release_freed_memory

if TYPE_CHECKING:
    import argparse


def write_bucket(items: int, value_size: int, vbuckets: int) -> tuple[Any, int, float]:
    """A bucket holding ``items`` documents written a batch at a time, each batch
    persisted; the bytes of memory it grew by; the CPU seconds writing took."""
    from mockdcp.model import Bucket

    gc.collect()
    release_freed_memory()
    before = rss()
    bucket = Bucket(
        "default",
        vbuckets,
        seed=1,
        clock=time.time,
        checkpoint_max_items=10_000,
        pause_collector=collector_paused,
    )
    pad = bench_value(0, value_size)
    t0 = time.process_time()
    for start in range(0, items, LOAD_BATCH):
        keys = [b"key::%09d" % i for i in range(start, min(start + LOAD_BATCH, items))]
        bucket.set_many(keys, [pad] * len(keys), datatypes=1)
        bucket.persist()
    cpu = time.process_time() - t0
    gc.collect()
    release_freed_memory()
    return bucket, rss() - before, cpu


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    import trio

    key_value = len(b"key::%09d" % 0) + len(bench_value(0, args.value_size))
    mem, hot, writes, rates, cpu_rates, complete = [], [], [], [], [], []
    for _ in range(args.runs):
        bucket, grown, cpu = write_bucket(args.items, args.value_size, args.vbuckets)
        mem.append(grown / args.items - key_value)
        hot.append(sum(len(vb.items) for vb in bucket.vbuckets) / args.items)
        writes.append(args.items / cpu)
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
        "hot_share": statistics.median(hot),
        "written_items_per_cpu_s": statistics.median(writes),
        "disk_events_per_s": statistics.median(rates),
        "disk_events_per_server_cpu_s": statistics.median(cpu_rates),
    }
    samples = {"bytes_beyond": mem, "written_items_per_cpu_s": writes, "events_per_s": rates}
    targets = {"bytes_per_item_beyond_key_value": "<= 250"}
    return emit(args, "written", params, figures, samples, all(complete), targets)
