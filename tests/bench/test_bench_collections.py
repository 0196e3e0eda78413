from __future__ import annotations

import pytest

from mockdcp.cli.bench._consumer import bench_streams
from mockdcp.cli.bench._harness import BENCH_COLLECTIONS, load_bucket, stream_plan
from mockdcp.client import StreamFilter
from tests.bench._run import bench_refusal, bench_report

# a bench's smoke run: the full tier (python -m pytest --full-only)
pytestmark = pytest.mark.full


class TestStreamPlan:
    def test_a_filter_streams_one_collections_share_of_the_items(self) -> None:
        assert stream_plan(10, filtered=True, stream_ids=0) == ([8], 3)  # items 0, 4, 8

    def test_filtered_stream_ids_each_stream_their_own_collection(self) -> None:
        assert stream_plan(10, filtered=True, stream_ids=2) == ([8, 9], 3 + 3)

    def test_pass_through_stream_ids_each_get_every_item(self) -> None:
        assert stream_plan(10, filtered=False, stream_ids=3) == ([], 30)
        assert stream_plan(10, filtered=False, stream_ids=0) == ([], 10)

    def test_the_bench_bucket_spreads_items_round_robin(self) -> None:
        bucket, _, _ = load_bucket(40, 64, 4, BENCH_COLLECTIONS)
        per: dict[int, int] = {}
        for cid, _key in bucket.oracle():
            per[cid] = per.get(cid, 0) + 1
        assert per == {8: 10, 9: 10, 10: 10, 11: 10}


class TestBenchStreams:
    def test_one_filter_without_stream_ids(self) -> None:
        assert bench_streams([8], 0) == (StreamFilter(collections=[8]),)

    def test_filtered_streams_get_sids_from_one(self) -> None:
        assert bench_streams([8, 9], 2) == (
            StreamFilter(collections=[8], sid=1),
            StreamFilter(collections=[9], sid=2),
        )

    def test_pass_through_streams_with_sids(self) -> None:
        assert bench_streams([], 2) == (StreamFilter(sid=1), StreamFilter(sid=2))

    def test_no_option_is_one_pass_through_stream(self) -> None:
        assert bench_streams([], 0) == ()


@pytest.mark.full
def test_bench_streams_one_collection_through_a_filter() -> None:
    report = bench_report("--vbuckets", "4", "--items", "8000", "--filter")
    assert report["params"]["filter"] is True
    figures = report["figures"]
    assert figures["streamed_items"] == 2000
    assert figures["events_per_s"] > 0
    assert figures["bucket_items_per_s"] > figures["events_per_s"]  # it walked 4x as many


@pytest.mark.full
@pytest.mark.parametrize(("filtered", "streamed"), [(False, 8000), (True, 2000)])
def test_bench_streams_two_stream_ids_per_vbucket(filtered: bool, streamed: int) -> None:
    report = bench_report(
        "--vbuckets", "4", "--items", "4000", "--stream-ids", *(["--filter"] if filtered else [])
    )
    assert report["params"]["stream_ids"] == 2
    assert report["figures"]["streamed_items"] == streamed
    assert report["figures"]["events_per_s"] > 0


@pytest.mark.full
def test_bench_refuses_a_filter_for_a_legacy_consumer() -> None:
    assert b"need collections" in bench_refusal("--legacy", "--filter")


@pytest.mark.full
def test_bench_refuses_more_stream_ids_than_collections() -> None:
    assert b"--stream-ids: 5 is not 1..4" in bench_refusal("--stream-ids", "5")
