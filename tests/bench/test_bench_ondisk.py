"""``mockdcp bench --corpus DIR --on-disk`` runs end to end and reports its figures (the
figures themselves are read at full size: docs/performance.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest

from mockdcp.pipeline import CorpusSpec, generate_partition
from tests.bench._run import bench_refusal, bench_report

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.full


def test_bench_on_disk_reports_import_ready_memory_and_backfill_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOCKDCP_CACHE", str(tmp_path))
    spec = CorpusSpec(docs=2000, seed=2, partitions=2)
    corpus = tmp_path / "c"
    corpus.mkdir()
    for p in range(spec.num_partitions):
        pq.write_table(generate_partition(spec, p), corpus / f"part-{p:05d}.parquet")
    report = bench_report("corpus", "--corpus", str(corpus), "--vbuckets", "8")
    assert report["mode"] == "corpus"
    assert report["complete"] is True
    figures = report["figures"]
    assert 0 < figures["documents"] <= 2000
    assert figures["import_s"] > 0
    assert 0 < figures["ready_s"] < 60
    assert figures["ready_rss_anon_bytes"] > 0
    assert figures["disk_events_per_s"] > 0
    assert figures["legacy_disk_events_per_s"] > 0
    assert list(tmp_path.glob("bench-*")) == []  # the bench's import is removed


def test_bench_on_disk_needs_a_corpus() -> None:
    assert b"now spelled: mockdcp bench corpus --corpus DIR" in bench_refusal("--on-disk")
    assert b"corpus needs --corpus DIR" in bench_refusal("corpus")
