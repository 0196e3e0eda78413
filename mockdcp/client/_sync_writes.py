"""Durable writes as the reference consumer takes them (kv_engine
docs/dcp/documentation/commands/prepare.md, commit.md, abort.md): a prepare is held,
never delivered; its commit delivers the held document at the commit's seqno (a
mutation, or a deletion for a prepared deletion); an abort drops it. Each takes a seqno
of the snapshot.

``resolve`` applies one of them to the prepares the consumer holds
(``ConsumerState.prepares``, kept across reconnects) and says what follows: the document
to deliver, or only the seqno the stream moved to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mockdcp.protocol import Abort, Deletion, Mutation, Prepare

if TYPE_CHECKING:
    from mockdcp.client._state import ConsumerState
    from mockdcp.client._streams import StreamKey
    from mockdcp.protocol import Commit


def resolve(
    state: ConsumerState, key: StreamKey, msg: Prepare | Commit | Abort
) -> tuple[Mutation | Deletion | None, int]:
    """Apply ``msg`` of stream ``key`` to the held prepares: (the committed document to
    deliver, its seqno), or (None, the seqno the stream moved to) for a prepare, an
    abort (from disk its prepare may be gone: nothing to drop) or a commit whose prepare
    never came (a violation, noted in ``state``)."""
    vb, sid = key
    cid = msg.collection_id or 0
    held = state.prepares
    if isinstance(msg, Prepare):
        held[(vb, sid, cid, msg.key)] = msg
        return None, msg.by_seqno
    prepare = held.pop((vb, sid, cid, msg.key), None)
    if isinstance(msg, Abort):
        state.aborts += 1
        return None, msg.abort_seqno
    if prepare is None or prepare.by_seqno != msg.prepared_seqno:
        where = "" if sid is None else f" sid {sid}"
        state.violations.append(
            f"vb {vb}{where} commit at {msg.commit_seqno} of prepare "
            f"{msg.prepared_seqno} never received"
        )
        return None, msg.commit_seqno
    document = committed(prepare, opaque=msg.opaque, vbucket=vb, seqno=msg.commit_seqno)
    return document, msg.commit_seqno


def committed(prepare: Prepare, *, opaque: int, vbucket: int, seqno: int) -> Mutation | Deletion:
    """The document ``prepare`` makes once committed at ``seqno`` (on ``vbucket``, as
    the commit's stream has it)."""
    fields: dict[str, Any] = {
        "opaque": opaque,
        "vbucket": vbucket,
        "cas": prepare.cas,
        "by_seqno": seqno,
        "rev_seqno": prepare.rev_seqno,
        "key": prepare.key,
        "collection_id": prepare.collection_id,
        "value": prepare.value,
        "datatype": prepare.datatype,
    }
    if prepare.deleted:
        return Deletion(**fields)
    return Mutation(flags=prepare.flags, expiration=prepare.expiration, **fields)
