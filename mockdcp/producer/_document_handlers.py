"""The KV document commands on a producer connection: decode the key, run the command
on the bucket (``mockdcp/model/_documents.py``), answer as a node does.

Responses (kv_engine ``docs/BinaryProtocol.md``): GET/GAT carry extras = u32 flags, the
body and its datatype (JSON only toward a connection that has the JSON datatype);
mutations carry the new CAS and, with HELLO MUTATION_SEQNO, extras = vbucket uuid and
seqno (the mutation token); GET_META carries the metadata extras and the CAS.
``_dispatch`` registers these handlers in its one table; they answer through ``conn.replies``.
The model's document commands (``Documents``, with the sub-document engine) are imported
at a connection's first document command (``_model``), not with the producer: a DCP
consumer never sends one, and importing them cost every server 18 ms of CPU after its
ready line, while the first consumer bootstraps.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from mockdcp.model import MemoryFull
from mockdcp.producer import _lookups as lookups
from mockdcp.producer._privileges import document_status
from mockdcp.protocol import (
    Add,
    Datatype,
    Delete,
    Get,
    GetAndTouch,
    GetMeta,
    HelloFeature,
    RemoteProtocolError,
    Replace,
    Set,
    Status,
    SubdocMultiLookup,
    SubdocMultiMutation,
    Touch,
    encode_get_meta_extras,
    encode_lookup_results,
    encode_mutation_results,
    encode_mutation_token,
    split_collection,
)
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.model import Documents, KvError, Written
    from mockdcp.producer._connection import Connection
    from mockdcp.protocol import DocumentRequest, Frame


@functools.cache
def _model() -> tuple[type[Documents], type[KvError]]:
    """The model's ``Documents`` and ``KvError``, imported once, when first needed."""
    from mockdcp.model import Documents, KvError

    return Documents, KvError


def _documents(conn: Connection) -> Documents:
    return _model()[0](conn.node.bucket)


def _run(
    conn: Connection,
    frame: Frame,
    msg: DocumentRequest,
    command: Callable[[Documents, int, int, bytes], None],
) -> None:
    """Split the key, check the user's privilege on its collection
    (``_privileges.document_status``), run ``command(documents, vbucket, collection,
    key)``, and answer its ``KvError`` with the status a node gives."""
    try:
        cid, key = split_collection(msg.key, conn.settings.collections)
    except RemoteProtocolError as exc:
        conn.replies.respond(frame, exc.status, context=str(exc))
        return
    node = conn.node
    refused = document_status(
        node.users,
        conn.user,
        node.bucket.name,
        node.bucket.manifest,
        frame.opcode,
        cid,
        collections=conn.settings.collections,
    )
    if refused in (Status.UNKNOWN_COLLECTION, Status.UNKNOWN_SCOPE):
        conn.replies.reply(frame, lookups._unknown(node.bucket, refused))
        return
    if refused is not None:
        conn.replies.respond(frame, refused, context="no access (a privilege the user lacks)")
        return
    view = node.view
    if 0 <= msg.vbucket < view.num_vbuckets and not view.is_active(msg.vbucket):
        conn.replies.not_my_vbucket(frame)  # documents are read and written on actives
        return
    kv_error = _model()[1]
    try:
        command(_documents(conn), msg.vbucket, cid, key)
    except MemoryFull as exc:  # an ephemeral noEviction bucket is full
        conn.replies.respond(frame, Status.ETMPFAIL, context=str(exc))
    except ModelError as exc:  # a value the model refuses: the request's fault
        conn.replies.respond(frame, Status.EINVAL, context=str(exc))
    except kv_error as exc:
        if exc.status == Status.NOT_MY_VBUCKET:
            conn.replies.not_my_vbucket(frame)
        elif exc.status == Status.UNKNOWN_COLLECTION:
            conn.replies.reply(frame, lookups._unknown(conn.node.bucket, Status.UNKNOWN_COLLECTION))
        else:
            conn.replies.respond(frame, exc.status, value=exc.value, context=exc.context)


def _token(conn: Connection, written: Written) -> bytes:
    if HelloFeature.MUTATION_SEQNO not in conn.features:
        return b""
    return encode_mutation_token(written.vbucket_uuid, written.item.seqno)


def _body_datatype(conn: Connection, datatype: int) -> int:
    return datatype if conn.replies.json_enabled else datatype & ~Datatype.JSON


