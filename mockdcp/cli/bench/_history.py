"""``mockdcp bench history --revisions N``: a Magma bucket whose one collection keeps
history, ``--items`` writes over ``--items / N`` keys (every key written N times); a
consumer with ``change_streams`` gets every revision (kv_engine ``checkpoint.cc``: a
history collection's items are never de-duplicated), from memory, or with
``--from-disk`` backfilled from the retained history (one
Disk|Checkpoint|History|MayDuplicateKeys snapshot per vbucket). Each run loads its
bucket afresh and streams it three times (the median pass counts). Events/s against
the target of 1M.
"""

from __future__ import annotations

import gc
import statistics
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from mockdcp.cli.bench._harness import (
    FIRST_COLLECTION_ID,
    LOAD_BATCH,
    bench_value,
    emit,
    expel_to_disk,
    stream_once,
)
from mockdcp.util import collector_paused

if TYPE_CHECKING:
    import argparse

    from mockdcp.model import Bucket

#: the history collection: the first one the bucket declares
HISTORY_COLLECTION = FIRST_COLLECTION_ID


def refusal(args: argparse.Namespace) -> str | None:
    """Why these options cannot be measured together (None: they can)."""
    if args.legacy:
        return "history streams to a change-streams consumer: collections, not --legacy"
    return None


def history_bucket(items: int, revisions: int, value_size: int, vbuckets: int) -> Bucket:
    """A Magma bucket (history retained) with ``items`` writes to its history
    collection, each key written ``revisions`` times (round robin over the keys)."""
    from mockdcp.model import Bucket

    bucket = Bucket(
        "default",
        vbuckets,
        seed=1,
        clock=time.time,
        pause_collector=collector_paused,
        storage="magma",
        collections={"bench": [{"name": "history", "history": True}]},
    )
    keys = max(1, items // revisions)
    pad = bench_value(0, value_size)
    for start in range(0, items, LOAD_BATCH):
        count = min(LOAD_BATCH, items - start)
        batch = [b"key::%09d" % (i % keys) for i in range(start, start + count)]
        bucket.set_many(
            batch, [pad] * count, datatypes=1, collection_ids=[HISTORY_COLLECTION] * count
        )
    return bucket


def _history_run(args: argparse.Namespace) -> dict[str, Any]:
    import trio

    bucket = history_bucket(args.items, args.revisions, args.value_size, args.vbuckets)
    if args.from_disk:
        expel_to_disk(bucket)
    report = trio.run(
        partial(
            stream_once,
            bucket,
            args.items,  # every revision
            args.vbuckets,
            False,
            passes=3,
            consumer_args=("--change-streams",),
        )
    )
    del bucket
    gc.collect()
    return {
        "events_per_s": float(report["events"] / report["seconds"]),
        "complete": bool(report["complete"]),
        "disk_snapshots": report["disk_snapshots"],
        "events": report["events"],
    }


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    runs = [_history_run(args) for _ in range(args.runs)]
    params = {
        "items": args.items,
        "vbuckets": args.vbuckets,
        "revisions_per_key": args.revisions,
        "from_disk": args.from_disk,
    }
    figures = {"events_per_s": statistics.median(r["events_per_s"] for r in runs)}
    complete = all(r["complete"] for r in runs)
    return emit(
        args, "history", params, figures, {"all": runs}, complete, {"events_per_s": ">= 1M"}
    )
