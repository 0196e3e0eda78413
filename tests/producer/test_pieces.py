"""The pieces split out of the connection, each on its own: keepalive timing, the stream
registry, the read-only lookups."""

from __future__ import annotations

from mockdcp.model import Bucket, Cluster
from mockdcp.producer._keepalive import NOOP_OPAQUE_BASE, Keepalive
from mockdcp.producer._lookups import all_vb_seqnos, collection_id, observe_seqno, scope_id
from mockdcp.protocol import (
    DcpNoop,
    GetAllVbSeqnos,
    GetCollectionId,
    GetScopeId,
    ObserveSeqno,
    Status,
)


def test_noops_go_every_interval_while_none_is_outstanding() -> None:
    k = Keepalive(last_received=0, last_noop=0)
    assert k.due(5, 10) is None
    noop = k.due(10, 10)
    assert noop == DcpNoop(opaque=NOOP_OPAQUE_BASE + 1).encode()
    assert k.due(25, 10) is None  # the first is not answered yet
    assert k.deadline(10, 360) == 360
    assert k.answer(NOOP_OPAQUE_BASE + 1)
    assert not k.answer(NOOP_OPAQUE_BASE + 1)
    assert k.deadline(10, 360) == 20
    assert k.due(20, 10) is not None
    assert (k.sent, k.answered) == (2, 1)


def test_a_noop_is_due_at_the_deadline_it_gives() -> None:
    # 0.58 - 0.08 < 0.5 in floating point: the writer woke at 0.58 for nothing, for ever
    k = Keepalive(last_received=0.08, last_noop=0.08)
    deadline = k.deadline(0.5, 360)
    assert deadline == 0.58
    assert k.due(deadline, 0.5) is not None


def test_silence_past_the_idle_timeout_is_reported() -> None:
    k = Keepalive(last_received=0, last_noop=0)
    assert k.idle_for(359, 360) is None
    assert k.idle_for(361, 360) == 361
    k.received(100)
    assert k.idle_for(361, 360) is None


def bucket() -> Bucket:
    b = Bucket("default", 4, seed=3, clock=lambda: 1_700_000_000.0)
    b.set("a", "1", vbucket=2)
    b.persist()
    b.set("b", "1", vbucket=2)
    return b


def test_all_vb_seqnos_and_the_collection_id_rule() -> None:
    b = bucket()
    reply = all_vb_seqnos(b, GetAllVbSeqnos(opaque=1), collections=False)
    assert reply.status == Status.SUCCESS
    assert len(reply.value) == 4 * 10
    refused = all_vb_seqnos(
        b, GetAllVbSeqnos(opaque=1, state=1, collection_id=0), collections=False
    )
    assert refused.status == Status.EINVAL


def test_observe_seqno_reports_the_current_branch_and_an_older_one() -> None:
    b = bucket()
    node = Cluster(b).view("node0")
    vb = b.vbucket(2)
    old_uuid = vb.failover.entries[0][0]
    b.failover(2, lose_unpersisted=False)
    reply = observe_seqno(node, ObserveSeqno(opaque=1, vbucket=2, vbucket_uuid=old_uuid))
    assert reply is not None
    assert reply.status == Status.SUCCESS
    assert len(reply.value) == 43  # format 1: with the old uuid and its last seqno
    assert observe_seqno(node, ObserveSeqno(opaque=1, vbucket=2, vbucket_uuid=1)).status == (  # type: ignore[union-attr]
        Status.KEY_ENOENT
    )
    assert observe_seqno(node, ObserveSeqno(opaque=1, vbucket=9, vbucket_uuid=1)) is None


def test_a_default_only_bucket_knows_only_the_default_scope_and_collection() -> None:
    b = bucket()
    assert collection_id(b, GetCollectionId(opaque=1, path="_default._default")).status == 0
    assert collection_id(b, GetCollectionId(opaque=1, path="_default.b")).status == (
        Status.UNKNOWN_COLLECTION
    )
    assert collection_id(b, GetCollectionId(opaque=1, path="a.b")).status == Status.UNKNOWN_SCOPE
    assert scope_id(b, GetScopeId(opaque=1, path="_default")).status == 0
    assert scope_id(b, GetScopeId(opaque=1, path="inventory")).status == Status.UNKNOWN_SCOPE
