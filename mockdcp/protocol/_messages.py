"""Message classes: the meaning of a ``Frame`` (wire.md §5, §8; seeds 000, 003, 004).

One frozen, keyword-only attrs class per command. ``encode()`` gives the frame's bytes;
``decode(frame)`` checks the frame's shape the way kv_engine's ``mcbp_validators.cc``
does (extras length, key and value present or absent, datatype bits allowed) and raises
``RemoteProtocolError`` with status EINVAL naming the ``field`` at fault. Do not subclass
these classes outside this module: the dispatchers look them up by opcode.

Header fields that belong to a message are attributes: ``opaque`` everywhere, ``vbucket``
where the header carries one, ``cas`` on document messages, and ``stream_id`` on the DCP
stream messages (``None`` = classic magic 0x80; a number = magic 0x08 with the framing
extras ``22 NN NN``, wire.md §2).

Document keys (mutation, deletion, expiration, prepare, commit, abort) carry a LEB128
collection-id prefix on connections that negotiated HELLO COLLECTIONS (wire.md §4). The
message holds the bare key and ``collection_id`` (``None`` = no prefix); ``decode`` must be
told with ``collections=True`` that a prefix is there.

Value helpers for responses, system-event values and xattrs live in ``_values`` and are
re-exported here. The two dispatchers, ``decode_client_message`` (what a producer
receives) and ``decode_server_message`` (what a consumer receives), end the module.
"""

from __future__ import annotations

import enum
import struct
from typing import Any, ClassVar, Self, TypeVar

import attrs

from mockdcp._errors import RemoteProtocolError
from mockdcp.protocol._document_frame import _DELETION_V1, _MUTATION, _doc_key
from mockdcp.protocol._enums import (
    CLUSTERMAP_CHANGE_NOTIFICATION,
    Datatype,
    Magic,
    Opcode,
    SnapshotMarkerVersion,
    Status,
    StreamEndReason,
    SystemEventType,
    VBucketState,
)
from mockdcp.protocol._frame import Frame, encode_frame, stream_id_frame_info
from mockdcp.protocol._leb128 import decode_leb128
from mockdcp.protocol._values import (
    CollectionEventData as CollectionEventData,
)
from mockdcp.protocol._values import (
    ObserveSeqnoResult as ObserveSeqnoResult,
)
from mockdcp.protocol._values import (
    ScopeEventData as ScopeEventData,
)
from mockdcp.protocol._values import (
    decode_all_vb_seqnos as decode_all_vb_seqnos,
)
from mockdcp.protocol._values import (
    decode_failover_log as decode_failover_log,
)
from mockdcp.protocol._values import (
    decode_hello_features as decode_hello_features,
)
from mockdcp.protocol._values import (
    decode_id_lookup_extras as decode_id_lookup_extras,
)
from mockdcp.protocol._values import (
    decode_rollback_value as decode_rollback_value,
)
from mockdcp.protocol._values import (
    encode_all_vb_seqnos as encode_all_vb_seqnos,
)
from mockdcp.protocol._values import (
    encode_failover_log as encode_failover_log,
)
from mockdcp.protocol._values import (
    encode_hello_features as encode_hello_features,
)
from mockdcp.protocol._values import (
    encode_id_lookup_extras as encode_id_lookup_extras,
)
from mockdcp.protocol._values import (
    encode_rollback_value as encode_rollback_value,
)
from mockdcp.protocol._values import (
    encode_xattrs as encode_xattrs,
)
from mockdcp.protocol._values import (
    parse_system_event_value as parse_system_event_value,
)
from mockdcp.protocol._values import (
    split_xattrs as split_xattrs,
)
from mockdcp.protocol._values import (
    strip_user_xattrs as strip_user_xattrs,
)

#: Every datatype bit a frame may carry (datatype.h ``is_valid``).
ALL_DATATYPES = int(Datatype.JSON | Datatype.SNAPPY | Datatype.XATTR)

