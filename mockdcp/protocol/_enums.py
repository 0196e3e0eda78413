"""Wire constants of the memcached binary protocol as a DCP connection uses them.

Every number here is a byte on the wire. Sources: kv_engine
``include/mcbp/protocol/{magic,opcode,status,feature,datatype}.h``,
``include/memcached/protocol_binary.h`` and ``docs/BinaryProtocol.md``.
Enum members carry a ``#:`` comment saying where a DCP client meets them.
"""

from __future__ import annotations

import enum


class Magic(enum.IntEnum):
    """Byte 0 of every frame (``docs/BinaryProtocol.md``, "Magic Byte")."""

    #: Classic request; also every DCP stream message the producer sends.
    REQUEST = 0x80
    #: Classic response; also the consumer's answer to DCP_NOOP.
    RESPONSE = 0x81
    #: Server-initiated request (duplex), e.g. cluster-map change notification.
    SERVER_REQUEST = 0x82
    #: Client's reply to a server-initiated request.
    SERVER_RESPONSE = 0x83
    #: Request with flexible framing extras (stream-id on DCP messages).
    ALT_REQUEST = 0x08
    #: Response with flexible framing extras (tracing); mockdcp never sends it.
    ALT_RESPONSE = 0x18

    @property
    def is_request(self) -> bool:
        return self in (Magic.REQUEST, Magic.ALT_REQUEST, Magic.SERVER_REQUEST)

    @property
    def has_framing_extras(self) -> bool:
        return self in (Magic.ALT_REQUEST, Magic.ALT_RESPONSE)


class Opcode(enum.IntEnum):
    """Byte 1: the command (``include/mcbp/protocol/opcode.h``)."""

    #: KV document commands (kv_engine ``docs/BinaryProtocol.md``): GET..DELETE, TOUCH,
    #: GAT, GET_META and the sub-document multi-path commands.
    GET = 0x00
    #: Server push (magic 0x82) or a KV SET (magic 0x80); context decides.
    SET = 0x01
    ADD = 0x02
    REPLACE = 0x03
    DELETE = 0x04
    TOUCH = 0x1C
    GAT = 0x1D
    GET_META = 0xA0
    SUBDOC_MULTI_LOOKUP = 0xD0
    SUBDOC_MULTI_MUTATION = 0xD1
    NOOP = 0x0A
    VERSION = 0x0B
    HELLO = 0x1F
    SASL_LIST_MECHS = 0x20
    SASL_AUTH = 0x21
    SASL_STEP = 0x22
    GET_ALL_VB_SEQNOS = 0x48
    DCP_OPEN = 0x50
    DCP_ADD_STREAM = 0x51
    DCP_CLOSE_STREAM = 0x52
    DCP_STREAM_REQ = 0x53
    DCP_GET_FAILOVER_LOG = 0x54
    DCP_STREAM_END = 0x55
    DCP_SNAPSHOT_MARKER = 0x56
    DCP_MUTATION = 0x57
    DCP_DELETION = 0x58
    DCP_EXPIRATION = 0x59
    DCP_FLUSH = 0x5A
    DCP_SET_VBUCKET_STATE = 0x5B
    DCP_NOOP = 0x5C
    DCP_BUFFER_ACKNOWLEDGEMENT = 0x5D
    DCP_CONTROL = 0x5E
    DCP_SYSTEM_EVENT = 0x5F
    DCP_PREPARE = 0x60
    DCP_SEQNO_ACKNOWLEDGED = 0x61
    DCP_COMMIT = 0x62
    DCP_ABORT = 0x63
    DCP_SEQNO_ADVANCED = 0x64
    DCP_OSO_SNAPSHOT = 0x65
    DCP_CACHE_TRANSFER = 0x66
    DCP_CACHE_TRANSFER_END = 0x67
    SELECT_BUCKET = 0x89
    OBSERVE_SEQNO = 0x91
    GET_FAILOVER_LOG = 0x96
    GET_CLUSTER_CONFIG = 0xB5
    GET_COLLECTIONS_MANIFEST = 0xBA
    GET_COLLECTION_ID = 0xBB
    GET_SCOPE_ID = 0xBC
    GET_ERROR_MAP = 0xFE


#: Server-push opcode (magic 0x82): the cluster map changed.
CLUSTERMAP_CHANGE_NOTIFICATION = 0x01


