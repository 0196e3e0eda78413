from __future__ import annotations

import pytest

from mockdcp import RemoteProtocolError
from mockdcp.protocol import decode_leb128, encode_leb128


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, "00"),
        (8, "08"),
        (0x7F, "7f"),
        (0x80, "8001"),
        (0x3FFF, "ff7f"),
        (0x4000, "808001"),
        (0xFFFFFFFF, "ffffffff0f"),
    ],
)
def test_wire_4_table_round_trips(value: int, wire: str) -> None:
    assert encode_leb128(value) == bytes.fromhex(wire)
    assert decode_leb128(bytes.fromhex(wire)) == (value, len(wire) // 2)


def test_decode_starts_at_offset_and_returns_next_offset() -> None:
    assert decode_leb128(b"xx\x80\x01doc", 2) == (0x80, 4)


def test_decode_stops_at_first_byte_without_continuation_bit() -> None:
    assert decode_leb128(b"\x08doc1") == (8, 1)


@pytest.mark.parametrize("wire", ["", "80", "ff ff", "ff ff ff ff"])
def test_truncated_number_is_rejected_naming_the_key(wire: str) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_leb128(bytes.fromhex(wire))
    assert info.value.field == "key"


def test_more_than_five_bytes_is_rejected() -> None:
    with pytest.raises(RemoteProtocolError, match="longer than 5"):
        decode_leb128(bytes.fromhex("8080808080 01"))


def test_value_beyond_u32_is_rejected() -> None:
    with pytest.raises(RemoteProtocolError, match="exceeds a u32"):
        decode_leb128(bytes.fromhex("ffffffff1f"))


@pytest.mark.parametrize("wire", ["8100", "808000", "ff8000"])
def test_non_canonical_encoding_is_rejected(wire: str) -> None:
    with pytest.raises(RemoteProtocolError, match="non-canonical") as info:
        decode_leb128(bytes.fromhex(wire))
    assert info.value.field == "key"


@pytest.mark.parametrize("value", [-1, 0x1_0000_0000])
def test_encode_refuses_values_outside_u32(value: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        encode_leb128(value)
