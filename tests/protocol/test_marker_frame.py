"""``encode_snapshot_marker_v1_frame``: a V1 snapshot marker without a stream-id packed
at once, as a stream queues the marker of most snapshots; the same bytes as the
message's ``encode`` (kv_engine ``docs/dcp/documentation/commands/snapshot-marker.md``),
which reads them back."""

from __future__ import annotations

from hypothesis import given, strategies as st

from mockdcp.protocol import (
    FrameReader,
    SnapshotFlag,
    SnapshotMarker,
    decode_server_message,
    encode_snapshot_marker_v1_frame,
)

u16 = st.integers(0, 2**16 - 1)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)


@given(opaque=u32, vbucket=u16, start=u64, end=u64, flags=u32)
def test_the_packed_v1_marker_is_the_messages_frame(
    opaque: int, vbucket: int, start: int, end: int, flags: int
) -> None:
    packed = encode_snapshot_marker_v1_frame(
        opaque=opaque, vbucket=vbucket, start_seqno=start, end_seqno=end, flags=flags
    )
    message = SnapshotMarker(
        opaque=opaque, vbucket=vbucket, start_seqno=start, end_seqno=end, flags=flags
    )
    assert packed == message.encode()


def test_a_disk_marker_reads_back_as_the_marker_it_was_made_from() -> None:
    flags = int(SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT)
    wire = encode_snapshot_marker_v1_frame(
        opaque=0xDEADBEEF, vbucket=1023, start_seqno=1, end_seqno=97, flags=flags
    )
    assert len(wire) == 44  # header and 20 bytes of extras
    reader = FrameReader()
    reader.feed(wire)
    frame = reader.next_frame()
    assert frame is not None
    marker = decode_server_message(frame, collections=True)
    assert marker == SnapshotMarker(
        opaque=0xDEADBEEF, vbucket=1023, start_seqno=1, end_seqno=97, flags=flags
    )