#: kv_engine ``cb::limits::MaxKeyLength``: the longest DCP_OPEN name.
MAX_NAME_LENGTH = 250


# -- shape checks (mcbp_validators.cc ``verify_header``) ------------------------------------


class Need(enum.Enum):
    """Whether a key or value must be absent, present, or either."""

    ZERO = "must be empty"
    NONZERO = "must not be empty"
    ANY = "may be anything"


@attrs.frozen(kw_only=True)
class Shape:
    """What a request's body must look like before its fields are read."""

    extras: tuple[int, ...] = (0,)
    key: Need = Need.ZERO
    value: Need = Need.ZERO
    datatypes: int = 0


def _einval(message: str, field: str) -> RemoteProtocolError:
    return RemoteProtocolError(message, status=Status.EINVAL, field=field)


def _check_part(data: bytes, need: Need, field: str) -> None:
    if (need is Need.ZERO and data) or (need is Need.NONZERO and not data):
        raise _einval(f"{field} {need.value}", field)


def check_shape(frame: Frame, shape: Shape) -> None:
    """Raise ``RemoteProtocolError`` (EINVAL) unless ``frame`` has ``shape``."""
    if len(frame.extras) not in shape.extras:
        sizes = " or ".join(str(n) for n in shape.extras)
        raise _einval(f"extras must be {sizes} bytes, not {len(frame.extras)}", "extras")
    _check_part(frame.key, need=shape.key, field="key")
    _check_part(frame.value, need=shape.value, field="value")
    if frame.datatype & ~shape.datatypes:
        raise _einval(f"datatype {frame.datatype:#04x} not allowed here", "datatype")


def _text(data: bytes, field: str) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise _einval(f"{field} is not UTF-8", field) from None


def _require_vbucket_zero(frame: Frame) -> None:
    if frame.vbucket != 0:
        raise _einval("vbucket must be 0 for this command", "vbucket")


_E = TypeVar("_E", bound=enum.IntEnum)


def _enum_or_int(kind: type[_E], n: int) -> _E | int:
    try:
        return kind(n)
    except ValueError:
        return n


# -- the base class ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Parts:
    """The variable parts of a frame, as a message lays them out."""

    extras: bytes = b""
    key: bytes = b""
    value: bytes = b""
    datatype: int = 0
    vbucket: int = 0
    cas: int = 0


@attrs.frozen(kw_only=True)
class Message:
    """Base of every message. ``OPCODE``/``MAGIC``/``SHAPE`` describe the frame."""

    OPCODE: ClassVar[int]
    MAGIC: ClassVar[Magic] = Magic.REQUEST
    SHAPE: ClassVar[Shape] = Shape()

    opaque: int

    def parts(self) -> Parts:
        """Extras, key, value, datatype, vbucket and CAS of this message's frame."""
        return Parts()

    def frame_stream_id(self) -> int | None:
        """The stream-id to put in the framing extras (stream messages override)."""
        return None

    def encode(self) -> bytes:
        """The frame's bytes (wire.md §1-§2). ``struct.error`` if a field is out of range."""
        p = self.parts()
        sid = self.frame_stream_id()
        return encode_frame(
            self.MAGIC if sid is None else Magic.ALT_REQUEST,
            self.OPCODE,
            datatype=p.datatype,
            vbucket_or_status=p.vbucket,
            opaque=self.opaque,
            cas=p.cas,
            framing_extras=b"" if sid is None else stream_id_frame_info(sid),
            extras=p.extras,
            key=p.key,
            value=p.value,
        )

    @classmethod
    def decode(cls, frame: Frame, *, collections: bool = False) -> Self:
        """Check ``frame`` against ``SHAPE`` and build the message.

        ``collections`` says whether document keys carry a LEB128 prefix. Raises
        ``RemoteProtocolError`` naming the field that is wrong.
        """
        check_shape(frame, cls.SHAPE)
        return cls.from_frame(frame, collections)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        """Read the fields of an already shape-checked frame."""
        return cls(opaque=frame.opaque)


