"""What a connection's user may do: the one privilege question the producer asks before
a request and at each snapshot marker, with the users of ``mockdcp.model.Users``.

* ``request_status``: the privilege a command needs (kv_engine
  ``daemon/mcbp_privileges.cc``: DCP commands need DcpProducer, document reads Read,
  writes Upsert/Insert/Delete; DCP_OPEN as a producer DcpProducer,
  ``dcp_open_executor.cc``); EACCESS without it.
* ``may_select``: SELECT_BUCKET needs some privilege in the bucket (kv_engine
  ``select_bucket_executor.cc``, ``Cookie::mayAccessBucket``), else EACCESS.
* ``may_stream``: a stream needs DcpStream on what its filter selects: the bucket for a
  pass-through stream, the scope for a scope filter, each collection for a collection
  filter (kv_engine ``collections/vbucket_filter.cc`` ``Filter::checkPrivileges``);
  checked when the stream is requested (EACCESS) and before each snapshot marker
  (``DcpProducer::getAndValidateNextItemFromStream`` →
  ``ActiveStream::endIfRequiredPrivilegesLost``: STREAM_END LOST_PRIVILEGES).
* ``keeps_dcp``: a DCP connection whose user lost DcpProducer is shut down (kv_engine
  ``Connection::tryToProgressDcpStream``: "DcpProducer privilege no longer available").

Pure: reads the users and the manifest, changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model import Privilege
from mockdcp.protocol import DcpOpenFlag, Opcode, Status, StreamEndReason

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mockdcp.model import Bucket, Manifest, Users
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


def request_status(
    users: Users, user: str | None, bucket: str, opcode: int, open_flags: int = 0
) -> Status | None:
    """EACCESS if ``user`` lacks the privilege ``opcode`` needs in ``bucket``, else
    None. Document commands are checked on the bucket as a whole (a role limited to one
    collection does not reach them here)."""
    needed = required_privilege(opcode, open_flags)
    if needed is None:
        return None
    if needed in (P.DCP_PRODUCER, P.DCP_CONSUMER):
        return None if users.allowed(user, needed, bucket) else Status.EACCESS
    return None if users.allowed(user, needed, bucket, "_default", "_default") else Status.EACCESS


def may_select(users: Users, user: str | None, bucket: str) -> bool:
    """SELECT_BUCKET's question: some privilege in ``bucket``."""
    return users.may_access_bucket(user, bucket)


def may_stream(
    users: Users,
    user: str | None,
    bucket: str,
    manifest: Manifest,
    collections: Iterable[int] | None,
    scope: int | None = None,
) -> bool:
    """DcpStream on what a stream's filter selects (module docstring): ``collections``
    None for a pass-through stream; ``scope`` the id of a scope filter. A collection
    the manifest no longer has is not asked about (the filter lets it go)."""
    if collections is None:
        return users.allowed(user, P.DCP_STREAM, bucket)
    if scope is not None:
        found = manifest.scopes.get(scope)
        return found is None or users.allowed(user, P.DCP_STREAM, bucket, found.name)
    for cid in collections:
        coll = manifest.collections.get(cid)
        if coll is None:
            continue
        scope_name = manifest.scopes[coll.scope_id].name
        if not users.allowed(user, P.DCP_STREAM, bucket, scope_name, coll.name):
            return False
    return True


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
