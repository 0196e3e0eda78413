"""Server version profiles: what a 7.0, 7.2, 7.6 or 8.0 data node grants, accepts and
reports, one frozen record per version (``PROFILES``), the default the newest.

The producer's negotiation rules consult the profile of the node (HELLO, DCP_CONTROL,
DCP_STREAM_REQ flags); the cluster config and ``/pools`` report its version, cluster
compatibility and bucket capabilities. Every fact is from the release's source, read at
its tag in couchbase/kv_engine (``v7.0.0``, ``v7.2.0``, ``v7.6.0``, ``v8.0.0``) and
couchbase/ns_server:

* HELLO: ``include/mcbp/protocol/feature.h`` and
  ``daemon/protocol/mcbp/hello_packet_executor.cc`` (a feature the release does not
  know is not granted). Only features the mock implements are granted at all.
* DCP_CONTROL: ``DcpProducer::control`` in ``engines/ep/src/dcp/producer.cc``; a key the
  release does not know falls through to its last line, ``invalid_arguments``: EINVAL.
* DCP_STREAM_REQ flags: ``daemon/mcbp_validators.cc``. Until 7.2 the stream-request
  validator did not look at the flags (``dcp_stream_req_validator`` at ``v7.0.0``) and
  the producer read only those it knew: the others were ignored. From 7.2 (MB-55441,
  ``verify_common_dcp_stream_restrictions``) a flag outside the release's mask is EINVAL.
* Bucket capabilities: ns_server ``bucket_info_cache.erl``
  (``build_bucket_capabilities``, by cluster compat version); cluster compatibility:
  ``cluster_compat_mode.erl`` (``effective_cluster_compat_version``: major * 0x10000 +
  minor) and ``menelaus_web_pools.erl`` (``clusterCompatVersion``, "major.minor").
* GET_ALL_VB_SEQNOS takes the collection-filtered form (extras of 8 bytes) in all four:
  ``get_all_vb_seqnos_validator`` is the same at ``v7.0.0`` and ``v8.0.0``.

What is newer than 8.0 (kv_engine's master after ``v8.0.x``: the ``cache_transfer``
control and the CACHE_TRANSFER stream flag, HELLO ``DcpSkipDeletesInInitialBackfill``,
the DCP_OPEN flag of that name) is in no profile: every profile refuses it.
"""

from __future__ import annotations

import re

import attrs

from mockdcp.protocol._enums import HelloFeature, StreamFlag

_F = HelloFeature

#: HELLO features of a 7.0 node the mock implements (kv_engine ``v7.0.0``
#: ``feature.h``: codes up to 0x19 SubdocReplaceBodyWithXattr).
_FEATURES_70 = frozenset(
    {
        _F.TCP_NODELAY,
        _F.MUTATION_SEQNO,
        _F.XATTR,
        _F.XERROR,
        _F.SELECT_BUCKET,
        _F.SNAPPY,
        _F.JSON,
        _F.DUPLEX,
        _F.CLUSTERMAP_CHANGE_NOTIFICATION,
        _F.ALT_REQUEST_SUPPORT,
        _F.SYNC_REPLICATION,
        _F.COLLECTIONS,
        _F.SNAPPY_EVERYWHERE,
        _F.PRESERVE_TTL,
        _F.SUBDOC_CREATE_AS_DELETED,
        _F.SUBDOC_REPLACE_BODY_WITH_XATTR,
    }
)
#: 7.6 (``v7.6.0`` ``feature.h``: up to 0x20): replica reads, the cluster map the
#: client knows, de-duplicated NOT_MY_VBUCKET maps, brief map notifications.
_FEATURES_76 = _FEATURES_70 | {
    _F.SUBDOC_REPLICA_READ,
    _F.GET_CLUSTER_CONFIG_WITH_KNOWN_VERSION,
    _F.DEDUPE_NOT_MY_VBUCKET_CLUSTERMAP,
    _F.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF,
    _F.SUBDOC_ALLOWS_ACCESS_ON_MULTIPLE_XATTR_KEYS,
}
#: 8.0 (``v8.0.0`` ``feature.h``: up to 0x24): binary xattrs.
_FEATURES_80 = _FEATURES_76 | {_F.SUBDOC_BINARY_XATTR}

