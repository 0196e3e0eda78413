"""The protocol checker on a producer connection, without sockets: it sees every DCP
connection of a name (state kept across reconnects), its violations are
``ProtocolViolation`` events carrying the frame, it times what it must through the
connection's deadline, and it changes nothing the producer sends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model import Bucket
from mockdcp.producer import CheckerLimits, Connection, Node
from mockdcp.producer.events import ProtocolViolation, StreamEnded
from mockdcp.protocol import (
    DcpBufferAck,
    DcpControl,
    DcpNoop,
    DcpStreamRequest,
    Opcode,
    Response,
    SnapshotMarker,
    Status,
    StreamEnd,
    StreamEndReason,
)

from ._session import Session, decode_all

if TYPE_CHECKING:
    import pytest

    from mockdcp.protocol import Message

MAX = 2**64 - 1


def bucket() -> Bucket:
    b = Bucket("default", 2, seed=5, clock=lambda: 1_700_000_000.0)
    for i in range(10):
        b.set(f"k{i}", b"{}", vbucket=0)  # one snapshot: [0, 10] from 0
    return b


def request(vb: int, start: int, snap: tuple[int, int], uuid: int) -> DcpStreamRequest:
    return DcpStreamRequest(
        opaque=7,
        vbucket=vb,
        flags=0,
        start_seqno=start,
        end_seqno=MAX,
        vbucket_uuid=uuid,
        snap_start_seqno=snap[0],
        snap_end_seqno=snap[1],
    )


def violations(node: Node) -> list[ProtocolViolation]:
    return [e for e in node.events if isinstance(e, ProtocolViolation)]


def connected(b: Bucket, node: Node, now: float = 0.0) -> Session:
    session = Session(b, node=node, now=now)
    session.open_dcp(name=b"consumer")
    return session


def handed_out(s: Session) -> list[Message | Response]:
    """What the connection hands the shell to write now, not yet reported written."""
    return decode_all(b"".join(s.conn.buffers_to_send(s.now)))


def noops_every_second(b: Bucket) -> tuple[Node, Session]:
    node = Node(bucket=b, users={"Administrator": "password"})
    s = connected(b, node)
    s.call(DcpControl(opaque=1, key="enable_noop", value="true"))
    s.call(DcpControl(opaque=2, key="set_noop_interval", value="1"))
    return node, s


def ended_too_slow_at_one_second(b: Bucket) -> tuple[Node, Session]:
    """vb 0 streamed from 0, ended TOO_SLOW at 1 s; it must be re-opened within 2 s."""
    node = Node(
        bucket=b,
        users={"Administrator": "password"},
        checker_limits=CheckerLimits(reopen_within=2.0),
    )
    s = connected(b, node)
    s.call(request(0, 0, (0, 0), 0))
    s.now = 1.0
    node.steps.end_streams([0], StreamEndReason.TOO_SLOW)
    return node, s


def test_a_resume_on_a_new_connection_of_the_name_is_checked_against_the_last_one() -> None:
    b = bucket()
    node = Node(bucket=b, users={"Administrator": "password"})
    first = connected(b, node)
    out = first.call(request(0, 0, (0, 0), 0))
    assert [(m.start_seqno, m.end_seqno) for m in out if isinstance(m, SnapshotMarker)] == [(0, 10)]
    first.conn.close("dropped")
    uuid = b.vbucket(0).failover.newest_uuid

    second = connected(b, node, now=1.0)
    wrong = request(0, 5, (5, 5), uuid)  # "complete" at 5, inside snapshot [0, 10]
    second.call(wrong)
    [v] = violations(node)
    assert (v.rule, v.vbucket, v.conn_id, v.name) == ("resume.complete", 0, 2, "consumer")
    assert bytes.fromhex(v.frame) == wrong.encode()
    assert v.summary.startswith("DCP_STREAM_REQ vb 0 start 5 ")
    assert node.checkers.found() == {"resume.complete": 1}

    third = connected(b, node, now=2.0)
    third.call(request(0, 10, (10, 10), uuid))  # where the snapshot ended: right
    third.call(request(1, 0, (0, 0), 0))
    assert len(violations(node)) == 1


def test_an_early_stream_end_is_an_event_and_not_re_opening_it_in_time_a_violation() -> None:
    b = bucket()
    node, s = ended_too_slow_at_one_second(b)
    out = s.read()
    assert [m.reason for m in out if isinstance(m, StreamEnd)] == [StreamEndReason.TOO_SLOW]
    [ended] = [e for e in node.events if isinstance(e, StreamEnded)]
    assert (ended.vbucket, ended.reason, ended.time) == (0, "TOO_SLOW", 1.0)
    assert s.conn.next_deadline() == 3.0  # the checker's, through the connection's
    s.now = 3.0
    s.read()
    [v] = violations(node)
    assert (v.rule, v.time) == ("stream_end.not_reopened", 3.0)
    expected = StreamEnd(opaque=7, vbucket=0, reason=StreamEndReason.TOO_SLOW).encode()
    assert bytes.fromhex(v.frame) == expected


def test_a_failover_s_stream_end_is_re_opened_by_a_rollback_then_a_request_below_it() -> None:
    b = bucket()
    node = Node(bucket=b, users={"Administrator": "password"})
    s = connected(b, node)
    s.call(request(0, 0, (0, 0), 0))
    old_uuid = b.vbucket(0).failover.newest_uuid
    b.failover(0, lose_after=4)
    out = s.call(request(0, 10, (10, 10), old_uuid))
    assert [m.reason for m in out if isinstance(m, StreamEnd)] == [StreamEndReason.STATE_CHANGED]
    assert [m.status for m in out if isinstance(m, Response)] == [Status.ROLLBACK]
    s.call(request(0, 4, (4, 4), old_uuid))
    s.now = 60.0
    s.read()
    assert violations(node) == []


def test_an_unanswered_noop_is_reported_through_the_connection_s_deadline() -> None:
    b = bucket()
    node, s = noops_every_second(b)
    s.now = 1.0
    noops = [m for m in s.read() if isinstance(m, DcpNoop)]
    assert len(noops) == 1
    assert s.conn.next_deadline() == 2.0
    s.now = 2.0
    s.read()
    [v] = violations(node)
    assert v.rule == "noop.unanswered"
    assert bytes.fromhex(v.frame) == noops[0].encode()


def test_a_noop_answered_before_its_write_is_reported_is_answered() -> None:
    # The shell hands the noop to the socket, and a fast consumer's answer may be read
    # before the shell reports the write done (data_written): the checker must already
    # know the noop it answers.
    b = bucket()
    node, s = noops_every_second(b)
    s.now = 1.0
    [noop] = [m for m in handed_out(s) if isinstance(m, DcpNoop)]
    answer = Response(opcode=Opcode.DCP_NOOP, status=Status.SUCCESS, opaque=noop.opaque)
    s.send(answer.encode())
    s.conn.data_written(s.now)
    s.now = 1.9
    s.read()
    assert violations(node) == []
    assert s.conn.next_deadline() == 2.0  # the next noop's, not the answered one's
    s.now = 2.0
    s.read()  # the next noop goes out; nothing is late
    assert violations(node) == []


def test_a_stream_re_opened_before_its_stream_end_s_write_is_reported_is_re_opened() -> None:
    b = bucket()
    node, s = ended_too_slow_at_one_second(b)
    out = handed_out(s)
    assert [m.reason for m in out if isinstance(m, StreamEnd)] == [StreamEndReason.TOO_SLOW]
    s.send(request(0, 10, (10, 10), b.vbucket(0).failover.newest_uuid).encode())
    s.conn.data_written(s.now)
    for s.now in (3.0, 3.5):  # the deadline, and past a late tick's grace
        s.read()
    assert violations(node) == []


def script(b: Bucket, node: Node) -> list[bytes]:
    """A conversation full of mistakes, on two connections of one name: every byte the
    producer wrote."""
    written: list[bytes] = []

    def call(session: Session, msg: Message | Response) -> None:
        session.send(msg.encode())
        written.append(bytes(session.conn.data_to_send(session.now)))

    first = Session(b, node=node)
    call(first, DcpControl(opaque=0, key="connection_buffer_size", value="100"))
    first.open_dcp(buffer_size=100, name=b"consumer")
    call(first, DcpControl(opaque=1, key="enable_noop", value="true"))
    call(first, DcpControl(opaque=2, key="enable_noop", value="false"))
    call(first, request(0, 0, (0, 0), 0))
    call(first, DcpBufferAck(opaque=0, nbytes=10_000))
    call(first, request(1, 3, (4, 9), 0x1234))
    call(first, request(7, 0, (0, 0), 0))
    first.now = 30.0
    written.append(bytes(first.conn.data_to_send(first.now)))
    first.conn.close("dropped")
    second = Session(b, node=node, now=31.0)
    second.open_dcp(name=b"consumer")
    call(second, request(0, 5, (5, 5), b.vbucket(0).failover.newest_uuid))
    call(second, request(0, 50, (50, 50), b.vbucket(0).failover.newest_uuid))
    return written


def test_the_checker_changes_nothing_the_producer_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = Node(bucket=bucket(), users={"Administrator": "password"})
    with_checker = script(checked.bucket, checked)
    found = {v.rule for v in violations(checked)}
    assert {"control.contradicted", "flow.over_ack", "resume.complete"} <= found
    assert "vbucket.not_in_map" in found

    monkeypatch.setattr(Connection, "watch", lambda self, frame, now: None)
    unchecked = Node(bucket=bucket(), users={"Administrator": "password"})
    assert script(unchecked.bucket, unchecked) == with_checker
    assert violations(unchecked) == []


def test_a_failing_checker_is_logged_and_costs_the_producer_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mockdcp.producer import ConnectionChecker

    def broken(self: ConnectionChecker, *args: object) -> list[object]:
        raise RuntimeError("checker bug")

    b = bucket()
    node = Node(bucket=b, users={"Administrator": "password"})
    s = connected(b, node)
    monkeypatch.setattr(ConnectionChecker, "request", broken)
    monkeypatch.setattr(ConnectionChecker, "tick", broken)
    out = s.call(request(0, 0, (0, 0), 0))
    assert [(m.start_seqno, m.end_seqno) for m in out if isinstance(m, SnapshotMarker)] == [(0, 10)]
    assert "the protocol checker failed" in caplog.text
    assert not s.conn.closed
