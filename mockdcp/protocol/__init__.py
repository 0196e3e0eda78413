"""The wire codec: frames, messages, LEB128, SASL, cluster config. Pure: no I/O, no clock."""

from __future__ import annotations

from mockdcp.protocol._enums import *  # noqa: F403
from mockdcp.protocol._frame import (
    DEFAULT_MAX_FRAME_SIZE as DEFAULT_MAX_FRAME_SIZE,
    HEADER_SIZE as HEADER_SIZE,
    Frame as Frame,
    FrameReader as FrameReader,
    encode_frame as encode_frame,
    iter_frame_infos as iter_frame_infos,
    stream_id_frame_info as stream_id_frame_info,
)
from mockdcp.protocol._errormap import (
    error_map as error_map,
)
from mockdcp.protocol._leb128 import (
    decode_leb128 as decode_leb128,
    encode_leb128 as encode_leb128,
)
from mockdcp.protocol._messages import (
    Abort as Abort,
    ClusterMapChangeNotification as ClusterMapChangeNotification,
    Commit as Commit,
    DcpAddStream as DcpAddStream,
    DcpBufferAck as DcpBufferAck,
    DcpCloseStream as DcpCloseStream,
    DcpControl as DcpControl,
    DcpGetFailoverLog as DcpGetFailoverLog,
    DcpNoop as DcpNoop,
    DcpOpen as DcpOpen,
    DcpSeqnoAcknowledged as DcpSeqnoAcknowledged,
    DcpStreamRequest as DcpStreamRequest,
    Deletion as Deletion,
    DocumentMessage as DocumentMessage,
    Expiration as Expiration,
    GetAllVbSeqnos as GetAllVbSeqnos,
    GetClusterConfig as GetClusterConfig,
    GetCollectionId as GetCollectionId,
    GetCollectionsManifest as GetCollectionsManifest,
    GetErrorMap as GetErrorMap,
    GetScopeId as GetScopeId,
    Hello as Hello,
    Message as Message,
    Mutation as Mutation,
    Noop as Noop,
    ObserveSeqno as ObserveSeqno,
    OsoSnapshot as OsoSnapshot,
    Prepare as Prepare,
    Response as Response,
    SaslAuth as SaslAuth,
    SaslListMechs as SaslListMechs,
    SaslStep as SaslStep,
    SelectBucket as SelectBucket,
    SeqnoAdvanced as SeqnoAdvanced,
    SetVbucketState as SetVbucketState,
    SnapshotMarker as SnapshotMarker,
    StreamEnd as StreamEnd,
    StreamMessage as StreamMessage,
    SystemEvent as SystemEvent,
    Version as Version,
    collection_event as collection_event,
    decode_client_message as decode_client_message,
    decode_server_message as decode_server_message,
    scope_event as scope_event,
)
from mockdcp.protocol._stream_value import (
    StreamRequestValue as StreamRequestValue,
)
from mockdcp.protocol._values import (
    CollectionEventData as CollectionEventData,
    ObserveSeqnoResult as ObserveSeqnoResult,
    ScopeEventData as ScopeEventData,
    decode_all_vb_seqnos as decode_all_vb_seqnos,
    decode_failover_log as decode_failover_log,
    decode_hello_features as decode_hello_features,
    decode_id_lookup_extras as decode_id_lookup_extras,
    decode_rollback_value as decode_rollback_value,
    encode_all_vb_seqnos as encode_all_vb_seqnos,
    encode_failover_log as encode_failover_log,
    encode_hello_features as encode_hello_features,
    encode_id_lookup_extras as encode_id_lookup_extras,
    encode_rollback_value as encode_rollback_value,
    encode_xattrs as encode_xattrs,
    parse_system_event_value as parse_system_event_value,
    split_xattrs as split_xattrs,
    strip_user_xattrs as strip_user_xattrs,
)

from mockdcp.protocol._messages import encode_document_frame as encode_document_frame  # noqa: E402

_LAZY = {"SaslClient", "SaslResult", "SaslServer"}


def __getattr__(name: str) -> object:
    """SASL (and scramp, which pulls in ssl) is imported on first use: it is not needed
    until a client authenticates, and ``mockdcp serve`` starts faster without it."""
    if name in _LAZY:
        from mockdcp.protocol import _sasl

        return getattr(_sasl, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