#: DCP_CONTROL keys of a 7.0 producer (``v7.0.0`` ``DcpProducer::control``).
_CONTROLS_70 = frozenset(
    {
        "backfill_order",
        "connection_buffer_size",
        "stream_buffer_size",
        "enable_noop",
        "force_value_compression",
        "supports_cursor_dropping",
        "supports_cursor_dropping_vulcan",
        "supports_hifi_MFU",
        "set_noop_interval",
        "set_priority",
        "send_stream_end_on_client_close_stream",
        "enable_expiry_opcode",
        "enable_stream_id",
        "enable_sync_writes",
        "consumer_name",
        "enable_out_of_order_snapshots",
        "include_deleted_user_xattrs",
        "v7_dcp_status_codes",
    }
)
#: 7.2 (``v7.2.0``: ``DcpControlKeys::FlatBuffersSystemEvents``, ``ChangeStreams``).
_CONTROLS_72 = _CONTROLS_70 | {"flatbuffers_system_events", "change_streams"}
#: 8.0 (``v8.0.0``: ``DcpControlKeys::SnapshotMaxMarkerVersion``: v2.2 markers).
_CONTROLS_80 = _CONTROLS_72 | {"max_marker_version"}

#: Stream flags a 7.0 producer reads (``v7.0.0`` ``protocol_binary.h``
#: ``DCP_ADD_STREAM_*``; STRICT_VBUUID read by ``DcpProducer::streamRequest``).
_FLAGS_70 = (
    StreamFlag.TAKEOVER
    | StreamFlag.DISK_ONLY
    | StreamFlag.TO_LATEST
    | StreamFlag.ACTIVE_VB_ONLY
    | StreamFlag.STRICT_VBUUID
)
#: 7.2: IGNORE_PURGED_TOMBSTONES (``v7.2.0`` ``verify_common_dcp_stream_restrictions``).
_FLAGS_72 = _FLAGS_70 | StreamFlag.IGNORE_PURGED_TOMBSTONES
#: 7.6: FROM_LATEST (``v7.6.0`` ``DCP_ADD_STREAM_FLAG_FROM_LATEST``).
_FLAGS_76 = _FLAGS_72 | StreamFlag.FROM_LATEST

#: Bucket capabilities of a 7.0 cluster (ns_server ``7.0.0`` ``bucket_info_cache.erl``).
_CAPS_70 = (
    "collections",
    "durableWrite",
    "tombstonedUserXAttrs",
    "couchapi",
    "subdoc.ReplaceBodyWithXattr",
    "subdoc.DocumentMacroSupport",
)
#: 7.1 and 7.2 (ns_server ``neo``: ``is_cluster_71``, ``is_cluster_72``).
_CAPS_72 = (*_CAPS_70, "subdoc.ReviveDocument", "dcp.IgnorePurgedTombstones")
#: 7.6 (``is_cluster_76``).
_CAPS_76 = (
    *_CAPS_72,
    "preserveExpiry",
    "querySystemCollection",
    "mobileSystemCollection",
    "subdoc.ReplicaRead",
    "rangeScan",
)
#: 8.0 (``is_cluster_79``, which an 8.0 cluster is).
_CAPS_80 = (*_CAPS_76, "subdoc.BinaryXattr", "subdoc.AccessDeleted")
#: The capabilities every membase bucket lists after the conditional ones.
_CAPS_ALWAYS = ("dcp", "cccp", "xattr", "nodesExt", "xdcrCheckpointing")


@attrs.frozen(kw_only=True)
class ServerProfile:
    """What one release of Couchbase Server does where consumers can tell versions apart.

    ``version`` is the string VERSION and ``/pools`` report (a GA build of the release
    unless a full string was asked for: ``resolve_server_version``)."""

    #: "7.0", "7.2", "7.6", "8.0"
    name: str
    version: str
    #: (major, minor) of the cluster compat mode
    compat: tuple[int, int]
    #: HELLO features granted when asked
    features: frozenset[HelloFeature]
    #: DCP_CONTROL keys the producer knows (any other: EINVAL)
    controls: frozenset[str]
    #: ``enable_out_of_order_snapshots=true_with_seqno_advanced`` (kv_engine ``v7.1.0``)
    oso_seqno_advanced: bool
    #: stream-request flags the producer reads
    stream_flags: StreamFlag
    #: a flag outside ``stream_flags`` is EINVAL (from 7.2, MB-55441); else ignored
    checks_stream_flags: bool
    #: bucket capabilities (before the ``nonDedupedHistory`` of a history bucket)
    capabilities: tuple[str, ...]
    #: a backfill idle for ``dcp_backfill_idle_limit_seconds`` ends STREAM_END SLOW
    #: (kv_engine MB-62703, commit 57b242f0e "End backfilling (disk) streams which make
    #: no progress", first in ``v8.0.0``: ``configuration.json`` at ``v7.6.x`` has no
    #: ``dcp_backfill_idle_*``); before it an idle backfill waits for its consumer for
    #: as long as it takes, holding its disk snapshot (the commit's "can indefinitely
    #: hold disk resources")
    ends_idle_backfills: bool
    #: the public source of the profile (the release's tags)
    source: str

    @property
    def history(self) -> bool:
        """Magma history retention and change streams (7.2: ``change_streams``)."""
        return "change_streams" in self.controls

    @property
    def marker_v2_2(self) -> bool:
        """Snapshot markers v2.2 with the purge seqno (8.0: ``max_marker_version``)."""
        return "max_marker_version" in self.controls

    @property
    def cluster_compatibility(self) -> int:
        """``/pools/default`` ``nodes[].clusterCompatibility`` (ns_server
        ``effective_cluster_compat_version``: major * 0x10000 + minor)."""
        major, minor = self.compat
        return major * 0x10000 + minor

    @property
    def compat_version(self) -> str:
        """``clusterCompatVersion`` (ns_server ``compat_version_to_binary``)."""
        return "{}.{}".format(*self.compat)

    def bucket_capabilities(self, *, history: bool) -> list[str]:
        """The ``bucketCapabilities`` of a membase bucket on this version; ``history``:
        it retains history (Magma), ``nonDedupedHistory`` from 7.2."""
        extra = ["nonDedupedHistory"] if history and self.history else []
        return [*self.capabilities, *extra, *_CAPS_ALWAYS]