class Status(enum.IntEnum):
    """Bytes 6-7 of a response (``include/mcbp/protocol/status.h``)."""

    SUCCESS = 0x00
    #: No stream to close; unknown bucket; no cluster map.
    KEY_ENOENT = 0x01
    #: An active stream already exists for (vbucket, sid).
    KEY_EEXISTS = 0x02
    E2BIG = 0x03
    #: Malformed request, bad control key/value, bad flags.
    EINVAL = 0x04
    #: The vbucket is not active (or not here).
    NOT_MY_VBUCKET = 0x07
    #: A KV write that could not be stored (e.g. sub-document ADD on an existing doc).
    NOT_STORED = 0x05
    #: A bucket is needed and none is selected.
    NO_BUCKET = 0x08
    #: Sent by a consumer only (v7 DCP status codes).
    DCP_STREAM_NOT_FOUND = 0x0A
    #: Sent by a consumer only (v7 DCP status codes).
    OPAQUE_NO_MATCH = 0x0B
    #: SASL failure.
    AUTH_ERROR = 0x20
    #: SASL needs another step (a "success class" status).
    AUTH_CONTINUE = 0x21
    #: start/end/snapshot range inconsistent.
    ERANGE = 0x22
    #: Stream request must roll back; value = u64 rollback seqno.
    ROLLBACK = 0x23
    #: No privilege.
    EACCESS = 0x24
    UNKNOWN_COMMAND = 0x81
    ENOMEM = 0x82
    #: Known but refused (control keys, noop mandatory).
    NOT_SUPPORTED = 0x83
    EINTERNAL = 0x84
    EBUSY = 0x85
    ETMPFAIL = 0x86
    UNKNOWN_COLLECTION = 0x88
    #: A stream request's ``uid`` is above the node's manifest uid.
    COLLECTIONS_MANIFEST_IS_AHEAD = 0x8B
    UNKNOWN_SCOPE = 0x8C
    #: Stream-id present when not enabled, or absent when enabled.
    DCP_STREAMID_INVALID = 0x8D
    #: A write of a document whose durable write (prepare) is still pending
    #: (``status.h`` SyncWriteInProgress).
    SYNC_WRITE_IN_PROGRESS = 0xA2
    #: Sub-document statuses (kv_engine ``include/mcbp/protocol/status.h``).
    SUBDOC_PATH_ENOENT = 0xC0
    SUBDOC_PATH_MISMATCH = 0xC1
    SUBDOC_PATH_EINVAL = 0xC2
    SUBDOC_PATH_E2BIG = 0xC3
    SUBDOC_DOC_E2DEEP = 0xC4
    SUBDOC_VALUE_CANTINSERT = 0xC5
    SUBDOC_DOC_NOT_JSON = 0xC6
    SUBDOC_NUM_ERANGE = 0xC7
    SUBDOC_DELTA_EINVAL = 0xC8
    SUBDOC_PATH_EEXISTS = 0xC9
    SUBDOC_VALUE_ETOODEEP = 0xCA
    SUBDOC_INVALID_COMBO = 0xCB
    #: Some specs of a multi-path command failed: the value says which.
    SUBDOC_MULTI_PATH_FAILURE = 0xCC
    #: Success, on a deleted document (ACCESS_DELETED).
    SUBDOC_SUCCESS_DELETED = 0xCD
    SUBDOC_XATTR_INVALID_FLAG_COMBO = 0xCE
    SUBDOC_XATTR_INVALID_KEY_COMBO = 0xCF
    SUBDOC_XATTR_UNKNOWN_MACRO = 0xD0
    SUBDOC_XATTR_UNKNOWN_VATTR = 0xD1
    SUBDOC_XATTR_CANT_MODIFY_VATTR = 0xD2
    SUBDOC_MULTI_PATH_FAILURE_DELETED = 0xD3
    SUBDOC_INVALID_XATTR_ORDER = 0xD4


class Datatype(enum.IntFlag):
    """Byte 5: what the value bytes are (``include/mcbp/protocol/datatype.h``)."""

    RAW = 0x00
    JSON = 0x01
    SNAPPY = 0x02
    XATTR = 0x04


class HelloFeature(enum.IntEnum):
    """The u16 codes of HELLO (``include/mcbp/protocol/feature.h``)."""

    DATATYPE = 0x01
    TLS = 0x02
    TCP_NODELAY = 0x03
    MUTATION_SEQNO = 0x04
    TCP_DELAY = 0x05
    XATTR = 0x06
    XERROR = 0x07
    SELECT_BUCKET = 0x08
    INVALID_09 = 0x09
    SNAPPY = 0x0A
    JSON = 0x0B
    DUPLEX = 0x0C
    CLUSTERMAP_CHANGE_NOTIFICATION = 0x0D
    UNORDERED_EXECUTION = 0x0E
    TRACING = 0x0F
    ALT_REQUEST_SUPPORT = 0x10
    SYNC_REPLICATION = 0x11
    COLLECTIONS = 0x12
    SNAPPY_EVERYWHERE = 0x13
    PRESERVE_TTL = 0x14
    VATTR = 0x15
    POINT_IN_TIME_RECOVERY = 0x16
    SUBDOC_CREATE_AS_DELETED = 0x17
    SUBDOC_DOCUMENT_MACRO_SUPPORT = 0x18
    SUBDOC_REPLACE_BODY_WITH_XATTR = 0x19
    REPORT_UNIT_USAGE = 0x1A
    NON_BLOCKING_THROTTLING_MODE = 0x1B
    SUBDOC_REPLICA_READ = 0x1C
    GET_CLUSTER_CONFIG_WITH_KNOWN_VERSION = 0x1D
    DEDUPE_NOT_MY_VBUCKET_CLUSTERMAP = 0x1E
    CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF = 0x1F
    SUBDOC_ALLOWS_ACCESS_ON_MULTIPLE_XATTR_KEYS = 0x20
    SUBDOC_BINARY_XATTR = 0x21
    RANGE_SCAN_INCLUDE_XATTR = 0x22
    SUBDOC_ALLOW_REPLICA_READ_ON_DELETED_DOCS = 0x23
    GET_RANDOM_KEY_INCLUDE_XATTR = 0x24
    MUTATE_WITH_META = 0x25
    DCP_SKIP_DELETES_IN_INITIAL_BACKFILL = 0x26


