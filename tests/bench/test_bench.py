"""``mockdcp bench stream``, ``cold``, ``written`` and ``docs`` run end to end and report
their figures (the figures themselves are read at full size: docs/performance.md), and
the spellings from before the modes still select them."""

from __future__ import annotations

import pytest

from tests.bench._run import bench_refusal, bench_report

pytestmark = pytest.mark.full


def test_bench_stream_reports_every_figure_for_a_small_run() -> None:
    report = bench_report("stream", "--items", "20000", "--vbuckets", "8")
    assert report["mode"] == "stream"
    assert report["complete"] is True
    assert report["params"]["items"] == 20000
    assert report["params"]["legacy"] is False
    figures = report["figures"]
    assert figures["events_per_s"] > 0
    assert figures["consumers_complete"] == 1
    assert figures["bytes_per_s"] > 0
    assert figures["memory_per_item_bytes"] > 0
    assert figures["load_items_per_s"] > 0
    assert figures["events_per_server_cpu_s"] > 0
    assert figures["events_per_consumer_cpu_s"] > 0
    assert figures["disk_snapshots"] == 0  # streamed from memory
    assert report["samples"]["events_per_s"] == [figures["events_per_s"]]


def test_bench_without_a_mode_streams() -> None:
    report = bench_report("--items", "2000", "--vbuckets", "4")
    assert report["mode"] == "stream"


def test_bench_streams_a_persisted_bucket_from_disk() -> None:
    report = bench_report("--items", "5000", "--vbuckets", "4", "--from-disk")
    assert report["params"]["from_disk"] is True
    assert report["figures"]["events_per_s"] > 0
    assert report["figures"]["disk_snapshots"] == 4  # one backfill per vbucket


def test_bench_streams_to_a_legacy_consumer() -> None:
    report = bench_report("stream", "--items", "5000", "--vbuckets", "4", "--legacy")
    assert report["params"]["legacy"] is True
    assert report["figures"]["events_per_s"] > 0


def test_bench_streams_to_a_consumer_that_negotiates_nothing() -> None:
    """``--bare``: no HELLO and no DCP_CONTROL (no collections, no flow-control window
    to acknowledge, no noops), as a hand-written consumer may connect: every item
    comes, its bootstrap timed apart as the reference consumer's is."""
    report = bench_report("stream", "--items", "5000", "--vbuckets", "4", "--bare")
    assert report["params"]["bare"] is True
    assert report["params"]["legacy"] is True
    assert report["complete"] is True
    assert report["figures"]["events_per_s"] > 0


def test_bench_refuses_a_bare_consumer_with_collections_or_many_connections() -> None:
    for extra in (("--filter",), ("--stream-ids", "2"), ("--consumers", "2")):
        message = bench_refusal("stream", "--items", "100", "--bare", *extra)
        assert b"--bare streams one connection without collections" in message


def test_bench_streams_to_several_consumers_at_once() -> None:
    report = bench_report("--items", "3000", "--vbuckets", "8", "--consumers", "3")
    assert report["params"]["consumers"] == 3
    assert report["figures"]["consumers_complete"] == 3
    assert report["figures"]["server_peak_rss_bytes"] > 0


@pytest.mark.parametrize(
    "spelling", [("docs", "--items", "3000"), ("--docs", "3000")], ids=["mode", "earlier"]
)
def test_bench_docs_reports_the_cold_tier_figures_for_a_small_run(
    spelling: tuple[str, ...],
) -> None:
    report = bench_report(*spelling, "--vbuckets", "8")
    assert report["mode"] == "docs"
    assert report["params"]["items"] == 3000
    assert report["complete"] is True
    figures = report["figures"]
    assert figures["load_docs_per_s"] > 0
    assert figures["generate_documents_per_s"] > 0
    assert figures["write_documents_per_s"] > 0
    assert 0 < figures["ready_s"] < 60
    assert figures["disk_events_per_s"] > 0
    assert figures["legacy_disk_events_per_s"] > 0
    assert "bytes_per_doc_beyond_key_value" in figures
    assert figures["resident_bytes"] > 0
    assert 0 < figures["ready_resident_bytes"] <= figures["ready_peak_resident_bytes"]
    # where the load's time went (drawn here: 3,000 documents, no worker)
    for phase in ("draw", "frame", "keys", "chunks", "gather", "index", "install"):
        assert figures[f"phase_{phase}_cpu_s"] >= 0, phase
        assert f"phase_{phase}_s" in figures, phase
    assert figures["phase_chunks_cpu_s"] > 0


