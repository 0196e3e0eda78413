"""The steps on an ephemeral bucket: the persistence steps refused by name before
anything runs, ``ephemeral_purge`` (and refused on a couchbase bucket), the
``bucket:`` block's ephemeral settings."""

from __future__ import annotations

import pytest

from mockdcp import ScenarioError
from mockdcp.model import Bucket
from mockdcp.scenario import ScenarioProblems, check_steps, parse_scenario, scenario_bucket
from mockdcp.scenario.steps import (
    EphemeralPurge,
    Persist,
    Persistence,
    Purge,
    PurgeHistory,
    Restart,
    Set,
)


def bucket(bucket_type: str = "ephemeral") -> Bucket:
    return Bucket("default", 4, seed=1, clock=lambda: 1_700_000_000.0, bucket_type=bucket_type)


@pytest.mark.parametrize(
    "step", [Persist(), Persistence(paused=True), Purge(), PurgeHistory()], ids=lambda s: s.NAME
)
def test_persistence_steps_on_an_ephemeral_bucket_are_refused_by_name(step: object) -> None:
    b = bucket()
    with pytest.raises(ScenarioProblems) as info:
        check_steps([Set(key="k", value="v"), step], b)  # type: ignore[list-item]
    [problem] = info.value.problems
    assert problem.step == 1
    assert problem.message.startswith(f"{step.NAME}: the bucket is ephemeral")  # type: ignore[attr-defined]
    assert "no persistence" in problem.message
    assert not b.oracle()  # nothing applied


def test_ephemeral_purge_checks_on_ephemeral_only() -> None:
    check_steps([EphemeralPurge(), EphemeralPurge(vbuckets=1, age=0), Restart()], bucket())
    with pytest.raises(ScenarioProblems, match="needs an ephemeral bucket"):
        check_steps([EphemeralPurge()], bucket("couchbase"))
    with pytest.raises(ScenarioProblems, match="seconds >= 0"):
        check_steps([EphemeralPurge(age=-1)], bucket())


def test_the_bucket_block_makes_an_ephemeral_bucket() -> None:
    scenario = parse_scenario(
        "name: e\n"
        "bucket: {vbuckets: 2, type: ephemeral, eviction_policy: nruEviction,"
        " memory_quota: 100000, ephemeral_purge_age: 60}\n"
        "steps: [{set: {key: k, value: v}}, {ephemeral_purge: {age: 0}}]\n"
    )
    b = scenario_bucket(scenario)
    assert b.bucket_type == "ephemeral"
    assert b.ephemeral is not None
    assert (b.ephemeral.eviction_policy, b.ephemeral.memory_quota) == ("nruEviction", 100_000)
    assert b.ephemeral.purge_age == 60


def test_ephemeral_settings_on_a_couchbase_bucket_are_refused() -> None:
    scenario = parse_scenario("name: e\nbucket: {memory_quota: 1000}\nsteps: []\n")
    with pytest.raises(ScenarioError, match="an ephemeral bucket's"):
        scenario_bucket(scenario)
    with pytest.raises(ScenarioError, match="type"):
        parse_scenario("name: e\nbucket: {type: memcached}\nsteps: []\n")


def test_a_failover_of_an_ephemeral_bucket_is_checked_as_losing_nothing() -> None:
    # the check's simulation keeps the high seqno: a later lose_after up to it is valid
    from mockdcp.scenario.steps import Failover

    b = bucket()
    key = next(f"k{i}" for i in range(100) if b.vbucket_of(f"k{i}") == 0)
    steps = [Set(key=key, value="v"), Set(key=key, value="w"), Failover(vbuckets=0)]
    check_steps([*steps, Failover(vbuckets=0, lose_after=2)], b)
    with pytest.raises(ScenarioProblems, match="beyond the high seqno"):
        check_steps([*steps, Failover(vbuckets=0, lose_after=3)], b)
