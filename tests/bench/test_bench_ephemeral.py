"""``mockdcp bench ephemeral``: an ephemeral bucket streamed from memory and by backfill
(its sequence list) against a couchbase bucket loaded the same way (issue 41)."""

from __future__ import annotations

import pytest

from mockdcp.cli import build_parser
from mockdcp.cli.bench._args import resolve
from tests.bench._run import bench_report


def test_the_ephemeral_mode_takes_the_streaming_sizes_only() -> None:
    args = build_parser().parse_args(["bench", "ephemeral", "--items", "10", "--legacy"])
    assert resolve(args) == "ephemeral"
    args = build_parser().parse_args(["bench", "ephemeral", "--from-disk"])
    with pytest.raises(ValueError, match="does not take --from-disk"):
        resolve(args)


@pytest.mark.full
def test_bench_ephemeral_reports_both_buckets_both_ways() -> None:
    report = bench_report("ephemeral", "--items", "4000", "--vbuckets", "4")
    assert report["mode"] == "ephemeral"
    assert report["complete"] is True
    figures = report["figures"]
    for name in ("couchbase", "ephemeral"):
        for way in ("memory", "backfill"):
            assert figures[f"{name}_{way}_events_per_s"] > 0
    assert figures["memory_ratio"] > 0
    assert figures["backfill_ratio"] > 0
