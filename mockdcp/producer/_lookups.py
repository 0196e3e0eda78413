"""Read-only commands answered from the bucket: GET_ALL_VB_SEQNOS, OBSERVE_SEQNO, the
collections manifest and the collection/scope id lookups.

Each is a pure function from the request (and the bucket) to a ``Reply``; the connection
frames it. Sources: kv_engine ``engines/ep/src/ep_engine.cc`` (``observe_seqno``,
``getAllVBucketSequenceNumbers``), ``engines/ep/src/collections/manager.cc`` (manifest
and id lookups, UNKNOWN_COLLECTION/UNKNOWN_SCOPE with the manifest uid as context). The
scopes and collections are the manifest's: ``Bucket.manifest`` (``mockdcp.model._manifest``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol import Datatype, Status, VBucketState, manifest_uid_error_body

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from mockdcp.model import Bucket, NodeView
    from mockdcp.protocol import GetAllVbSeqnos, GetCollectionId, GetScopeId, ObserveSeqno


@attrs.frozen(kw_only=True)
class Reply:
    """A response's status and body; ``context`` becomes the XERROR context."""

    status: Status = Status.SUCCESS
    value: bytes = b""
    extras: bytes = b""
    datatype: int = 0
    context: str | None = None


def _unknown(bucket: Bucket | NodeView, status: Status, context: str | None = None) -> Reply:
    """UNKNOWN_COLLECTION / UNKNOWN_SCOPE carry the manifest uid as JSON."""
    body = manifest_uid_error_body(bucket.manifest.uid)
    return Reply(status=status, value=body, datatype=Datatype.JSON, context=context)


def all_vb_seqnos(bucket: Bucket | NodeView, msg: GetAllVbSeqnos, *, collections: bool) -> Reply:
    """GET_ALL_VB_SEQNOS: (vbucket, high seqno) pairs of the vbuckets in ``msg.state``
    (every live one when 0).

    With a collection id (needs HELLO COLLECTIONS) the seqno is that collection's high
    seqno (UNKNOWN_COLLECTION if it is not in the manifest). A connection without
    COLLECTIONS sees only the default collection, so it gets the default collection's
    (kv_engine ``getAllVBucketSequenceNumbers``; on a bucket that never had another
    collection that is the vbucket's high seqno)."""
    from mockdcp.protocol import encode_all_vb_seqnos

    if msg.collection_id is not None and not collections:
        return Reply(status=Status.EINVAL, context="collection id needs COLLECTIONS")
    cid = msg.collection_id if collections else 0
    if cid is None:
        return Reply(value=encode_all_vb_seqnos(bucket.high_seqnos(msg.state or None)))
    if cid not in bucket.manifest.collections:
        return _unknown(bucket, Status.UNKNOWN_COLLECTION, f"unknown collection {cid:x}")
    return Reply(value=encode_all_vb_seqnos(bucket.collection_high_seqnos(cid, msg.state or None)))


def observe_seqno(node: NodeView, msg: ObserveSeqno) -> Reply | None:
    """OBSERVE_SEQNO: the current uuid, persisted and high seqnos of the node's copy
    (active or replica: java-dcp-client's rollback mitigation and go-dcp observe every
    replica); with an older uuid of the failover table, format 1 adds that branch's uuid
    and last seqno. An unknown uuid gets KEY_ENOENT. None for a vbucket the node holds no
    copy of (NOT_MY_VBUCKET). On an ephemeral bucket the persisted seqno is 0
    (``_ephemeral.public_persisted_seqno``: nothing is ever on disk)."""
    from mockdcp.model import public_persisted_seqno
    from mockdcp.protocol import ObserveSeqnoResult

    if not 0 <= msg.vbucket < node.num_vbuckets:
        return None
    vb = node.holds(msg.vbucket)
    if vb is None or not vb.online or vb.state is VBucketState.DEAD:
        return None
    entries = vb.failover.entries
    for i, (uuid, _seqno) in enumerate(entries):
        if uuid != msg.vbucket_uuid:
            continue
        result = ObserveSeqnoResult(
            vbucket=vb.vbid,
            vbucket_uuid=entries[0][0],
            persisted_seqno=public_persisted_seqno(vb, node.cluster.bucket.ephemeral is not None),
            current_seqno=vb.high_seqno,
            old_vbucket_uuid=None if i == 0 else uuid,
            last_seqno=None if i == 0 else entries[i - 1][1],
        )
        return Reply(value=result.encode())
    return Reply(status=Status.KEY_ENOENT, context="unknown vbucket uuid")


