"""``mockdcp bench --corpus DIR --on-disk`` runs end to end and reports its figures (the
figures themselves are read at full size: README)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest

from mockdcp.pipeline import CorpusSpec, generate_partition
from tests.bench._run import bench_refusal, bench_report

if TYPE_CHECKING:
    from pathlib import Path

# a bench's smoke run: the full tier (python -m pytest --full-only)
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
    report = bench_report("--corpus", str(corpus), "--on-disk", "--vbuckets", "8")
    assert report["complete"] is True
    assert 0 < report["documents"] <= 2000
    assert report["import_s"] > 0
    assert 0 < report["ready_s"] < 60
    assert report["ready_rss_anon_bytes"] > 0
    assert report["disk_events_per_s"] > 0
    assert report["legacy_disk_events_per_s"] > 0
    assert list(tmp_path.glob("bench-*")) == []  # the bench's import is removed


def test_bench_on_disk_needs_a_corpus() -> None:
    assert b"--corpus DIR --on-disk go together" in bench_refusal("--on-disk")
