"""Benchmark of the data pipeline (not a test; run it by hand and read the medians):

    python -m tests.bench.pipeline_bench --docs 1000000 --runs 3

* corpus: documents per second of the corpus job, Spark's start excluded (the session is
  made before the clock starts);
* load: corpus rows per second into a 1024-vbucket bucket through ``load_corpus_sync``
  (on a ``--load-docs`` corpus: the model holds every version in memory);
* verify: seconds to verify the corpus's oracle against itself (``--docs`` documents,
  documents mode) and against the corpus read as an event log (events mode).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from mockdcp.model import Bucket
from mockdcp.pipeline import CorpusSpec, load_corpus_sync, make_corpus, oracle_from_corpus, verify
from mockdcp.pipeline._spark import spark_session


def _median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--load-docs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mockdcp-bench-"))
    started = time.perf_counter()
    spark_session()
    figures: dict[str, object] = {"spark_start_s": round(time.perf_counter() - started, 1)}
    try:
        rates = []
        for run in range(args.runs):
            report = make_corpus(CorpusSpec(docs=args.docs, seed=run), str(root / f"c{run}"))
            rates.append(args.docs / report.seconds)
            figures["corpus_rows"] = report.rows
        figures["corpus_docs_per_s"] = [round(r) for r in rates]
        corpus = root / "c0"
        for run in range(1, args.runs):
            shutil.rmtree(root / f"c{run}")

        small = root / "small"
        make_corpus(CorpusSpec(docs=args.load_docs, seed=7), str(small))
        loads = []
        for _ in range(args.runs):
            bucket = Bucket("default", 1024, clock=time.time)
            loads.append(load_corpus_sync(bucket, small).rows_per_second)
            del bucket
        figures["load_rows_per_s"] = [round(r) for r in loads]

        oracle = root / "oracle"
        t = time.perf_counter()
        oracle_from_corpus(corpus, oracle)
        figures["oracle_s"] = round(time.perf_counter() - t, 1)
        docs_mode, events_mode = [], []
        for _ in range(args.runs):
            checked = verify(oracle, oracle)
            assert checked.differences == 0, checked
            docs_mode.append(checked.seconds)
            checked = verify(oracle, corpus)
            assert checked.differences == 0, checked
            events_mode.append(checked.seconds)
        figures["verify_documents_s"] = [round(s, 1) for s in docs_mode]
        figures["verify_events_s"] = [round(s, 1) for s in events_mode]
        figures["verify_documents"] = checked.expected
        figures["verify_event_rows"] = checked.actual_rows
        medians = {
            "corpus_docs_per_s": _median(rates),
            "load_rows_per_s": _median(loads),
            "verify_documents_s": _median(docs_mode),
            "verify_events_s": _median(events_mode),
        }
        figures["medians"] = {k: round(v, 1) for k, v in medians.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
