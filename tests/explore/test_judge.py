"""The judges: a ``check`` result read into named anomalies, each with its witness."""

from __future__ import annotations

from typing import Any

import pytest

from mockdcp.explore import Anomaly, anomalies, headline


def failed(reason: str, **fields: Any) -> dict[str, Any]:  # noqa: ANN401
    return {
        "verdict": "fail",
        "reason": reason,
        "violations": [],
        "expectations": [],
        "verification": None,
        "evidence": ["   0.000s <- connected from 127.0.0.1 [conn 1]"],
        **fields,
    }


def violation(rule: str, vbucket: int = 3) -> dict[str, Any]:
    return {"rule": rule, "message": "m", "vbucket": vbucket, "summary": "frame", "time": 1.0}


def verification(**counts: int) -> dict[str, Any]:
    base = dict.fromkeys(("missing", "phantom", "stale", "wrong_value", "duplicates"), 0)
    base.update(counts)
    examples = {k: [{"key": f"{k}-key", "vbucket": 2, "seqno": 7}] for k in counts}
    return {**base, "expected": 10, "examples": examples}


def test_a_pass_has_no_anomaly() -> None:
    assert anomalies({"verdict": "pass", "reason": "ok"}) == []


@pytest.mark.parametrize(
    ("rule", "anomaly"),
    [
        ("resume.complete", Anomaly.BAD_RESUME),
        ("resume.uuid", Anomaly.BAD_RESUME),
        ("rollback.ignored", Anomaly.ROLLBACK_IGNORED),
        ("stream_end.not_reopened", Anomaly.VBUCKET_ABANDONED),
        ("flow.stall", Anomaly.STUCK),
        ("noop.unanswered", Anomaly.PROTOCOL),
    ],
)
def test_each_checker_rule_names_its_anomaly(rule: str, anomaly: Anomaly) -> None:
    (found,) = anomalies(failed(f"{rule}: m", violations=[violation(rule)]))
    assert found.anomaly is anomaly
    assert found.vbucket == 3
    assert found.detail.startswith(rule)
    assert found.frames[-1] == "frame"


@pytest.mark.parametrize(
    ("field", "anomaly"),
    [
        ("missing", Anomaly.LOST_WRITE),
        ("phantom", Anomaly.PHANTOM),
        ("stale", Anomaly.STALE_VALUE),
        ("wrong_value", Anomaly.STALE_VALUE),
    ],
)
def test_the_oracle_names_what_the_output_got_wrong(field: str, anomaly: Anomaly) -> None:
    result = failed("output: ...", verification=verification(**{field: 2}))
    (found,) = anomalies(result)
    assert found.anomaly is anomaly
    assert found.keys == (f"{field}-key",)
    assert (found.vbucket, found.seqnos) == (2, (7,))
    assert found.detail == f"2 {field.replace('_', ' ')} of 10 documents"


def test_a_wait_timed_out_while_connected_is_a_vbucket_abandoned() -> None:
    reason = (
        "wait timed out after 8s: not yet written: vb 1 seqno 6 (written up to 4); "
        "connections 1; since the wait began: streams opened 0"
    )
    (found,) = anomalies(failed(reason))
    assert found.anomaly is Anomaly.VBUCKET_ABANDONED
    assert (found.vbucket, found.seqnos) == (1, (6,))


def test_a_wait_timed_out_with_no_connection_is_stuck() -> None:
    reason = "wait timed out after 8s: connections 0; since the wait began: streams opened 0"
    (found,) = anomalies(failed(reason))
    assert found.anomaly is Anomaly.STUCK


def test_the_consumer_exiting_is_its_own_anomaly_and_comes_first() -> None:
    result = failed(
        "the consumer exited with 1 before the scenario ended (+1 more)",
        verification=verification(missing=3),
    )
    found = anomalies(result)
    assert [f.anomaly for f in found] == [Anomaly.CONSUMER_EXIT, Anomaly.LOST_WRITE]
    assert headline(found) is Anomaly.CONSUMER_EXIT


def test_a_schedule_over_its_time_limit_is_stuck() -> None:
    (found,) = anomalies(failed("the scenario did not finish within 60s"))
    assert found.anomaly is Anomaly.STUCK


def test_a_cause_is_filed_before_its_consequence() -> None:
    result = failed(
        "stream_end.not_reopened: m (+1 more)",
        violations=[violation("stream_end.not_reopened")],
        verification=verification(missing=1),
    )
    assert headline(anomalies(result)) is Anomaly.VBUCKET_ABANDONED


def test_failed_expectations_name_rollbacks_and_resumes() -> None:
    expectations = [
        {"name": "rollback of vbucket 0 to 5", "passed": False, "detail": "d", "step": 3},
        {"name": "resume of vbucket 1 from 10", "passed": False, "detail": "d", "step": 4},
        {"name": "no protocol violations", "passed": False, "detail": "d", "step": 5},
    ]
    found = anomalies(failed("rollback of vbucket 0 to 5: d", expectations=expectations))
    assert [f.anomaly for f in found] == [Anomaly.ROLLBACK_IGNORED, Anomaly.BAD_RESUME]


def test_errors_of_mockdcp_are_never_the_consumers() -> None:
    (exc,) = anomalies(failed("mockdcp error: RuntimeError: boom"))
    assert exc.anomaly is Anomaly.SERVER_ERROR
    (step,) = anomalies(failed("failover: no such vbucket"))
    assert step.anomaly is Anomaly.SERVER_ERROR
    assert "a step failed" in step.detail


def test_a_consumer_that_never_connects_is_stuck() -> None:
    (found,) = anomalies(failed("the consumer never connected within 15s"))
    assert found.anomaly is Anomaly.STUCK
