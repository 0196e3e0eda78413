"""The durable-write steps: sync_write, commit and abort, validated whole first."""

from __future__ import annotations

import pytest

from mockdcp.model import Bucket
from mockdcp.scenario import ScenarioProblems, check_steps
from mockdcp.scenario.steps import Abort, Commit, Set, SyncWrite


def bucket() -> Bucket:
    return Bucket("default", 4, seed=1, clock=lambda: 1_700_000_000.0)


def test_a_pending_write_then_its_commit_checks() -> None:
    check_steps(
        [
            SyncWrite(key="k", value={"a": 1}, outcome="pending"),
            Commit(key="k"),
            SyncWrite(key="k", value="2", outcome="abort", level="persist_to_majority"),
            SyncWrite(key="k", value="3", outcome="pending"),
            Abort(key="k"),
            Set(key="k", value="4"),
        ],
        bucket(),
    )


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([Commit(key="k")], "no pending durable write"),
        ([Abort(key="k")], "no pending durable write"),
        (
            [SyncWrite(key="k", value="1", outcome="pending"), Commit(key="k"), Commit(key="k")],
            "no pending durable write",
        ),
        ([SyncWrite(key="k", value="1"), Abort(key="k")], "no pending durable write"),
        (
            [SyncWrite(key="k", value="1", outcome="pending"), SyncWrite(key="k", value="2")],
            "is pending",
        ),
        ([SyncWrite(key="k", value="1", outcome="pending"), Set(key="k", value="2")], "pending"),
    ],
)
def test_bad_durable_steps_are_refused_before_anything(steps: list[object], message: str) -> None:
    b = bucket()
    with pytest.raises(ScenarioProblems) as info:
        check_steps([Set(key="x", value="0"), *steps], b)  # type: ignore[list-item]
    assert message in info.value.problems[0].message
    assert all(vb.high_seqno == 0 for vb in b.vbuckets)
