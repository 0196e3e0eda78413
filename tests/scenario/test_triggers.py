from __future__ import annotations

from typing import Any

import pytest

from mockdcp.model import Bucket
from mockdcp.producer import events as ev
from mockdcp.scenario import ConsumerProgress, Expect, ResumeExpectation, RollbackExpectation
from mockdcp.scenario._triggers import Branch, ExpectationCheck, ProgressTrigger, Route


def bucket(items: int = 0) -> Bucket:
    b = Bucket("default", 2, seed=1, clock=lambda: 1_700_000_000.0)
    for i in range(items):
        b.set(f"k{i}", "v", vbucket=i % 2)
    return b


def request(vb: int, start: int, rollback: int | None = None, **kw: object) -> ev.StreamRequested:
    fields: dict[str, Any] = {
        "time": 1.0,
        "conn_id": 1,
        "vbucket": vb,
        "stream_id": None,
        "start_seqno": start,
        "end_seqno": 2**64 - 1,
        "vbucket_uuid": 7,
        "snap_start_seqno": start,
        "snap_end_seqno": start,
        "flags": 0,
        "status": "ROLLBACK" if rollback is not None else "SUCCESS",
        "rollback_seqno": rollback,
    }
    fields.update(kw)
    return ev.StreamRequested(**fields)


def test_a_seqno_trigger_targets_each_vbuckets_high_seqno_and_skips_empty_ones() -> None:
    b = bucket(3)
    trigger = ProgressTrigger.start(ConsumerProgress(seqno="high"), b)
    assert trigger.targets == {0: 2, 1: 1}
    trigger.observe(ev.SeqnoWritten(time=1, conn_id=1, vbucket=0, seqno=2))
    assert not trigger.met()
    trigger.observe(ev.SeqnoWritten(time=1, conn_id=1, vbucket=1, seqno=1))
    assert trigger.met()


def test_an_acked_seqno_needs_acks_covering_its_frame() -> None:
    trigger = ProgressTrigger.start(ConsumerProgress(vbucket=0, seqno=2, acked=True), bucket(4))
    trigger.observe(ev.SeqnoWritten(time=1, conn_id=3, vbucket=0, seqno=2, flow_bytes=500))
    trigger.observe(ev.BytesAcked(time=1, conn_id=3, nbytes=499, total=499))
    assert not trigger.met()
    trigger.observe(ev.BytesAcked(time=1, conn_id=3, nbytes=1, total=500))
    assert trigger.met()


def test_a_rollback_is_taken_only_by_a_request_at_or_below_the_rollback_seqno() -> None:
    trigger = ProgressTrigger.start(ConsumerProgress(vbucket=0, rollback=True), bucket())
    trigger.observe(request(0, 50, rollback=40))
    trigger.observe(request(0, 50, rollback=40))  # a consumer that ignores the rollback
    assert not trigger.met()
    trigger.observe(request(0, 40))
    assert trigger.met()


def test_connection_noop_and_ack_counts() -> None:
    spec = ConsumerProgress(connections=1, noops_answered=2, bytes_acked=10)
    trigger = ProgressTrigger.start(spec, bucket())
    trigger.observe(ev.ConnectionOpened(time=1, conn_id=1))
    trigger.observe(ev.NoopAnswered(time=1, conn_id=1, opaque=1))
    trigger.observe(ev.BytesAcked(time=1, conn_id=1, nbytes=10, total=10))
    assert not trigger.met()
    trigger.observe(ev.NoopAnswered(time=1, conn_id=1, opaque=2))
    assert trigger.met()


def test_only_the_named_connection_counts() -> None:
    spec = ConsumerProgress(bytes_acked=1, connection="mine")
    trigger = ProgressTrigger.start(spec, bucket())
    trigger.observe(ev.BytesAcked(time=1, conn_id=1, name="other", nbytes=5, total=5))
    assert not trigger.met()
    trigger.observe(ev.BytesAcked(time=1, conn_id=2, name="mine", nbytes=5, total=5))
    assert trigger.met()


def test_a_rollback_sent_is_not_a_rollback_taken() -> None:
    check = ExpectationCheck(Expect(rollback=RollbackExpectation(vbucket=0, to=40)), began=0)
    check.observe(request(0, 50, rollback=40))
    check.observe(request(0, 50, rollback=40))
    assert not check.passed
    assert "re-requested from 50" in check.failure()
    check.observe(request(0, 40))
    assert check.passed


def test_a_rollback_to_another_seqno_does_not_pass() -> None:
    check = ExpectationCheck(Expect(rollback=RollbackExpectation(vbucket=0, to=40)), began=0)
    check.observe(request(0, 50, rollback=0))
    check.observe(request(0, 0))
    assert not check.passed
    assert check.failure() == "ROLLBACK to 0, expected 40"


