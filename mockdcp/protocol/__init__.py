"""The wire codec: frames, messages, LEB128, SASL, cluster config. Pure: no I/O, no clock.

The enums, the frame layer and the document-frame encoder load at once; the message
classes, values, SASL and the error map load on first use (``__getattr__``): creating
the attrs message classes costs about 0.1 s, which ``mockdcp serve`` spends after it is
ready rather than before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.protocol._document_frame import (
    AFTER_ALL_SEQNOS as AFTER_ALL_SEQNOS,
    MUTATION_FRAME as MUTATION_FRAME,
    collection_prefix as collection_prefix,
    document_head as document_head,
    encode_document_frame as encode_document_frame,
    encode_seqno_advanced_frame as encode_seqno_advanced_frame,
    encode_system_event_frame as encode_system_event_frame,
    stream_frame_seqno as stream_frame_seqno,
    stream_item_seqno as stream_item_seqno,
)
from mockdcp.protocol._enums import *  # noqa: F403
from mockdcp.protocol._errors import (
    LocalProtocolError as LocalProtocolError,
    ProtocolError as ProtocolError,
    RemoteProtocolError as RemoteProtocolError,
)
from mockdcp.protocol._frame import (
    DEFAULT_MAX_FRAME_SIZE as DEFAULT_MAX_FRAME_SIZE,
    HEADER_SIZE as HEADER_SIZE,
    Frame as Frame,
    FrameReader as FrameReader,
    encode_frame as encode_frame,
    iter_frame_infos as iter_frame_infos,
    stream_id_frame_info as stream_id_frame_info,
)
from mockdcp.protocol._leb128 import (
    decode_leb128 as decode_leb128,
    encode_leb128 as encode_leb128,
)
from mockdcp.util import lazy_getattr

if TYPE_CHECKING:
    from mockdcp.protocol._cluster_config import (
        SERVER_VERSION as SERVER_VERSION,
        cluster_config as cluster_config,
        encode_config as encode_config,
        manifest_uid_error_body as manifest_uid_error_body,
    )
    from mockdcp.protocol._document_requests import (
        Add as Add,
        Delete as Delete,
        DocFlag as DocFlag,
        DocumentRequest as DocumentRequest,
        Get as Get,
        GetAndTouch as GetAndTouch,
        GetMeta as GetMeta,
        PathFlag as PathFlag,
        Replace as Replace,
        Set as Set,
        SubdocMultiLookup as SubdocMultiLookup,
        SubdocMultiMutation as SubdocMultiMutation,
        SubdocOpcode as SubdocOpcode,
        SubdocSpec as SubdocSpec,
        Touch as Touch,
        encode_get_meta_extras as encode_get_meta_extras,
        encode_lookup_results as encode_lookup_results,
        encode_mutation_failure as encode_mutation_failure,
        encode_mutation_results as encode_mutation_results,
        encode_mutation_token as encode_mutation_token,
        split_collection as split_collection,
    )
    from mockdcp.protocol._errormap import (
        error_map as error_map,
    )
    from mockdcp.protocol._flatbuffers import (
        CollectionEventV2 as CollectionEventV2,
        DroppedCollectionV2 as DroppedCollectionV2,
        DroppedScopeV2 as DroppedScopeV2,
        ScopeEventV2 as ScopeEventV2,
        encode_flatbuffers_value as encode_flatbuffers_value,
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
    from mockdcp.protocol._sasl import (
        SaslClient as SaslClient,
        SaslResult as SaslResult,
        SaslServer as SaslServer,
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

_LAZY: dict[str, str] = {
    "CollectionEventV2": "_flatbuffers",
    "DroppedCollectionV2": "_flatbuffers",
    "DroppedScopeV2": "_flatbuffers",
    "ScopeEventV2": "_flatbuffers",
    "encode_flatbuffers_value": "_flatbuffers",
    "Add": "_document_requests",
    "Delete": "_document_requests",
    "DocFlag": "_document_requests",
    "DocumentRequest": "_document_requests",
    "Get": "_document_requests",
    "GetAndTouch": "_document_requests",
    "GetMeta": "_document_requests",
    "PathFlag": "_document_requests",
    "Replace": "_document_requests",
    "Set": "_document_requests",
    "SubdocMultiLookup": "_document_requests",
    "SubdocMultiMutation": "_document_requests",
    "SubdocOpcode": "_document_requests",
    "SubdocSpec": "_document_requests",
    "Touch": "_document_requests",
    "encode_get_meta_extras": "_document_requests",
    "encode_lookup_results": "_document_requests",
    "encode_mutation_failure": "_document_requests",
    "encode_mutation_results": "_document_requests",
    "encode_mutation_token": "_document_requests",
    "split_collection": "_document_requests",
    "SERVER_VERSION": "_cluster_config",
    "cluster_config": "_cluster_config",
    "encode_config": "_cluster_config",
    "manifest_uid_error_body": "_cluster_config",
    "Abort": "_messages",
    "ClusterMapChangeNotification": "_messages",
    "CollectionEventData": "_values",
    "Commit": "_messages",
    "DcpAddStream": "_messages",
    "DcpBufferAck": "_messages",
    "DcpCloseStream": "_messages",
    "DcpControl": "_messages",
    "DcpGetFailoverLog": "_messages",
    "DcpNoop": "_messages",
    "DcpOpen": "_messages",
    "DcpSeqnoAcknowledged": "_messages",
    "DcpStreamRequest": "_messages",
    "Deletion": "_messages",
    "DocumentMessage": "_messages",
    "Expiration": "_messages",
    "GetAllVbSeqnos": "_messages",
    "GetClusterConfig": "_messages",
    "GetCollectionId": "_messages",
    "GetCollectionsManifest": "_messages",
    "GetErrorMap": "_messages",
    "GetScopeId": "_messages",
    "Hello": "_messages",
    "Message": "_messages",
    "Mutation": "_messages",
    "Noop": "_messages",
    "ObserveSeqno": "_messages",
    "ObserveSeqnoResult": "_values",
    "OsoSnapshot": "_messages",
    "Prepare": "_messages",
    "Response": "_messages",
    "SaslAuth": "_messages",
    "SaslClient": "_sasl",
    "SaslListMechs": "_messages",
    "SaslResult": "_sasl",
    "SaslServer": "_sasl",
    "SaslStep": "_messages",
    "ScopeEventData": "_values",
    "SelectBucket": "_messages",
    "SeqnoAdvanced": "_messages",
    "SetVbucketState": "_messages",
    "SnapshotMarker": "_messages",
    "StreamEnd": "_messages",
    "StreamMessage": "_messages",
    "StreamRequestValue": "_stream_value",
    "SystemEvent": "_messages",
    "Version": "_messages",
    "collection_event": "_messages",
    "decode_all_vb_seqnos": "_values",
    "decode_client_message": "_messages",
    "decode_failover_log": "_values",
    "decode_hello_features": "_values",
    "decode_id_lookup_extras": "_values",
    "decode_rollback_value": "_values",
    "decode_server_message": "_messages",
    "encode_all_vb_seqnos": "_values",
    "encode_failover_log": "_values",
    "encode_hello_features": "_values",
    "encode_id_lookup_extras": "_values",
    "encode_rollback_value": "_values",
    "encode_xattrs": "_values",
    "error_map": "_errormap",
    "parse_system_event_value": "_values",
    "scope_event": "_messages",
    "split_xattrs": "_values",
    "strip_user_xattrs": "_values",
}


if not TYPE_CHECKING:
    # At run time only: the type checker sees the names imported above and nothing
    # else, so a misspelled import fails ``mypy --strict`` (tests/test_exports.py).
    __getattr__ = lazy_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
