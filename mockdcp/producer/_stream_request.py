"""The DCP_STREAM_REQ decision: the order of checks of a current producer.

Source: kv_engine ``DcpProducer::streamRequest`` and the request validator; the
rollback rule itself is ``mockdcp.model.needs_rollback`` (``FailoverTable::needsRollback``). The
first failing check decides the answer. Pure: it reads the bucket, changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from mockdcp.model import Bucket, needs_rollback
from mockdcp.protocol import (
    DEFAULT_PROFILE,
    DcpOpenFlag,
    DcpStreamRequest,
    RemoteProtocolError,
    SnapshotMarkerVersion,
    Status,
    StreamFlag,
    StreamRequestValue,
    VBucketState,
    manifest_uid_error_body,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.model import Manifest, NodeView, VBucket
    from mockdcp.producer._controls import DcpSettings
    from mockdcp.protocol import ServerProfile


@attrs.frozen(kw_only=True)
class StreamRequestDecision:
    """The answer to a stream request, and the adjusted range when it succeeds."""

    status: Status
    reason: str = ""
    rollback_seqno: int = 0
    error_body: bytes = b""
    start_seqno: int = 0
    end_seqno: int = 0
    snap_start_seqno: int = 0
    snap_end_seqno: int = 0
    collections: frozenset[int] | None = None
    #: a scope filter's scope (its collections then are ``collections``)
    scope: int | None = None
    stream_id: int | None = None
    disk_only: bool = False
    ignore_purged_tombstones: bool = False
    client_purge_seqno: int = 0
    marker_version: SnapshotMarkerVersion = SnapshotMarkerVersion.V1


#: the stream flags as ints: ``int & StreamFlag.X`` takes the flag's reflected
#: ``__rand__``, which makes a flag each time (0.7 µs; ten a stream request)
_NO_VALUE = int(StreamFlag.NO_VALUE)
_ACTIVE_VB_ONLY = int(StreamFlag.ACTIVE_VB_ONLY)
_FROM_LATEST = int(StreamFlag.FROM_LATEST)
_IGNORE_PURGED_TOMBSTONES = int(StreamFlag.IGNORE_PURGED_TOMBSTONES)
_STRICT_VBUUID = int(StreamFlag.STRICT_VBUUID)
_DISK_ONLY = int(StreamFlag.DISK_ONLY)
_TO_LATEST = int(StreamFlag.TO_LATEST)
#: (a connection's open flags are a ``DcpOpenFlag``: ``&`` with one made a flag too)
_INCLUDE_XATTRS = int(DcpOpenFlag.INCLUDE_XATTRS)


#: the value of a stream request without one (frozen: one for all)
_NO_REQUEST_VALUE = StreamRequestValue()


def _fail(status: Status, reason: str, body: bytes = b"") -> StreamRequestDecision:
    return StreamRequestDecision(status=status, reason=reason, error_body=body)


def stream_flags(flags: int, profile: ServerProfile) -> int | str:
    """Check 0: the flags the stream request is served with, or why it is refused
    (EINVAL). From 7.2 a flag the release does not know is refused (kv_engine MB-55441,
    ``verify_common_dcp_stream_restrictions`` in ``daemon/mcbp_validators.cc``;
    NO_VALUE, 0x08, was removed in 5.0 and says so); a 7.0 node's validator did not look
    at the flags (``dcp_stream_req_validator`` at ``v7.0.0``) and its producer reads only
    those it knows: the others are ignored (``ServerProfile.stream_flags``)."""
    known = int(profile.stream_flags)
    unknown = flags & ~known
    if not profile.checks_stream_flags:
        return flags & known
    if unknown & _NO_VALUE:
        return "stream flag NO_VALUE (0x08) is no longer used"
    if unknown:
        return f"unknown stream flags {unknown:#x}"
    return flags


def _parse_value(
    req: DcpStreamRequest, settings: DcpSettings
) -> StreamRequestValue | StreamRequestDecision:
    if not req.value:
        return _NO_REQUEST_VALUE
    if not settings.collections:
        return _fail(Status.EINVAL, "a stream-request value needs HELLO COLLECTIONS")
    try:
        return StreamRequestValue.parse(req.value)
    except RemoteProtocolError as exc:
        return _fail(exc.status, str(exc))


def stream_filter(
    value: StreamRequestValue, manifest: Manifest, *, collections: bool, vbucket_uid: int
) -> frozenset[int] | StreamRequestDecision | None:
    """Check 7: the collections a stream lets through (None = all of them, the
    "pass-through" stream), or the failing decision. Rules of kv_engine's
    ``Collections::VB::Filter`` (``engines/ep/src/collections/vbucket_filter.cc``), in
    its order; unknown collection and scope carry the manifest uid as the error body
    ``{"manifest_uid":"<hex>"}``:

    * a ``uid`` above the vbucket's manifest uid: COLLECTIONS_MANIFEST_IS_AHEAD (the node
      has not seen the manifest the client has), without the uid body;
    * ``collections``: every id in the manifest, else UNKNOWN_COLLECTION naming it;
    * ``scope``: in the manifest, else UNKNOWN_SCOPE; the filter is the scope's
      collections now (later ones joining it is the stream's business);
    * no filter on a connection without COLLECTIONS: only ``_default``, which must exist
      (UNKNOWN_COLLECTION once it was dropped);
    * ``collections`` with ``scope`` and the value's own syntax were checked when it was
      parsed (``StreamRequestValue.parse``).
    """
    if value.uid is not None and value.uid > vbucket_uid:
        # kv_engine sets the manifest-uid context only for unknown collection/scope
        return _fail(
            Status.COLLECTIONS_MANIFEST_IS_AHEAD,
            f"stream-request uid {value.uid:x} is ahead of the manifest uid {vbucket_uid:x}",
        )
    if value.collections is not None:
        unknown = [c for c in value.collections if c not in manifest.collections]
        if unknown:
            return _fail(
                Status.UNKNOWN_COLLECTION,
                f"unknown collection {unknown[0]:x}",
                manifest_uid_error_body(manifest.uid),
            )
        return frozenset(value.collections)
    if value.scope is not None:
        if value.scope not in manifest.scopes:
            return _fail(
                Status.UNKNOWN_SCOPE,
                f"unknown scope {value.scope:x}",
                manifest_uid_error_body(manifest.uid),
            )
        return frozenset(c.cid for c in manifest.collections.values() if c.scope_id == value.scope)
    if collections:
        return None
    if 0 not in manifest.collections:
        return _fail(
            Status.UNKNOWN_COLLECTION,
            "the default collection was dropped",
            manifest_uid_error_body(manifest.uid),
        )
    return frozenset({0})


def _filter_high_seqno(vb: VBucket, collections: frozenset[int], start: int) -> int:
    """TO_LATEST on a filtered stream ends at the filter's own high seqno: the newest
    seqno of its collections' documents and events in the vbucket (kv_engine
    ``DcpProducer::streamRequest``, the collections' high seqno). Never below the start:
    a consumer already past it gets its STREAM_END at once, not ERANGE."""
    high = max((vb.collection_high.get(cid, 0) for cid in collections), default=0)
    return max(high, start)


def decide_stream_request(
    req: DcpStreamRequest,
    *,
    bucket: Bucket | NodeView,
    settings: DcpSettings,
    active_stream_exists: bool | Callable[[int | None], bool],
    profile: ServerProfile = DEFAULT_PROFILE,
    privilege: Callable[[frozenset[int] | None, int | None], Status | None] | None = None,
) -> StreamRequestDecision:
    """Answer a stream request in the order of ``DcpProducer::streamRequest``'s checks,
    as a node of ``profile``'s version does.

    Returns a decision with status SUCCESS (and the adjusted range), ROLLBACK (and the
    seqno), or the error status of the first failing check. ``privilege(collections,
    scope)``: the user's DcpStream privilege on the filter, asked where kv_engine makes
    the filter (``Collections::VB::Filter``'s constructor calls ``checkPrivileges``):
    None with it, else the status refusing the stream (EACCESS, or UNKNOWN_COLLECTION /
    UNKNOWN_SCOPE with the manifest uid for data the user cannot see).
    """
    flags = stream_flags(req.flags, profile)
    if isinstance(flags, str):
        return _fail(Status.EINVAL, flags)
    # 1-2: the vbucket must be here and active (or replica without ACTIVE_VB_ONLY)
    if req.vbucket >= bucket.num_vbuckets:
        return _fail(Status.NOT_MY_VBUCKET, "no such vbucket")
    vb = bucket.vbucket(req.vbucket)
    state = vb.state  # compared by identity: hashing an enum member runs Python code
    if state is not VBucketState.ACTIVE and (
        state is not VBucketState.REPLICA or flags & _ACTIVE_VB_ONLY
    ):
        return _fail(Status.NOT_MY_VBUCKET, f"vbucket is {state.name.lower()}")
    high = vb.high_seqno
    start, end = req.start_seqno, req.end_seqno
    snap_start, snap_end, uuid = req.snap_start_seqno, req.snap_end_seqno, req.vbucket_uuid
    # 3: FROM_LATEST
    if flags & _FROM_LATEST:
        start = snap_start = snap_end = high
        uuid = uuid or vb.failover.newest_uuid
    # 4: noop is mandatory for xattrs and collection-aware streams
    xattrs = bool(int(settings.open_flags) & _INCLUDE_XATTRS)
    if (xattrs or settings.collections) and not settings.noop_enabled:
        return _fail(Status.NOT_SUPPORTED, "enable_noop is required for xattrs and collections")
    # 5-6: range checks
    if start > end:
        return _fail(Status.ERANGE, "start seqno above end seqno")
    if not snap_start <= start <= snap_end:
        return _fail(Status.ERANGE, "start seqno outside the snapshot range")
    # 7: the JSON value and the filter
    value = _parse_value(req, settings)
    if isinstance(value, StreamRequestDecision):
        return value
    collections = stream_filter(
        value,
        bucket.manifest,
        collections=settings.collections,
        vbucket_uid=vb.manifest_uid,
    )
    if isinstance(collections, StreamRequestDecision):
        return collections
    refused = None if privilege is None else privilege(collections, value.scope)
    if refused == Status.EACCESS:
        return _fail(Status.EACCESS, "no DcpStream privilege on the stream's data")
    if refused is not None:  # data the user cannot see: as if it did not exist
        body = manifest_uid_error_body(bucket.manifest.uid)
        return _fail(refused, "no privilege on the stream's data", body)
    # 8: stream-id present exactly when enabled
    sid = req.stream_id if req.stream_id is not None else value.sid
    if (sid is not None) != settings.stream_ids:
        return _fail(Status.DCP_STREAMID_INVALID, "stream-id and enable_stream_id disagree")
    # 9: a collection filter with sync writes (kv_engine refuses FilterType::Collection
    # only: a scope filter, or a legacy client's default collection, streams them)
    if value.collections is not None and settings.sync_writes:
        return _fail(Status.NOT_SUPPORTED, "collection filters cannot stream sync writes")
    # 10: one active stream per (vbucket, sid)
    exists = active_stream_exists(sid) if callable(active_stream_exists) else active_stream_exists
    if exists:
        return _fail(Status.KEY_EEXISTS, "a stream for this vbucket is already open")
    # 11: rollback
    ignore_purged = bool(flags & _IGNORE_PURGED_TOMBSTONES)
    rollback, seqno, why = needs_rollback(
        start_seqno=start,
        high_seqno=high,
        vbucket_uuid=uuid,
        snap_start_seqno=snap_start,
        snap_end_seqno=snap_end,
        purge_seqno=vb.purge_seqno,
        failover_entries=vb.failover.entries,
        strict_vbuuid=bool(flags & _STRICT_VBUUID),
        ignore_purged_tombstones=ignore_purged,
        client_purge_seqno=value.purge_seqno or 0,
        collections_high_seqno=None if collections is None else high,
    )
    if rollback:
        return StreamRequestDecision(status=Status.ROLLBACK, rollback_seqno=seqno, reason=why)
    return _accepted(req, vb, settings, value, collections, sid, (start, end, snap_start, snap_end))


def _accepted(
    req: DcpStreamRequest,
    vb: VBucket,
    settings: DcpSettings,
    value: StreamRequestValue,
    collections: frozenset[int] | None,
    sid: int | None,
    seqnos: tuple[int, int, int, int],
) -> StreamRequestDecision:
    """The last checks of ``decide_stream_request`` once no rollback is needed (12-15),
    and the accepted stream's decision: ``seqnos`` are its start, end, snapshot start
    and end as the checks before adjusted them."""
    flags = req.flags
    start, end, snap_start, snap_end = seqnos
    high = vb.high_seqno
    ignore_purged = bool(flags & _IGNORE_PURGED_TOMBSTONES)
    # 12: TO_LATEST and DISK_ONLY move the end
    disk_only = bool(flags & _DISK_ONLY)
    if flags & _TO_LATEST:
        end = high if collections is None else _filter_high_seqno(vb, collections, start)
    if disk_only:
        end = min(end, vb.persisted_seqno)
    # 13-14
    if start > end:
        return _fail(Status.ERANGE, "start seqno above the adjusted end seqno")
    if start > high:
        return _fail(Status.ERANGE, "start seqno above the vbucket's high seqno")
    # 15: a complete snapshot claimed beyond what we have
    if start == snap_start and snap_end > high and settings.collections:
        snap_end = snap_start
    version = (
        SnapshotMarkerVersion.V2_2
        if settings.max_marker_version == "2.2"
        else SnapshotMarkerVersion.V1
    )
    return StreamRequestDecision(
        status=Status.SUCCESS,
        start_seqno=start,
        end_seqno=end,
        snap_start_seqno=snap_start,
        snap_end_seqno=snap_end,
        collections=collections,
        scope=value.scope,
        stream_id=sid,
        disk_only=disk_only,
        ignore_purged_tombstones=ignore_purged,
        client_purge_seqno=value.purge_seqno or 0,
        marker_version=version,
    )
