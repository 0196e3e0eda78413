"""The KV document commands consumers and SDKs send to a data node, and the values of
their responses.

Sources: kv_engine ``docs/BinaryProtocol.md`` (Get, Set/Add/Replace, Delete, Touch, GAT,
GetMeta), ``docs/SubDocument.md`` (multi-path lookup and mutation encodings),
``daemon/mcbp_validators.cc`` (the shapes), ``include/mcbp/protocol/request.h``
(framing-extras ids), and gocbcore ``memd`` (how a client lays them out).

Keys are kept as sent: on a collection-aware connection they start with the LEB128
collection id (``split_collection``). Flexible framing extras are read into
``durability`` and ``preserve_ttl``; a write with a durability level is a prepare
the mock node commits at once (``mockdcp/model/_documents.py``).
"""

from __future__ import annotations

import enum
import struct
from typing import TYPE_CHECKING, Any, Self

import attrs

from mockdcp.protocol._enums import Opcode
from mockdcp.protocol._frame import iter_frame_infos
from mockdcp.protocol._leb128 import decode_leb128
from mockdcp.protocol._message_base import (
    ALL_DATATYPES,
    Message,
    Need,
    Parts,
    Shape,
    _einval,
)

if TYPE_CHECKING:
    from mockdcp.protocol._frame import Frame

#: request.h ``FrameInfoId``: durability requirement and preserve TTL.
FRAME_INFO_DURABILITY = 1
FRAME_INFO_PRESERVE_TTL = 5

_U32 = struct.Struct(">I")
_STORE_EXTRAS = struct.Struct(">II")
_MUTATION_TOKEN = struct.Struct(">QQ")
_LOOKUP_SPEC = struct.Struct(">BBH")
_MUTATION_SPEC = struct.Struct(">BBHI")
_LOOKUP_RESULT = struct.Struct(">HI")
_MUTATION_RESULT = struct.Struct(">BHI")


class SubdocOpcode(enum.IntEnum):
    """The opcode of one spec inside a multi-path command (``docs/SubDocument.md``)."""

    #: whole document (lookup: GET, mutation: SET_DOC / DELETE_DOC), empty path
    GET_DOC = 0x00
    SET_DOC = 0x01
    DELETE_DOC = 0x04
    GET = 0xC5
    EXISTS = 0xC6
    DICT_ADD = 0xC7
    DICT_UPSERT = 0xC8
    DELETE = 0xC9
    REPLACE = 0xCA
    ARRAY_PUSH_LAST = 0xCB
    ARRAY_PUSH_FIRST = 0xCC
    ARRAY_INSERT = 0xCD
    ARRAY_ADD_UNIQUE = 0xCE
    COUNTER = 0xCF
    GET_COUNT = 0xD2


class PathFlag(enum.IntFlag):
    """Per-spec flags."""

    MKDIR_P = 0x01
    XATTR_PATH = 0x04
    EXPAND_MACROS = 0x10
    BINARY_XATTR = 0x20


class DocFlag(enum.IntFlag):
    """Whole-command flags (the last extras byte of a multi-path command)."""

    MKDOC = 0x01
    ADD = 0x02
    ACCESS_DELETED = 0x04
    CREATE_AS_DELETED = 0x08
    REVIVE_DOCUMENT = 0x10
    REPLICA_READ = 0x20


LOOKUP_OPCODES = frozenset(
    {SubdocOpcode.GET_DOC, SubdocOpcode.GET, SubdocOpcode.EXISTS, SubdocOpcode.GET_COUNT}
)
MUTATION_OPCODES = frozenset(SubdocOpcode) - LOOKUP_OPCODES


def split_collection(key: bytes, collections: bool) -> tuple[int, bytes]:
    """(collection id, document key) of a request key; ``RemoteProtocolError`` (EINVAL,
    field ``key``) when the key is empty or its LEB128 prefix is malformed."""
    if not collections:
        cid, rest = 0, key
    else:
        try:
            cid, used = decode_leb128(key)
        except (ValueError, IndexError):
            raise _einval("malformed LEB128 collection prefix", "key") from None
        rest = key[used:]
    if not 1 <= len(rest) <= 250:
        raise _einval(f"a document key has 1..250 bytes, not {len(rest)}", "key")
    return cid, rest