def test_a_resume_must_match_every_field_given() -> None:
    spec = Expect(resume=ResumeExpectation(vbucket=1, seqno=7, snap_start=5, snap_end=9))
    check = ExpectationCheck(spec, began=0)
    check.observe(request(1, 7, snap_start_seqno=7, snap_end_seqno=7))
    assert not check.passed
    assert "snap start 7 (expected 5), snap end 7 (expected 9)" in check.failure()
    check.observe(request(1, 7, snap_start_seqno=5, snap_end_seqno=9))
    assert check.passed
    assert check.route is Route.SNAPSHOT_RECEIVED


@pytest.mark.parametrize(
    ("expected", "sent", "route"),
    [
        ((9, 9), (5, 9), Route.SNAPSHOT_RECEIVED),
        ((5, 9), (9, 9), Route.COMPLETE_SNAPSHOT),
    ],
)
def test_a_complete_snapshot_resumes_by_either_of_its_ranges(
    expected: tuple[int, int], sent: tuple[int, int], route: Route
) -> None:
    resume = ResumeExpectation(vbucket=1, seqno=9, snap_start=expected[0], snap_end=expected[1])
    check = ExpectationCheck(Expect(resume=resume), began=0)
    check.observe(request(1, 9, snap_start_seqno=sent[0], snap_end_seqno=sent[1]))
    assert check.passed
    assert check.route is route
    assert "the same complete snapshot" in check.detail


def test_a_resume_at_another_seqno_is_no_complete_snapshot_of_it() -> None:
    resume = ResumeExpectation(vbucket=1, seqno=9, snap_start=9, snap_end=9)
    check = ExpectationCheck(Expect(resume=resume), began=0)
    check.observe(request(1, 8, snap_start_seqno=5, snap_end_seqno=9))
    assert not check.passed


def observed(time: float = 1.0) -> ev.SeqnoObserved:
    return ev.SeqnoObserved(time=time, conn_id=1, vbucket=0, persisted_seqno=0)


@pytest.mark.parametrize("observe_first", [True, False])
def test_a_consumer_polling_observe_seqno_may_resume_below_the_point_it_was_sent(
    observe_first: bool,
) -> None:
    """java-dcp-client's rollback mitigation delivers only persisted writes and drops what
    it held back when the stream ends: it resumes from what it delivered (it may poll
    OBSERVE_SEQNO only after its first request on a new connection)."""
    resume = ResumeExpectation(vbucket=1, seqno=10, snap_start=10, snap_end=10)
    check = ExpectationCheck(Expect(resume=resume), began=0)
    if observe_first:
        check.observe(observed())
    check.observe(request(1, 4, snap_start_seqno=1, snap_end_seqno=10))
    if not observe_first:
        assert not check.passed
        check.observe(observed(2.0))
    assert check.passed
    assert check.route is Route.HELD_BACK
    assert check.detail.startswith("held back unpersisted writes: requested from 4")


def test_a_resume_below_the_point_without_observe_seqno_fails() -> None:
    resume = ResumeExpectation(vbucket=1, seqno=10, snap_start=10, snap_end=10)
    check = ExpectationCheck(Expect(resume=resume), began=0)
    check.observe(request(1, 0))
    assert not check.passed
    assert check.failure().startswith("requested with start seqno 0 (expected 10)")


def test_observe_seqno_does_not_excuse_a_resume_outside_its_snapshot() -> None:
    resume = ResumeExpectation(vbucket=1, seqno=10)
    check = ExpectationCheck(Expect(resume=resume), began=0)
    check.observe(observed())
    check.observe(request(1, 4, snap_start_seqno=5, snap_end_seqno=10))
    assert not check.passed


def written(vb: int, seqno: int, time: float) -> ev.SeqnoWritten:
    return ev.SeqnoWritten(time=time, conn_id=1, vbucket=vb, seqno=seqno)


def rollback_check(to: int | None = 40, branch: Branch | None = None) -> ExpectationCheck:
    spec = Expect(rollback=RollbackExpectation(vbucket=0, to=to))
    return ExpectationCheck(spec, began=0, branch=branch)


def test_a_rollback_taken_is_the_rolled_back_route() -> None:
    check = rollback_check(branch=Branch(2.0, 40))
    check.observe(request(0, 50, rollback=40, time=3.0))
    check.observe(request(0, 38, time=3.0))
    assert check.passed
    assert check.route is Route.ROLLED_BACK
    assert check.detail == "rolled back: re-requested from 38 after ROLLBACK to 40"


