from __future__ import annotations

import pytest

from mockdcp import RemoteProtocolError
from mockdcp.protocol import (
    HEADER_SIZE,
    DcpControl,
    Frame,
    FrameReader,
    Magic,
    Noop,
    Opcode,
    StreamEnd,
    encode_frame,
    iter_frame_infos,
    stream_id_frame_info,
)

CONTROL = DcpControl(opaque=3, key="enable_noop", value="true").encode()
END_WITH_SID = StreamEnd(opaque=0x10, vbucket=3, reason=0, stream_id=5).encode()


class TestFrameReader:
    def test_whole_frame_is_returned_with_parts_split(self) -> None:
        reader = FrameReader()
        reader.feed(CONTROL)
        frame = reader.next_frame()
        assert frame == Frame(
            magic=Magic.REQUEST,
            opcode=Opcode.DCP_CONTROL,
            opaque=3,
            key=b"enable_noop",
            value=b"true",
        )
        assert frame.size == len(CONTROL)
        assert reader.next_frame() is None

    def test_byte_at_a_time_gives_the_frame_only_at_the_last_byte(self) -> None:
        reader = FrameReader()
        for byte in CONTROL[:-1]:
            reader.feed(bytes((byte,)))
            assert reader.next_frame() is None
        reader.feed(CONTROL[-1:])
        assert reader.next_frame() is not None
        assert reader.buffered == 0

    def test_several_frames_in_one_chunk_come_out_in_order(self) -> None:
        reader = FrameReader()
        reader.feed(CONTROL + END_WITH_SID + CONTROL[:10])
        frames = list(reader.frames())
        assert [f.opcode for f in frames] == [Opcode.DCP_CONTROL, Opcode.DCP_STREAM_END]
        assert reader.buffered == 10

    def test_alt_magic_frame_carries_framing_extras_and_stream_id(self) -> None:
        reader = FrameReader()
        reader.feed(END_WITH_SID)
        frame = reader.next_frame()
        assert frame is not None
        assert frame.magic is Magic.ALT_REQUEST
        assert frame.framing_extras == bytes.fromhex("220005")
        assert frame.stream_id() == 5
        assert frame.extras == bytes(4)

    def test_frame_announcing_more_than_the_cap_is_refused_from_its_header(self) -> None:
        reader = FrameReader(max_frame_size=1024)
        header = encode_frame(Magic.REQUEST, Opcode.DCP_CONTROL, key=b"k", value=b"v" * 1100)
        reader.feed(header[:HEADER_SIZE])
        with pytest.raises(RemoteProtocolError, match="1024-byte limit") as info:
            reader.next_frame()
        assert info.value.field == "total_body_length"

    def test_frame_at_the_cap_is_accepted(self) -> None:
        reader = FrameReader(max_frame_size=1024)
        reader.feed(encode_frame(Magic.REQUEST, Opcode.DCP_CONTROL, key=b"k", value=b"v" * 1023))
        assert reader.next_frame() is not None

    def test_unknown_magic_is_rejected_naming_the_magic(self) -> None:
        reader = FrameReader()
        reader.feed(bytes((0x42,)) + bytes(23))
        with pytest.raises(RemoteProtocolError) as info:
            reader.next_frame()
        assert info.value.field == "magic"

    def test_extras_and_key_longer_than_the_body_are_rejected(self) -> None:
        reader = FrameReader()
        reader.feed(bytes([0x80, 0x5E, 0, 4, 200, 0, 0, 0]) + (10).to_bytes(4, "big") + bytes(12))
        with pytest.raises(RemoteProtocolError) as info:
            reader.next_frame()
        assert info.value.field == "total_body_length"

    def test_reader_stays_poisoned_after_an_error(self) -> None:
        reader = FrameReader()
        reader.feed(bytes((0x42,)) + bytes(23))
        with pytest.raises(RemoteProtocolError):
            reader.next_frame()
        with pytest.raises(RemoteProtocolError):
            reader.feed(CONTROL)
        with pytest.raises(RemoteProtocolError):
            reader.next_frame()

    def test_short_header_needs_more_data(self) -> None:
        reader = FrameReader()
        reader.feed(CONTROL[:23])
        assert reader.next_frame() is None
        assert reader.buffered == 23


class TestFramingExtras:
    def test_stream_id_frame_info_is_tag_0x22_and_u16(self) -> None:
        assert stream_id_frame_info(0x1234) == bytes.fromhex("221234")
        assert list(iter_frame_infos(bytes.fromhex("221234"))) == [(2, b"\x12\x34")]

    def test_barrier_then_stream_id(self) -> None:
        assert list(iter_frame_infos(bytes.fromhex("00 22 0005"))) == [(0, b""), (2, b"\x00\x05")]

    def test_id_and_length_escapes(self) -> None:
        data = bytes([0xFF, 0x01, 0x01]) + b"x" * 16
        assert list(iter_frame_infos(data)) == [(16, b"x" * 16)]

    @pytest.mark.parametrize("data", ["f0", "0f", "23 0000", "ff 01"])
    def test_truncated_frame_info_is_rejected(self, data: str) -> None:
        with pytest.raises(RemoteProtocolError) as info:
            list(iter_frame_infos(bytes.fromhex(data)))
        assert info.value.field == "framing_extras"

    def test_stream_id_of_wrong_length_is_rejected(self) -> None:
        frame = Frame(
            magic=Magic.ALT_REQUEST, opcode=Opcode.DCP_CLOSE_STREAM, framing_extras=b"\x21\x05"
        )
        with pytest.raises(RemoteProtocolError) as info:
            frame.stream_id()
        assert info.value.field == "framing_extras"

    def test_classic_magic_cannot_carry_framing_extras(self) -> None:
        with pytest.raises(ValueError, match="cannot carry"):
            encode_frame(Magic.REQUEST, Opcode.DCP_NOOP, framing_extras=b"\x00")

    def test_alt_magic_key_is_limited_to_255_bytes(self) -> None:
        with pytest.raises(ValueError, match="255"):
            encode_frame(Magic.ALT_REQUEST, Opcode.DCP_MUTATION, key=b"k" * 256)

    def test_frame_encode_round_trips_through_the_reader(self) -> None:
        reader = FrameReader()
        reader.feed(END_WITH_SID)
        frame = reader.next_frame()
        assert frame is not None
        assert frame.encode() == END_WITH_SID


def test_take_buffered_hands_over_the_bytes_not_yet_framed() -> None:
    whole = Noop(opaque=1).encode()
    second = Noop(opaque=2).encode()
    reader = FrameReader()
    reader.feed(whole + second[:10])
    frame = reader.next_frame()
    assert frame is not None
    assert frame.opaque == 1
    assert reader.next_frame() is None
    assert reader.take_buffered() == bytearray(second[:10])
    assert reader.buffered == 0
