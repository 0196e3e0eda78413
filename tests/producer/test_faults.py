"""A connection's faults (``mockdcp.producer._faults``): when writing may resume."""

from __future__ import annotations

from mockdcp.producer._faults import Faults


def test_a_held_reply_due_during_a_stall_is_due_when_the_stall_ends() -> None:
    """explore --seed 39 --nodes 3 --replicas 1 --vbuckets 8, schedule 335: a delayed
    stream request's reply fell due inside a stall; the deadline stayed at its due time,
    already passed, and the writer spun on it (for ever under the virtual clock)."""
    faults = Faults()
    faults.held.append((0.5, b"reply"))
    faults.stall(0.31, 0.52)
    assert faults.write_budget(0.5) == 0
    assert faults.deadline(0.5) == 0.31 + 0.52
    assert faults.deadline(0.4) == 0.31 + 0.52
    assert faults.deadline(0.9) == 0.5  # the stall over: the held reply is due


def test_a_held_reply_waits_for_a_spent_throttle_allowance() -> None:
    faults = Faults()
    faults.throttle(0.0, 100.0, 10.0)
    faults.wrote(0.0, 1000)  # ten seconds' allowance spent at once
    faults.held.append((0.5, b"reply"))
    assert faults.write_budget(1.0) == 0
    deadline = faults.deadline(1.0)
    assert deadline is not None
    assert deadline > 1.0
    assert faults.deadline(10.5) == 0.5  # the throttle over: due now