def _source(tag: str) -> str:
    return f"couchbase/kv_engine {tag}, couchbase/ns_server bucket_info_cache.erl"


PROFILES: dict[str, ServerProfile] = {
    p.name: p
    for p in (
        ServerProfile(
            name="7.0",
            version="7.0.0-5302-enterprise",
            compat=(7, 0),
            features=_FEATURES_70,
            controls=_CONTROLS_70,
            oso_seqno_advanced=False,
            stream_flags=_FLAGS_70,
            checks_stream_flags=False,
            capabilities=_CAPS_70,
            ends_idle_backfills=False,
            source=_source("v7.0.0"),
        ),
        ServerProfile(
            name="7.2",
            version="7.2.0-5325-enterprise",
            compat=(7, 2),
            features=_FEATURES_70,
            controls=_CONTROLS_72,
            oso_seqno_advanced=True,
            stream_flags=_FLAGS_72,
            checks_stream_flags=True,
            capabilities=_CAPS_72,
            ends_idle_backfills=False,
            source=_source("v7.2.0"),
        ),
        ServerProfile(
            name="7.6",
            version="7.6.2-3721-enterprise",
            compat=(7, 6),
            features=_FEATURES_76,
            controls=_CONTROLS_72,
            oso_seqno_advanced=True,
            stream_flags=_FLAGS_76,
            checks_stream_flags=True,
            capabilities=_CAPS_76,
            ends_idle_backfills=False,
            source=_source("v7.6.0"),
        ),
        ServerProfile(
            name="8.0",
            version="8.0.0-3777-enterprise",
            compat=(8, 0),
            features=_FEATURES_80,
            controls=_CONTROLS_80,
            oso_seqno_advanced=True,
            stream_flags=_FLAGS_76,
            checks_stream_flags=True,
            capabilities=_CAPS_80,
            ends_idle_backfills=True,
            source=_source("v8.0.0"),
        ),
    )
}

#: The newest release: what a node is unless told otherwise.
DEFAULT_PROFILE = PROFILES["8.0"]

#: "X.Y" or a full version string "X.Y.Z[-build][-edition]" as ``/pools`` reports one
_VERSION = re.compile(r"(\d{1,3})\.(\d{1,3})(?:\.\d{1,4}(?:-\d{1,6})?(?:-[a-z]{1,12})?)?")


class UnknownServerVersion(ValueError):
    """A server version that names no profile (the message says which exist)."""


def resolve_server_version(text: str) -> ServerProfile:
    """The profile of ``text``: a profile name ("7.2"), or a full version string
    ("7.2.4-7070-enterprise") whose major.minor names one, reported as given.

    Raises ``UnknownServerVersion`` naming ``text`` and the known versions."""
    known = ", ".join(PROFILES)
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        raise UnknownServerVersion(
            f"unknown server version {text!r}: give one of {known} (or X.Y.Z-build-edition)"
        )
    name = f"{int(match.group(1))}.{int(match.group(2))}"
    profile = PROFILES.get(name)
    if profile is None:
        raise UnknownServerVersion(f"unknown server version {text!r}: {name} is not one of {known}")
    if text.strip() == name:
        return profile
    return attrs.evolve(profile, version=text.strip())


def history_unsupported(profile: ServerProfile, *, retains_history: bool) -> str | None:
    """Why a bucket that retains history cannot be on ``profile``'s version (None: it
    can). History retention is a 7.2 setting (kv_engine ``configuration.json``
    ``history_retention_bytes`` / ``_seconds``, added in 7.2.0; ns_server
    ``historyRetentionSeconds`` from ``is_cluster_72``): before 7.2 a Magma bucket keeps
    no history, so a bucket declared with it is refused rather than quietly changed."""
    if not retains_history or profile.history:
        return None
    return (
        f"a bucket retaining history needs server version 7.2 or later, not {profile.name}"
        " (use couchstore, or magma with history_retention_bytes: 0)"
    )
