"""``mockdcp bench durable --fraction F``: a bucket where a fraction F of the ``--items``
writes are durable (a prepare and its commit, two seqnos each), streamed by a consumer
without ``enable_sync_writes`` (it gets the commits as mutations and never a prepare),
against a bucket of as many plain writes in the same run (each streamed three times, the
median pass counts): the ratio's target is 0.9. ``--from-disk``: both are persisted
first; ``--legacy``: the consumer does not negotiate collections.
"""

from __future__ import annotations

import gc
import statistics
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from mockdcp.cli.bench._harness import LOAD_BATCH, bench_value, emit, expel_to_disk, stream_once
from mockdcp.util import collector_paused

if TYPE_CHECKING:
    import argparse

    from mockdcp.model import Bucket


def refusal(args: argparse.Namespace) -> str | None:
    """Why these options cannot be measured together (None: they can)."""
    if not 0 < args.fraction <= 1:
        return f"--fraction: {args.fraction:g} is not a fraction in (0, 1]"
    return None


def durable_bucket(items: int, fraction: float, value_size: int, vbuckets: int) -> Bucket:
    """A bucket of ``items`` writes of new keys, ``fraction`` of them durable writes
    committed at once (in each batch of ``LOAD_BATCH``, the plain ones first)."""
    from mockdcp.model import Bucket

    bucket = Bucket("default", vbuckets, seed=1, clock=time.time, pause_collector=collector_paused)
    pad = bench_value(0, value_size)
    for start in range(0, items, LOAD_BATCH):
        count = min(LOAD_BATCH, items - start)
        durable = round(count * fraction)
        keys = [b"key::%09d" % i for i in range(start, start + count)]
        plain = keys[: count - durable]
        if plain:
            bucket.set_many(plain, [pad] * len(plain), datatypes=1)
        for key in keys[count - durable :]:
            bucket.sync_write(key, pad, outcome="commit")
    return bucket


def _durable_run(args: argparse.Namespace) -> dict[str, Any]:
    import trio

    rates = {}
    for label, fraction in (("plain", 0.0), ("durable", args.fraction)):
        bucket = durable_bucket(args.items, fraction, args.value_size, args.vbuckets)
        if args.from_disk:
            expel_to_disk(bucket)
        report = trio.run(
            partial(stream_once, bucket, args.items, args.vbuckets, args.legacy, passes=3)
        )
        rates[label] = float(report["events"] / report["seconds"])
        if not report["complete"]:
            raise RuntimeError(f"the {label} bucket's stream did not bring every item")
        del bucket
        gc.collect()
    return {**rates, "ratio": rates["durable"] / rates["plain"]}


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    runs = [_durable_run(args) for _ in range(args.runs)]
    params = {
        "items": args.items,
        "vbuckets": args.vbuckets,
        "durable_fraction": args.fraction,
        "legacy": args.legacy,
        "from_disk": args.from_disk,
    }
    figures = {
        "plain_events_per_s": statistics.median(r["plain"] for r in runs),
        "durable_events_per_s": statistics.median(r["durable"] for r in runs),
        "ratio": statistics.median(r["ratio"] for r in runs),
    }
    return emit(args, "durable", params, figures, {"all": runs}, True, {"ratio": ">= 0.9"})
