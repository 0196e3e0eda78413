"""The document messages' extras layouts, and the one-pack encoder of the hot path.

Kept apart from ``_messages`` (whose attrs classes take a while to create) so that the
bucket model can encode an item's frame when it is written without importing every
message class: ``mockdcp serve`` is ready sooner. ``_messages`` uses the same layouts.
"""

from __future__ import annotations

import struct

from mockdcp.protocol._enums import Magic, Opcode
from mockdcp.protocol._leb128 import encode_leb128

#: DCP_MUTATION extras (31): by-seqno, rev-seqno, flags, expiration, lock time, nmeta,
#: nru (kv_engine ``docs/dcp/documentation/commands/mutation.md``).
_MUTATION = struct.Struct(">QQIIIHB")
#: DCP_DELETION V1 extras (18): by-seqno, rev-seqno, nmeta (kv_engine
#: ``docs/dcp/documentation/commands/deletion.md``).
_DELETION_V1 = struct.Struct(">QQH")


def _doc_key(key: bytes, collection_id: int | None) -> bytes:
    """Key on the wire: LEB128 collection id + key when collections are on (kv_engine
    ``docs/Collections.md``)."""
    return key if collection_id is None else encode_leb128(collection_id) + key


# -- the hot path ---------------------------------------------------------------------

#: Header + mutation extras in one pack: magic, opcode, key length, extras length,
#: datatype, vbucket, body, opaque, cas, then the 31 bytes of _MUTATION.
MUTATION_FRAME = struct.Struct(">BBHBBHIIQ" + _MUTATION.format[1:])
_DELETION_V1_FRAME = struct.Struct(">BBHBBHIIQ" + _DELETION_V1.format[1:])
_LEB_SMALL = [bytes((i,)) for i in range(0x80)]


def encode_document_frame(
    *,
    vbucket: int,
    cas: int,
    by_seqno: int,
    rev_seqno: int,
    key: bytes,
    collection_id: int | None,
    value: bytes,
    datatype: int,
    flags: int = 0,
    expiration: int = 0,
    deleted: bool = False,
) -> bytes:
    """The bytes of ``Mutation(...)`` (or of a V1 ``Deletion`` when ``deleted``) with
    opaque 0 and no stream-id, built with one ``struct.pack``.

    This is the form the producer caches per item and patches per stream
    (docs/performance.md); it must equal what the message classes encode, which the tests
    check for arbitrary fields.
    """
    if collection_id is None:
        k = key
    elif collection_id < 0x80:
        k = _LEB_SMALL[collection_id] + key
    else:
        k = _doc_key(key, collection_id)
    if deleted:
        body = _DELETION_V1.size + len(k) + len(value)
        head = _DELETION_V1_FRAME.pack(
            Magic.REQUEST,
            Opcode.DCP_DELETION,
            len(k),
            _DELETION_V1.size,
            datatype,
            vbucket,
            body,
            0,
            cas,
            by_seqno,
            rev_seqno,
            0,
        )
    else:
        body = _MUTATION.size + len(k) + len(value)
        head = MUTATION_FRAME.pack(
            Magic.REQUEST,
            Opcode.DCP_MUTATION,
            len(k),
            _MUTATION.size,
            datatype,
            vbucket,
            body,
            0,
            cas,
            by_seqno,
            rev_seqno,
            flags,
            expiration,
            0,
            0,
            0,
        )
    return head + k + value


def document_head(
    *,
    vbucket: int,
    cas: int,
    by_seqno: int,
    rev_seqno: int,
    key_length: int,
    value_length: int,
    datatype: int,
    flags: int = 0,
    expiration: int = 0,
    deleted: bool = False,
) -> bytes:
    """The header and extras of ``encode_document_frame`` (opaque 0) for a key on the
    wire (collection prefix included) and a value of these lengths."""
    if deleted:
        return _DELETION_V1_FRAME.pack(
            Magic.REQUEST,
            Opcode.DCP_DELETION,
            key_length,
            _DELETION_V1.size,
            datatype,
            vbucket,
            _DELETION_V1.size + key_length + value_length,
            0,
            cas,
            by_seqno,
            rev_seqno,
            0,
        )
    return MUTATION_FRAME.pack(
        Magic.REQUEST,
        Opcode.DCP_MUTATION,
        key_length,
        _MUTATION.size,
        datatype,
        vbucket,
        _MUTATION.size + key_length + value_length,
        0,
        cas,
        by_seqno,
        rev_seqno,
        flags,
        expiration,
        0,
        0,
        0,
    )


def collection_prefix(collection_id: int) -> bytes:
    """The LEB128 prefix of a key in ``collection_id`` (kv_engine ``docs/Collections.md``)."""
    return _LEB_SMALL[collection_id] if collection_id < 0x80 else encode_leb128(collection_id)


# -- system events (kv_engine docs/dcp/documentation/commands/system_event.md) ----------

#: DCP_SYSTEM_EVENT extras (13): by-seqno, event id, version (kv_engine
#: ``docs/dcp/documentation/commands/system_event.md``, "Extra data").
SYSTEM_EVENT_EXTRAS = struct.Struct(">QIB")
_SYSTEM_EVENT_FRAME = struct.Struct(">BBHBBHIIQ" + SYSTEM_EVENT_EXTRAS.format[1:])
#: DCP_SEQNO_ADVANCED extras (8): the seqno (kv_engine docs/dcp seqno-advanced.md).
_SEQNO_ADVANCED_FRAME = struct.Struct(">BBHBBHIIQQ")
#: DCP_SNAPSHOT_MARKER V1 extras (20): start, end, u32 flags (kv_engine
#: ``docs/dcp/documentation/commands/snapshot-marker.md``)
MARKER_V1_EXTRAS = struct.Struct(">QQI")
_MARKER_V1_FRAME = struct.Struct(">BBHBBHIIQ" + MARKER_V1_EXTRAS.format[1:])


