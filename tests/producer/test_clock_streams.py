"""What the node's timers do reaches the streams as each connection negotiated."""

from __future__ import annotations

from mockdcp.model import Bucket, VirtualClock
from mockdcp.producer import Node
from mockdcp.protocol import (
    DcpControl,
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    Deletion,
    Expiration,
)

from ._session import Session

T0 = 1_700_000_000.0


def _stream(node: Node, bucket: Bucket, *, expiry_opcode: bool) -> Session:
    s = Session(bucket, node=node)
    flags = DcpOpenFlag.PRODUCER | (DcpOpenFlag.INCLUDE_DELETE_TIMES if expiry_opcode else 0)
    name = b"expiry" if expiry_opcode else b"plain"
    s.call(DcpOpen(opaque=0, name=name, flags=int(flags)))
    if expiry_opcode:
        s.call(DcpControl(opaque=0, key="enable_expiry_opcode", value="true"))
    s.call(
        DcpStreamRequest(
            opaque=7,
            vbucket=0,
            flags=0,
            start_seqno=0,
            end_seqno=2**64 - 1,
            vbucket_uuid=0,
            snap_start_seqno=0,
            snap_end_seqno=0,
        )
    )
    return s


def test_the_expiry_pager_streams_an_expiration_or_a_deletion_as_negotiated() -> None:
    bucket = Bucket("default", 1, seed=3, clock=VirtualClock(T0))
    bucket.set("ttl", "{}", expiry=int(T0) + 30)
    node = Node(bucket=bucket, users={"Administrator": "password"})
    with_opcode = _stream(node, bucket, expiry_opcode=True)
    plain = _stream(node, bucket, expiry_opcode=False)
    bucket.advance_clock(T0 + 600)
    got = with_opcode.read()
    expired = [m for m in got if isinstance(m, Expiration)]
    assert [m.key for m in expired] == [b"ttl"]
    assert expired[0].delete_time == int(T0) + 30
    deleted = [m for m in plain.read() if isinstance(m, Deletion | Expiration)]
    assert [(type(m), m.key) for m in deleted] == [(Deletion, b"ttl")]