def test_resuming_at_or_below_the_branch_needs_no_rollback() -> None:
    check = rollback_check(branch=Branch(2.0, 40))
    check.observe(written(0, 50, time=1.0))  # sent past the branch point, held back
    check.observe(request(0, 40, time=3.0))
    assert check.passed
    assert check.route is Route.RESUMED_BELOW_BRANCH
    assert "at or below the branch point 40, sent up to 50" in check.detail


def test_a_consumer_never_sent_past_the_branch_point_mitigated() -> None:
    check = rollback_check(to=None, branch=Branch(2.0, 40))
    check.observe(written(0, 40, time=1.0))
    check.observe(request(0, 40, time=3.0))
    assert check.passed
    assert check.route is Route.MITIGATED


def test_requests_before_the_branch_do_not_count() -> None:
    check = rollback_check(branch=Branch(2.0, 40))
    check.observe(request(0, 0, time=1.0))  # the first stream request, from 0
    assert not check.passed
    assert check.failure() == (
        "no ROLLBACK taken, nor an accepted request at or below the branch point 40 "
        "after the branch"
    )


def test_a_request_accepted_above_the_branch_point_fails() -> None:
    check = rollback_check(branch=Branch(2.0, 40))
    check.observe(request(0, 50, time=3.0))
    assert not check.passed
    assert check.failure() == "accepted from 50, above the branch point 40, without a ROLLBACK"


def test_without_a_branch_only_a_rollback_shows_the_way() -> None:
    check = rollback_check(to=None)
    check.observe(request(0, 0, time=3.0))
    assert not check.passed
    assert check.failure() == "no ROLLBACK sent"


def test_reconnected_counts_from_the_last_close() -> None:
    check = ExpectationCheck(Expect(reconnected=True, within=2), began=0)
    check.observe(ev.ConnectionClosed(time=10, conn_id=1, reason="disconnect step"))
    check.observe(ev.DcpOpened(time=13, conn_id=2, flags=1))
    assert not check.passed
    check.observe(ev.ConnectionClosed(time=20, conn_id=2, reason="disconnect step"))
    check.observe(ev.DcpOpened(time=21, conn_id=3, flags=1))
    assert check.passed


def test_a_refused_request_is_not_a_resume() -> None:
    check = ExpectationCheck(Expect(resume=ResumeExpectation(vbucket=1, seqno=9)), began=0)
    check.observe(request(1, 9, status="NOT_MY_VBUCKET"))
    assert not check.passed
    assert check.failure() == "a request from 9 was answered NOT_MY_VBUCKET"
    check.observe(request(1, 9))
    assert check.passed


def violation(rule: str = "rollback.ignored") -> ev.ProtocolViolation:
    return ev.ProtocolViolation(
        time=5.0,
        conn_id=3,
        name="consumer",
        rule=rule,
        message="ROLLBACK to 5 answered, re-requested from 10",
        vbucket=0,
        summary="DCP_STREAM_REQ vb 0 start 10",
    )


def test_conformant_settles_on_the_first_violation_and_fails_with_it() -> None:
    check = ExpectationCheck(Expect(conformant=True, within=0), began=0)
    check.observe(request(0, 10))
    assert not check.settled
    check.observe(violation())
    check.observe(violation("noop.unanswered"))
    assert check.settled
    check.finish()
    assert not check.passed
    assert check.name == "no protocol violations"
    assert check.detail == (
        "rollback.ignored: ROLLBACK to 5 answered, re-requested from 10 "
        "(conn 3 'consumer') [DCP_STREAM_REQ vb 0 start 10]"
    )
    assert check.failure() == check.detail


def test_conformant_passes_once_its_time_is_over_without_a_violation() -> None:
    check = ExpectationCheck(Expect(conformant=True, within=1), began=0)
    check.observe(request(0, 10))
    assert not check.settled  # it waits for ``within``, watching
    check.finish()
    assert check.passed
    assert check.detail == "the protocol checker reported nothing"


def opened(vb: int, start: int, conn_id: int = 2) -> ev.StreamOpened:
    return ev.StreamOpened(
        time=1, conn_id=conn_id, vbucket=vb, stream_id=None, start_seqno=start, end_seqno=2**64 - 1
    )


def test_a_stream_resumed_at_or_past_the_target_meets_it_with_nothing_to_write() -> None:
    # issue 45: the consumer got every item, reconnected and resumed from the high seqno:
    # nothing is left to write, and the wait is met (acked too: nothing to acknowledge)
    trigger = ProgressTrigger.start(ConsumerProgress(seqno="high", acked=True), bucket(3))
    assert trigger.targets == {0: 2, 1: 1}
    trigger.observe(opened(0, 1))
    trigger.observe(opened(1, 1))
    assert not trigger.met()  # vb 0 resumed below its target: seqno 2 is still to come
    trigger.observe(opened(0, 2))
    assert trigger.met()
