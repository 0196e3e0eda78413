"""``mockdcp bench history`` and ``durable`` run end to end (the figures themselves are
read at full size, in docs/performance.md), and ``--history N`` and ``--durable F`` still select
them."""

from __future__ import annotations

import pytest

from tests.bench._run import bench_refusal, bench_report

pytestmark = pytest.mark.full


@pytest.mark.parametrize(
    "spelling", [("history", "--revisions", "4"), ("--history", "4")], ids=["mode", "earlier"]
)
def test_history_bench_streams_every_revision_from_memory(spelling: tuple[str, ...]) -> None:
    report = bench_report(*spelling, "--items", "4000", "--vbuckets", "4")
    assert report["mode"] == "history"
    assert report["complete"] is True
    assert report["params"]["revisions_per_key"] == 4
    # four writes of each key, all of them delivered (none de-duplicated)
    assert [r["events"] for r in report["samples"]["all"]] == [4000]
    assert report["figures"]["events_per_s"] > 0


def test_history_bench_backfills_every_revision_from_disk() -> None:
    report = bench_report("history", "--items", "4000", "--vbuckets", "4", "--from-disk")
    assert report["params"]["from_disk"] is True
    assert report["complete"] is True
    assert report["samples"]["all"][0]["disk_snapshots"] == 4  # one history backfill a vb


@pytest.mark.parametrize(
    "spelling", [("durable", "--fraction", "0.1"), ("--durable", "0.1")], ids=["mode", "earlier"]
)
def test_durable_bench_compares_a_bucket_with_durable_writes_to_one_without(
    spelling: tuple[str, ...],
) -> None:
    report = bench_report(*spelling, "--items", "5000", "--vbuckets", "4")
    assert report["mode"] == "durable"
    assert report["params"]["durable_fraction"] == 0.1
    assert report["figures"]["plain_events_per_s"] > 0
    assert report["figures"]["durable_events_per_s"] > 0
    assert report["figures"]["ratio"] > 0


def test_bench_refuses_history_with_durable_writes_and_fractions_beyond_one() -> None:
    assert b"not both" in bench_refusal("--history", "2", "--durable", "0.1")
    assert b"1.5 is not a fraction in (0, 1]" in bench_refusal("--durable", "1.5")
    assert b"is not a fraction" in bench_refusal("durable", "--fraction", "0")


def test_bench_takes_history_on_magma_only() -> None:
    report = bench_report("--storage", "magma", "--history", "--items", "2000", "--vbuckets", "2")
    assert report["params"]["revisions_per_key"] == 4  # --history alone: four writes a key
    assert b"keeps no history" in bench_refusal("history", "--storage", "couchstore")
    assert b"keeps no history" in bench_refusal("--storage", "couchstore", "--history", "2")
    assert b"keeps no history" in bench_refusal("--storage", "magma")
