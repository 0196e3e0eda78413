"""Read-only commands answered from the bucket: GET_ALL_VB_SEQNOS, OBSERVE_SEQNO, the
collections manifest and the collection/scope id lookups.

Each is a pure function from the request (and the bucket) to a ``Reply``; the connection
frames it. Sources: kv_engine ``engines/ep/src/ep_engine.cc`` (``observe_seqno``,
``getAllVBucketSequenceNumbers``), ``engines/ep/src/collections/manager.cc`` (manifest
and id lookups, UNKNOWN_COLLECTION/UNKNOWN_SCOPE with the manifest uid as context). Only
the ``_default`` scope and collection exist (id 0, manifest uid 0).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol import Datatype, Status
from mockdcp.protocol._cluster_config import default_manifest, manifest_uid_error_body

if TYPE_CHECKING:
    from mockdcp.model import Bucket
    from mockdcp.protocol import GetAllVbSeqnos, GetCollectionId, GetScopeId, ObserveSeqno


@attrs.frozen(kw_only=True)
class Reply:
    """A response's status and body; ``context`` becomes the XERROR context."""

    status: Status = Status.SUCCESS
    value: bytes = b""
    extras: bytes = b""
    datatype: int = 0
    context: str | None = None


def _unknown(status: Status) -> Reply:
    """UNKNOWN_COLLECTION / UNKNOWN_SCOPE carry the manifest uid as JSON."""
    return Reply(status=status, value=manifest_uid_error_body(), datatype=Datatype.JSON)


def all_vb_seqnos(bucket: Bucket, msg: GetAllVbSeqnos, *, collections: bool) -> Reply:
    """GET_ALL_VB_SEQNOS: (vbucket, high seqno) pairs of the vbuckets in ``msg.state``
    (every live one when 0); a collection id needs HELLO COLLECTIONS."""
    from mockdcp.protocol import encode_all_vb_seqnos

    if msg.collection_id is not None and not collections:
        return Reply(status=Status.EINVAL, context="collection id needs COLLECTIONS")
    if msg.collection_id not in (None, 0):
        return _unknown(Status.UNKNOWN_COLLECTION)
    return Reply(value=encode_all_vb_seqnos(bucket.high_seqnos(msg.state or None)))


def observe_seqno(bucket: Bucket, msg: ObserveSeqno) -> Reply | None:
    """OBSERVE_SEQNO: the current uuid, persisted and high seqnos; with an older uuid of
    the failover table, format 1 adds that branch's uuid and last seqno. An unknown
    uuid gets KEY_ENOENT. None for a vbucket the bucket does not have (NOT_MY_VBUCKET)."""
    from mockdcp.protocol import ObserveSeqnoResult

    if not 0 <= msg.vbucket < bucket.num_vbuckets:
        return None
    vb = bucket.vbucket(msg.vbucket)
    entries = vb.failover.entries
    for i, (uuid, _seqno) in enumerate(entries):
        if uuid != msg.vbucket_uuid:
            continue
        result = ObserveSeqnoResult(
            vbucket=vb.vbid,
            vbucket_uuid=entries[0][0],
            persisted_seqno=vb.persisted_seqno,
            current_seqno=vb.high_seqno,
            old_vbucket_uuid=None if i == 0 else uuid,
            last_seqno=None if i == 0 else entries[i - 1][1],
        )
        return Reply(value=result.encode())
    return Reply(status=Status.KEY_ENOENT, context="unknown vbucket uuid")


def collections_manifest() -> Reply:
    """GET_COLLECTIONS_MANIFEST: the manifest as JSON."""
    return Reply(value=json.dumps(default_manifest()).encode(), datatype=Datatype.JSON)


def collection_id(msg: GetCollectionId) -> Reply:
    """GET_COLLECTION_ID of ``scope.collection`` (a bare name is in ``_default``)."""
    from mockdcp.protocol import encode_id_lookup_extras

    path = msg.path or "_default._default"
    if path.count(".") == 0:
        path = f"_default.{path}"
    if path not in ("_default._default", "._default", "_default."):
        return _unknown(Status.UNKNOWN_COLLECTION)
    return Reply(extras=encode_id_lookup_extras(0, 0))


def scope_id(msg: GetScopeId) -> Reply:
    """GET_SCOPE_ID of a scope name."""
    from mockdcp.protocol import encode_id_lookup_extras

    if (msg.path or "_default") not in ("_default", "_default."):
        return _unknown(Status.UNKNOWN_SCOPE)
    return Reply(extras=encode_id_lookup_extras(0, 0))
