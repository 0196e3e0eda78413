"""The base of the message classes: frame shape checks (kv_engine
``mcbp_validators.cc``), ``Parts``, ``Message`` and ``StreamMessage``.

See ``_messages`` for the conventions every message class follows.
"""

from __future__ import annotations

import enum
import struct
from typing import ClassVar, Self, TypeVar

import attrs

from mockdcp.protocol._enums import (
    Datatype,
    Magic,
    Status,
)
from mockdcp.protocol._errors import RemoteProtocolError
from mockdcp.protocol._frame import Frame, encode_frame, stream_id_frame_info

#: Every datatype bit a frame may carry (datatype.h ``is_valid``).
ALL_DATATYPES = int(Datatype.JSON | Datatype.SNAPPY | Datatype.XATTR)

#: kv_engine ``cb::limits::MaxKeyLength``: the longest DCP_OPEN name.
MAX_NAME_LENGTH = 250

#: The (epoch, revision) extras of GET_CLUSTER_CONFIG and the cluster-map push.
_CONFIG_VERSION = struct.Struct(">qq")


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
        """The frame's bytes (kv_engine ``docs/BinaryProtocol.md``). ``struct.error`` if a
        field is out of range."""
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
    """A DCP stream message that may carry a stream-id (``dcp_stream_id.h``)."""

    vbucket: int
    stream_id: int | None = None

    def frame_stream_id(self) -> int | None:
        return self.stream_id