def on_get(conn: Connection, frame: Frame, msg: Get | GetAndTouch, now: float) -> None:
    """GET, and GAT (which touches first)."""

    def command(docs: Documents, vb: int, cid: int, key: bytes) -> None:
        if isinstance(msg, GetAndTouch):
            docs.touch(vb, cid, key, msg.expiry)
        item, body, datatype = docs.get(vb, cid, key)
        conn.replies.respond(
            frame,
            extras=item.flags.to_bytes(4, "big"),
            value=body,
            datatype=_body_datatype(conn, datatype),
            cas=item.cas,
        )

    _run(conn, frame, msg, command)


def on_store(conn: Connection, frame: Frame, msg: Set | Add | Replace, now: float) -> None:
    """SET, ADD and REPLACE."""
    mode = "add" if isinstance(msg, Add) else "replace" if isinstance(msg, Replace) else "set"

    def command(docs: Documents, vb: int, cid: int, key: bytes) -> None:
        written = docs.store(
            mode,
            vb,
            cid,
            key,
            msg.value,
            datatype=msg.datatype,
            flags=msg.flags,
            expiry=msg.expiry,
            cas=msg.cas,
            preserve_ttl=msg.preserve_ttl,
            durability=msg.durability,
        )
        conn.replies.respond(frame, extras=_token(conn, written), cas=written.item.cas)

    _run(conn, frame, msg, command)


def on_delete(conn: Connection, frame: Frame, msg: Delete, now: float) -> None:
    def command(docs: Documents, vb: int, cid: int, key: bytes) -> None:
        written = docs.delete(vb, cid, key, cas=msg.cas, durability=msg.durability)
        conn.replies.respond(frame, extras=_token(conn, written), cas=written.item.cas)

    _run(conn, frame, msg, command)


def on_touch(conn: Connection, frame: Frame, msg: Touch, now: float) -> None:
    def command(docs: Documents, vb: int, cid: int, key: bytes) -> None:
        written = docs.touch(vb, cid, key, msg.expiry)
        conn.replies.respond(frame, cas=written.item.cas)

    _run(conn, frame, msg, command)


def on_get_meta(conn: Connection, frame: Frame, msg: GetMeta, now: float) -> None:
    def command(docs: Documents, vb: int, cid: int, key: bytes) -> None:
        item = docs.get_meta(vb, cid, key)
        extras = encode_get_meta_extras(
            deleted=item.deleted,
            flags=item.flags,
            expiry=item.expiry,
            rev_seqno=item.rev_seqno,
            datatype=item.datatype if msg.version == 2 else None,
        )
        conn.replies.respond(frame, extras=extras, cas=item.cas)

    _run(conn, frame, msg, command)


def on_lookup(conn: Connection, frame: Frame, msg: SubdocMultiLookup, now: float) -> None:
    def command(docs: Documents, vb: int, cid: int, key: bytes) -> None:
        looked = docs.lookup_in(vb, cid, key, msg.specs, msg.doc_flags)
        value = encode_lookup_results(looked.results)
        conn.replies.respond(frame, looked.status, value=value, cas=looked.item.cas)

    _run(conn, frame, msg, command)


def on_mutation(conn: Connection, frame: Frame, msg: SubdocMultiMutation, now: float) -> None:
    def command(docs: Documents, vb: int, cid: int, key: bytes) -> None:
        written = docs.mutate_in(
            vb,
            cid,
            key,
            msg.specs,
            doc_flags=msg.doc_flags,
            expiry=msg.expiry,
            user_flags=msg.user_flags,
            cas=msg.cas,
            preserve_ttl=msg.preserve_ttl,
        )
        value = encode_mutation_results(written.results)
        conn.replies.respond(frame, extras=_token(conn, written), value=value, cas=written.item.cas)

    _run(conn, frame, msg, command)


#: The document commands' part of the dispatch table (``_dispatch``).
HANDLERS: dict[type, Callable[[Connection, Frame, Any, float], None]] = {
    Get: on_get,
    GetAndTouch: on_get,
    Set: on_store,
    Add: on_store,
    Replace: on_store,
    Delete: on_delete,
    Touch: on_touch,
    GetMeta: on_get_meta,
    SubdocMultiLookup: on_lookup,
    SubdocMultiMutation: on_mutation,
}
