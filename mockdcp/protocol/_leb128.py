"""Unsigned LEB128, the collection-id prefix of DCP document keys (kv_engine
``docs/Collections.md``).

Seven bits per byte, least significant group first; bit 7 says "more bytes follow". A
collection id is a u32, so a valid encoding has 1 to 5 bytes. Decoding refuses anything
longer, anything that leaves the u32 range, a non-canonical encoding (a trailing zero
group such as ``81 00`` for 1, which kv_engine's ``decodeCanonical`` rejects in keys) and a
buffer that ends mid-number; the error names the ``key`` field because the number only
ever appears at the front of a key.
"""

from __future__ import annotations

from mockdcp.protocol._errors import RemoteProtocolError

#: Largest value a DCP LEB128 prefix may carry (collection ids are u32).
LEB128_MAX = 0xFFFFFFFF

#: A u32 needs at most ceil(32 / 7) = 5 groups.
LEB128_MAX_BYTES = 5


def encode_leb128(n: int) -> bytes:
    """Encode ``n`` (0 <= n <= 0xffffffff) as unsigned LEB128 (``docs/Collections.md``,
    "Valid LEB128 encodings").

    Raises ``ValueError`` for a value outside the u32 range.
    """
    if not 0 <= n <= LEB128_MAX:
        raise ValueError(f"LEB128 collection id {n} is outside 0..0xffffffff")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_leb128(buf: bytes | bytearray | memoryview, offset: int = 0) -> tuple[int, int]:
    """Read one unsigned LEB128 number at ``offset``; return ``(value, next_offset)``.

    Raises ``RemoteProtocolError`` (field ``key``) when the buffer ends before the last
    byte, when the encoding is longer than 5 bytes or not canonical, or when the value
    exceeds a u32.
    """
    value = 0
    for i in range(LEB128_MAX_BYTES):
        pos = offset + i
        if pos >= len(buf):
            raise RemoteProtocolError("truncated LEB128 collection id", field="key")
        byte = buf[pos]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if byte == 0 and i > 0:
                raise RemoteProtocolError("non-canonical LEB128 collection id", field="key")
            if value > LEB128_MAX:
                raise RemoteProtocolError("LEB128 collection id exceeds a u32", field="key")
            return value, pos + 1
    raise RemoteProtocolError("LEB128 collection id longer than 5 bytes", field="key")
