"""The ``advance_clock`` step: checked before anything runs, applied to the bucket."""

from __future__ import annotations

import time

import pytest

from mockdcp.model import Bucket, ItemKind, VirtualClock
from mockdcp.producer import Node
from mockdcp.scenario import ScenarioProblems, StepRunner, check_steps, parse_scenario, steps
from mockdcp.scenario._check import parse_span
from mockdcp.scenario._convert import parse_steps
from mockdcp.util import ScenarioError

T0 = 1_700_000_000.0


def virtual(vbuckets: int = 1) -> Bucket:
    bucket = Bucket("default", vbuckets, seed=2, clock=VirtualClock(T0))
    bucket.flusher.interval = 0.005  # the server's flusher: the pager's writes persist
    return bucket


def problems(bucket: Bucket, *step: steps.Step) -> list[str]:
    try:
        check_steps(list(step), bucket)
    except ScenarioProblems as exc:
        return [p.message for p in exc.problems]
    return []


def test_seconds_take_units_up_to_days() -> None:
    assert parse_span("30d") == 30 * 86_400
    assert parse_span("2h") == 7200
    assert parse_span(90) == 90
    with pytest.raises(ValueError, match="30d"):
        parse_span("a week")
    with pytest.raises(ValueError, match="hundred years"):
        parse_span(10**12)
    (step,) = parse_steps([{"advance_clock": {"seconds": "3d"}}])
    assert step == steps.AdvanceClock(seconds=3 * 86_400.0)


def test_advance_clock_runs_the_pager_and_compaction() -> None:
    n = Node(bucket=virtual(), users={"u": "p"})
    runner = StepRunner(n)
    runner.apply_now(
        [
            steps.Set(key="ttl", value="{}", expiry=int(T0) + 60),
            steps.Set(key="gone", value="{}"),
            steps.Delete(key="gone"),
            steps.AdvanceClock(seconds=3 * 86_400 + 60),
        ]
    )
    vb = n.bucket.vbucket(0)
    assert vb.items[(0, b"ttl")].kind is ItemKind.EXPIRATION
    assert vb.purge_seqno == 3  # the deletion, 3 days old at a compaction; not the expiry
    runner.apply_now([steps.AdvanceClock(to="2023-11-30T00:00:00Z")])
    assert n.bucket.clock() == 1_701_302_400
    assert vb.purge_seqno == 4  # the expiration, 3 days old now


def test_refused_on_a_wall_clock_backwards_or_with_both_fields() -> None:
    wall = Bucket("default", 1, seed=2, clock=time.time)
    assert problems(wall, steps.AdvanceClock(seconds=10)) == [
        "advance_clock needs a virtual clock: this server runs on the wall clock "
        "(serve --clock virtual)"
    ]
    b = virtual()
    assert problems(b, steps.AdvanceClock(seconds=10, to="2024-01-01T00:00:00Z")) == [
        "advance_clock takes one of seconds or to"
    ]
    assert problems(b, steps.AdvanceClock()) == ["advance_clock takes one of seconds or to"]
    back = problems(
        b, steps.AdvanceClock(seconds=60), steps.AdvanceClock(to="2023-11-14T22:13:30Z")
    )
    assert back == [
        "advance_clock cannot go back: to 2023-11-14T22:13:30Z is before the clock "
        "(2023-11-14T22:14:20Z)"
    ]
    assert problems(b, steps.AdvanceClock(to="soon")) == [
        "to: 'soon' is not an ISO 8601 time (like 2024-01-01T00:00:00Z)"
    ]
    assert b.clock() == T0  # nothing applied


def test_a_scenario_bucket_clock_is_virtual_from_clock_start() -> None:
    from mockdcp.scenario import scenario_bucket

    text = """
name: t
bucket: {vbuckets: 1, clock_start: "2024-01-01T00:00:00Z"}
steps:
  - set: {key: a, value: x, expiry: 1704067260}
  - advance_clock: {seconds: 10m}
"""
    scenario = parse_scenario(text)
    bucket = scenario_bucket(scenario)
    assert bucket.virtual_clock is not None
    assert bucket.clock() == 1_704_067_200
    with pytest.raises(ScenarioProblems, match="clock_start"):
        parse_scenario(text.replace("2024-01-01T00:00:00Z", "new year"))


def test_a_scenario_bucket_sets_the_pager_interval_and_the_purge_age() -> None:
    from mockdcp.scenario import scenario_bucket

    text = """
name: t
bucket: {vbuckets: 1, exp_pager_stime: 60, metadata_purge_age: 3600}
steps: []
"""
    timers = scenario_bucket(parse_scenario(text)).timers
    assert (timers.exp_pager_stime, timers.metadata_purge_age) == (60, 3600)
    with pytest.raises(ScenarioError, match="exp_pager_stime"):
        scenario_bucket(parse_scenario(text.replace("60,", "0,")))


def test_from_python_seconds_may_carry_a_unit_and_a_bad_one_is_a_problem() -> None:
    b = virtual()
    StepRunner(Node(bucket=b, users={})).apply_now([steps.AdvanceClock(seconds="2h")])
    assert b.clock() == T0 + 7200
    assert problems(b, steps.AdvanceClock(seconds="a week")) == [
        "seconds is a number or a string like '30d', not 'a week'"
    ]


def test_advance_clock_runs_every_buckets_timers() -> None:
    """The clock is the node's: moving it runs the pager and compaction of each bucket
    (``create_bucket`` gives the new bucket the node's clock), whichever bucket acts."""
    from mockdcp.model import BucketSpec

    n = Node(bucket=virtual(), users={"u": "p"})
    other = n.buckets.create(BucketSpec(name="other")).bucket
    other.flusher.interval = 0.005
    assert other.clock is n.bucket.clock
    runner = StepRunner(n)
    runner.apply_now(
        [
            steps.Set(key="ttl", value="{}", expiry=int(T0) + 60, bucket="other"),
            steps.Set(key="gone", value="{}", bucket="other"),
            steps.Delete(key="gone", bucket="other"),
            steps.Set(key="ttl", value="{}", expiry=int(T0) + 60),
            steps.AdvanceClock(seconds=3 * 86_400 + 60),  # on the scenario's bucket
        ]
    )
    for bucket in (n.bucket, other):
        item = bucket.vbucket(bucket.vbucket_of("ttl")).get(b"ttl")
        assert item is not None
        assert item.kind is ItemKind.EXPIRATION, bucket.name
    assert other.vbucket(other.vbucket_of("gone")).purge_seqno > 0  # compaction ran there
    assert n.bucket.clock() == other.clock() == T0 + 3 * 86_400 + 60
    runner.apply_now([steps.AdvanceClock(seconds=60, bucket="other")])  # from the other
    assert n.bucket.clock() == T0 + 3 * 86_400 + 120


def test_the_check_knows_every_bucket_moved() -> None:
    """After ``advance_clock`` on one bucket, another bucket's ``to`` is checked against
    the moved clock (the node's one clock)."""
    from mockdcp.model import BucketSpec

    n = Node(bucket=virtual(), users={"u": "p"})
    n.buckets.create(BucketSpec(name="other"))
    back = [
        steps.AdvanceClock(seconds=3600),
        steps.AdvanceClock(to="2023-11-14T22:30:00Z", bucket="other"),  # T0 + 1000 s
    ]
    with pytest.raises(ScenarioProblems, match="cannot go back") as caught:
        check_steps(back, n.bucket, topology=n.topology)
    assert [p.step for p in caught.value.problems] == [1]
