"""The stream state machine without sockets: what it queues, piece by piece."""

from __future__ import annotations

from mockdcp.model import Bucket
from mockdcp.producer import StreamRequestDecision
from mockdcp.producer._controls import DcpSettings
from mockdcp.producer._encoder import ItemEncoder
from mockdcp.producer._stream import PIECE_BYTES, Stream
from mockdcp.protocol import Mutation, SnapshotMarker, Status, StreamEnd, StreamEndReason
from tests.producer._session import decode_all

BIG = PIECE_BYTES // 4  # a value size: a batch of 20 such items takes about five pieces


def bucket() -> Bucket:
    return Bucket("default", 1, seed=3, clock=lambda: 1_700_000_000.0)


def open_stream(b: Bucket, *, end_seqno: int = 2**64 - 1, opaque: int = 0xABCD) -> Stream:
    return Stream(
        vb=b.vbucket(0),
        opaque=opaque,
        request=StreamRequestDecision(
            status=Status.SUCCESS,
            stream_id=None,
            start_seqno=0,
            end_seqno=end_seqno,
            snap_start_seqno=0,
            collections=None,
        ),
        encoder=ItemEncoder(DcpSettings(collections=True)),
        cursor_name="test",
    )


def take_chunk(stream: Stream) -> bytes | None:
    """What the connection would send next from this stream (one chunk), or None."""
    if not stream.refill():
        return None
    chunk = stream.chunks.popleft()
    stream.mark_drained()
    return bytes(chunk.buf)


def test_a_batch_larger_than_a_piece_is_queued_piece_by_piece() -> None:
    b = bucket()
    for i in range(20):
        b.set(f"k{i}", b"v" * BIG, vbucket=0)
    stream = open_stream(b)
    chunks = []
    while (chunk := take_chunk(stream)) is not None:
        chunks.append(chunk)
    # the marker, then several pieces none much over PIECE_BYTES
    assert len(chunks) > 3
    assert all(len(c) <= PIECE_BYTES + BIG + 100 for c in chunks)
    messages = decode_all(b"".join(chunks))
    marker = messages[0]
    assert isinstance(marker, SnapshotMarker)
    assert (marker.start_seqno, marker.end_seqno) == (0, 20)
    mutations = [m for m in messages if isinstance(m, Mutation)]
    assert [m.by_seqno for m in mutations] == list(range(1, 21))
    assert {m.opaque for m in messages} == {0xABCD}
    assert stream.queue.items_sent == 20
    assert stream.last_sent_seqno == 20


def test_writes_between_pieces_do_not_take_items_out_of_the_snapshot_being_sent() -> None:
    """De-duplication in the open checkpoint while a batch is half sent: the snapshot
    already announced must still carry every item it had when read, or the consumer
    would hold an inconsistent state at the snapshot's end."""
    b = bucket()
    for i in range(20):
        b.set(f"k{i}", b"v" * BIG, vbucket=0)
    stream = open_stream(b)
    sent = [take_chunk(stream), take_chunk(stream)]  # the marker and the first piece
    for i in range(20):  # replace every key: the open checkpoint drops the old versions
        b.set(f"k{i}", b"w" * 10, vbucket=0)
    while (chunk := take_chunk(stream)) is not None:
        sent.append(chunk)
    messages = decode_all(b"".join(c for c in sent if c is not None))
    markers = [m for m in messages if isinstance(m, SnapshotMarker)]
    mutations = [m for m in messages if isinstance(m, Mutation)]
    assert [(m.start_seqno, m.end_seqno) for m in markers] == [(0, 20), (21, 40)]
    assert [m.by_seqno for m in mutations] == list(range(1, 41))


def test_stream_end_follows_the_last_piece() -> None:
    b = bucket()
    for i in range(20):
        b.set(f"k{i}", b"v" * BIG, vbucket=0)
    stream = open_stream(b, end_seqno=20)
    sent = []
    while (chunk := take_chunk(stream)) is not None:
        sent.append(chunk)
    messages = decode_all(b"".join(sent))
    assert isinstance(messages[-1], StreamEnd)
    assert messages[-1].reason == StreamEndReason.OK
    assert sum(isinstance(m, Mutation) for m in messages) == 20


