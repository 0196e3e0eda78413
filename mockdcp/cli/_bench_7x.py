"""``mockdcp bench`` for the 7.x bucket: change history on Magma and durable writes.

* ``--history N``: a Magma bucket whose one collection keeps history, ``--items`` writes
  over ``--items / N`` keys (every key written N times); a consumer with
  ``change_streams`` gets every revision (kv_engine ``checkpoint.cc``: a history
  collection's items are never de-duplicated), from memory, or with ``--from-disk``
  backfilled from the retained history (one Disk|Checkpoint|History|MayDuplicateKeys
  snapshot per vbucket). Events/s against the target of 1M.
* ``--durable F``: a bucket where a fraction F of the ``--items`` writes are durable
  (a prepare and its commit, two seqnos each), streamed by a consumer without
  ``enable_sync_writes`` (it gets the commits as mutations and never a prepare),
  against a bucket of as many plain writes in the same run: the ratio's target is 0.9.

Both are medians of ``--runs``; each run loads its buckets afresh.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from mockdcp.cli._bench import (
    FIRST_COLLECTION_ID,
    LOAD_BATCH,
    _stream_once,
    _value,
    expel_to_disk,
)
from mockdcp.util import collector_paused

if TYPE_CHECKING:
    import argparse

    from mockdcp.model import Bucket

#: the history collection of ``--history``: the first one the bucket declares
HISTORY_COLLECTION = FIRST_COLLECTION_ID


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
    pad = _value(0, value_size)
    for start in range(0, items, LOAD_BATCH):
        count = min(LOAD_BATCH, items - start)
        batch = [b"key::%09d" % (i % keys) for i in range(start, start + count)]
        bucket.set_many(
            batch, [pad] * count, datatypes=1, collection_ids=[HISTORY_COLLECTION] * count
        )
    return bucket


def durable_bucket(items: int, fraction: float, value_size: int, vbuckets: int) -> Bucket:
    """A bucket of ``items`` writes of new keys, ``fraction`` of them durable writes
    committed at once (in each batch of ``LOAD_BATCH``, the plain ones first)."""
    from mockdcp.model import Bucket

    bucket = Bucket("default", vbuckets, seed=1, clock=time.time, pause_collector=collector_paused)
    pad = _value(0, value_size)
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


def _rate(report: dict[str, Any]) -> float:
    return float(report["events"] / report["seconds"])


def _history_run(args: argparse.Namespace) -> dict[str, Any]:
    import trio

    bucket = history_bucket(args.items, args.history, args.value_size, args.vbuckets)
    if args.from_disk:
        expel_to_disk(bucket)
    report = trio.run(
        partial(
            _stream_once,
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
    return {"events_per_s": _rate(report), "complete": report["complete"], **_kinds(report)}


def _kinds(report: dict[str, Any]) -> dict[str, Any]:
    return {"disk_snapshots": report["disk_snapshots"], "events": report["events"]}


def _durable_run(args: argparse.Namespace) -> dict[str, Any]:
    import trio

    rates = {}
    for label, fraction in (("plain", 0.0), ("durable", args.durable)):
        bucket = durable_bucket(args.items, fraction, args.value_size, args.vbuckets)
        if args.from_disk:
            expel_to_disk(bucket)
        report = trio.run(
            partial(_stream_once, bucket, args.items, args.vbuckets, args.legacy, passes=3)
        )
        rates[label] = _rate(report)
        if not report["complete"]:
            raise RuntimeError(f"the {label} bucket's stream did not bring every item")
        del bucket
        gc.collect()
    return {**rates, "ratio": rates["durable"] / rates["plain"]}


def run_7x_bench(args: argparse.Namespace) -> int:
    """``mockdcp bench --history N`` or ``--durable F`` (see the module docstring)."""
    history = bool(args.history)
    runs = [_history_run(args) if history else _durable_run(args) for _ in range(args.runs)]
    source = "disk" if args.from_disk else "memory"
    if history:
        report: dict[str, Any] = {
            "mode": "history",
            "items": args.items,
            "revisions_per_key": args.history,
            "from": source,
            "events_per_s": statistics.median(r["events_per_s"] for r in runs),
            "complete": all(r["complete"] for r in runs),
            "all": runs,
        }
        line = (
            f"mockdcp bench --history {args.history}: {args.items:,} writes, every revision "
            f"from {source} to a change-streams consumer: "
            f"{report['events_per_s']:,.0f} events/s (median of {args.runs}; target 1M)"
        )
    else:
        report = {
            "mode": "durable",
            "items": args.items,
            "durable_fraction": args.durable,
            "legacy": args.legacy,
            "from": source,
            "plain_events_per_s": statistics.median(r["plain"] for r in runs),
            "durable_events_per_s": statistics.median(r["durable"] for r in runs),
            "ratio": statistics.median(r["ratio"] for r in runs),
            "all": runs,
        }
        line = (
            f"mockdcp bench --durable {args.durable:g}: {args.items:,} writes from {source}, "
            f"a consumer without sync writes: {report['durable_events_per_s']:,.0f} events/s "
            f"against {report['plain_events_per_s']:,.0f} without durable writes, ratio "
            f"{report['ratio']:.2f} (median of {args.runs}; target 0.9)"
        )
    print(json.dumps(report) if args.json else line)
    return 0
