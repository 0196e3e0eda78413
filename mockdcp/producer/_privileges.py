"""What a connection's user may do: the one privilege question the producer asks before
a request and at each snapshot marker, with the users of ``mockdcp.model.Users``.

* ``request_status``: the privilege a DCP command needs (kv_engine
  ``daemon/mcbp_privileges.cc``: DCP commands need DcpProducer; DCP_OPEN as a producer
  DcpProducer, ``dcp_open_executor.cc``); EACCESS without it.
* ``document_status``: a document command needs Read, Upsert, Insert or Delete on the
  key's collection (kv_engine ``EventuallyPersistentEngine::checkCollectionAccess``).
  Without it, ``data_status`` says how the node refuses: EACCESS where the user has
  some privilege on that data, UNKNOWN_COLLECTION (UNKNOWN_SCOPE) where it has none,
  so that a user cannot learn of a collection it may not see (kv_engine
  ``rbac/privilege_database.cc`` ``Bucket::check``/``Scope::check``: FailNoPrivileges,
  which ``rbac/privileges.cc`` ``PrivilegeAccess::getEngineErrorCode`` makes
  unknown_collection/unknown_scope; a client without collections gets EINVAL instead,
  ``daemon/connection.cc`` ``remapErrorCode``).
* ``may_select``: SELECT_BUCKET needs some privilege in the bucket (kv_engine
  ``select_bucket_executor.cc``, ``Cookie::mayAccessBucket``), else EACCESS.
* ``may_stream``/``stream_status``: a stream needs DcpStream on what its filter
  selects: the bucket for a pass-through stream, the scope for a scope filter, each
  collection for a collection filter (kv_engine ``collections/vbucket_filter.cc``
  ``Filter::checkPrivileges``: one collection the user cannot see makes the answer
  UNKNOWN_COLLECTION, else one it may not stream EACCESS); checked when the stream is
  requested and before each snapshot marker
  (``DcpProducer::getAndValidateNextItemFromStream`` →
  ``ActiveStream::endIfRequiredPrivilegesLost``: STREAM_END LOST_PRIVILEGES).
* ``visible_manifest``/``may_see``: GET_COLLECTIONS_MANIFEST lists the collections on
  which the user has some privilege, and the scopes holding one or that it reaches as a
  whole (kv_engine ``EventuallyPersistentEngine::get_collection_manifest``: visible
  unless FailNoPrivileges; ``collections/manifest.cc`` ``Manifest::to_json``);
  GET_COLLECTION_ID and GET_SCOPE_ID answer UNKNOWN_COLLECTION / UNKNOWN_SCOPE for one
  it cannot see (``get_collection_id``, ``get_scope_id``).
* ``keeps_dcp``: a DCP connection whose user lost DcpProducer is shut down (kv_engine
  ``Connection::tryToProgressDcpStream``: "DcpProducer privilege no longer available").

Pure: reads the users and the manifest, changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model import ROLES, Privilege
from mockdcp.protocol import DcpOpenFlag, Opcode, Status, StreamEndReason

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mockdcp.model import Bucket, Manifest, Role, Users
    from mockdcp.producer._stream import Stream

P = Privilege

#: opcode -> the privilege it needs in the selected bucket (mcbp_privileges.cc)
REQUIRED: dict[int, Privilege] = {
    Opcode.DCP_ADD_STREAM: P.DCP_PRODUCER,
    Opcode.DCP_CLOSE_STREAM: P.DCP_PRODUCER,
    Opcode.DCP_STREAM_REQ: P.DCP_PRODUCER,
    Opcode.DCP_GET_FAILOVER_LOG: P.DCP_PRODUCER,
    Opcode.DCP_SEQNO_ACKNOWLEDGED: P.DCP_PRODUCER,
    # dcpConsumerOrProducer: a producer connection's DcpProducer
    Opcode.DCP_CONTROL: P.DCP_PRODUCER,
    Opcode.DCP_BUFFER_ACKNOWLEDGEMENT: P.DCP_PRODUCER,
    Opcode.GET: P.READ,
    Opcode.GET_META: P.READ,
    Opcode.SUBDOC_MULTI_LOOKUP: P.READ,
    Opcode.SET: P.UPSERT,
    Opcode.REPLACE: P.UPSERT,
    Opcode.TOUCH: P.UPSERT,
    Opcode.GAT: P.UPSERT,
    Opcode.SUBDOC_MULTI_MUTATION: P.UPSERT,
    Opcode.ADD: P.INSERT,
    Opcode.DELETE: P.DELETE,
}


def required_privilege(opcode: int, open_flags: int = 0) -> Privilege | None:
    """The privilege ``opcode`` needs, or None (HELLO, SASL, NOOP, GET_CLUSTER_CONFIG,
    GET_ALL_VB_SEQNOS... need none); DCP_OPEN's depends on its flags."""
    if opcode == Opcode.DCP_OPEN:
        return P.DCP_PRODUCER if open_flags & DcpOpenFlag.PRODUCER else P.DCP_CONSUMER
    return REQUIRED.get(opcode)


