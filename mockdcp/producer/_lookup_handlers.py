"""The lookups consumers make beside their streams: GET_ALL_VB_SEQNOS, OBSERVE_SEQNO and
the collections manifest, collection id and scope id. The answers are the pure functions
of ``_lookups``; these handlers send them through ``conn.replies``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mockdcp.producer import _lookups as lookups, events as ev
from mockdcp.producer._privileges import may_see, visible_manifest
from mockdcp.protocol import (
    GetAllVbSeqnos,
    GetCollectionId,
    GetCollectionsManifest,
    GetScopeId,
    ObserveSeqno,
    ObserveSeqnoResult,
    Status,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.producer._connection import Connection
    from mockdcp.protocol import Frame


def on_all_vb_seqnos(conn: Connection, frame: Frame, msg: GetAllVbSeqnos, now: float) -> None:
    reply = lookups.all_vb_seqnos(conn.node.view, msg, collections=conn.settings.collections)
    conn.replies.reply(frame, reply)


def on_observe_seqno(conn: Connection, frame: Frame, msg: ObserveSeqno, now: float) -> None:
    reply = lookups.observe_seqno(conn.node.view, msg)
    if reply is None:
        conn.replies.not_my_vbucket(frame)
        return
    if reply.status == Status.SUCCESS and conn.observed():
        persisted = ObserveSeqnoResult.decode(reply.value).persisted_seqno
        conn.emit(ev.SeqnoObserved, vbucket=msg.vbucket, persisted_seqno=persisted)
    conn.replies.reply(frame, reply)


def on_manifest(conn: Connection, frame: Frame, msg: GetCollectionsManifest, now: float) -> None:
    node = conn.node
    shown = visible_manifest(node.users, conn.user, node.bucket.name, node.bucket.manifest)
    conn.replies.reply(frame, lookups.collections_manifest(node.bucket, shown))


def _may_see(conn: Connection) -> Callable[[str, str | None], bool]:
    """Whether the connection's user may see a scope or collection (``may_see``)."""
    node = conn.node
    return lambda scope, collection: may_see(
        node.users, conn.user, node.bucket.name, scope, collection
    )


def on_collection_id(conn: Connection, frame: Frame, msg: GetCollectionId, now: float) -> None:
    conn.replies.reply(frame, lookups.collection_id(conn.node.bucket, msg, _may_see(conn)))


def on_scope_id(conn: Connection, frame: Frame, msg: GetScopeId, now: float) -> None:
    conn.replies.reply(frame, lookups.scope_id(conn.node.bucket, msg, _may_see(conn)))


#: The lookups' part of the dispatch table (``_dispatch``).
HANDLERS: dict[type, Callable[[Connection, Frame, Any, float], None]] = {
    GetAllVbSeqnos: on_all_vb_seqnos,
    ObserveSeqno: on_observe_seqno,
    GetCollectionsManifest: on_manifest,
    GetCollectionId: on_collection_id,
    GetScopeId: on_scope_id,
}