class DcpOpenFlag(enum.IntFlag):
    """DCP_OPEN extras flags (kv_engine ``docs/dcp/documentation/commands/open-connection.md``)."""

    PRODUCER = 0x001
    #: Retired (NOTIFIER): EINVAL.
    NOTIFIER = 0x002
    INCLUDE_XATTRS = 0x004
    NO_VALUE = 0x008
    #: Never used: EINVAL.
    UNUSED_10 = 0x010
    INCLUDE_DELETE_TIMES = 0x020
    NO_VALUE_WITH_UNDERLYING_DATATYPE = 0x040
    #: Retired (point-in-time recovery): EINVAL.
    PITR = 0x080
    INCLUDE_DELETED_USER_XATTRS = 0x100
    SKIP_DELETES_IN_INITIAL_BACKFILL = 0x200


class StreamFlag(enum.IntFlag):
    """DCP_STREAM_REQ extras flags (``include/mcbp/protocol/dcp_add_stream_flags.h``)."""

    TAKEOVER = 0x001
    DISK_ONLY = 0x002
    TO_LATEST = 0x004
    #: Removed in 5.0: EINVAL ("flag is no longer used").
    NO_VALUE = 0x008
    ACTIVE_VB_ONLY = 0x010
    STRICT_VBUUID = 0x020
    FROM_LATEST = 0x040
    IGNORE_PURGED_TOMBSTONES = 0x080
    CACHE_TRANSFER = 0x100


class SnapshotFlag(enum.IntFlag):
    """Snapshot marker type bits (kv_engine ``docs/dcp/documentation/commands/snapshot-marker.md``;
    0x01 is MEMORY, not disk)."""

    MEMORY = 0x01
    DISK = 0x02
    CHECKPOINT = 0x04
    ACK = 0x08
    HISTORY = 0x10
    MAY_CONTAIN_DUPLICATE_KEYS = 0x20


class SnapshotMarkerVersion(enum.Enum):
    """How a snapshot marker is laid out: V1 in extras, V2.x in the value (kv_engine
    ``docs/dcp/documentation/commands/snapshot-marker.md``)."""

    V1 = "1"
    #: Extras = version byte 0x00; value = start, end, flags, max visible, high completed.
    V2_0 = "2.0"
    #: Extras = version byte 0x02; V2.0 plus purge seqno (and high prepared seqno).
    V2_2 = "2.2"


class StreamEndReason(enum.IntEnum):
    """DCP_STREAM_END extras (``include/mcbp/protocol/dcp_stream_end_status.h``)."""

    #: End seqno reached (or DISK_ONLY finished, or start >= end).
    OK = 0
    #: After CLOSE_STREAM with send_stream_end_on_client_close_stream.
    CLOSED = 1
    #: The vbucket changed state; also what internal ROLLBACK becomes on the wire.
    STATE_CHANGED = 2
    #: Never on the wire.
    DISCONNECTED = 3
    #: Backfill idle protection only.
    TOO_SLOW = 4
    BACKFILL_FAILED = 5
    #: Never on the wire: converted to STATE_CHANGED (kv_engine ``dcp/response.h``
    #: ``StreamEndResponse::statusToFlags``). A node ends streams with it when their
    #: vbucket rolls back (``DcpProducer::closeStreamDueToRollback``) or a backfill's
    #: range was purged (``backfill_by_seqno_disk.cc``, ``backfill_memory.cc``); the
    #: consumer re-opens and is answered ROLLBACK (``producer._stream.wire_end_reason``).
    ROLLBACK = 6
    #: Collection-aware connections only; OK otherwise.
    FILTER_EMPTY = 7
    #: Collection-aware connections only; OK otherwise.
    LOST_PRIVILEGES = 8


class SystemEventType(enum.IntEnum):
    """DCP_SYSTEM_EVENT event ids (``docs/dcp/documentation/commands/system_event.md``)."""

    BEGIN_COLLECTION = 0
    END_COLLECTION = 1
    FLUSH_COLLECTION = 2
    CREATE_SCOPE = 3
    DROP_SCOPE = 4
    MODIFY_COLLECTION = 5


class VBucketState(enum.IntEnum):
    """Vbucket states as DCP_SET_VBUCKET_STATE and GET_ALL_VB_SEQNOS spell them."""

    ACTIVE = 1
    REPLICA = 2
    PENDING = 3
    DEAD = 4


class OsoSnapshotFlag(enum.IntFlag):
    """DCP_OSO_SNAPSHOT extras flags."""

    START = 0x01
    END = 0x02
