"""The 24-byte memcached binary header, flexible framing extras, and the frame reader.

This module is the one place that knows the header layout (kv_engine ``docs/BinaryProtocol.md``):

    offset 0  magic            u8
           1  opcode           u8
           2  key length       u16   (alt magics: u8 framing-extras length, u8 key length)
           4  extras length    u8
           5  datatype         u8
           6  vbucket / status u16
           8  total body       u32   = framing extras + extras + key + value
          12  opaque           u32
          16  cas              u64

A ``Frame`` is the raw, layout-checked unit; the message classes in ``_messages`` give
frames their meaning. ``FrameReader`` is the incremental parser: feed it arbitrary chunks,
take whole frames out. It never holds more than one incomplete frame plus what was fed,
caps the size it will accept, and reports malformed input as ``RemoteProtocolError`` naming
the offending field. Work is O(bytes fed): each byte is copied into the buffer once and
sliced out once.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol._enums import Magic
from mockdcp.protocol._errors import RemoteProtocolError

if TYPE_CHECKING:
    from collections.abc import Iterator

HEADER = struct.Struct(">BBHBBHIIQ")
ALT_HEADER = struct.Struct(">BBBBBBHIIQ")
HEADER_SIZE = 24

#: Largest frame body a real data node accepts by default (memcached max packet, 30 MiB
#: value plus headroom). A frame announcing more is refused before it is buffered.
DEFAULT_MAX_FRAME_SIZE = 32 * 1024 * 1024

#: Flexible framing id of the DCP stream-id frame; always encoded as tag byte 0x22.
FRAME_INFO_STREAM_ID = 2

#: each magic by its byte (``Magic(byte)`` runs the enum's lookup in Python each frame)
_MAGICS = {int(m): m for m in Magic}


@attrs.frozen(kw_only=True, slots=True)
class Frame:
    """One whole frame, header fields decoded, body split into its four parts.

    ``vbucket_or_status`` is the vbucket of a request and the status of a response.
    """

    magic: Magic
    opcode: int
    datatype: int = 0
    vbucket_or_status: int = 0
    opaque: int = 0
    cas: int = 0
    framing_extras: bytes = b""
    extras: bytes = b""
    key: bytes = b""
    value: bytes = b""

    @property
    def vbucket(self) -> int:
        return self.vbucket_or_status

    @property
    def status(self) -> int:
        return self.vbucket_or_status

    @property
    def size(self) -> int:
        """Bytes on the wire, header included (what flow control charges)."""
        return (
            HEADER_SIZE
            + len(self.framing_extras)
            + len(self.extras)
            + len(self.key)
            + len(self.value)
        )

    def encode(self) -> bytes:
        """The frame's bytes.

        Raises ``ValueError`` when a part does not fit its length field (alt magics hold a
        key of at most 255 bytes and framing extras of at most 255).
        """
        return encode_frame(
            self.magic,
            self.opcode,
            datatype=self.datatype,
            vbucket_or_status=self.vbucket_or_status,
            opaque=self.opaque,
            cas=self.cas,
            framing_extras=self.framing_extras,
            extras=self.extras,
            key=self.key,
            value=self.value,
        )

    def stream_id(self) -> int | None:
        """The DCP stream-id carried in the framing extras, if any."""
        for frame_id, data in iter_frame_infos(self.framing_extras):
            if frame_id == FRAME_INFO_STREAM_ID:
                if len(data) != 2:
                    raise RemoteProtocolError(
                        "stream-id frame info must hold 2 bytes", field="framing_extras"
                    )
                return int.from_bytes(data, "big")
        return None


def encode_frame(
    magic: int,
    opcode: int,
    *,
    datatype: int = 0,
    vbucket_or_status: int = 0,
    opaque: int = 0,
    cas: int = 0,
    framing_extras: bytes = b"",
    extras: bytes = b"",
    key: bytes = b"",
    value: bytes = b"",
) -> bytes:
    """Encode one frame from its parts (the general, not the hot, path)."""
    body = len(framing_extras) + len(extras) + len(key) + len(value)
    if magic in (Magic.ALT_REQUEST, Magic.ALT_RESPONSE):
        if len(key) > 0xFF or len(framing_extras) > 0xFF:
            raise ValueError("alt-magic frames hold at most 255 bytes of key and framing")
        header = ALT_HEADER.pack(
            magic,
            opcode,
            len(framing_extras),
            len(key),
            len(extras),
            datatype,
            vbucket_or_status,
            body,
            opaque,
            cas,
        )
    else:
        if framing_extras:
            raise ValueError(f"magic {magic:#04x} cannot carry framing extras")
        header = HEADER.pack(
            magic, opcode, len(key), len(extras), datatype, vbucket_or_status, body, opaque, cas
        )
    return b"".join((header, framing_extras, extras, key, value))


def stream_id_frame_info(sid: int) -> bytes:
    """Framing extras for a DCP stream-id: tag 0x22 then the u16 id (kv_engine
    ``docs/BinaryProtocol.md``, "ID:2 - DCP stream-ID")."""
    return bytes((0x22,)) + sid.to_bytes(2, "big")


def iter_frame_infos(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Split flexible framing extras into (id, data) pairs.

    The tag byte holds the id in its high nibble and the length in its low one; 15 in
    either means "15 + the next byte" (the id's escape byte comes first).
    Raises ``RemoteProtocolError`` (field ``framing_extras``) on a truncated entry.
    """
    pos = 0
    end = len(data)
    while pos < end:
        tag = data[pos]
        pos += 1
        frame_id = tag >> 4
        length = tag & 0x0F
        if frame_id == 15:
            if pos >= end:
                raise RemoteProtocolError("truncated frame-info id escape", field="framing_extras")
            frame_id += data[pos]
            pos += 1
        if length == 15:
            if pos >= end:
                raise RemoteProtocolError(
                    "truncated frame-info length escape", field="framing_extras"
                )
            length += data[pos]
            pos += 1
        if pos + length > end:
            raise RemoteProtocolError(
                f"frame info {frame_id} claims {length} bytes past the end", field="framing_extras"
            )
        yield frame_id, bytes(data[pos : pos + length])
        pos += length


