"""``mockdcp bench corpus --corpus DIR``: a corpus served from its import's files
(``serve --corpus DIR --on-disk``).

Figures: the import's seconds (the first start: into a private cache directory,
removed at the end), the seconds from spawning ``mockdcp serve --corpus DIR --on-disk``
to its ready line with the import reused, and that server's resident memory once
ready; then, in this process, the resident memory of the bucket on disk and events/s of
one collection-aware and one legacy connection backfilling every document, with the
peak resident memory while they stream. Resident memory is split as Linux reports it
(``/proc/<pid>/status``): ``RssAnon`` is the process's own memory, ``RssFile`` pages of
the mapped files (page cache: the kernel drops them when memory is wanted and reads
them again).
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mockdcp.cli.bench._harness import emit, stream_once

if TYPE_CHECKING:
    import argparse


def rss_parts(pid: int | str = "self") -> dict[str, int]:
    """``RssAnon`` and ``RssFile`` of a process, in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("RssAnon", "RssFile"):
            out[name] = int(rest.split()[0]) * 1024
    return out


def measure_ready(corpus: str, vbuckets: int, cache: Path) -> tuple[float, dict[str, int]]:
    """Seconds from spawning ``serve --corpus CORPUS --on-disk`` to its ready line, and
    its resident memory then."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "mockdcp", "serve", "--port", "0", "--http-port", "0"),
            *("--json", "--vbuckets", str(vbuckets), "--corpus", corpus, "--on-disk"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MOCKDCP_CACHE": str(cache)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        seconds = time.perf_counter() - t0
        if b"ready" not in line:
            raise RuntimeError(f"serve --on-disk did not become ready: {line!r}")
        time.sleep(0.5)
        return seconds, rss_parts(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)


def refusal(args: argparse.Namespace) -> str | None:
    """Why these options cannot be measured together (None: they can)."""
    if not args.corpus:
        return "corpus needs --corpus DIR (a directory of Parquet files)"
    return None


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    import trio

    from mockdcp.data import cache_root, load_on_disk
    from mockdcp.model import Bucket

    corpus = args.corpus
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="bench-", dir=root))
    try:
        bucket = Bucket("default", args.vbuckets, seed=1, clock=time.time)
        first = load_on_disk(bucket, corpus, cache=cache)
        docs = first.documents
        del bucket
        gc.collect()
        ready: list[float] = []
        ready_rss: list[dict[str, int]] = []
        for _ in range(args.runs):
            seconds, rss = measure_ready(corpus, args.vbuckets, cache)
            ready.append(seconds)
            ready_rss.append(rss)
        before = rss_parts()
        bucket = Bucket("default", args.vbuckets, seed=1, clock=time.time)
        load_on_disk(bucket, corpus, cache=cache)
        gc.collect()
        loaded = rss_parts()
        aware: list[float] = []
        legacy: list[float] = []
        peaks: list[int] = []
        complete = []
        for _ in range(args.runs):
            for legacy_consumer, rates in ((False, aware), (True, legacy)):
                result = trio.run(stream_once, bucket, docs, args.vbuckets, legacy_consumer)
                rates.append(result["events"] / result["seconds"])
                peaks.append(result["server_peak_rss"])
                complete.append(bool(result["complete"]))
        after = rss_parts()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    params = {"corpus": str(corpus), "vbuckets": args.vbuckets}
    figures: dict[str, Any] = {
        "documents": docs,
        "rows": first.rows,
        "import_s": first.seconds,
        "ready_s": statistics.median(ready),
        "ready_rss_anon_bytes": statistics.median(r["RssAnon"] for r in ready_rss),
        "ready_rss_file_bytes": statistics.median(r["RssFile"] for r in ready_rss),
        "loaded_rss_anon_bytes": loaded["RssAnon"] - before["RssAnon"],
        "loaded_rss_file_bytes": loaded["RssFile"] - before["RssFile"],
        "disk_events_per_s": statistics.median(aware),
        "legacy_disk_events_per_s": statistics.median(legacy),
        "streaming_peak_rss_bytes": max(peaks),
        "streamed_rss_anon_bytes": after["RssAnon"],
        "streamed_rss_file_bytes": after["RssFile"],
    }
    samples = {"ready_s": ready, "events_per_s": aware, "legacy_events_per_s": legacy}
    return emit(args, "corpus", params, figures, samples, all(complete))