@attrs.frozen(kw_only=True)
class StreamMessage(Message):
    """A DCP stream message that may carry a stream-id (wire.md §2)."""

    vbucket: int
    stream_id: int | None = None

    def frame_stream_id(self) -> int | None:
        return self.stream_id


# -- client requests: bootstrap (wire.md §5.1) --------------------------------------------


@attrs.frozen(kw_only=True)
class Hello(Message):
    """HELLO: key = agent name, value = u16 feature codes (even length, wire.md §5.1)."""

    OPCODE = Opcode.HELLO
    SHAPE = Shape(key=Need.ANY, value=Need.ANY)

    agent: bytes = b""
    features: tuple[int, ...] = ()

    def parts(self) -> Parts:
        return Parts(key=self.agent, value=encode_hello_features(self.features))

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        return cls(
            opaque=frame.opaque, agent=frame.key, features=decode_hello_features(frame.value)
        )


@attrs.frozen(kw_only=True)
class SaslListMechs(Message):
    """SASL_LIST_MECHS: empty request; the reply lists mechanisms."""

    OPCODE = Opcode.SASL_LIST_MECHS


@attrs.frozen(kw_only=True)
class _SaslMessage(Message):
    """SASL_AUTH and SASL_STEP: key = mechanism name, value = the SASL payload."""

    SHAPE = Shape(key=Need.NONZERO, value=Need.ANY)

    mechanism: str
    payload: bytes = b""

    def parts(self) -> Parts:
        return Parts(key=self.mechanism.encode(), value=self.payload)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        return cls(opaque=frame.opaque, mechanism=_text(frame.key, "key"), payload=frame.value)


@attrs.frozen(kw_only=True)
class SaslAuth(_SaslMessage):
    """SASL_AUTH: key = mechanism, value = initial client response (wire.md §5.1)."""

    OPCODE = Opcode.SASL_AUTH


@attrs.frozen(kw_only=True)
class SaslStep(_SaslMessage):
    """SASL_STEP: key = mechanism, value = the client's next (final) message."""

    OPCODE = Opcode.SASL_STEP


@attrs.frozen(kw_only=True)
class SelectBucket(Message):
    """SELECT_BUCKET: key = bucket name."""

    OPCODE = Opcode.SELECT_BUCKET
    SHAPE = Shape(key=Need.ANY)

    bucket: str

    def parts(self) -> Parts:
        return Parts(key=self.bucket.encode())

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        return cls(opaque=frame.opaque, bucket=_text(frame.key, "key"))


@attrs.frozen(kw_only=True)
class GetErrorMap(Message):
    """GET_ERROR_MAP: value = u16 highest map version the client reads; vbucket 0."""

    OPCODE = Opcode.GET_ERROR_MAP
    SHAPE = Shape(value=Need.ANY)

    version: int

    def parts(self) -> Parts:
        return Parts(value=struct.pack(">H", self.version))

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        _require_vbucket_zero(frame)
        if len(frame.value) != 2:
            raise _einval("value must be a 2-byte version", "value")
        return cls(opaque=frame.opaque, version=int.from_bytes(frame.value, "big"))


_CONFIG_VERSION = struct.Struct(">qq")


def _check_config_version(epoch: int, revision: int) -> None:
    """kv_engine ``GetClusterConfigPayload::validate``: revision >= 1, epoch >= 1 or -1."""
    if revision < 1 or (epoch < 1 and epoch != -1):
        raise _einval(f"bad cluster-config version (epoch {epoch}, rev {revision})", "extras")