def collections_manifest(bucket: Bucket, shown: Mapping[int, Sequence[int]] | None = None) -> Reply:
    """GET_COLLECTIONS_MANIFEST: the bucket's manifest as JSON; ``shown``: scope id ->
    collection ids, the only ones listed (what the user may see:
    ``_privileges.visible_manifest``)."""
    manifest = bucket.manifest.to_json()
    if shown is not None:
        scopes = []
        for scope in manifest["scopes"]:
            cids = shown.get(int(scope["uid"], 16))
            if cids is not None:
                collections = [c for c in scope["collections"] if int(c["uid"], 16) in cids]
                scopes.append({**scope, "collections": collections})
        manifest["scopes"] = scopes
    body = json.dumps(manifest, separators=(",", ":")).encode()
    return Reply(value=body, datatype=Datatype.JSON)


def _split_path(path: str) -> tuple[str, str]:
    """``scope.collection`` → (scope, collection); an empty part is ``_default``."""
    scope, _, name = path.partition(".")
    return scope or "_default", name or "_default"


def collection_id(
    bucket: Bucket, msg: GetCollectionId, may_see: Callable[[str, str | None], bool] | None = None
) -> Reply:
    """GET_COLLECTION_ID of ``scope.collection``: manifest uid and collection id;
    UNKNOWN_SCOPE when the scope is not there, UNKNOWN_COLLECTION when the collection is
    not (or ``may_see(scope, collection)`` says the user cannot see it), EINVAL unless
    the path has exactly one dot (kv_engine ``Collections::Manager::getCollectionID``;
    ``.`` is ``_default._default``)."""
    from mockdcp.protocol import encode_id_lookup_extras

    if msg.path.count(".") != 1:
        return Reply(status=Status.EINVAL, context=f"invalid collection path {msg.path!r}")
    scope, name = _split_path(msg.path)
    manifest = bucket.manifest
    if manifest.scope_named(scope) is None:
        return _unknown(bucket, Status.UNKNOWN_SCOPE, f"unknown scope {scope!r}")
    coll = manifest.collection_named(scope, name)
    if coll is None or (may_see is not None and not may_see(scope, name)):
        return _unknown(bucket, Status.UNKNOWN_COLLECTION, f"unknown collection {name!r}")
    return Reply(extras=encode_id_lookup_extras(manifest.uid, coll.cid))


def scope_id(
    bucket: Bucket, msg: GetScopeId, may_see: Callable[[str, str | None], bool] | None = None
) -> Reply:
    """GET_SCOPE_ID of the scope of a path (``scope``, ``scope.`` or
    ``scope.collection``: the part before the dot, empty is ``_default``); EINVAL with more
    than one dot (kv_engine ``Collections::Manager::getScopeID``); UNKNOWN_SCOPE for one
    there is not, or that ``may_see(scope, None)`` says the user cannot see."""
    from mockdcp.protocol import encode_id_lookup_extras

    path = msg.path
    if path.count(".") > 1:
        return Reply(status=Status.EINVAL, context=f"invalid scope path {path!r}")
    name = _split_path(path)[0]
    sc = bucket.manifest.scope_named(name)
    if sc is None or (may_see is not None and not may_see(name, None)):
        return _unknown(bucket, Status.UNKNOWN_SCOPE, f"unknown scope {name!r}")
    return Reply(extras=encode_id_lookup_extras(bucket.manifest.uid, sc.sid))
