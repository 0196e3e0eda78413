"""The wire codec: frames, messages, LEB128, SASL, cluster config. Pure: no I/O, no clock.

The enums, the frame layer and the document-frame encoder load at once; the message
classes, values, SASL and the error map load on first use (``__getattr__``): creating
the attrs message classes costs about 0.1 s, which ``mockdcp serve`` spends after it is
ready rather than before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp._lazy import lazy_getattr
from mockdcp.protocol._document_frame import encode_document_frame as encode_document_frame
from mockdcp.protocol._enums import *  # noqa: F403
from mockdcp.protocol._frame import (
    DEFAULT_MAX_FRAME_SIZE as DEFAULT_MAX_FRAME_SIZE,
)
from mockdcp.protocol._frame import (
    HEADER_SIZE as HEADER_SIZE,
)
from mockdcp.protocol._frame import (
    Frame as Frame,
)
from mockdcp.protocol._frame import (
    FrameReader as FrameReader,
)
from mockdcp.protocol._frame import (
    encode_frame as encode_frame,
)
from mockdcp.protocol._frame import (
    iter_frame_infos as iter_frame_infos,
)
from mockdcp.protocol._frame import (
    stream_id_frame_info as stream_id_frame_info,
)
from mockdcp.protocol._leb128 import (
    decode_leb128 as decode_leb128,
)
from mockdcp.protocol._leb128 import (
    encode_leb128 as encode_leb128,
)

if TYPE_CHECKING:
    from mockdcp.protocol._errormap import (
        error_map as error_map,
    )
    from mockdcp.protocol._messages import (
        Abort as Abort,
    )
    from mockdcp.protocol._messages import (
        ClusterMapChangeNotification as ClusterMapChangeNotification,
    )
    from mockdcp.protocol._messages import (
        Commit as Commit,
    )
    from mockdcp.protocol._messages import (
        DcpAddStream as DcpAddStream,
    )
    from mockdcp.protocol._messages import (
        DcpBufferAck as DcpBufferAck,
    )
    from mockdcp.protocol._messages import (
        DcpCloseStream as DcpCloseStream,
    )
    from mockdcp.protocol._messages import (
        DcpControl as DcpControl,
    )
    from mockdcp.protocol._messages import (
        DcpGetFailoverLog as DcpGetFailoverLog,
    )
    from mockdcp.protocol._messages import (
        DcpNoop as DcpNoop,
    )
    from mockdcp.protocol._messages import (
        DcpOpen as DcpOpen,
    )
    from mockdcp.protocol._messages import (
        DcpSeqnoAcknowledged as DcpSeqnoAcknowledged,
    )
    from mockdcp.protocol._messages import (
        DcpStreamRequest as DcpStreamRequest,
    )
    from mockdcp.protocol._messages import (
        Deletion as Deletion,
    )
    from mockdcp.protocol._messages import (
        DocumentMessage as DocumentMessage,
    )
    from mockdcp.protocol._messages import (
        Expiration as Expiration,
    )
    from mockdcp.protocol._messages import (
        GetAllVbSeqnos as GetAllVbSeqnos,
    )
    from mockdcp.protocol._messages import (
        GetClusterConfig as GetClusterConfig,
    )
    from mockdcp.protocol._messages import (
        GetCollectionId as GetCollectionId,
    )
    from mockdcp.protocol._messages import (
        GetCollectionsManifest as GetCollectionsManifest,
    )
    from mockdcp.protocol._messages import (
        GetErrorMap as GetErrorMap,
    )
    from mockdcp.protocol._messages import (
        GetScopeId as GetScopeId,
    )
    from mockdcp.protocol._messages import (
        Hello as Hello,
    )
    from mockdcp.protocol._messages import (
        Message as Message,
    )
    from mockdcp.protocol._messages import (
        Mutation as Mutation,
    )
    from mockdcp.protocol._messages import (
        Noop as Noop,
    )
    from mockdcp.protocol._messages import (
        ObserveSeqno as ObserveSeqno,
    )
    from mockdcp.protocol._messages import (
        OsoSnapshot as OsoSnapshot,
    )
    from mockdcp.protocol._messages import (
        Prepare as Prepare,
    )
    from mockdcp.protocol._messages import (
        Response as Response,
    )
    from mockdcp.protocol._messages import (
        SaslAuth as SaslAuth,
    )
    from mockdcp.protocol._messages import (
        SaslListMechs as SaslListMechs,
    )
    from mockdcp.protocol._messages import (
        SaslStep as SaslStep,
    )
    from mockdcp.protocol._messages import (
        SelectBucket as SelectBucket,
    )
    from mockdcp.protocol._messages import (
        SeqnoAdvanced as SeqnoAdvanced,
    )
    from mockdcp.protocol._messages import (
        SetVbucketState as SetVbucketState,
    )
    from mockdcp.protocol._messages import (
        SnapshotMarker as SnapshotMarker,
    )
    from mockdcp.protocol._messages import (
        StreamEnd as StreamEnd,
    )
    from mockdcp.protocol._messages import (
        StreamMessage as StreamMessage,
    )
    from mockdcp.protocol._messages import (
        SystemEvent as SystemEvent,
    )
    from mockdcp.protocol._messages import (
        Version as Version,
    )
    from mockdcp.protocol._messages import (
        collection_event as collection_event,
    )
    from mockdcp.protocol._messages import (
        decode_client_message as decode_client_message,
    )
    from mockdcp.protocol._messages import (
        decode_server_message as decode_server_message,
    )
    from mockdcp.protocol._messages import (
        scope_event as scope_event,
    )
    from mockdcp.protocol._sasl import SaslClient as SaslClient
    from mockdcp.protocol._sasl import SaslResult as SaslResult
    from mockdcp.protocol._sasl import SaslServer as SaslServer
    from mockdcp.protocol._stream_value import (
        StreamRequestValue as StreamRequestValue,
    )
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

_LAZY: dict[str, str] = {
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


__getattr__ = lazy_getattr(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