def encode_system_event_frame(
    *, vbucket: int, cas: int, by_seqno: int, event: int, version: int, key: bytes, value: bytes
) -> bytes:
    """The bytes of ``SystemEvent(...)`` with opaque 0 and no stream-id, in one pack: the
    key is the bare collection or scope name (never LEB128-prefixed), datatype 0."""
    extras = SYSTEM_EVENT_EXTRAS.size
    head = _SYSTEM_EVENT_FRAME.pack(
        Magic.REQUEST,
        Opcode.DCP_SYSTEM_EVENT,
        len(key),
        extras,
        0,
        vbucket,
        extras + len(key) + len(value),
        0,
        cas,
        by_seqno,
        event,
        version,
    )
    return head + key + value


def encode_snapshot_marker_v1_frame(
    *, opaque: int, vbucket: int, start_seqno: int, end_seqno: int, flags: int
) -> bytes:
    """The bytes of a V1 ``SnapshotMarker(...)`` without a stream-id, in one pack: the
    marker before most snapshots a stream sends (the message's ``encode`` made its
    parts and a frame of them, about 5 µs a stream)."""
    return _MARKER_V1_FRAME.pack(
        Magic.REQUEST,
        Opcode.DCP_SNAPSHOT_MARKER,
        0,
        MARKER_V1_EXTRAS.size,
        0,
        vbucket,
        MARKER_V1_EXTRAS.size,
        opaque,
        0,
        start_seqno,
        end_seqno,
        flags,
    )


def encode_seqno_advanced_frame(*, vbucket: int, by_seqno: int) -> bytes:
    """The bytes of ``SeqnoAdvanced(...)`` with opaque 0 and no stream-id."""
    return _SEQNO_ADVANCED_FRAME.pack(
        Magic.REQUEST, Opcode.DCP_SEQNO_ADVANCED, 0, 8, 0, vbucket, 8, 0, 0, by_seqno
    )


# -- reading the seqno a stream frame carries ---------------------------------------------

_U64 = struct.Struct(">Q")
#: opcodes whose extras start with the by-seqno (kv_engine
#: ``include/mcbp/protocol/dcp_*`` payload layouts): mutation, deletion, expiration,
#: system event, seqno-advanced and prepare.
_SEQNO_FIRST = frozenset(
    {
        Opcode.DCP_MUTATION,
        Opcode.DCP_DELETION,
        Opcode.DCP_EXPIRATION,
        Opcode.DCP_SYSTEM_EVENT,
        Opcode.DCP_SEQNO_ADVANCED,
        Opcode.DCP_PREPARE,
    }
)
#: opcodes whose extras are the prepared seqno, then their own (commit, abort)
_SEQNO_SECOND = frozenset({Opcode.DCP_COMMIT, Opcode.DCP_ABORT})
#: what ``stream_frame_seqno`` gives a frame that belongs after every seqno (STREAM_END)
AFTER_ALL_SEQNOS = 1 << 64


def stream_item_seqno(buf: bytes | bytearray | memoryview, offset: int) -> int | None:
    """The by-seqno of an item frame (mutation, deletion, expiration, system event,
    seqno-advanced, prepare; a commit's or an abort's own seqno) at ``offset``; None for
    any other frame."""
    opcode = buf[offset + 1]
    if opcode in _SEQNO_FIRST:
        at = 0
    elif opcode in _SEQNO_SECOND:
        at = 8
    else:
        return None
    framing = buf[offset + 2] if buf[offset] == Magic.ALT_REQUEST else 0
    return int(_U64.unpack_from(buf, offset + 24 + framing + at)[0])


def stream_frame_seqno(buf: bytes | bytearray | memoryview, offset: int) -> int:
    """The seqno a producer's stream frame at ``offset`` of ``buf`` stands at: an item's
    by-seqno (a commit's or an abort's own, not its prepare's), a snapshot marker's
    start seqno (V1 extras, or the V2.x value), and ``AFTER_ALL_SEQNOS`` for STREAM_END
    and anything else. Frames with the stream-id
    frame info (magic 0x08) have their framing extras skipped."""
    magic, opcode = buf[offset], buf[offset + 1]
    if magic == Magic.ALT_REQUEST:
        framing, key_len = buf[offset + 2], buf[offset + 3]
    else:
        framing, key_len = 0, (buf[offset + 2] << 8) | buf[offset + 3]
    extras_at = offset + 24 + framing
    if opcode in _SEQNO_FIRST:
        return int(_U64.unpack_from(buf, extras_at)[0])
    if opcode in _SEQNO_SECOND:
        return int(_U64.unpack_from(buf, extras_at + 8)[0])
    if opcode == Opcode.DCP_SNAPSHOT_MARKER:
        extras_len = buf[offset + 4]
        at = extras_at if extras_len == 20 else extras_at + extras_len + key_len
        return int(_U64.unpack_from(buf, at)[0])
    return AFTER_ALL_SEQNOS
