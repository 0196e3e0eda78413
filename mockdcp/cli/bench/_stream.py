"""``mockdcp bench stream`` (the default mode): ``--items`` documents of ``--value-size``
bytes over ``--vbuckets``, loaded with ``Bucket.set_many``, served, and streamed over
loopback to the bench consumer (a process of its own). Figures: events/s (and per CPU
second of the server and of the consumer), bytes/s, resident memory per item, the load
rate and the server's peak resident memory. Variants: ``--from-disk`` (the bucket is
persisted first: the stream is a disk backfill), ``--legacy`` (the consumer does not
negotiate collections), ``--consumers N`` (N connections stream every item at once),
``--filter`` (the items spread over ``BENCH_COLLECTIONS`` collections, one streamed
through a collection filter), ``--stream-ids N`` (N streams per vbucket: with
``--filter`` stream k filters the k-th collection, without it each gets every item) and
``--tls`` (each run also streams a bucket loaded the same way over the TLS port, a CA of
its own, reported with its ratio to the plaintext figure) and ``--bare`` (the consumer
negotiates nothing: no HELLO, no DCP_CONTROL, so no collections, no flow control).
"""

from __future__ import annotations

import gc
import statistics
from functools import partial
from typing import TYPE_CHECKING, Any

from mockdcp.cli.bench._harness import (
    BENCH_COLLECTIONS,
    emit,
    expel_to_disk,
    load_bucket,
    stream_once,
    stream_plan,
)

if TYPE_CHECKING:
    import argparse


def refusal(args: argparse.Namespace) -> str | None:
    """Why these options cannot be measured together (None: they can)."""
    if args.legacy and (args.filter or args.stream_ids):
        return "--filter and --stream-ids need collections, not --legacy"
    if args.bare and (args.filter or args.stream_ids or args.consumers > 1):
        return (
            "--bare streams one connection without collections: no --filter, "
            "--stream-ids or --consumers"
        )
    return None


def tls_rate(args: argparse.Namespace, streamed: int, cids: list[int] | None) -> float:
    """Events/s of the run's stream over TLS, from a bucket loaded as the run's was."""
    import trio

    bucket, _, _ = load_bucket(
        args.items, args.value_size, args.vbuckets, BENCH_COLLECTIONS if args.filter else 0
    )
    if args.from_disk:
        expel_to_disk(bucket)
    result = trio.run(
        partial(
            stream_once,
            bucket,
            streamed,
            args.vbuckets,
            args.legacy or args.bare,
            args.consumers,
            cids,
            args.stream_ids,
            tls=True,
            consumer_args=("--bare",) if args.bare else (),
        )
    )
    del bucket
    gc.collect()
    return float(result["events"] / result["seconds"])


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    import trio

    rates, byte_rates, mem, disk, loads, peaks = [], [], [], [], [], []
    walked: list[float] = []  # the bucket's items per second of streaming
    tls_rates: list[float] = []  # --tls: events/s of the same stream over TLS
    server_cpu, consumer_cpu, complete = [], [], []
    result: dict[str, Any] = {}
    cids, streamed = stream_plan(args.items, args.filter, args.stream_ids)
    for _ in range(args.runs):
        bucket, grown, load_s = load_bucket(
            args.items, args.value_size, args.vbuckets, BENCH_COLLECTIONS if args.filter else 0
        )
        mem.append(grown / args.items)
        loads.append(args.items / load_s)
        if args.from_disk:
            expel_to_disk(bucket)
        result = trio.run(
            partial(
                stream_once,
                bucket,
                streamed,
                args.vbuckets,
                args.legacy or args.bare,
                args.consumers,
                cids,
                args.stream_ids,
                consumer_args=("--bare",) if args.bare else (),
            )
        )
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
            tls_rates.append(tls_rate(args, streamed, cids))
    params = {
        "items": args.items,
        "value_size": args.value_size,
        "vbuckets": args.vbuckets,
        "from_disk": args.from_disk,
        "legacy": args.legacy or args.bare,
        "bare": args.bare,
        "consumers": args.consumers,
        "filter": args.filter,
        "stream_ids": args.stream_ids,
        "tls": args.tls,
    }
    figures: dict[str, Any] = {
        "events_per_s": statistics.median(rates),
        # events per CPU second of each process: what a machine whose cores are not
        # shared with other work would reach (the slower of the two bounds the rate)
        "events_per_server_cpu_s": statistics.median(server_cpu),
        "events_per_consumer_cpu_s": statistics.median(consumer_cpu),
        "bytes_per_s": statistics.median(byte_rates),
        # items each connection receives: a quarter of them with --filter, all of them
        # per pass-through stream
        "streamed_items": streamed,
        # the bucket's items over the streaming time: what a filtered stream walked past
        "bucket_items_per_s": statistics.median(walked),
        # in the worst run: the connections that got exactly every item
        "consumers_complete": min(complete),
        "system_events": result["system_events"],
        "seqno_advances": result["seqno_advances"],
        "disk_snapshots": statistics.median(disk),
        "memory_per_item_bytes": statistics.median(mem),
        "load_items_per_s": statistics.median(loads),
        "server_peak_rss_bytes": max(peaks),
    }
    if tls_rates:
        figures["tls_events_per_s"] = statistics.median(tls_rates)
        # TLS over plaintext, run by run (the target is 0.5)
        figures["tls_ratio"] = statistics.median(
            t / r for t, r in zip(tls_rates, rates, strict=True)
        )
    samples = {
        "events_per_s": rates,
        "memory_per_item_bytes": mem,
        "load_items_per_s": loads,
        "tls_events_per_s": tls_rates,
    }
    targets = {
        "events_per_s": ">= 1,000,000",
        "memory_per_item_bytes": "< 1024",
        "tls_ratio": ">= 0.5",
    }
    done = min(complete) == args.consumers
    return emit(args, "stream", params, figures, samples, done, targets)