#: the privileges kv_engine checks per collection (``is_collection_privilege``)
COLLECTION_PRIVILEGES = frozenset(
    {
        P.READ,
        P.INSERT,
        P.UPSERT,
        P.DELETE,
        P.RANGE_SCAN,
        P.META_WRITE,
        P.SYSTEM_XATTR_READ,
        P.SYSTEM_XATTR_WRITE,
        P.SYSTEM_COLLECTION_LOOKUP,
        P.DCP_STREAM,
        P.SIMPLE_STATS,
    }
)


def request_status(
    users: Users, user: str | None, bucket: str, opcode: int, open_flags: int = 0
) -> Status | None:
    """EACCESS if ``user`` lacks the bucket privilege ``opcode`` needs in ``bucket``
    (the DCP commands), else None. Document commands are checked on their key's
    collection once it is decoded (``document_status``)."""
    needed = required_privilege(opcode, open_flags)
    if needed in (P.DCP_PRODUCER, P.DCP_CONSUMER):
        return None if users.allowed(user, needed, bucket) else Status.EACCESS
    return None


def _reaches(role: Role, bucket: str, scope: str, collection: str | None) -> bool:
    """Does ``role`` give some collection privilege on ``scope`` (``collection`` in it,
    when given) of ``bucket``? Collection privileges given on the bucket as a whole
    reach everything in it (kv_engine ``Bucket::collectionPrivilegeExists``)."""
    definition = ROLES[role.name]
    whole = definition.bucket & COLLECTION_PRIVILEGES
    if not (whole or definition.data & COLLECTION_PRIVILEGES):
        return False
    if role.bucket is not None and role.bucket not in ("*", bucket):
        return False
    if whole or role.scope == "*":
        return True
    if role.scope != scope:
        return False
    return collection is None or role.collection in ("*", collection)


def data_status(
    users: Users,
    user: str | None,
    bucket: str,
    privilege: Privilege,
    scope: str,
    collection: str | None = None,
) -> Status | None:
    """None if ``user`` holds ``privilege`` on ``scope`` (``scope.collection``) of
    ``bucket``; else EACCESS where some role of the user reaches that data, and
    UNKNOWN_COLLECTION (UNKNOWN_SCOPE without a collection) where none does: the node
    does not tell a user of data it may not see (module docstring)."""
    if users.allowed(user, privilege, bucket, scope, collection):
        return None
    found = users.user(user) if user is not None else None
    roles = () if found is None else found.roles
    if any(_reaches(r, bucket, scope, collection) for r in roles):
        return Status.EACCESS
    return Status.UNKNOWN_COLLECTION if collection is not None else Status.UNKNOWN_SCOPE


def document_status(
    users: Users,
    user: str | None,
    bucket: str,
    manifest: Manifest,
    opcode: int,
    collection_id: int,
    *,
    collections: bool,
) -> Status | None:
    """The document command ``opcode`` on a key of ``collection_id``: None, or how the
    node refuses it (``data_status``; EINVAL for UNKNOWN_* toward a connection without
    collections). A collection the manifest does not have is the command's to refuse
    (UNKNOWN_COLLECTION whatever the user's privileges)."""
    needed = REQUIRED.get(opcode)
    coll = manifest.collections.get(collection_id)
    if needed is None or coll is None:
        return None
    scope = manifest.scopes[coll.scope_id].name
    status = data_status(users, user, bucket, needed, scope, coll.name)
    if status in (Status.UNKNOWN_COLLECTION, Status.UNKNOWN_SCOPE) and not collections:
        return Status.EINVAL
    return status


