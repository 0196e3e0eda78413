"""What the node's timers do reaches the streams as each connection negotiated."""

from __future__ import annotations

import pytest

from mockdcp.model import Bucket, VirtualClock
from mockdcp.producer import Node
from mockdcp.protocol import (
    PROFILES,
    DcpBufferAck,
    DcpControl,
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    Deletion,
    Expiration,
    Mutation,
    StreamEnd,
    StreamEndReason,
)
from mockdcp.scenario import StepRunner, steps

from ._session import Session

T0 = 1_700_000_000.0


def _stream(node: Node, bucket: Bucket, *, expiry_opcode: bool) -> Session:
    s = Session(bucket, node=node)
    flags = DcpOpenFlag.PRODUCER | (DcpOpenFlag.INCLUDE_DELETE_TIMES if expiry_opcode else 0)
    name = b"expiry" if expiry_opcode else b"plain"
    s.call(DcpOpen(opaque=0, name=name, flags=int(flags)))
    if expiry_opcode:
        s.call(DcpControl(opaque=0, key="enable_expiry_opcode", value="true"))
    s.call(
        DcpStreamRequest(
            opaque=7,
            vbucket=0,
            flags=0,
            start_seqno=0,
            end_seqno=2**64 - 1,
            vbucket_uuid=0,
            snap_start_seqno=0,
            snap_end_seqno=0,
        )
    )
    return s


def test_the_expiry_pager_streams_an_expiration_or_a_deletion_as_negotiated() -> None:
    bucket = Bucket("default", 1, seed=3, clock=VirtualClock(T0))
    bucket.set("ttl", "{}", expiry=int(T0) + 30)
    node = Node(bucket=bucket, users={"Administrator": "password"})
    with_opcode = _stream(node, bucket, expiry_opcode=True)
    plain = _stream(node, bucket, expiry_opcode=False)
    bucket.advance_clock(T0 + 600)
    got = with_opcode.read()
    expired = [m for m in got if isinstance(m, Expiration)]
    assert [m.key for m in expired] == [b"ttl"]
    assert expired[0].delete_time == int(T0) + 30
    deleted = [m for m in plain.read() if isinstance(m, Deletion | Expiration)]
    assert [(type(m), m.key) for m in deleted] == [(Deletion, b"ttl")]


def _disk_bucket() -> Bucket:
    """30 documents of 20 kB in vbucket 0, only on disk: a backfill of 600 kB."""
    bucket = Bucket("default", 1, seed=1, clock=VirtualClock(T0))
    for i in range(30):
        bucket.set(f"k{i}", b"v" * 20_000, vbucket=0)
    bucket.checkpoint(0)
    bucket.persist(0)
    return bucket


def _held_backfill(buffer_size: int, version: str = "8.0") -> tuple[Session, Bucket, list[object]]:
    bucket = _disk_bucket()
    node = Node(bucket=bucket, users={"Administrator": "password"}, profile=PROFILES[version])
    s = Session(bucket, node=node, features=())
    s.open_dcp(buffer_size=buffer_size)
    s.read()
    sent = s.call(
        DcpStreamRequest(
            opaque=7,
            vbucket=0,
            flags=0,
            start_seqno=0,
            end_seqno=2**64 - 1,
            vbucket_uuid=0,
            snap_start_seqno=0,
            snap_end_seqno=0,
        )
    )
    return s, bucket, [*sent, *s.read()]


def _advance(s: Session, bucket: Bucket, seconds: float) -> int:
    moved = bucket.advance_clock(bucket.clock() + seconds)
    return s.node.steps.end_idle_backfills(moved.start, moved.end)


def test_a_backfill_held_by_a_full_window_for_the_idle_limit_ends_slow() -> None:
    s, bucket, sent = _held_backfill(buffer_size=50_000)
    assert 0 < len([m for m in sent if isinstance(m, Mutation)]) < 30  # the window is full
    (stream,) = list(s.conn.streams)
    assert stream.backfill_running
    assert _advance(s, bucket, 600) == 0  # 10 minutes: under the 720 s limit
    StepRunner(s.node).apply_now([steps.AdvanceClock(seconds=120)])  # 12 minutes idle
    assert not stream.alive
    s.send(DcpBufferAck(opaque=0, nbytes=1 << 20).encode())  # the consumer reads again
    tail = s.read()
    ends = [m for m in tail if isinstance(m, StreamEnd)]
    assert [e.reason for e in ends] == [StreamEndReason.TOO_SLOW]
    assert not [m for m in tail if isinstance(m, Mutation)]  # its queued items dropped


@pytest.mark.parametrize("version", ["7.0", "7.2", "7.6"])
def test_before_8_0_an_idle_backfill_waits_for_its_consumer(version: str) -> None:
    """MB-62703 (kv_engine 57b242f0e, first in v8.0.0) added the idle limit: an older
    node never ends the backfill; it resumes when the consumer reads again."""
    s, bucket, sent = _held_backfill(buffer_size=50_000, version=version)
    (stream,) = list(s.conn.streams)
    assert _advance(s, bucket, 30 * 86_400) == 0  # a month idle
    StepRunner(s.node).apply_now([steps.AdvanceClock(seconds=3600)])
    assert stream.alive
    assert stream.backfill_running
    for _ in range(20):
        s.send(DcpBufferAck(opaque=0, nbytes=1 << 20).encode())  # the consumer reads again
        sent += s.read()
    assert len([m for m in sent if isinstance(m, Mutation)]) == 30
    assert not [m for m in sent if isinstance(m, StreamEnd)]


def test_a_backfill_that_progresses_between_moves_is_not_idle() -> None:
    s, bucket, _sent = _held_backfill(buffer_size=50_000)
    assert _advance(s, bucket, 600) == 0
    s.send(DcpBufferAck(opaque=0, nbytes=50_000).encode())
    assert [m for m in s.read() if isinstance(m, Mutation)]  # progress at the clock's time
    assert _advance(s, bucket, 600) == 0  # 10 minutes since that progress
    assert _advance(s, bucket, 120) == 1


def test_a_backfill_its_consumer_reads_is_never_slow() -> None:
    s, bucket, sent = _held_backfill(buffer_size=0)  # no flow control: nothing holds it
    assert _advance(s, bucket, 30 * 86_400) == 0
    sent += s.read()
    assert len([m for m in sent if isinstance(m, Mutation)]) == 30
    assert not [m for m in sent if isinstance(m, StreamEnd)]