def _framing(frame: Frame) -> tuple[int, bool]:
    """(durability level or 0, preserve TTL) from the flexible framing extras."""
    level, preserve = 0, False
    for frame_id, data in iter_frame_infos(frame.framing_extras):
        if frame_id == FRAME_INFO_DURABILITY:
            if len(data) not in (1, 3) or not 1 <= data[0] <= 3:
                raise _einval("bad durability requirement", "framing_extras")
            if len(data) == 3 and int.from_bytes(data[1:], "big") in (0, 0xFFFF):
                raise _einval("durability timeout 0 and 0xffff are invalid", "framing_extras")
            level = data[0]
        elif frame_id == FRAME_INFO_PRESERVE_TTL:
            preserve = True
    return level, preserve


@attrs.frozen(kw_only=True)
class DocumentRequest(Message):
    """Base of the document commands: key (as sent), vbucket, CAS, framing extras."""

    SHAPE = Shape(key=Need.NONZERO)

    key: bytes
    vbucket: int = 0
    cas: int = 0
    durability: int = 0
    preserve_ttl: bool = False

    def parts(self) -> Parts:
        return Parts(key=self.key, vbucket=self.vbucket, cas=self.cas)

    @classmethod
    def _common(cls, frame: Frame) -> dict[str, Any]:
        level, preserve = _framing(frame)
        return {
            "opaque": frame.opaque,
            "key": frame.key,
            "vbucket": frame.vbucket,
            "cas": frame.cas,
            "durability": level,
            "preserve_ttl": preserve,
        }

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        return cls(**cls._common(frame))


@attrs.frozen(kw_only=True)
class Get(DocumentRequest):
    """GET: key only; the reply has extras = u32 flags, the value and its datatype."""

    OPCODE = Opcode.GET


@attrs.frozen(kw_only=True)
class Delete(DocumentRequest):
    """DELETE: key, optional CAS; the reply carries the tombstone's CAS."""

    OPCODE = Opcode.DELETE


@attrs.frozen(kw_only=True)
class GetMeta(DocumentRequest):
    """GET_META: key; extras empty or 1 byte (version 1 or 2: add the datatype)."""

    OPCODE = Opcode.GET_META
    SHAPE = Shape(extras=(0, 1), key=Need.NONZERO)

    version: int = 1

    def parts(self) -> Parts:
        return attrs.evolve(super().parts(), extras=bytes((self.version,)))

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        version = frame.extras[0] if frame.extras else 1
        if version not in (1, 2):
            raise _einval(f"GET_META version {version} is not 1 or 2", "extras")
        return cls(version=version, **cls._common(frame))


@attrs.frozen(kw_only=True)
class Touch(DocumentRequest):
    """TOUCH: extras = u32 expiry; GAT (get and touch) has the same request."""

    OPCODE = Opcode.TOUCH
    SHAPE = Shape(extras=(4,), key=Need.NONZERO)

    expiry: int = 0

    def parts(self) -> Parts:
        return attrs.evolve(super().parts(), extras=_U32.pack(self.expiry))

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        (expiry,) = _U32.unpack(frame.extras)
        return cls(expiry=expiry, **cls._common(frame))


@attrs.frozen(kw_only=True)
class GetAndTouch(Touch):
    """GAT: TOUCH that also returns the document as GET does."""

    OPCODE = Opcode.GAT


@attrs.frozen(kw_only=True)
class _Store(DocumentRequest):
    """SET / ADD / REPLACE: extras = u32 flags + u32 expiry, key, value, datatype."""

    SHAPE = Shape(extras=(8,), key=Need.NONZERO, value=Need.ANY, datatypes=ALL_DATATYPES)

    value: bytes = b""
    flags: int = 0
    expiry: int = 0
    datatype: int = 0

    def parts(self) -> Parts:
        return attrs.evolve(
            super().parts(),
            extras=_STORE_EXTRAS.pack(self.flags, self.expiry),
            value=self.value,
            datatype=self.datatype,
        )

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        flags, expiry = _STORE_EXTRAS.unpack(frame.extras)
        fields = cls._common(frame)
        return cls(value=frame.value, flags=flags, expiry=expiry, datatype=frame.datatype, **fields)


