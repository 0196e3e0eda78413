"""``mockdcp bench --history`` and ``--durable`` run end to end (the figures themselves
are read at full size, in the README)."""

from __future__ import annotations

import pytest

from tests.bench._run import bench_refusal, bench_report

# a bench's smoke run: the full tier (python -m pytest --full-only)
pytestmark = pytest.mark.full


def test_history_bench_streams_every_revision_from_memory() -> None:
    report = bench_report("--history", "4", "--items", "4000", "--vbuckets", "4")
    assert report["mode"] == "history"
    assert report["complete"] is True
    # four writes of each key, all of them delivered (none de-duplicated)
    assert [r["events"] for r in report["all"]] == [4000]
    assert report["events_per_s"] > 0


def test_history_bench_backfills_every_revision_from_disk() -> None:
    report = bench_report("--history", "4", "--items", "4000", "--vbuckets", "4", "--from-disk")
    assert report["from"] == "disk"
    assert report["complete"] is True
    assert report["all"][0]["disk_snapshots"] == 4  # one history backfill per vbucket


def test_durable_bench_compares_a_bucket_with_durable_writes_to_one_without() -> None:
    report = bench_report("--durable", "0.1", "--items", "5000", "--vbuckets", "4")
    assert report["mode"] == "durable"
    assert report["plain_events_per_s"] > 0
    assert report["durable_events_per_s"] > 0
    assert report["ratio"] > 0


def test_bench_refuses_history_with_durable_writes_and_fractions_beyond_one() -> None:
    assert b"not both" in bench_refusal("--history", "2", "--durable", "0.1")
    assert b"not both" in bench_refusal("--durable", "1.5")


def test_bench_takes_history_on_magma_only() -> None:
    report = bench_report("--storage", "magma", "--history", "--items", "2000", "--vbuckets", "2")
    assert report["revisions_per_key"] == 4  # --history alone: four writes a key
    assert b"keeps no history" in bench_refusal("--storage", "couchstore", "--history", "2")
    assert b"keeps no history" in bench_refusal("--storage", "magma")