def parse_header(data: bytes | bytearray | memoryview) -> tuple[Magic, int, int, int, int, int]:
    """Check a 24-byte header; return (magic, framing, key, extras, body, datatype).

    Raises ``RemoteProtocolError`` naming the field that is wrong.
    """
    magic = data[0]
    m = _MAGICS.get(magic)
    if m is None:
        raise RemoteProtocolError(f"unknown magic {magic:#04x}", field="magic")
    if m.has_framing_extras:
        framing, keylen = data[2], data[3]
    else:
        framing, keylen = 0, (data[2] << 8) | data[3]
    extlen = data[4]
    datatype = data[5]
    body = int.from_bytes(data[8:12], "big")
    if framing + extlen + keylen > body:
        raise RemoteProtocolError(
            f"framing ({framing}) + extras ({extlen}) + key ({keylen}) exceed body ({body})",
            field="total_body_length",
        )
    return m, framing, keylen, extlen, body, datatype


class FrameReader:
    """Incremental frame parser: ``feed(chunk)`` then iterate ``frames()``.

    A frame whose announced body exceeds ``max_frame_size`` is refused as soon as its
    header arrives. After a ``RemoteProtocolError`` the reader is poisoned: the stream is
    unsynchronised, so every later call raises the same error.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        self._max = max_frame_size
        self._error: RemoteProtocolError | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise self._error
        self._buf += data

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet form a whole frame (after ``frames()`` ran)."""
        return len(self._buf)

    def take_buffered(self) -> bytearray:
        """The bytes fed and not yet framed, handed over (the reader is empty after):
        for a caller that reads the rest of the stream itself."""
        rest, self._buf = self._buf, bytearray()
        return rest

    def next_frame(self) -> Frame | None:
        """The next whole frame, or ``None`` when more bytes are needed."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        if len(buf) < HEADER_SIZE:
            return None
        try:
            magic, framing, keylen, extlen, body, datatype = parse_header(buf)
            if body > self._max:
                raise RemoteProtocolError(
                    f"frame body of {body} bytes exceeds the {self._max}-byte limit",
                    field="total_body_length",
                )
        except RemoteProtocolError as exc:
            self._error = exc
            raise
        end = HEADER_SIZE + body
        if len(buf) < end:
            return None
        opcode = buf[1]
        vb_or_status, _, opaque, cas = struct.unpack_from(">HIIQ", buf, 6)
        p = HEADER_SIZE
        fe = bytes(buf[p : p + framing])
        p += framing
        ext = bytes(buf[p : p + extlen])
        p += extlen
        key = bytes(buf[p : p + keylen])
        p += keylen
        value = bytes(buf[p:end])
        del buf[:end]
        return Frame(
            magic=magic,
            opcode=opcode,
            datatype=datatype,
            vbucket_or_status=vb_or_status,
            opaque=opaque,
            cas=cas,
            framing_extras=fe,
            extras=ext,
            key=key,
            value=value,
        )

    def frames(self) -> Iterator[Frame]:
        """Every whole frame buffered so far, in order."""
        while (frame := self.next_frame()) is not None:
            yield frame
