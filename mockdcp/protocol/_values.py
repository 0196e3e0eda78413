"""Value helpers: bodies that are not a message of their own.

Response values (failover log, rollback seqno, all-vb seqnos, HELLO features, id lookups,
OBSERVE_SEQNO), system-event values of versions 0 and 1 (kv_engine
``docs/dcp/documentation/commands/system_event.md``; version 2 in ``_flatbuffers``) and the
xattr section (kv_engine ``docs/Document.md``, "XAttr"). Every decoder raises
``RemoteProtocolError`` with status EINVAL naming the part of the frame at fault
(``value`` or ``extras``).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Self

import attrs

from mockdcp.protocol._enums import Datatype, Status, SystemEventType
from mockdcp.protocol._errors import RemoteProtocolError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mockdcp.protocol._flatbuffers import FlatBuffersEvent


def _einval(message: str, field: str) -> RemoteProtocolError:
    return RemoteProtocolError(message, status=Status.EINVAL, field=field)


# -- response values ---------------------------------------------------------------------

_FAILOVER_ENTRY = struct.Struct(">QQ")
_VB_SEQNO = struct.Struct(">HQ")


def _whole_records(data: bytes, layout: struct.Struct, what: str) -> None:
    """``RemoteProtocolError`` unless ``data`` is whole ``layout`` records."""
    if len(data) % layout.size:
        raise _einval(
            f"{what} of {len(data)} bytes is not whole {layout.size}-byte records", "value"
        )


def _records(data: bytes, layout: struct.Struct, what: str) -> list[tuple[int, ...]]:
    _whole_records(data, layout, what)
    return list(layout.iter_unpack(data))


def encode_failover_log(entries: Iterable[tuple[int, int]]) -> bytes:
    """Failover log value: (u64 uuid, u64 seqno) entries, newest first (kv_engine
    ``docs/dcp/documentation/commands/failover-log.md``)."""
    pack = _FAILOVER_ENTRY.pack
    return b"".join([pack(uuid, seqno) for uuid, seqno in entries])


def decode_failover_log(data: bytes) -> list[tuple[int, int]]:
    """Inverse of ``encode_failover_log``; ``RemoteProtocolError`` on a partial entry."""
    return [(uuid, seqno) for uuid, seqno in _records(data, _FAILOVER_ENTRY, "failover log")]


def failover_log_uuids(data: bytes) -> tuple[int, ...]:
    """The vbucket uuids of a failover log value, newest first (each entry's first
    u64), without its seqnos: one unpack of the whole value as u64s, every other one
    taken. ``RemoteProtocolError`` on a partial entry, as ``decode_failover_log``."""
    _whole_records(data, _FAILOVER_ENTRY, "failover log")
    return struct.unpack(f">{len(data) // 8}Q", data)[::2]


def encode_rollback_value(seqno: int) -> bytes:
    """ROLLBACK (0x23) response value: the u64 seqno to roll back to (kv_engine
    ``docs/dcp/documentation/commands/stream-request.md``)."""
    return struct.pack(">Q", seqno)


def decode_rollback_value(data: bytes) -> int:
    """Inverse of ``encode_rollback_value``; ``RemoteProtocolError`` unless 8 bytes."""
    if len(data) != 8:
        raise _einval("rollback value must be a u64", "value")
    return int.from_bytes(data, "big")


def encode_all_vb_seqnos(seqnos: Iterable[tuple[int, int]]) -> bytes:
    """GET_ALL_VB_SEQNOS reply: (u16 vbucket, u64 seqno) records (kv_engine
    ``docs/dcp/documentation/commands/get_seqno.md``)."""
    return b"".join(_VB_SEQNO.pack(vb, seqno) for vb, seqno in seqnos)


def decode_all_vb_seqnos(data: bytes) -> list[tuple[int, int]]:
    """Inverse of ``encode_all_vb_seqnos``; ``RemoteProtocolError`` on a partial record."""
    return [(vb, seqno) for vb, seqno in _records(data, _VB_SEQNO, "all-vb-seqnos value")]


def encode_hello_features(features: Iterable[int]) -> bytes:
    """HELLO request/reply value: u16 feature codes in the given order (kv_engine
    ``docs/BinaryProtocol.md``, "0x1f HELO")."""
    return b"".join(struct.pack(">H", f) for f in features)


def decode_hello_features(data: bytes) -> tuple[int, ...]:
    """Inverse of ``encode_hello_features``; odd length → ``RemoteProtocolError`` EINVAL."""
    if len(data) % 2:
        raise _einval("HELLO value must be of even length", "value")
    return tuple(n for (n,) in struct.iter_unpack(">H", data))


_ID_LOOKUP = struct.Struct(">QI")


def encode_id_lookup_extras(manifest_uid: int, ident: int) -> bytes:
    """GET_COLLECTION_ID / GET_SCOPE_ID reply extras: u64 manifest uid + u32 id."""
    return _ID_LOOKUP.pack(manifest_uid, ident)


def decode_id_lookup_extras(extras: bytes) -> tuple[int, int]:
    """Inverse of ``encode_id_lookup_extras`` → (manifest uid, id)."""
    if len(extras) != _ID_LOOKUP.size:
        raise _einval("id lookup extras must be 12 bytes", "extras")
    uid, ident = _ID_LOOKUP.unpack(extras)
    return uid, ident


_OBSERVE_0 = struct.Struct(">BHQQQ")
_OBSERVE_1 = struct.Struct(">BHQQQQQ")


@attrs.frozen(kw_only=True)
class ObserveSeqnoResult:
    """OBSERVE_SEQNO reply value (as java-dcp-client's ``ObserveSeqnoResponse.java`` and
    gocbcore's ``observecomponent.go`` read it): format 0, or 1 after a failover, which
    adds the old vbucket uuid and the last seqno seen under it."""

    vbucket: int
    vbucket_uuid: int
    persisted_seqno: int
    current_seqno: int
    old_vbucket_uuid: int | None = None
    last_seqno: int | None = None

    def encode(self) -> bytes:
        head = (self.vbucket, self.vbucket_uuid, self.persisted_seqno, self.current_seqno)
        if self.old_vbucket_uuid is None or self.last_seqno is None:
            return _OBSERVE_0.pack(0, *head)
        return _OBSERVE_1.pack(1, *head, self.old_vbucket_uuid, self.last_seqno)

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """Raises ``RemoteProtocolError`` (field ``value``) on a bad format or length."""
        layout = {0: _OBSERVE_0, 1: _OBSERVE_1}.get(data[0] if data else -1)
        if layout is None or len(data) != layout.size:
            raise _einval("not an OBSERVE_SEQNO format 0/1 value", "value")
        _, vb, uuid, persisted, current, *old = layout.unpack(data)
        return cls(
            vbucket=vb,
            vbucket_uuid=uuid,
            persisted_seqno=persisted,
            current_seqno=current,
            old_vbucket_uuid=old[0] if old else None,
            last_seqno=old[1] if old else None,
        )


# -- system-event values (system_event.md, versions 0 and 1) -----------------------------

_COLLECTION_V0 = struct.Struct(">QII")
_COLLECTION_V1 = struct.Struct(">QIII")
_SCOPE_V0 = struct.Struct(">QI")


@attrs.frozen(kw_only=True)
class CollectionEventData:
    """Begin/end collection value: manifest uid, scope id, collection id [, max ttl (v1)]."""

    manifest_uid: int
    scope_id: int
    collection_id: int
    max_ttl: int | None = None

    def encode(self) -> bytes:
        """Version 0 (16 bytes) without ``max_ttl``, version 1 (20 bytes) with it."""
        head = (self.manifest_uid, self.scope_id, self.collection_id)
        if self.max_ttl is None:
            return _COLLECTION_V0.pack(*head)
        return _COLLECTION_V1.pack(*head, self.max_ttl)

    @property
    def version(self) -> int:
        return 0 if self.max_ttl is None else 1


@attrs.frozen(kw_only=True)
class ScopeEventData:
    """Create/drop scope value (version 0): manifest uid, scope id."""

    manifest_uid: int
    scope_id: int

    def encode(self) -> bytes:
        return _SCOPE_V0.pack(self.manifest_uid, self.scope_id)

    @property
    def version(self) -> int:
        return 0


def parse_system_event_value(
    event: int, version: int, value: bytes
) -> CollectionEventData | ScopeEventData | FlatBuffersEvent:
    """Read a system-event value (kv_engine ``docs/dcp/documentation/commands/system_event.md``,
    "Key and Value Data Definition"): versions
    0/1 as ``CollectionEventData``/``ScopeEventData``, version 2 (FlatBuffers) as the
    classes of ``_flatbuffers``.

    Raises ``RemoteProtocolError`` (field ``value``) when the length does not match the
    event and version, or a version 2 value is not a FlatBuffers table of the event.
    """
    if version == 2:
        from mockdcp.protocol._flatbuffers import decode_flatbuffers_value

        return decode_flatbuffers_value(event, value)
    if event in (SystemEventType.CREATE_SCOPE, SystemEventType.DROP_SCOPE):
        if version == 0 and len(value) == _SCOPE_V0.size:
            uid, sid = _SCOPE_V0.unpack(value)
            return ScopeEventData(manifest_uid=uid, scope_id=sid)
    elif event in (SystemEventType.BEGIN_COLLECTION, SystemEventType.END_COLLECTION):
        if version == 0 and len(value) == _COLLECTION_V0.size:
            uid, sid, cid = _COLLECTION_V0.unpack(value)
            return CollectionEventData(manifest_uid=uid, scope_id=sid, collection_id=cid)
        if (
            version == 1
            and len(value) == _COLLECTION_V1.size
            and event == SystemEventType.BEGIN_COLLECTION
        ):
            uid, sid, cid, ttl = _COLLECTION_V1.unpack(value)
            return CollectionEventData(
                manifest_uid=uid, scope_id=sid, collection_id=cid, max_ttl=ttl
            )
    raise _einval(f"system event {event} v{version} value of {len(value)} bytes", "value")


# -- xattrs (kv_engine docs/Document.md, "XAttr") -------------------------------------------


def _as_bytes(s: str | bytes) -> bytes:
    return s.encode() if isinstance(s, str) else s


def encode_xattrs(pairs: Iterable[tuple[str | bytes, str | bytes]], body: bytes) -> bytes:
    """An xattr section (u32 total, then u32 length + ``key\\0value\\0`` per pair) + body.

    Raises ``ValueError`` if a key or value contains a NUL byte.
    """
    blobs = []
    for k, v in pairs:
        key, value = _as_bytes(k), _as_bytes(v)
        if b"\0" in key or b"\0" in value:
            raise ValueError("xattr keys and values cannot contain NUL bytes")
        pair = key + b"\0" + value + b"\0"
        blobs.append(struct.pack(">I", len(pair)) + pair)
    section = b"".join(blobs)
    return struct.pack(">I", len(section)) + section + body


def _xattr_pair(blob: bytes) -> tuple[bytes, bytes]:
    """``key\\0value\\0`` → (key, value); ``RemoteProtocolError`` if malformed."""
    parts = blob.split(b"\0")
    if len(parts) != 3 or parts[2] or not parts[0]:
        raise _einval("malformed xattr pair", "value")
    return parts[0], parts[1]


def split_xattrs(value: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Split a value whose datatype has XATTR into ([(key, value)...], body).

    Raises ``RemoteProtocolError`` (field ``value``) when the section is truncated or a
    pair is malformed.
    """
    if len(value) < 4:
        raise _einval("value too short for an xattr section", "value")
    total = int.from_bytes(value[:4], "big")
    if 4 + total > len(value):
        raise _einval(f"xattr section of {total} bytes runs past the value", "value")
    pairs, pos, end = [], 4, 4 + total
    while pos < end:
        if pos + 4 > end:
            raise _einval("truncated xattr pair length", "value")
        size = int.from_bytes(value[pos : pos + 4], "big")
        if pos + 4 + size > end:
            raise _einval("xattr pair runs past the xattr section", "value")
        pairs.append(_xattr_pair(value[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    return pairs, value[end:]


def strip_user_xattrs(value: bytes, datatype: int) -> tuple[bytes, int]:
    """Keep only system xattrs (keys starting with ``_``, kv_engine
    ``docs/ExtendedAttributes.md``).

    Returns the new value and datatype: XATTR is cleared when no system xattr is left.
    A value without the XATTR bit is returned unchanged.
    """
    if not datatype & Datatype.XATTR:
        return value, datatype
    pairs, body = split_xattrs(value)
    system = [(k, v) for k, v in pairs if k.startswith(b"_")]
    if not system:
        return body, datatype & ~Datatype.XATTR
    return encode_xattrs(system, body), datatype
