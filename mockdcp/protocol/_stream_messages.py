"""What a producer sends on a DCP connection: the stream messages, the sync-write family,
the cluster-map push, and the system-event builders (kv_engine
``docs/dcp/documentation/commands/*.md``, ``docs/BinaryProtocol.md``). See ``_messages``
for the conventions."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, ClassVar, Self

import attrs

from mockdcp.protocol._document_frame import (
    _DELETION_V1,
    _MUTATION,
    MARKER_V1_EXTRAS as _MARKER_V1,
    _doc_key,
)
from mockdcp.protocol._enums import (
    CLUSTERMAP_CHANGE_NOTIFICATION,
    Datatype,
    Magic,
    Opcode,
    SnapshotMarkerVersion,
    StreamEndReason,
    SystemEventType,
    VBucketState,
)
from mockdcp.protocol._leb128 import decode_leb128
from mockdcp.protocol._message_base import (
    _CONFIG_VERSION,
    ALL_DATATYPES,
    Message,
    Need,
    Parts,
    Shape,
    StreamMessage,
    _einval,
    _enum_or_int,
    _text,
)
from mockdcp.protocol._values import (
    CollectionEventData,
    ScopeEventData,
    parse_system_event_value,
)

if TYPE_CHECKING:
    from mockdcp.protocol._flatbuffers import FlatBuffersEvent
    from mockdcp.protocol._frame import Frame

# -- producer → consumer stream messages (docs/dcp/documentation/commands/) -------------------


_MARKER_V2_0 = struct.Struct(">QQIQQ")
#: The V2.2 list of older kv_engine ``snapshot-marker.md``: V2.0 + purge seqno (44-byte
#: value). Decoded, never encoded.
_MARKER_V2_2_SEED = struct.Struct(">QQIQQQ")
#: kv_engine ``DcpSnapshotMarkerV2_2Value`` (protocol_binary.h): V2.0 + purge seqno +
#: high prepared seqno, 52 bytes. The form mockdcp sends.
_MARKER_V2_2 = struct.Struct(">QQIQQQQ")
_MARKER_VERSION_BYTE = {SnapshotMarkerVersion.V2_0: 0, SnapshotMarkerVersion.V2_2: 2}


@attrs.frozen(kw_only=True)
class SnapshotMarker(StreamMessage):
    """DCP_SNAPSHOT_MARKER (kv_engine ``docs/dcp/documentation/commands/snapshot-marker.md``).

    V1: extras 20 = start, end, u32 flags. V2.x: extras 1 = version byte (0 = V2.0,
    2 = V2.2), fields in the value: start, end, flags, max visible, high completed
    [, purge seqno, high prepared seqno]. Fields a version does not carry decode as 0.
    """

    OPCODE = Opcode.DCP_SNAPSHOT_MARKER
    SHAPE = Shape(extras=(1, 20), value=Need.ANY)

    start_seqno: int
    end_seqno: int
    flags: int
    version: SnapshotMarkerVersion = SnapshotMarkerVersion.V1
    max_visible_seqno: int = 0
    high_completed_seqno: int = 0
    purge_seqno: int = 0
    high_prepared_seqno: int = 0

    def _value(self) -> bytes:
        head = (self.start_seqno, self.end_seqno, self.flags)
        tail = (self.max_visible_seqno, self.high_completed_seqno)
        if self.version is SnapshotMarkerVersion.V2_0:
            return _MARKER_V2_0.pack(*head, *tail)
        return _MARKER_V2_2.pack(*head, *tail, self.purge_seqno, self.high_prepared_seqno)

    def parts(self) -> Parts:
        if self.version is SnapshotMarkerVersion.V1:
            extras = _MARKER_V1.pack(self.start_seqno, self.end_seqno, self.flags)
            return Parts(extras=extras, vbucket=self.vbucket)
        extras = bytes((_MARKER_VERSION_BYTE[self.version],))
        return Parts(extras=extras, value=self._value(), vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        common: dict[str, Any] = {
            "opaque": frame.opaque,
            "vbucket": frame.vbucket,
            "stream_id": frame.stream_id(),
        }
        if len(frame.extras) == 20:
            if frame.value:
                raise _einval("a V1 snapshot marker has no value", "value")
            start, end, flags = _MARKER_V1.unpack(frame.extras)
            return cls(start_seqno=start, end_seqno=end, flags=flags, **common)
        return cls(**_marker_v2_fields(frame.extras[0], frame.value), **common)


#: V2.x value layouts by (version byte, value length), with the fields each carries.
_MARKER_FIELDS = ("start_seqno", "end_seqno", "flags", "max_visible_seqno", "high_completed_seqno")
_MARKER_V2_LAYOUTS: dict[tuple[int, int], tuple[struct.Struct, tuple[str, ...]]] = {
    (0, _MARKER_V2_0.size): (_MARKER_V2_0, _MARKER_FIELDS),
    (2, _MARKER_V2_2_SEED.size): (_MARKER_V2_2_SEED, (*_MARKER_FIELDS, "purge_seqno")),
    (2, _MARKER_V2_2.size): (
        _MARKER_V2_2,
        (*_MARKER_FIELDS, "purge_seqno", "high_prepared_seqno"),
    ),
}


def _marker_v2_fields(version: int, value: bytes) -> dict[str, Any]:
    """Read a V2.x marker value (kv_engine ``dcp_snapshot_marker_validator`` sizes, plus
    the 44-byte V2.2 of older kv_engine ``docs/dcp/documentation/commands/snapshot-marker.md``);
    fields a layout lacks keep their default of 0."""
    if version not in (0, 2):
        raise _einval(f"unsupported snapshot marker version {version}", "extras")
    entry = _MARKER_V2_LAYOUTS.get((version, len(value)))
    if entry is None:
        raise _einval(f"snapshot marker V2.{version} value of {len(value)} bytes", "value")
    layout, names = entry
    fields = dict(zip(names, layout.unpack(value), strict=True))
    kind = SnapshotMarkerVersion.V2_0 if version == 0 else SnapshotMarkerVersion.V2_2
    return {"version": kind, **fields}


def _split_doc_key(frame: Frame, collections: bool) -> tuple[bytes, int | None]:
    """(bare key, collection id or None); the bare key must not be empty."""
    if not collections:
        return frame.key, None
    cid, pos = decode_leb128(frame.key)
    if pos == len(frame.key):
        raise _einval("key holds a collection id but no document key", "key")
    return frame.key[pos:], cid


@attrs.frozen(kw_only=True)
class DocumentMessage(StreamMessage):
    """Fields shared by mutation, deletion and expiration."""

    SHAPE = Shape(key=Need.NONZERO, value=Need.ANY, datatypes=ALL_DATATYPES)

    cas: int = 0
    by_seqno: int
    rev_seqno: int
    key: bytes
    collection_id: int | None = None
    value: bytes = b""
    datatype: int = 0

    def _parts(self, extras: bytes) -> Parts:
        return Parts(
            extras=extras,
            key=_doc_key(self.key, self.collection_id),
            value=self.value,
            datatype=self.datatype,
            vbucket=self.vbucket,
            cas=self.cas,
        )


def _document_fields(frame: Frame, collections: bool) -> dict[str, Any]:
    """The header and key/value fields every ``DocumentMessage`` reads the same way."""
    key, cid = _split_doc_key(frame, collections)
    return {
        "opaque": frame.opaque,
        "vbucket": frame.vbucket,
        "stream_id": frame.stream_id(),
        "cas": frame.cas,
        "key": key,
        "collection_id": cid,
        "value": frame.value,
        "datatype": frame.datatype,
    }


@attrs.frozen(kw_only=True)
class Mutation(DocumentMessage):
    """DCP_MUTATION: extras 31 = by-seqno, rev-seqno, flags, expiration, lock time,
    nmeta (always 0), nru (kv_engine ``docs/dcp/documentation/commands/mutation.md``)."""

    OPCODE = Opcode.DCP_MUTATION
    SHAPE = attrs.evolve(DocumentMessage.SHAPE, extras=(_MUTATION.size,))

    flags: int = 0
    expiration: int = 0
    lock_time: int = 0
    nru: int = 0

    def parts(self) -> Parts:
        return self._parts(
            _MUTATION.pack(
                self.by_seqno,
                self.rev_seqno,
                self.flags,
                self.expiration,
                self.lock_time,
                0,
                self.nru,
            )
        )

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        by_seqno, rev, flags, exp, lock, nmeta, nru = _MUTATION.unpack(frame.extras)
        if nmeta:
            raise _einval("DCP does not carry extended metadata (nmeta must be 0)", "extras")
        return cls(
            by_seqno=by_seqno,
            rev_seqno=rev,
            flags=flags,
            expiration=exp,
            lock_time=lock,
            nru=nru,
            **_document_fields(frame, collections),
        )


_DELETION_V2 = struct.Struct(">QQIB")


@attrs.frozen(kw_only=True)
class Deletion(DocumentMessage):
    """DCP_DELETION (kv_engine ``docs/dcp/documentation/commands/deletion.md``). ``delete_time``
    None ⇒ V1 (extras 18: by-seqno, rev-seqno, nmeta 0); else V2 (extras 21: by-seqno,
    rev-seqno, delete time, 0)."""

    OPCODE = Opcode.DCP_DELETION
    SHAPE = attrs.evolve(DocumentMessage.SHAPE, extras=(_DELETION_V1.size, _DELETION_V2.size))

    delete_time: int | None = None

    def parts(self) -> Parts:
        if self.delete_time is None:
            return self._parts(_DELETION_V1.pack(self.by_seqno, self.rev_seqno, 0))
        return self._parts(_DELETION_V2.pack(self.by_seqno, self.rev_seqno, self.delete_time, 0))

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        common = _document_fields(frame, collections)
        if len(frame.extras) == _DELETION_V2.size:
            by_seqno, rev, delete_time, _ = _DELETION_V2.unpack(frame.extras)
            return cls(by_seqno=by_seqno, rev_seqno=rev, delete_time=delete_time, **common)
        by_seqno, rev, nmeta = _DELETION_V1.unpack(frame.extras)
        if nmeta:
            raise _einval("DCP does not carry extended metadata (nmeta must be 0)", "extras")
        return cls(by_seqno=by_seqno, rev_seqno=rev, **common)


_EXPIRATION = struct.Struct(">QQI")


@attrs.frozen(kw_only=True)
class Expiration(DocumentMessage):
    """DCP_EXPIRATION: extras 20 = by-seqno, rev-seqno, delete time (kv_engine
    ``docs/dcp/documentation/commands/expiration.md``)."""

    OPCODE = Opcode.DCP_EXPIRATION
    SHAPE = attrs.evolve(DocumentMessage.SHAPE, extras=(_EXPIRATION.size,))

    delete_time: int = 0

    def parts(self) -> Parts:
        return self._parts(_EXPIRATION.pack(self.by_seqno, self.rev_seqno, self.delete_time))

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        by_seqno, rev, delete_time = _EXPIRATION.unpack(frame.extras)
        common = _document_fields(frame, collections)
        return cls(by_seqno=by_seqno, rev_seqno=rev, delete_time=delete_time, **common)


@attrs.frozen(kw_only=True)
class StreamEnd(StreamMessage):
    """DCP_STREAM_END: extras u32 reason (kv_engine
    ``docs/dcp/documentation/commands/stream-end.md``); the consumer does not answer."""

    OPCODE = Opcode.DCP_STREAM_END
    SHAPE = Shape(extras=(4,))

    reason: StreamEndReason | int

    def parts(self) -> Parts:
        return Parts(extras=struct.pack(">I", self.reason), vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        reason = _enum_or_int(StreamEndReason, int.from_bytes(frame.extras, "big"))
        return cls(
            opaque=frame.opaque, vbucket=frame.vbucket, stream_id=frame.stream_id(), reason=reason
        )


@attrs.frozen(kw_only=True)
class DcpNoop(Message):
    """DCP_NOOP: producer → consumer, empty; the consumer must answer 0x81 (§8.13)."""

    OPCODE = Opcode.DCP_NOOP


@attrs.frozen(kw_only=True)
class SetVbucketState(Message):
    """DCP_SET_VBUCKET_STATE: extras u8 state 1..4 (takeover streams only, §8.12)."""

    OPCODE = Opcode.DCP_SET_VBUCKET_STATE
    SHAPE = Shape(extras=(1,))

    vbucket: int
    state: VBucketState | int

    def parts(self) -> Parts:
        return Parts(extras=bytes((self.state,)), vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        try:
            state = VBucketState(frame.extras[0])
        except ValueError:
            raise _einval(f"vbucket state {frame.extras[0]} is not 1..4", "extras") from None
        return cls(opaque=frame.opaque, vbucket=frame.vbucket, state=state)


_SYSTEM_EVENT = struct.Struct(">QIB")
#: protocol_binary.h ``isValidEvent``: 2 (flush) is reserved and refused.
_VALID_EVENTS = frozenset({0, 1, 3, 4, 5})


@attrs.frozen(kw_only=True)
class SystemEvent(StreamMessage):
    """DCP_SYSTEM_EVENT: extras 13 = u64 by-seqno, u32 event, u8 version (kv_engine
    ``docs/dcp/documentation/commands/system_event.md``).

    The key (collection or scope name, empty on drops) is never LEB128-prefixed. See
    ``parse_system_event_value`` and the ``encode_*_value`` helpers for the value.
    """

    OPCODE = Opcode.DCP_SYSTEM_EVENT
    SHAPE = Shape(
        extras=(_SYSTEM_EVENT.size,), key=Need.ANY, value=Need.ANY, datatypes=ALL_DATATYPES
    )

    by_seqno: int
    event: int
    version: int
    key: bytes = b""
    value: bytes = b""

    def parts(self) -> Parts:
        extras = _SYSTEM_EVENT.pack(self.by_seqno, self.event, self.version)
        return Parts(extras=extras, key=self.key, value=self.value, vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        by_seqno, event, version = _SYSTEM_EVENT.unpack(frame.extras)
        if event not in _VALID_EVENTS or version > 2:
            raise _einval(f"invalid system event {event} version {version}", "extras")
        return cls(
            opaque=frame.opaque,
            vbucket=frame.vbucket,
            stream_id=frame.stream_id(),
            by_seqno=by_seqno,
            event=SystemEventType(event),
            version=version,
            key=frame.key,
            value=frame.value,
        )

    def data(self) -> CollectionEventData | ScopeEventData | FlatBuffersEvent:
        """The parsed value (versions 0 and 1, or 2 = FlatBuffers; ``system_event.md``)."""
        return parse_system_event_value(self.event, self.version, self.value)


@attrs.frozen(kw_only=True)
class SeqnoAdvanced(StreamMessage):
    """DCP_SEQNO_ADVANCED: extras u64 seqno (collection-aware connections, §8.17)."""

    OPCODE = Opcode.DCP_SEQNO_ADVANCED
    SHAPE = Shape(extras=(8,))

    by_seqno: int

    def parts(self) -> Parts:
        return Parts(extras=struct.pack(">Q", self.by_seqno), vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        seqno = int.from_bytes(frame.extras, "big")
        return cls(
            opaque=frame.opaque, vbucket=frame.vbucket, stream_id=frame.stream_id(), by_seqno=seqno
        )


@attrs.frozen(kw_only=True)
class OsoSnapshot(StreamMessage):
    """DCP_OSO_SNAPSHOT: extras u32 flags, 1 start / 2 end (kv_engine
    ``docs/dcp/documentation/commands/oso_snapshot.md``)."""

    OPCODE = Opcode.DCP_OSO_SNAPSHOT
    SHAPE = Shape(extras=(4,))

    flags: int

    def parts(self) -> Parts:
        return Parts(extras=struct.pack(">I", self.flags), vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        flags = int.from_bytes(frame.extras, "big")
        return cls(
            opaque=frame.opaque, vbucket=frame.vbucket, stream_id=frame.stream_id(), flags=flags
        )


# -- sync-write family (prepare.md, commit.md, abort.md): never carries a stream-id --------

_PREPARE = struct.Struct(">QQIIIBBB")


@attrs.frozen(kw_only=True)
class Prepare(Message):
    """DCP_PREPARE: extras 31 = by-seqno, rev-seqno, flags, expiration, lock time, nru,
    deleted (0/1), durability level (1..3); key; value; CAS = document CAS."""

    OPCODE = Opcode.DCP_PREPARE
    SHAPE = Shape(
        extras=(_PREPARE.size,), key=Need.NONZERO, value=Need.ANY, datatypes=ALL_DATATYPES
    )

    vbucket: int
    cas: int = 0
    by_seqno: int
    rev_seqno: int
    flags: int = 0
    expiration: int = 0
    lock_time: int = 0
    nru: int = 0
    deleted: bool = False
    durability_level: int = 1
    key: bytes
    collection_id: int | None = None
    value: bytes = b""
    datatype: int = 0

    def parts(self) -> Parts:
        extras = _PREPARE.pack(
            self.by_seqno,
            self.rev_seqno,
            self.flags,
            self.expiration,
            self.lock_time,
            self.nru,
            int(self.deleted),
            self.durability_level,
        )
        return Parts(
            extras=extras,
            key=_doc_key(self.key, self.collection_id),
            value=self.value,
            datatype=self.datatype,
            vbucket=self.vbucket,
            cas=self.cas,
        )

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        by_seqno, rev, flags, exp, lock, nru, deleted, level = _PREPARE.unpack(frame.extras)
        if not 1 <= level <= 3 or deleted > 1:
            raise _einval(f"bad durability level {level} or deleted flag {deleted}", "extras")
        key, cid = _split_doc_key(frame, collections)
        return cls(
            opaque=frame.opaque,
            vbucket=frame.vbucket,
            cas=frame.cas,
            by_seqno=by_seqno,
            rev_seqno=rev,
            flags=flags,
            expiration=exp,
            lock_time=lock,
            nru=nru,
            deleted=bool(deleted),
            durability_level=level,
            key=key,
            collection_id=cid,
            value=frame.value,
            datatype=frame.datatype,
        )


_TWO_SEQNOS = struct.Struct(">QQ")


@attrs.frozen(kw_only=True)
class _Resolution(Message):
    """DCP_COMMIT and DCP_ABORT share a layout: extras 16 = prepared seqno and the
    resolving seqno (``_RESOLVED`` names its field); key; no value (§8.16)."""

    SHAPE = Shape(extras=(16,), key=Need.NONZERO)
    _RESOLVED: ClassVar[str]

    vbucket: int
    prepared_seqno: int
    key: bytes
    collection_id: int | None = None

    def parts(self) -> Parts:
        extras = _TWO_SEQNOS.pack(self.prepared_seqno, getattr(self, self._RESOLVED))
        return Parts(
            extras=extras, key=_doc_key(self.key, self.collection_id), vbucket=self.vbucket
        )

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        prepared, resolved = _TWO_SEQNOS.unpack(frame.extras)
        key, cid = _split_doc_key(frame, collections)
        fields: dict[str, Any] = {cls._RESOLVED: resolved}
        return cls(
            opaque=frame.opaque,
            vbucket=frame.vbucket,
            prepared_seqno=prepared,
            key=key,
            collection_id=cid,
            **fields,
        )


@attrs.frozen(kw_only=True)
class Commit(_Resolution):
    """DCP_COMMIT: the prepare at ``prepared_seqno`` committed at ``commit_seqno``."""

    OPCODE = Opcode.DCP_COMMIT
    _RESOLVED = "commit_seqno"

    commit_seqno: int


@attrs.frozen(kw_only=True)
class Abort(_Resolution):
    """DCP_ABORT: the prepare at ``prepared_seqno`` aborted at ``abort_seqno``."""

    OPCODE = Opcode.DCP_ABORT
    _RESOLVED = "abort_seqno"

    abort_seqno: int


@attrs.frozen(kw_only=True)
class ClusterMapChangeNotification(Message):
    """Server push (magic 0x82, opcode 0x01): extras i64 epoch + i64 revision, key =
    bucket name, value = config JSON, empty for the "brief" variant (kv_engine
    ``docs/BinaryProtocol.md``, "0x01 Clustermap Change Notification")."""

    OPCODE = CLUSTERMAP_CHANGE_NOTIFICATION
    MAGIC = Magic.SERVER_REQUEST
    SHAPE = Shape(extras=(16,), key=Need.ANY, value=Need.ANY, datatypes=ALL_DATATYPES)

    bucket: str = ""
    epoch: int
    revision: int
    config: bytes = b""

    def parts(self) -> Parts:
        extras = _CONFIG_VERSION.pack(self.epoch, self.revision)
        datatype = Datatype.JSON if self.config else Datatype.RAW
        return Parts(extras=extras, key=self.bucket.encode(), value=self.config, datatype=datatype)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        epoch, revision = _CONFIG_VERSION.unpack(frame.extras)
        return cls(
            opaque=frame.opaque,
            bucket=_text(frame.key, "key"),
            epoch=epoch,
            revision=revision,
            config=frame.value,
        )


# -- system-event builders (system_event.md) ------------------------------------------


def collection_event(
    *,
    opaque: int,
    vbucket: int,
    by_seqno: int,
    name: bytes,
    data: CollectionEventData,
    end: bool = False,
    stream_id: int | None = None,
) -> SystemEvent:
    """A begin collection (key = name) or, with ``end``, an end collection (empty key)."""
    event = SystemEventType.END_COLLECTION if end else SystemEventType.BEGIN_COLLECTION
    return SystemEvent(
        opaque=opaque,
        vbucket=vbucket,
        stream_id=stream_id,
        by_seqno=by_seqno,
        event=event,
        version=data.version,
        key=b"" if end else name,
        value=data.encode(),
    )


def scope_event(
    *,
    opaque: int,
    vbucket: int,
    by_seqno: int,
    name: bytes,
    data: ScopeEventData,
    drop: bool = False,
    stream_id: int | None = None,
) -> SystemEvent:
    """A create scope (key = name) or, with ``drop``, a drop scope (empty key)."""
    event = SystemEventType.DROP_SCOPE if drop else SystemEventType.CREATE_SCOPE
    return SystemEvent(
        opaque=opaque,
        vbucket=vbucket,
        stream_id=stream_id,
        by_seqno=by_seqno,
        event=event,
        version=0,
        key=b"" if drop else name,
        value=data.encode(),
    )