@pytest.mark.parametrize("spelling", ["cold", "--cold"])
def test_bench_cold_reports_the_cold_tier_figures_for_a_small_run(spelling: str) -> None:
    report = bench_report(spelling, "--items", "5000", "--vbuckets", "4")
    assert report["mode"] == "cold"
    assert report["complete"] is True
    assert report["figures"]["load_items_per_s"] > 0
    assert report["figures"]["disk_events_per_s"] > 0


def test_bench_written_folds_the_persisted_writes_into_the_cold_tier() -> None:
    report = bench_report("written", "--items", "20000", "--vbuckets", "4")
    assert report["mode"] == "written"
    assert report["complete"] is True
    figures = report["figures"]
    assert figures["hot_share"] < 0.5  # most of them folded
    assert figures["written_items_per_cpu_s"] > 0
    assert figures["disk_events_per_s"] > 0
    assert "bytes_per_item_beyond_key_value" in figures


def test_bench_refuses_sizes_it_cannot_measure() -> None:
    for args, message in (
        (["--items", "0"], b"--items: 0 is not at least 1"),
        (["--vbuckets", "2000"], b"--vbuckets: 2000 is not 1..1024"),
        (["--runs", "x"], b"--runs: not an integer"),
    ):
        assert message in bench_refusal(*args)


def test_bench_refuses_options_its_mode_does_not_take() -> None:
    assert b"mode docs does not take --filter" in bench_refusal("docs", "--filter")
    assert b"mode startup does not take --items" in bench_refusal("startup", "--items", "5")
    assert b"goes with mode compare only" in bench_refusal("stream", "HEAD")


def test_bench_refuses_two_modes_at_once() -> None:
    assert b"one mode at a time: --cold, --docs" in bench_refusal("--cold", "--docs", "10")
    assert b"--cold selects mode cold, not docs" in bench_refusal("docs", "--cold")
    assert b"mockdcp bench docs --items N" in bench_refusal("--docs", "10", "--items", "20")


@pytest.mark.parametrize(
    "spelling", [("cluster", "--nodes", "2"), ("--nodes", "2")], ids=["mode", "earlier"]
)
def test_bench_cluster_streams_from_every_node_against_one(spelling: tuple[str, ...]) -> None:
    report = bench_report(*spelling, "--replicas", "1", "--items", "4000", "--vbuckets", "8")
    assert report["mode"] == "cluster"
    assert report["complete"] is True
    assert report["params"]["nodes"] == 2
    figures = report["figures"]
    assert figures["cluster_events_per_s"] > 0
    assert figures["events_per_s"] > 0
    assert figures["cluster_ratio"] > 0
    assert figures["cluster_cpu_ratio"] == pytest.approx(
        figures["cluster_events_per_server_cpu_s"] / figures["events_per_server_cpu_s"]
    )
    assert figures["replica_bytes_per_item"] > 0
    assert figures["load_with_replicas_ratio"] >= 1
    assert figures["server_page_faults"] >= 0
    assert figures["cluster_server_page_faults"] >= 0
    assert report["samples"]["server_page_faults"] == [figures["server_page_faults"]]


def test_bench_rebalance_times_a_rebalance_and_the_consumer_catching_up() -> None:
    report = bench_report("--rebalance", "--nodes", "2", "--items", "2000", "--vbuckets", "8")
    assert report["mode"] == "rebalance"
    figures = report["figures"]
    assert 0 < figures["rebalance_s"] <= figures["consumer_holds_oracle_after_s"]
    assert b"1 replica(s) need more nodes" in bench_refusal("rebalance", "--replicas", "1")
