from __future__ import annotations

from mockdcp.model import Bucket
from mockdcp.protocol import (
    DcpGetFailoverLog,
    DcpStreamRequest,
    ObserveSeqno,
    ObserveSeqnoResult,
    Response,
    StreamEnd,
    StreamEndReason,
)

from ._session import Session


def bucket() -> Bucket:
    return Bucket("default", 2, seed=5, clock=lambda: 1_700_000_000.0)


def stream_request(vb: int, uuid: int) -> DcpStreamRequest:
    return DcpStreamRequest(
        opaque=7,
        vbucket=vb,
        flags=0,
        start_seqno=0,
        end_seqno=2**64 - 1,
        vbucket_uuid=uuid,
        snap_start_seqno=0,
        snap_end_seqno=0,
    )


def streaming_session(b: Bucket, buffer_size: int = 0) -> tuple[Session, int]:
    for i in range(5):
        b.set(f"k{i}", b"{}", vbucket=0)
    b.persist()
    s = Session(b)
    s.open_dcp(buffer_size)
    uuid = b.vbucket(0).failover.newest_uuid
    s.call(stream_request(0, uuid))
    return s, uuid


def test_failover_queues_stream_end_ahead_of_a_later_observe_seqno() -> None:
    b = bucket()
    s, old_uuid = streaming_session(b)
    b.flusher.pause()
    b.set("lost", b"{}", vbucket=0)
    b.failover(0)
    s.send(ObserveSeqno(opaque=99, vbucket=0, vbucket_uuid=old_uuid).encode())
    out = s.read()
    ends = [i for i, m in enumerate(out) if isinstance(m, StreamEnd)]
    answer = next(i for i, m in enumerate(out) if isinstance(m, Response) and m.opaque == 99)
    assert ends
    assert ends[0] < answer
    end = out[ends[0]]
    assert isinstance(end, StreamEnd)
    assert end.reason == StreamEndReason.STATE_CHANGED
    reply = out[answer]
    assert isinstance(reply, Response)
    result = ObserveSeqnoResult.decode(reply.value)
    assert result.vbucket_uuid != old_uuid  # the new branch, seen only after the end


def test_stream_end_after_failover_is_sent_even_when_the_flow_window_is_full() -> None:
    b = bucket()
    s, _ = streaming_session(b, buffer_size=1)
    b.failover(0, lose_unpersisted=False)
    s.send(DcpGetFailoverLog(opaque=42, vbucket=0).encode())
    out = s.read()
    kinds = [type(m).__name__ for m in out]
    assert "StreamEnd" in kinds
    assert kinds.index("StreamEnd") < kinds.index("Response")


def test_failover_drops_the_old_branch_items_still_queued() -> None:
    b = bucket()
    s, _ = streaming_session(b)
    for i in range(3):
        b.set(f"queued{i}", b"{}", vbucket=0)  # read into the stream queue, not yet sent
    s.conn.on_vbucket_change(0)
    b.failover(0, lose_after=5)
    out = s.read()
    assert not any(getattr(m, "key", b"").startswith(b"queued") for m in out)
    assert [m.reason for m in out if isinstance(m, StreamEnd)] == [StreamEndReason.STATE_CHANGED]
    assert len(s.conn.streams) == 0


def test_failover_leaves_streams_of_other_vbuckets_open() -> None:
    b = bucket()
    s, _ = streaming_session(b)
    s.call(stream_request(1, b.vbucket(1).failover.newest_uuid))
    b.failover(1)
    out = s.read()
    assert [m.vbucket for m in out if isinstance(m, StreamEnd)] == [1]
    assert [(st.vbucket, st.stream_id) for st in s.conn.streams] == [(0, None)]


def test_node_failover_with_disconnect_closes_every_connection() -> None:
    b = bucket()
    s, _ = streaming_session(b)
    s.node.cut_branch(0, disconnect=True)
    assert s.conn.closed
    s.send(ObserveSeqno(opaque=99, vbucket=0, vbucket_uuid=0).encode())
    assert not [m for m in s.read() if isinstance(m, Response)]  # nothing is answered


def test_the_first_observe_seqno_of_a_connection_is_reported_once() -> None:
    """A consumer that polls OBSERVE_SEQNO mitigates rollbacks: the scenario's resume
    expectations read it from the event (the later polls are not reported)."""
    from mockdcp.producer import events as ev

    b = bucket()
    s, uuid = streaming_session(b)
    for opaque in (98, 99):
        s.call(ObserveSeqno(opaque=opaque, vbucket=0, vbucket_uuid=uuid))
    observed = [e for e in s.node.events if isinstance(e, ev.SeqnoObserved)]
    assert [(e.vbucket, e.persisted_seqno, e.kind) for e in observed] == [(0, 5, "seqno_observed")]
