"""``mockdcp bench ephemeral``: an ephemeral bucket against a couchbase bucket loaded the
same way (``--items`` documents of ``--value-size`` bytes over ``--vbuckets``), each
streamed from memory (the checkpoints) and by backfill: the couchbase bucket's from disk
(persisted, its checkpoints expelled), the ephemeral bucket's from its in-memory
sequence list (its checkpoints closed and expelled: kv_engine ``backfill_memory.cc``).
Each stream runs three times, the median pass counts. "From memory" is a stream whose
start the checkpoints still hold: on the ephemeral bucket only the open checkpoint is
kept (a closed one leaves once the sequence list holds it; the couchbase bucket's wait
for its flusher), so part of its stream reads the list as a backfill would. Figures:
events/s of the four streams and the ephemeral bucket's ratio to the couchbase
bucket's for each way (the target: the couchbase bucket's rates, issue 41).
``--legacy``: the consumer does not negotiate collections.
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

#: the bucket types compared, and the ways each is streamed
TYPES = ("couchbase", "ephemeral")
WAYS = ("memory", "backfill")


def refusal(args: argparse.Namespace) -> str | None:
    """Why these options cannot be measured together (None: they can)."""
    return None


def typed_bucket(bucket_type: str, items: int, value_size: int, vbuckets: int) -> Bucket:
    """A bucket of ``bucket_type`` holding ``items`` documents, loaded in batches."""
    from mockdcp.model import Bucket

    bucket = Bucket(
        "default",
        vbuckets,
        seed=1,
        clock=time.time,
        pause_collector=collector_paused,
        bucket_type=bucket_type,
    )
    pad = bench_value(0, value_size)
    for start in range(0, items, LOAD_BATCH):
        keys = [b"key::%09d" % i for i in range(start, min(start + LOAD_BATCH, items))]
        bucket.set_many(keys, [pad] * len(keys), datatypes=1)
    return bucket


def to_backfill(bucket: Bucket) -> None:
    """Leave the items to a backfill: the couchbase bucket's on disk, the ephemeral
    bucket's in its sequence list (closed checkpoints are expelled once the list holds
    them)."""
    if bucket.ephemeral is None:
        expel_to_disk(bucket)
        return
    for vb in range(bucket.num_vbuckets):
        bucket.checkpoint(vb)


def _run_once(args: argparse.Namespace) -> dict[str, Any]:
    import trio

    rates: dict[str, Any] = {}
    for bucket_type in TYPES:
        for way in WAYS:
            bucket = typed_bucket(bucket_type, args.items, args.value_size, args.vbuckets)
            if way == "backfill":
                to_backfill(bucket)
            report = trio.run(
                partial(stream_once, bucket, args.items, args.vbuckets, args.legacy, passes=3)
            )
            if not report["complete"]:
                raise RuntimeError(f"the {bucket_type} bucket's {way} stream missed items")
            if way == "backfill" and report["disk_snapshots"] != args.vbuckets:
                raise RuntimeError(f"the {bucket_type} bucket's backfill was not one per vbucket")
            rates[f"{bucket_type}_{way}"] = float(report["events"] / report["seconds"])
            del bucket
            gc.collect()
    for way in WAYS:
        rates[f"{way}_ratio"] = rates[f"ephemeral_{way}"] / rates[f"couchbase_{way}"]
    return rates


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    runs = [_run_once(args) for _ in range(args.runs)]
    params = {
        "items": args.items,
        "value_size": args.value_size,
        "vbuckets": args.vbuckets,
        "legacy": args.legacy,
    }
    figures = {
        f"{name}_events_per_s": statistics.median(r[name] for r in runs)
        for name in (f"{t}_{w}" for t in TYPES for w in WAYS)
    }
    for way in WAYS:
        figures[f"{way}_ratio"] = statistics.median(r[f"{way}_ratio"] for r in runs)
    targets = {"memory_ratio": ">= 0.9", "backfill_ratio": ">= 0.9"}
    return emit(args, "ephemeral", params, figures, {"all": runs}, True, targets)
