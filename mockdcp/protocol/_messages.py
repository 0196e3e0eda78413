"""Message classes: the meaning of a ``Frame`` (kv_engine ``docs/BinaryProtocol.md``,
``docs/dcp/documentation/commands/*.md``).

One frozen, keyword-only attrs class per command. ``encode()`` gives the frame's bytes;
``decode(frame)`` checks the frame's shape the way kv_engine's ``mcbp_validators.cc``
does (extras length, key and value present or absent, datatype bits allowed) and raises
``RemoteProtocolError`` with status EINVAL naming the ``field`` at fault. Do not subclass
these classes outside this module: the dispatchers look them up by opcode.

Header fields that belong to a message are attributes: ``opaque`` everywhere, ``vbucket``
where the header carries one, ``cas`` on document messages, and ``stream_id`` on the DCP
stream messages (``None`` = classic magic 0x80; a number = magic 0x08 with the framing
extras ``22 NN NN``, kv_engine ``docs/BinaryProtocol.md``, "ID:2 - DCP stream-ID").

Document keys (mutation, deletion, expiration, prepare, commit, abort) carry a LEB128
collection-id prefix on connections that negotiated HELLO COLLECTIONS (kv_engine
``docs/Collections.md``). The message holds the bare key and ``collection_id`` (``None`` =
no prefix); ``decode`` must be told with ``collections=True`` that a prefix is there.

The classes live in ``_message_base`` (shape checks, ``Message``), ``_requests`` (what a
client sends) and ``_stream_messages`` (what a producer sends); value helpers in
``_values``. This module holds ``Response`` and the two dispatchers,
``decode_client_message`` (what a producer receives) and ``decode_server_message`` (what
a consumer receives), and re-exports every message class.
"""

from __future__ import annotations

from typing import Self

import attrs

from mockdcp.protocol._enums import (
    CLUSTERMAP_CHANGE_NOTIFICATION,
    Magic,
    Status,
)
from mockdcp.protocol._errors import RemoteProtocolError
from mockdcp.protocol._frame import Frame, encode_frame
from mockdcp.protocol._message_base import (
    ALL_DATATYPES as ALL_DATATYPES,
    MAX_NAME_LENGTH as MAX_NAME_LENGTH,
    Message as Message,
    Need as Need,
    Parts as Parts,
    Shape as Shape,
    StreamMessage as StreamMessage,
    _einval,
    _enum_or_int,
    check_shape as check_shape,
)
from mockdcp.protocol._requests import (
    DcpAddStream as DcpAddStream,
    DcpBufferAck as DcpBufferAck,
    DcpCloseStream as DcpCloseStream,
    DcpControl as DcpControl,
    DcpGetFailoverLog as DcpGetFailoverLog,
    DcpOpen as DcpOpen,
    DcpSeqnoAcknowledged as DcpSeqnoAcknowledged,
    DcpStreamRequest as DcpStreamRequest,
    GetAllVbSeqnos as GetAllVbSeqnos,
    GetClusterConfig as GetClusterConfig,
    GetCollectionId as GetCollectionId,
    GetCollectionsManifest as GetCollectionsManifest,
    GetErrorMap as GetErrorMap,
    GetScopeId as GetScopeId,
    Hello as Hello,
    Noop as Noop,
    ObserveSeqno as ObserveSeqno,
    SaslAuth as SaslAuth,
    SaslListMechs as SaslListMechs,
    SaslStep as SaslStep,
    SelectBucket as SelectBucket,
    Version as Version,
    _IdLookup as _IdLookup,
    _SaslMessage as _SaslMessage,
)
from mockdcp.protocol._stream_messages import (
    Abort as Abort,
    ClusterMapChangeNotification as ClusterMapChangeNotification,
    Commit as Commit,
    DcpNoop as DcpNoop,
    Deletion as Deletion,
    DocumentMessage as DocumentMessage,
    Expiration as Expiration,
    Mutation as Mutation,
    OsoSnapshot as OsoSnapshot,
    Prepare as Prepare,
    SeqnoAdvanced as SeqnoAdvanced,
    SetVbucketState as SetVbucketState,
    SnapshotMarker as SnapshotMarker,
    StreamEnd as StreamEnd,
    SystemEvent as SystemEvent,
    collection_event as collection_event,
    scope_event as scope_event,
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
        """The frame's bytes (kv_engine ``docs/BinaryProtocol.md``)."""
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


# -- dispatchers ---------------------------------------------------------------------------

#: What a producer receives as requests, by opcode (the KV document commands join it
#: when the first request is decoded: ``_client_request``).
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


def _client_request(opcode: int) -> type[Message] | None:
    """The class of a client request: the KV document commands (``_document_requests``)
    join ``CLIENT_REQUESTS`` the first time a request is decoded, by the producer; a
    consumer, which only decodes what a producer sends, never loads them (their attrs
    classes are a tenth of a consumer process's imports)."""
    if not _DOCUMENTS_JOINED:
        from mockdcp.protocol._document_requests import DOCUMENT_REQUESTS

        CLIENT_REQUESTS.update({cls.OPCODE: cls for cls in DOCUMENT_REQUESTS})
        _DOCUMENTS_JOINED.append(True)
    return CLIENT_REQUESTS.get(opcode)


#: not empty once the KV document commands joined ``CLIENT_REQUESTS``
_DOCUMENTS_JOINED: list[bool] = []

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
    cls = _client_request(frame.opcode)
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
