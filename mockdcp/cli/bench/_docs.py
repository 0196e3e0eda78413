"""``mockdcp bench docs --items N``: N generated documents (the user profiles of
``mockdcp serve --docs``) loaded as ``serve --docs`` loads them (``load_documents``: the
cold tier, drawn in a worker), and for each of ``--runs``: resident bytes per document
beyond key and value, documents loaded per second (and the event loop's longest stall
meanwhile), events/s of one collection-aware and one legacy connection streaming them
all (from disk: a loaded corpus is persisted, in no checkpoint), the process's whole
resident size after the load, documents drawn and written per CPU second, where the
load's time went (``phase_NAME_s`` and ``phase_NAME_cpu_s``: ``LoadPhases``, the
server's phases and the workers' CPU seconds); and the seconds from spawning ``mockdcp
serve --docs N`` to its ready line, with that server's resident size then and its peak
until then.
"""

from __future__ import annotations

import gc
import statistics
import time
from functools import partial
from typing import TYPE_CHECKING

from mockdcp.cli.bench._harness import emit, measure_startup, rss, stream_once, watch_loop
from mockdcp.util import collector_paused, release_freed_memory

if TYPE_CHECKING:
    import argparse

    from mockdcp.model import Bucket


def _key_value_bytes(bucket: Bucket) -> int:
    """The bytes of every document's key and value the bucket holds (the cold tier's:
    its frames less their headers and collection prefixes)."""
    total = 0
    for vb in bucket.vbuckets:
        if vb.cold is not None:
            total += vb.cold.segment.key_value_bytes()
        total += sum(len(it.key) + len(it.value) for it in vb.items.values())
    return total


def draw_and_write(count: int) -> tuple[float, float]:
    """Generated user profiles (``mockdcp serve --docs``) per CPU second of one
    process: drawn, and written by ``Bucket.set_many_steps`` into an empty 1024-vbucket
    bucket."""

    from mockdcp.data import JSON, LOAD_BATCH, STEP_ROWS, document_chunks
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
    return generation, load


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    import trio

    from mockdcp.data import LoadPhases, load_documents
    from mockdcp.model import Bucket

    docs = args.items
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
    phases: list[dict[str, float]] = []
    for _ in range(args.runs):
        gc.collect()
        release_freed_memory()
        before = rss()
        bucket = Bucket(
            "default", args.vbuckets, seed=1, clock=time.time, pause_collector=collector_paused
        )
        stall = [0.0]

        spent = LoadPhases()

        async def load_and_watch(bucket: Bucket, stall: list[float], spent: LoadPhases) -> float:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch_loop, stall)
                t0 = time.perf_counter()
                await load_documents(bucket, docs, phases=spent)
                seconds = time.perf_counter() - t0
                nursery.cancel_scope.cancel()
            return seconds

        seconds = trio.run(load_and_watch, bucket, stall, spent)
        phases.append(spent.figures())
        gc.collect()
        release_freed_memory()
        resident.append(rss())
        mem.append((resident[-1] - before - _key_value_bytes(bucket)) / docs)
        loads.append(docs / seconds)
        stalls.append(stall[0] * 1000)
        for legacy_consumer, rates, per_cpu in (
            (False, aware, aware_cpu),
            (True, legacy, legacy_cpu),
        ):
            result = trio.run(stream_once, bucket, docs, args.vbuckets, legacy_consumer)
            rates.append(result["events"] / result["seconds"])
            per_cpu.append(result["events"] / result["server_cpu_s"])
            complete.append(bool(result["complete"]))
        del bucket
        gc.collect()
    drawn, written = [], []
    for _ in range(args.runs):
        generation, load = draw_and_write(docs)
        drawn.append(generation)
        written.append(load)
    ready_resident: list[tuple[int, int]] = []
    ready = measure_startup(args.runs, docs, ready_resident)
    params = {"items": docs, "vbuckets": args.vbuckets}
    figures = {
        "bytes_per_doc_beyond_key_value": statistics.median(mem),
        "resident_bytes": statistics.median(resident),
        "ready_resident_bytes": statistics.median(r for r, _ in ready_resident),
        "ready_peak_resident_bytes": statistics.median(peak for _, peak in ready_resident),
        "load_docs_per_s": statistics.median(loads),
        "generate_documents_per_s": statistics.median(drawn),
        "write_documents_per_s": statistics.median(written),
        "load_max_stall_ms": statistics.median(stalls),
        "ready_s": statistics.median(ready),
        "disk_events_per_s": statistics.median(aware),
        "legacy_disk_events_per_s": statistics.median(legacy),
        "disk_events_per_server_cpu_s": statistics.median(aware_cpu),
        "legacy_disk_events_per_server_cpu_s": statistics.median(legacy_cpu),
        **{name: statistics.median(run[name] for run in phases) for name in phases[0]},
    }
    samples = {
        "bytes_beyond": mem,
        "load_docs_per_s": loads,
        "ready_s": ready,
        "resident_bytes": resident,
        "ready_resident_bytes": ready_resident,
        "events_per_s": aware,
        "legacy_events_per_s": legacy,
    }
    return emit(
        args, "docs", params, figures, samples, all(complete), {"load_docs_per_s": ">= 250,000"}
    )