@attrs.frozen(kw_only=True)
class Set(_Store):
    """SET: store whatever is there (CAS, when given, must match)."""

    OPCODE = Opcode.SET


@attrs.frozen(kw_only=True)
class Add(_Store):
    """ADD: store only if the document does not exist (KEY_EEXISTS otherwise)."""

    OPCODE = Opcode.ADD


@attrs.frozen(kw_only=True)
class Replace(_Store):
    """REPLACE: store only if the document exists (KEY_ENOENT otherwise)."""

    OPCODE = Opcode.REPLACE


# -- sub-document multi-path commands ------------------------------------------------------


@attrs.frozen
class SubdocSpec:
    """One path operation of a multi-path command."""

    opcode: int
    flags: int
    path: bytes
    value: bytes = b""

    @property
    def xattr(self) -> bool:
        return bool(self.flags & PathFlag.XATTR_PATH)


def _lookup_specs(data: bytes) -> tuple[SubdocSpec, ...]:
    """``docs/SubDocument.md``: each spec = u8 opcode, u8 flags, u16 path length, path."""
    specs, pos = [], 0
    while pos < len(data):
        if pos + _LOOKUP_SPEC.size > len(data):
            raise _einval("truncated lookup spec", "value")
        op, flags, plen = _LOOKUP_SPEC.unpack_from(data, pos)
        pos += _LOOKUP_SPEC.size
        if pos + plen > len(data):
            raise _einval("lookup spec path runs past the value", "value")
        specs.append(SubdocSpec(op, flags, data[pos : pos + plen]))
        pos += plen
    return tuple(specs)


def _mutation_specs(data: bytes) -> tuple[SubdocSpec, ...]:
    """Each spec = u8 opcode, u8 flags, u16 path length, u32 value length, path, value."""
    specs, pos = [], 0
    while pos < len(data):
        if pos + _MUTATION_SPEC.size > len(data):
            raise _einval("truncated mutation spec", "value")
        op, flags, plen, vlen = _MUTATION_SPEC.unpack_from(data, pos)
        pos += _MUTATION_SPEC.size
        if pos + plen + vlen > len(data):
            raise _einval("mutation spec runs past the value", "value")
        path, value = data[pos : pos + plen], data[pos + plen : pos + plen + vlen]
        specs.append(SubdocSpec(op, flags, path, value))
        pos += plen + vlen
    return tuple(specs)


#: mcbp_validators.cc: a multi-path command carries 1..16 specs.
MAX_SPECS = 16


def _check_specs(specs: tuple[SubdocSpec, ...], allowed: frozenset[SubdocOpcode]) -> None:
    if not 1 <= len(specs) <= MAX_SPECS:
        raise _einval(f"a multi-path command has 1..{MAX_SPECS} specs, not {len(specs)}", "value")
    for spec in specs:
        if spec.opcode not in allowed:
            raise _einval(f"sub-document opcode {spec.opcode:#04x} not allowed here", "value")


@attrs.frozen(kw_only=True)
class SubdocMultiLookup(DocumentRequest):
    """SUBDOC_MULTI_LOOKUP: extras empty or 1 byte of doc flags; value = lookup specs."""

    OPCODE = Opcode.SUBDOC_MULTI_LOOKUP
    SHAPE = Shape(extras=(0, 1), key=Need.NONZERO, value=Need.NONZERO)

    specs: tuple[SubdocSpec, ...] = ()
    doc_flags: int = 0

    def parts(self) -> Parts:
        value = b"".join(
            _LOOKUP_SPEC.pack(s.opcode, s.flags, len(s.path)) + s.path for s in self.specs
        )
        extras = bytes((self.doc_flags,)) if self.doc_flags else b""
        return attrs.evolve(super().parts(), extras=extras, value=value)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        specs = _lookup_specs(frame.value)
        _check_specs(specs, LOOKUP_OPCODES)
        doc_flags = frame.extras[0] if frame.extras else 0
        return cls(specs=specs, doc_flags=doc_flags, **cls._common(frame))


