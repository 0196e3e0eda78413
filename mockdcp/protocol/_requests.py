"""What a client sends: the bootstrap requests (kv_engine ``docs/BinaryProtocol.md``) and
the DCP requests (kv_engine ``docs/dcp/documentation/commands/``). See ``_messages`` for the
conventions."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Self

import attrs

from mockdcp.protocol._enums import (
    Datatype,
    Opcode,
    VBucketState,
)
from mockdcp.protocol._message_base import (
    _CONFIG_VERSION,
    MAX_NAME_LENGTH,
    Message,
    Need,
    Parts,
    Shape,
    StreamMessage,
    _einval,
    _require_vbucket_zero,
    _text,
)
from mockdcp.protocol._values import (
    decode_hello_features,
    encode_hello_features,
)

if TYPE_CHECKING:
    from mockdcp.protocol._frame import Frame

# -- client requests: bootstrap (kv_engine docs/BinaryProtocol.md) -------------------------


@attrs.frozen(kw_only=True)
class Hello(Message):
    """HELLO: key = agent name, value = u16 feature codes (even length; kv_engine
    ``docs/BinaryProtocol.md``, "0x1f HELO")."""

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
    """SASL_AUTH: key = mechanism, value = initial client response (kv_engine ``docs/sasl.md``)."""

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


# -- client requests: DCP (kv_engine docs/dcp/documentation/commands/) ----------------------


@attrs.frozen(kw_only=True)
class DcpOpen(Message):
    """DCP_OPEN: extras u32 seqno (0) + u32 flags; key = name (1..250 bytes,
    kv_engine ``daemon/mcbp_validators.cc``).

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
    """DCP_CONTROL: key = setting name, value = setting; both non-empty (kv_engine
    ``docs/dcp/documentation/commands/control.md``)."""

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
    """DCP_GET_FAILOVER_LOG: empty body, vbucket in the header (kv_engine
    ``docs/dcp/documentation/commands/failover-log.md``)."""

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
