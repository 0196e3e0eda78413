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
#: nru (wire.md §8.9).
_MUTATION = struct.Struct(">QQIIIHB")
#: DCP_DELETION V1 extras (18): by-seqno, rev-seqno, nmeta (wire.md §8.10).
_DELETION_V1 = struct.Struct(">QQH")


def _doc_key(key: bytes, collection_id: int | None) -> bytes:
    """Key on the wire: LEB128 collection id + key when collections are on (wire.md §4)."""
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

    This is the form the producer caches per item and patches per stream (design.md
    performance rules); it must equal what the message classes encode, which the tests
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
    """The LEB128 prefix of a key in ``collection_id`` (wire.md §4)."""
    return _LEB_SMALL[collection_id] if collection_id < 0x80 else encode_leb128(collection_id)