@attrs.frozen(kw_only=True)
class SubdocMultiMutation(DocumentRequest):
    """SUBDOC_MULTI_MUTATION: extras = [u32 expiry [u32 user flags]] [u8 doc flags]
    (0, 1, 4, 5, 8 or 9 bytes); value = mutation specs."""

    OPCODE = Opcode.SUBDOC_MULTI_MUTATION
    SHAPE = Shape(extras=(0, 1, 4, 5, 8, 9), key=Need.NONZERO, value=Need.NONZERO)

    specs: tuple[SubdocSpec, ...] = ()
    doc_flags: int = 0
    expiry: int = 0
    user_flags: int | None = None

    def parts(self) -> Parts:
        value = b"".join(
            _MUTATION_SPEC.pack(s.opcode, s.flags, len(s.path), len(s.value)) + s.path + s.value
            for s in self.specs
        )
        extras = b""
        if self.expiry or self.user_flags is not None:
            extras = _U32.pack(self.expiry)
            if self.user_flags is not None:
                extras += _U32.pack(self.user_flags)
        if self.doc_flags:
            extras += bytes((self.doc_flags,))
        return attrs.evolve(super().parts(), extras=extras, value=value)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        specs = _mutation_specs(frame.value)
        _check_specs(specs, MUTATION_OPCODES)
        extras = frame.extras
        doc_flags = extras[-1] if len(extras) % 4 == 1 else 0
        expiry = _U32.unpack_from(extras, 0)[0] if len(extras) >= 4 else 0
        user_flags = _U32.unpack_from(extras, 4)[0] if len(extras) >= 8 else None
        return cls(
            specs=specs,
            doc_flags=doc_flags,
            expiry=expiry,
            user_flags=user_flags,
            **cls._common(frame),
        )


DOCUMENT_REQUESTS: tuple[type[DocumentRequest], ...] = (
    Get,
    Set,
    Add,
    Replace,
    Delete,
    Touch,
    GetAndTouch,
    GetMeta,
    SubdocMultiLookup,
    SubdocMultiMutation,
)

# -- response values -----------------------------------------------------------------------

#: GET_META reply extras: u32 deleted, u32 flags, u32 expiry, u64 rev seqno [, u8 datatype].
_GET_META = struct.Struct(">IIIQ")


def encode_get_meta_extras(
    *, deleted: bool, flags: int, expiry: int, rev_seqno: int, datatype: int | None
) -> bytes:
    """The GET_META reply extras (version 2 adds the datatype byte)."""
    out = _GET_META.pack(int(deleted), flags, expiry, rev_seqno)
    return out if datatype is None else out + bytes((datatype,))


def encode_mutation_token(vbucket_uuid: int, seqno: int) -> bytes:
    """A mutation's reply extras when HELLO MUTATION_SEQNO is on: u64 uuid, u64 seqno."""
    return _MUTATION_TOKEN.pack(vbucket_uuid, seqno)


def encode_lookup_results(results: list[tuple[int, bytes]]) -> bytes:
    """A multi-lookup reply value: per spec u16 status, u32 length, value."""
    return b"".join(_LOOKUP_RESULT.pack(status, len(v)) + v for status, v in results)


def encode_mutation_results(results: list[tuple[int, bytes]]) -> bytes:
    """A multi-mutation success value: (u8 index, u16 status 0, u32 length, value) for
    each spec that returns a value (COUNTER)."""
    return b"".join(_MUTATION_RESULT.pack(i, 0, len(v)) + v for i, v in results)


def encode_mutation_failure(index: int, status: int) -> bytes:
    """A multi-mutation MULTI_PATH_FAILURE value: u8 index, u16 status of the spec."""
    return struct.pack(">BH", index, status)


def decode_lookup_results(data: bytes) -> list[tuple[int, bytes]]:
    """Inverse of ``encode_lookup_results``."""
    out, pos = [], 0
    while pos < len(data):
        status, n = _LOOKUP_RESULT.unpack_from(data, pos)
        pos += _LOOKUP_RESULT.size
        out.append((status, data[pos : pos + n]))
        pos += n
    return out
