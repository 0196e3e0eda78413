from __future__ import annotations

import pytest

from tests.bench._run import bench_refusal, bench_report

# a bench's smoke run: the full tier (python -m pytest --full-only)
pytestmark = pytest.mark.full


def test_bench_reports_every_figure_for_a_small_run() -> None:
    # The performance goals are read from `mockdcp bench` at full size (README); this only
    # checks that the benchmark itself runs end to end and reports its figures.
    report = bench_report("--items", "20000", "--vbuckets", "8")
    assert report["items"] == 20000
    assert report["events_per_s"] > 0
    assert report["consumers_complete"] == 1
    assert report["bytes_per_s"] > 0
    assert 0 < report["startup_s"] < 30
    assert report["memory_per_item_bytes"] > 0
    assert report["load_items_per_s"] > 0
    assert report["load_documents_per_s"] > 0
    assert report["generate_documents_per_s"] > 0
    assert report["write_documents_per_s"] > 0
    assert 0 < report["ready_with_docs_s"] < 60
    assert report["events_per_server_cpu_s"] > 0
    assert report["events_per_consumer_cpu_s"] > 0
    assert report["disk_snapshots"] == 0  # streamed from memory
    assert report["legacy"] is False


def test_bench_streams_a_persisted_bucket_from_disk() -> None:
    report = bench_report("--items", "5000", "--vbuckets", "4", "--from-disk")
    assert report["from_disk"] is True
    assert report["events_per_s"] > 0
    assert report["disk_snapshots"] == 4  # one backfill per vbucket


def test_bench_streams_to_a_legacy_consumer() -> None:
    report = bench_report("--items", "5000", "--vbuckets", "4", "--legacy")
    assert report["legacy"] is True
    assert report["events_per_s"] > 0


def test_bench_streams_to_several_consumers_at_once() -> None:
    report = bench_report("--items", "3000", "--vbuckets", "8", "--consumers", "3")
    assert report["consumers"] == 3
    assert report["consumers_complete"] == 3
    assert report["events_per_s"] > 0
    assert report["server_peak_rss_bytes"] > 0


def test_bench_docs_reports_the_cold_tier_figures_for_a_small_run() -> None:
    report = bench_report("--docs", "3000", "--vbuckets", "8")
    assert report["docs"] == 3000
    assert report["complete"] is True
    assert report["load_docs_per_s"] > 0
    assert 0 < report["ready_s"] < 60
    assert report["disk_events_per_s"] > 0
    assert report["legacy_disk_events_per_s"] > 0
    assert "bytes_per_doc_beyond_key_value" in report
    assert report["resident_bytes"] > 0
    assert 0 < report["ready_resident_bytes"] <= report["ready_peak_resident_bytes"]


def test_bench_cold_reports_the_cold_tier_figures_for_a_small_run() -> None:
    report = bench_report("--cold", "--items", "5000", "--vbuckets", "4")
    assert report["complete"] is True
    assert report["load_items_per_s"] > 0
    assert report["disk_events_per_s"] > 0


def test_bench_refuses_sizes_it_cannot_measure() -> None:
    for args, message in (
        (["--items", "0"], b"--items: 0 is not at least 1"),
        (["--vbuckets", "2000"], b"--vbuckets: 2000 is not 1..1024"),
        (["--runs", "x"], b"--runs: not an integer"),
    ):
        assert message in bench_refusal(*args)
