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


def test_a_node_holds_output_while_a_stall_or_a_full_window_keeps_it_unwritten() -> None:
    """``Node.holds_output`` (what ``mockdcp check`` waits on before it takes a matching
    output as final): a write made during a stall is held until the stall ends, and one
    behind a full flow-control window until the consumer acknowledges; once written,
    nothing is held."""
    from mockdcp.model import Bucket
    from mockdcp.protocol import DcpBufferAck

    from ._session import Session, from_zero

    bucket = Bucket("default", 1, seed=1, clock=lambda: 1_700_000_000.0)
    session = Session(bucket)
    session.open_dcp(buffer_size=100)
    session.call(from_zero(0, 1))
    node = session.node
    assert not node.holds_output()
    node.steps.stall(1.0, None)
    bucket.set(b"k0", b'{"n": 0}')
    assert node.holds_output()
    assert not session.conn.data_to_send(session.now)  # stalled: nothing written
    session.now = 2.0  # the stall over
    unacked = len(session.conn.data_to_send(session.now))
    assert unacked > 100  # k0 and its marker: the window is full
    assert not node.holds_output()
    for i in range(1, 6):
        bucket.set(b"k%d" % i, b'{"n": %d}' % i)
    assert not session.conn.data_to_send(session.now)
    assert node.holds_output()  # the writes wait for an acknowledgement
    while unacked:  # the consumer acknowledges what it read, until nothing more comes
        session.send(DcpBufferAck(opaque=0, nbytes=unacked).encode())
        unacked = len(session.conn.data_to_send(session.now))
    assert not node.holds_output()