def may_see(
    users: Users, user: str | None, bucket: str, scope: str, collection: str | None = None
) -> bool:
    """Is ``scope`` (``scope.collection``) of ``bucket`` visible to ``user``: does it
    have some privilege there (Read is not FailNoPrivileges)? What GET_COLLECTION_ID,
    GET_SCOPE_ID and GET_COLLECTIONS_MANIFEST ask (kv_engine
    ``EventuallyPersistentEngine::get_collection_id``, ``get_scope_id``,
    ``get_collection_manifest``)."""
    status = data_status(users, user, bucket, P.READ, scope, collection)
    return status not in (Status.UNKNOWN_COLLECTION, Status.UNKNOWN_SCOPE)


def visible_manifest(
    users: Users, user: str | None, bucket: str, manifest: Manifest
) -> dict[int, list[int]]:
    """What GET_COLLECTIONS_MANIFEST shows ``user`` (module docstring): scope id ->
    the ids of its visible collections, for each scope shown."""
    shown: dict[int, list[int]] = {}
    for sid, scope in manifest.scopes.items():
        cids = [
            cid
            for cid, coll in manifest.collections.items()
            if coll.scope_id == sid and may_see(users, user, bucket, scope.name, coll.name)
        ]
        if cids or may_see(users, user, bucket, scope.name):
            shown[sid] = cids
    return shown


def may_select(users: Users, user: str | None, bucket: str) -> bool:
    """SELECT_BUCKET's question: some privilege in ``bucket``."""
    return users.may_access_bucket(user, bucket)


def stream_status(
    users: Users,
    user: str | None,
    bucket: str,
    manifest: Manifest,
    collections: Iterable[int] | None,
    scope: int | None = None,
) -> Status | None:
    """DcpStream on what a stream's filter selects (module docstring), None when the
    user has it: ``collections`` None for a pass-through stream (the bucket's
    privilege: EACCESS without); ``scope`` the id of a scope filter (UNKNOWN_SCOPE for
    one the user cannot see, else EACCESS); a collection filter: UNKNOWN_COLLECTION if
    any collection is one the user cannot see, else EACCESS if it may not stream one
    (kv_engine ``Filter::checkPrivileges``: "1 unknown collection in a sea of
    success/no_access dominates"). A collection the manifest no longer has is not asked
    about (the filter lets it go)."""
    if collections is None:
        return None if users.allowed(user, P.DCP_STREAM, bucket) else Status.EACCESS
    if scope is not None:
        found = manifest.scopes.get(scope)
        return None if found is None else data_status(users, user, bucket, P.DCP_STREAM, found.name)
    refused = set()
    for cid in collections:
        coll = manifest.collections.get(cid)
        if coll is None:
            continue
        scope_name = manifest.scopes[coll.scope_id].name
        refused.add(data_status(users, user, bucket, P.DCP_STREAM, scope_name, coll.name))
    for status in (Status.UNKNOWN_COLLECTION, Status.EACCESS):
        if status in refused:
            return status
    return None


def may_stream(
    users: Users,
    user: str | None,
    bucket: str,
    manifest: Manifest,
    collections: Iterable[int] | None,
    scope: int | None = None,
) -> bool:
    """May ``user`` stream what the filter selects (``stream_status`` is None)?"""
    return stream_status(users, user, bucket, manifest, collections, scope) is None


def keeps_dcp(users: Users, user: str | None, bucket: str) -> bool:
    """A producer connection of ``user`` may go on (DcpProducer in ``bucket``)."""
    return users.allowed(user, P.DCP_PRODUCER, bucket)


def losing_streams(
    streams: Iterable[Stream], users: Users, user: str | None, bucket: Bucket, collections: bool
) -> dict[Stream, StreamEndReason]:
    """The live streams whose user may no longer stream what they select (DcpStream on
    their filter, ``may_stream``) and how each ends at its next snapshot marker:
    LOST_PRIVILEGES on a connection that negotiated collections, OK without (kv_engine
    ``DcpProducer::getAndValidateNextItemFromStream``)."""
    reason = StreamEndReason.LOST_PRIVILEGES if collections else StreamEndReason.OK
    return {
        stream: reason
        for stream in streams
        if stream.alive
        and not may_stream(
            users,
            user,
            bucket.name,
            bucket.manifest,
            stream.filter.collections,
            stream.filter.scope,
        )
    }
