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


def test_persist_upto_beyond_every_high_seqno_is_a_problem() -> None:
    assert problems(Set(key="a", value="1"), Persist(upto=2))
    assert problems(Set(key="a", value="1"), Persist(upto=1)) == []


def test_earlier_steps_are_simulated_for_later_references() -> None:
    assert problems(Generate(docs=10), Delete(key="doc::000003")) == []
    assert problems(Delete(key="doc::000003")) == ["no live document 'doc::000003' to delete"]
    assert problems(Set(key="a", value="1"), Delete(key="a"), Delete(key="a"))


def test_purge_beyond_the_persisted_seqno_is_a_problem() -> None:
    assert problems(Set(key="a", value="1"), Purge(upto=1))
    assert problems(Set(key="a", value="1"), Persist(), Purge(upto=1)) == []


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