@attrs.frozen(kw_only=True)
class GetClusterConfig(Message):
    """GET_CLUSTER_CONFIG: extras 0, or 16 = i64 epoch + i64 revision the client has."""

    OPCODE = Opcode.GET_CLUSTER_CONFIG
    SHAPE = Shape(extras=(0, 16))

    epoch: int | None = None
    revision: int | None = None

    def parts(self) -> Parts:
        if self.epoch is None or self.revision is None:
            return Parts()
        return Parts(extras=_CONFIG_VERSION.pack(self.epoch, self.revision))

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        if not frame.extras:
            return cls(opaque=frame.opaque)
        epoch, revision = _CONFIG_VERSION.unpack(frame.extras)
        _check_config_version(epoch, revision)
        return cls(opaque=frame.opaque, epoch=epoch, revision=revision)


@attrs.frozen(kw_only=True)
class Version(Message):
    """VERSION: empty request; the reply value is the version string."""

    OPCODE = Opcode.VERSION


@attrs.frozen(kw_only=True)
class Noop(Message):
    """NOOP: plain keep-alive (not DCP_NOOP)."""

    OPCODE = Opcode.NOOP


@attrs.frozen(kw_only=True)
class GetAllVbSeqnos(Message):
    """GET_ALL_VB_SEQNOS: extras 0, 4 (u32 state 0..4) or 8 (state + u32 collection id)."""

    OPCODE = Opcode.GET_ALL_VB_SEQNOS
    SHAPE = Shape(extras=(0, 4, 8))

    state: int | None = None
    collection_id: int | None = None

    def parts(self) -> Parts:
        if self.state is None:
            return Parts()
        if self.collection_id is None:
            return Parts(extras=struct.pack(">I", self.state))
        return Parts(extras=struct.pack(">II", self.state, self.collection_id))

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        if not frame.extras:
            return cls(opaque=frame.opaque)
        state = int.from_bytes(frame.extras[:4], "big")
        if state > VBucketState.DEAD:
            raise _einval(f"vbucket state {state} is not 0..4", "extras")
        cid = int.from_bytes(frame.extras[4:], "big") if len(frame.extras) == 8 else None
        return cls(opaque=frame.opaque, state=state, collection_id=cid)