def test_ending_a_stream_mid_batch_sends_the_rest_of_the_batch_first() -> None:
    b = bucket()
    for i in range(20):
        b.set(f"k{i}", b"v" * BIG, vbucket=0)
    stream = open_stream(b)
    sent = [take_chunk(stream), take_chunk(stream)]
    stream.end(StreamEndReason.CLOSED)
    while (chunk := take_chunk(stream)) is not None:
        sent.append(chunk)
    messages = decode_all(b"".join(c for c in sent if c is not None))
    assert sum(isinstance(m, Mutation) for m in messages) == 20
    assert isinstance(messages[-1], StreamEnd)
    assert messages[-1].reason == StreamEndReason.CLOSED


def test_a_vbucket_reset_mid_batch_discards_the_rest() -> None:
    """The connection ends a stream whose vbucket the change feed says was reset so
    (``StreamScheduler.end_reset_streams``; through a connection:
    ``test_failover_order``)."""
    b = bucket()
    for i in range(20):
        b.set(f"k{i}", b"v" * BIG, vbucket=0)
    stream = open_stream(b)
    sent = [take_chunk(stream), take_chunk(stream)]
    b.restart(0)
    stream.end(StreamEndReason.STATE_CHANGED, discard_queue=True)
    while (chunk := take_chunk(stream)) is not None:
        sent.append(chunk)
    messages = decode_all(b"".join(c for c in sent if c is not None))
    assert sum(isinstance(m, Mutation) for m in messages) < 20
    assert isinstance(messages[-1], StreamEnd)
    assert messages[-1].reason == StreamEndReason.STATE_CHANGED


def test_a_backfill_is_queued_in_pieces_then_the_stream_goes_on_in_memory() -> None:
    b = bucket()
    for i in range(20):
        b.set(f"k{i}", b"v" * BIG, vbucket=0)
    b.checkpoint(0)
    b.persist(0)  # the closed checkpoint is expelled: seqnos 1-20 are only on disk
    b.set("after", b"x", vbucket=0)
    stream = open_stream(b)
    chunks = []
    while (chunk := take_chunk(stream)) is not None:
        chunks.append(chunk)
    assert stream.backfills == 1
    assert len(chunks) > 4
    messages = decode_all(b"".join(chunks))
    markers = [m for m in messages if isinstance(m, SnapshotMarker)]
    assert [(m.start_seqno, m.end_seqno) for m in markers] == [(0, 20), (21, 21)]
    assert [m.by_seqno for m in messages if isinstance(m, Mutation)] == list(range(1, 22))
    assert {m.opaque for m in messages} == {0xABCD}


def test_a_second_request_for_a_live_stream_is_refused_an_ended_one_replaced() -> None:
    """kv_engine ``DcpProducer::streamRequest`` (``engines/ep/src/dcp/producer.cc``):
    KEY_EEXISTS when the connection's stream for (vbucket, sid) is active; one that is
    over (its STREAM_END queued, not yet read, or sent) is replaced by the new one."""
    from mockdcp.protocol import DcpStreamRequest, Response
    from tests.producer._session import Session

    b = bucket()
    b.set("k1", b'{"v":1}')
    session = Session(b)
    session.open_dcp()

    def ask(opaque: int, end_seqno: int = 2**64 - 1) -> list[int]:
        request = DcpStreamRequest(
            opaque=opaque,
            vbucket=0,
            flags=0,
            start_seqno=0,
            end_seqno=end_seqno,
            vbucket_uuid=0,
            snap_start_seqno=0,
            snap_end_seqno=0,
        )
        return [r.status for r in session.call(request) if isinstance(r, Response)]

    assert ask(1) == [Status.SUCCESS]
    assert ask(2) == [Status.KEY_EEXISTS]  # live: refused, the stream goes on
    stream = session.conn.streams.get(0, None)
    assert stream is not None
    assert stream.alive
    stream.end(StreamEndReason.CLOSED)  # ending: its STREAM_END queued, not read
    assert ask(3) == [Status.SUCCESS]
    assert session.conn.streams.get(0, None) is not stream
    replaced = session.conn.streams.get(0, None)
    assert replaced is not None
    replaced.end(StreamEndReason.OK)
    assert ask(4) == [Status.SUCCESS]  # ended (its end seqno reached): replaced
