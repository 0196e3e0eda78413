from __future__ import annotations

import pytest

from mockdcp.model import Bucket
from mockdcp.scenario import (
    Delete,
    Generate,
    Persist,
    Purge,
    Reject,
    ScenarioProblems,
    Set,
    Wait,
    check_steps,
)
from mockdcp.scenario.steps import Checkpoint, Failover

from .test_convert import DESIGN_EXAMPLE


def bucket() -> Bucket:
    return Bucket("default", 8, seed=1, clock=lambda: 1_700_000_000.0)


def problems(*steps: object) -> list[str]:
    try:
        check_steps(list(steps), bucket())  # type: ignore[arg-type]
    except ScenarioProblems as exc:
        return [p.message for p in exc.problems]
    return []


def test_a_vbucket_the_bucket_lacks_is_a_problem() -> None:
    assert problems(Checkpoint(vbuckets=5000)) == ["no vbucket 5000 (the bucket has 0..7)"]


def test_persist_upto_beyond_a_named_vbuckets_high_seqno_is_a_problem() -> None:
    vb = bucket().vbucket_of("a")
    assert problems(Set(key="a", value="1"), Persist(vbuckets=vb, upto=2)) == [
        f"upto 2 is beyond the high seqno of vbucket {vb} (1)"
    ]
    assert problems(Set(key="a", value="1"), Persist(vbuckets=vb, upto=1)) == []
    assert problems(Set(key="a", value="1"), Persist(upto=40)) == []  # a bound for all


def test_earlier_steps_are_simulated_for_later_references() -> None:
    assert problems(Generate(docs=10), Delete(key="doc::000003")) == []
    assert problems(Delete(key="doc::000003")) == ["no live document 'doc::000003' to delete"]
    assert problems(Set(key="a", value="1"), Delete(key="a"), Delete(key="a"))


def test_purge_beyond_the_persisted_seqno_is_a_problem() -> None:
    vb = bucket().vbucket_of("a")
    assert problems(Set(key="a", value="1"), Purge(vbuckets=vb, upto=1))
    assert problems(Set(key="a", value="1"), Persist(), Purge(vbuckets=vb, upto=1)) == []


def test_liveness_is_not_predicted_after_a_failover() -> None:
    assert problems(Set(key="a", value="1"), Failover(), Delete(key="a")) == []


def test_unknown_opcode_status_and_collection_names_are_problems() -> None:
    assert problems(Reject(request="dcp_frob", status="etmpfail"))
    assert problems(Reject(request="dcp_stream_req", status="nope"))
    assert problems(Set(key="a", value="1", collection="inventory.hotel"))
    assert problems(Reject(request="dcp_stream_req", status="etmpfail")) == []


def test_a_wait_needs_exactly_one_of_seconds_and_consumer() -> None:
    assert problems(Wait()) == ["wait takes either seconds or consumer"]


def test_every_problem_of_a_list_is_reported_with_its_step() -> None:
    with pytest.raises(ScenarioProblems) as info:
        check_steps([Checkpoint(vbuckets=99), Set(key="a", value="1"), Wait()], bucket())
    assert [p.step for p in info.value.problems] == [0, 2]


def test_collection_steps_are_simulated_for_later_steps() -> None:
    from mockdcp.scenario import CreateCollection, CreateScope, DropCollection

    assert (
        problems(
            CreateScope(name="inventory"),
            CreateCollection(collection="inventory.hotel", max_ttl=60),
            Set(key="h1", value="1", collection="inventory.hotel"),
            DropCollection(collection="inventory.hotel"),
        )
        == []
    )
    found = problems(
        CreateCollection(collection="inventory.hotel"),
        CreateScope(name="inventory"),
        CreateScope(name="inventory"),
        DropCollection(collection="nodot"),
    )
    assert len(found) == 3
    assert "nodot" in found[-1]


def test_the_design_example_validates_on_its_bucket() -> None:
    from mockdcp.scenario import parse_scenario

    scenario = parse_scenario(
        DESIGN_EXAMPLE.replace(
            "bucket: {name: default, vbuckets: 16}",
            "bucket: {name: default, vbuckets: 16, collections: {inventory: [hotel, airline]}}",
        ).replace("generate: {docs: 100}", "generate: {docs: 100, collection: inventory.hotel}")
    )
    spec = scenario.bucket
    bucket = Bucket(
        spec.name, spec.vbuckets, seed=1, clock=lambda: 0.0, collections=spec.collections
    )
    check_steps(scenario.steps, bucket)