@attrs.frozen(kw_only=True)
class ObserveSeqno(Message):
    """OBSERVE_SEQNO: vbucket in the header, value = u64 vbucket uuid (body exactly 8)."""

    OPCODE = Opcode.OBSERVE_SEQNO
    SHAPE = Shape(value=Need.ANY)

    vbucket: int
    vbucket_uuid: int

    def parts(self) -> Parts:
        return Parts(value=struct.pack(">Q", self.vbucket_uuid), vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        if len(frame.value) != 8:
            raise _einval("value must be an 8-byte vbucket uuid", "value")
        uuid = int.from_bytes(frame.value, "big")
        return cls(opaque=frame.opaque, vbucket=frame.vbucket, vbucket_uuid=uuid)


@attrs.frozen(kw_only=True)
class GetCollectionsManifest(Message):
    """GET_COLLECTIONS_MANIFEST: empty, vbucket 0; the reply value is the manifest JSON."""

    OPCODE = Opcode.GET_COLLECTIONS_MANIFEST

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        _require_vbucket_zero(frame)
        return cls(opaque=frame.opaque)


@attrs.frozen(kw_only=True)
class _IdLookup(Message):
    """GET_COLLECTION_ID / GET_SCOPE_ID: a path in the value (or key, not both), vbucket 0."""

    SHAPE = Shape(key=Need.ANY, value=Need.ANY)

    path: str

    def parts(self) -> Parts:
        return Parts(value=self.path.encode())

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        _require_vbucket_zero(frame)
        if frame.key and frame.value:
            raise _einval("give the path in the key or the value, not both", "key")
        field = "key" if frame.key else "value"
        return cls(opaque=frame.opaque, path=_text(frame.key or frame.value, field))


@attrs.frozen(kw_only=True)
class GetCollectionId(_IdLookup):
    """GET_COLLECTION_ID: path ``scope.collection``; reply extras = manifest uid + id."""

    OPCODE = Opcode.GET_COLLECTION_ID


@attrs.frozen(kw_only=True)
class GetScopeId(_IdLookup):
    """GET_SCOPE_ID: path ``scope``; reply extras = manifest uid + scope id."""

    OPCODE = Opcode.GET_SCOPE_ID


# -- client requests: DCP (wire.md §5.2, §8) ----------------------------------------------


@attrs.frozen(kw_only=True)
class DcpOpen(Message):
    """DCP_OPEN: extras u32 seqno (0) + u32 flags; key = name (1..250 bytes, wire.md §8.1).

    A non-empty value is JSON and must be sent with datatype JSON; an empty one RAW.
    """

    OPCODE = Opcode.DCP_OPEN
    SHAPE = Shape(extras=(8,), key=Need.NONZERO, value=Need.ANY, datatypes=Datatype.JSON)

    name: bytes
    flags: int
    value: bytes = b""

    def parts(self) -> Parts:
        datatype = Datatype.JSON if self.value else Datatype.RAW
        extras = struct.pack(">II", 0, self.flags)
        return Parts(extras=extras, key=self.name, value=self.value, datatype=datatype)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        if len(frame.key) > MAX_NAME_LENGTH:
            raise _einval(f"connection name longer than {MAX_NAME_LENGTH} bytes", "key")
        if bool(frame.value) != bool(frame.datatype):
            raise _einval("datatype must be JSON with a value and RAW without", "datatype")
        flags = int.from_bytes(frame.extras[4:], "big")
        return cls(opaque=frame.opaque, name=frame.key, flags=flags, value=frame.value)


@attrs.frozen(kw_only=True)
class DcpControl(Message):
    """DCP_CONTROL: key = setting name, value = setting; both non-empty (wire.md §8.2)."""

    OPCODE = Opcode.DCP_CONTROL
    SHAPE = Shape(key=Need.NONZERO, value=Need.NONZERO)

    key: str
    value: str

    def parts(self) -> Parts:
        return Parts(key=self.key.encode(), value=self.value.encode())

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        key, value = _text(frame.key, "key"), _text(frame.value, "value")
        return cls(opaque=frame.opaque, key=key, value=value)


_STREAM_REQ = struct.Struct(">IIQQQQQ")


@attrs.frozen(kw_only=True)
class DcpStreamRequest(StreamMessage):
    """DCP_STREAM_REQ: 48 bytes of extras, no key, optional JSON value, datatype 0 (§8.3).

    The value is kept as bytes; ``StreamRequestValue.parse`` reads it.
    """

    OPCODE = Opcode.DCP_STREAM_REQ
    SHAPE = Shape(extras=(48,), value=Need.ANY)

    flags: int
    start_seqno: int
    end_seqno: int
    vbucket_uuid: int
    snap_start_seqno: int
    snap_end_seqno: int
    value: bytes = b""

    def parts(self) -> Parts:
        extras = _STREAM_REQ.pack(
            self.flags,
            0,
            self.start_seqno,
            self.end_seqno,
            self.vbucket_uuid,
            self.snap_start_seqno,
            self.snap_end_seqno,
        )
        return Parts(extras=extras, value=self.value, vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        flags, _, start, end, uuid, snap_start, snap_end = _STREAM_REQ.unpack(frame.extras)
        return cls(
            opaque=frame.opaque,
            vbucket=frame.vbucket,
            stream_id=frame.stream_id(),
            flags=flags,
            start_seqno=start,
            end_seqno=end,
            vbucket_uuid=uuid,
            snap_start_seqno=snap_start,
            snap_end_seqno=snap_end,
            value=frame.value,
        )


@attrs.frozen(kw_only=True)
class DcpCloseStream(StreamMessage):
    """DCP_CLOSE_STREAM: empty body; vbucket in the header, stream-id in framing (§8.6)."""

    OPCODE = Opcode.DCP_CLOSE_STREAM

    def parts(self) -> Parts:
        return Parts(vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        return cls(opaque=frame.opaque, vbucket=frame.vbucket, stream_id=frame.stream_id())


@attrs.frozen(kw_only=True)
class DcpGetFailoverLog(Message):
    """DCP_GET_FAILOVER_LOG: empty body, vbucket in the header (wire.md §8.5)."""

    OPCODE = Opcode.DCP_GET_FAILOVER_LOG

    vbucket: int

    def parts(self) -> Parts:
        return Parts(vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        return cls(opaque=frame.opaque, vbucket=frame.vbucket)


@attrs.frozen(kw_only=True)
class DcpBufferAck(Message):
    """DCP_BUFFER_ACKNOWLEDGEMENT: extras u32 bytes processed; never answered (§8.14)."""

    OPCODE = Opcode.DCP_BUFFER_ACKNOWLEDGEMENT
    SHAPE = Shape(extras=(4,))

    nbytes: int

    def parts(self) -> Parts:
        return Parts(extras=struct.pack(">I", self.nbytes))

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        return cls(opaque=frame.opaque, nbytes=int.from_bytes(frame.extras, "big"))


@attrs.frozen(kw_only=True)
class DcpAddStream(Message):
    """DCP_ADD_STREAM: extras u32 stream flags (ns_server → consumer only, §8.4)."""

    OPCODE = Opcode.DCP_ADD_STREAM
    SHAPE = Shape(extras=(4,))

    vbucket: int
    flags: int

    def parts(self) -> Parts:
        return Parts(extras=struct.pack(">I", self.flags), vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        flags = int.from_bytes(frame.extras, "big")
        return cls(opaque=frame.opaque, vbucket=frame.vbucket, flags=flags)


@attrs.frozen(kw_only=True)
class DcpSeqnoAcknowledged(Message):
    """DCP_SEQNO_ACKNOWLEDGED: extras u64 prepared seqno (replicas only, §8.16)."""

    OPCODE = Opcode.DCP_SEQNO_ACKNOWLEDGED
    SHAPE = Shape(extras=(8,))

    vbucket: int
    prepared_seqno: int

    def parts(self) -> Parts:
        return Parts(extras=struct.pack(">Q", self.prepared_seqno), vbucket=self.vbucket)

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        seqno = int.from_bytes(frame.extras, "big")
        return cls(opaque=frame.opaque, vbucket=frame.vbucket, prepared_seqno=seqno)


# -- producer → consumer stream messages (wire.md §8.7-§8.18) -----------------------------


_MARKER_V1 = struct.Struct(">QQI")
_MARKER_V2_0 = struct.Struct(">QQIQQ")
#: Seed 000's V2.2 list: V2.0 + purge seqno (44-byte value). Decoded, never encoded.
_MARKER_V2_2_SEED = struct.Struct(">QQIQQQ")
#: kv_engine ``DcpSnapshotMarkerV2_2Value`` (protocol_binary.h): V2.0 + purge seqno +
#: high prepared seqno, 52 bytes. The form mockdcp sends.
_MARKER_V2_2 = struct.Struct(">QQIQQQQ")
_MARKER_VERSION_BYTE = {SnapshotMarkerVersion.V2_0: 0, SnapshotMarkerVersion.V2_2: 2}


@attrs.frozen(kw_only=True)
class SnapshotMarker(StreamMessage):
    """DCP_SNAPSHOT_MARKER (seed 000, wire.md §8.8).

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
    seed 000's 44-byte V2.2); fields a layout lacks keep their default of 0."""
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
    nmeta (always 0), nru (wire.md §8.9)."""

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
    """DCP_DELETION (wire.md §8.10). ``delete_time`` None ⇒ V1 (extras 18: by-seqno,
    rev-seqno, nmeta 0); else V2 (extras 21: by-seqno, rev-seqno, delete time, 0)."""

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
    """DCP_EXPIRATION: extras 20 = by-seqno, rev-seqno, delete time (seed 004, §8.11)."""

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
    """DCP_STREAM_END: extras u32 reason (wire.md §8.7); the consumer does not answer."""

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
    """DCP_SYSTEM_EVENT: extras 13 = u64 by-seqno, u32 event, u8 version (seed 003, §8.15).

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

    def data(self) -> CollectionEventData | ScopeEventData:
        """The parsed value (versions 0 and 1; seed 003)."""
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
    """DCP_OSO_SNAPSHOT: extras u32 flags, 1 start / 2 end (wire.md §8.18)."""

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


# -- sync-write family (wire.md §8.16): never carries a stream-id -------------------------

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
class Commit(Message):
    """DCP_COMMIT: extras 16 = prepared seqno, commit seqno; key; no value (§8.16)."""

    OPCODE = Opcode.DCP_COMMIT
    SHAPE = Shape(extras=(16,), key=Need.NONZERO)

    vbucket: int
    prepared_seqno: int
    commit_seqno: int
    key: bytes
    collection_id: int | None = None

    def parts(self) -> Parts:
        extras = _TWO_SEQNOS.pack(self.prepared_seqno, self.commit_seqno)
        return Parts(
            extras=extras, key=_doc_key(self.key, self.collection_id), vbucket=self.vbucket
        )

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        prepared, committed = _TWO_SEQNOS.unpack(frame.extras)
        key, cid = _split_doc_key(frame, collections)
        return cls(
            opaque=frame.opaque,
            vbucket=frame.vbucket,
            prepared_seqno=prepared,
            commit_seqno=committed,
            key=key,
            collection_id=cid,
        )


@attrs.frozen(kw_only=True)
class Abort(Message):
    """DCP_ABORT: extras 16 = prepared seqno, abort seqno; key; no value (§8.16)."""

    OPCODE = Opcode.DCP_ABORT
    SHAPE = Shape(extras=(16,), key=Need.NONZERO)

    vbucket: int
    prepared_seqno: int
    abort_seqno: int
    key: bytes
    collection_id: int | None = None

    def parts(self) -> Parts:
        extras = _TWO_SEQNOS.pack(self.prepared_seqno, self.abort_seqno)
        return Parts(
            extras=extras, key=_doc_key(self.key, self.collection_id), vbucket=self.vbucket
        )

    @classmethod
    def from_frame(cls, frame: Frame, collections: bool) -> Self:
        prepared, aborted = _TWO_SEQNOS.unpack(frame.extras)
        key, cid = _split_doc_key(frame, collections)
        return cls(
            opaque=frame.opaque,
            vbucket=frame.vbucket,
            prepared_seqno=prepared,
            abort_seqno=aborted,
            key=key,
            collection_id=cid,
        )


@attrs.frozen(kw_only=True)
class ClusterMapChangeNotification(Message):
    """Server push (magic 0x82, opcode 0x01): extras i64 epoch + i64 revision, key =
    bucket name, value = config JSON, empty for the "brief" variant (wire.md §5.1)."""

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


# -- responses ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Response:
    """Any response (magic 0x81, or 0x83 to a server push); bytes 6-7 are the status.

    ``status`` decodes to a ``Status`` member when it is one, else to the plain number.
    """

    opcode: int
    status: Status | int
    opaque: int
    extras: bytes = b""
    key: bytes = b""
    value: bytes = b""
    datatype: int = 0
    cas: int = 0
    magic: Magic = Magic.RESPONSE

    def encode(self) -> bytes:
        """The frame's bytes (wire.md §1.1)."""
        return encode_frame(
            self.magic,
            self.opcode,
            datatype=self.datatype,
            vbucket_or_status=self.status,
            opaque=self.opaque,
            cas=self.cas,
            extras=self.extras,
            key=self.key,
            value=self.value,
        )

    @classmethod
    def decode(cls, frame: Frame) -> Self:
        """Raises ``RemoteProtocolError`` (field ``magic``) unless ``frame`` is 0x81/0x83."""
        if frame.magic not in (Magic.RESPONSE, Magic.SERVER_RESPONSE):
            raise _einval(f"magic {int(frame.magic):#04x} is not a response", "magic")
        return cls(
            magic=frame.magic,
            opcode=frame.opcode,
            status=_enum_or_int(Status, frame.status),
            opaque=frame.opaque,
            extras=frame.extras,
            key=frame.key,
            value=frame.value,
            datatype=frame.datatype,
            cas=frame.cas,
        )


# -- system-event builders (seed 003) -------------------------------------------------


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


# -- dispatchers ---------------------------------------------------------------------------

#: What a producer receives as requests, by opcode.
CLIENT_REQUESTS: dict[int, type[Message]] = {
    cls.OPCODE: cls
    for cls in (
        Hello,
        SaslListMechs,
        SaslAuth,
        SaslStep,
        SelectBucket,
        GetErrorMap,
        GetClusterConfig,
        Version,
        Noop,
        GetAllVbSeqnos,
        ObserveSeqno,
        GetCollectionsManifest,
        GetCollectionId,
        GetScopeId,
        DcpOpen,
        DcpControl,
        DcpStreamRequest,
        DcpCloseStream,
        DcpGetFailoverLog,
        DcpBufferAck,
        DcpAddStream,
        DcpSeqnoAcknowledged,
    )
}

#: What a consumer receives as (0x80/0x08) requests, by opcode.
SERVER_REQUESTS: dict[int, type[Message]] = {
    cls.OPCODE: cls
    for cls in (
        SnapshotMarker,
        Mutation,
        Deletion,
        Expiration,
        StreamEnd,
        DcpNoop,
        SetVbucketState,
        SystemEvent,
        SeqnoAdvanced,
        OsoSnapshot,
        Prepare,
        Commit,
        Abort,
    )
}


def _unknown(frame: Frame) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"unknown opcode {frame.opcode:#04x} for magic {int(frame.magic):#04x}",
        status=Status.UNKNOWN_COMMAND,
        field="opcode",
    )


def decode_client_message(frame: Frame) -> Message | Response:
    """Decode what a producer receives: a client request, or a consumer's response.

    Raises ``RemoteProtocolError``: status UNKNOWN_COMMAND (field ``opcode``) for an
    opcode mockdcp does not know (the server answers it and keeps the connection),
    EINVAL for a malformed request or a magic a client does not send.
    """
    if frame.magic in (Magic.RESPONSE, Magic.SERVER_RESPONSE):
        return Response.decode(frame)
    if frame.magic not in (Magic.REQUEST, Magic.ALT_REQUEST):
        raise _einval(f"a client does not send magic {int(frame.magic):#04x}", "magic")
    cls = CLIENT_REQUESTS.get(frame.opcode)
    if cls is None:
        raise _unknown(frame)
    return cls.decode(frame)


def decode_server_message(frame: Frame, *, collections: bool) -> Message | Response:
    """Decode what a consumer receives: a stream message, DCP_NOOP, a cluster-map push
    (magic 0x82) or a response (0x81).

    ``collections`` says whether document keys carry a LEB128 prefix. Raises
    ``RemoteProtocolError`` as ``decode_client_message`` does.
    """
    if frame.magic is Magic.RESPONSE:
        return Response.decode(frame)
    if frame.magic is Magic.SERVER_REQUEST:
        if frame.opcode != CLUSTERMAP_CHANGE_NOTIFICATION:
            raise _unknown(frame)
        return ClusterMapChangeNotification.decode(frame)
    if frame.magic not in (Magic.REQUEST, Magic.ALT_REQUEST):
        raise _einval(f"a producer does not send magic {int(frame.magic):#04x}", "magic")
    cls = SERVER_REQUESTS.get(frame.opcode)
    if cls is None:
        raise _unknown(frame)
    return cls.decode(frame, collections=collections)
