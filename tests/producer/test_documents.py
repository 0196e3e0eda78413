from __future__ import annotations

import struct

import pytest

from mockdcp.model import Bucket
from mockdcp.protocol import HelloFeature, Response, Status, encode_leb128
from mockdcp.protocol._document_requests import (
    Add,
    Delete,
    DocFlag,
    Get,
    GetMeta,
    PathFlag,
    Set,
    SubdocMultiLookup,
    SubdocMultiMutation,
    SubdocOpcode as Op,
    SubdocSpec,
    Touch,
    decode_lookup_results,
)

from ._session import FEATURES, Session


def bucket() -> Bucket:
    return Bucket("default", 8, seed=4, clock=lambda: 1_700_000_000.0)


def session(*extra: HelloFeature) -> Session:
    return Session(bucket(), features=(*FEATURES, *extra))


def reply(s: Session, msg: object) -> Response:
    out = s.call(msg)  # type: ignore[arg-type]
    assert len(out) == 1
    assert isinstance(out[0], Response)
    return out[0]


def key_vb(s: Session, key: bytes) -> int:
    return s.node.bucket.vbucket_of(key)


def test_set_answers_cas_and_mutation_token_with_mutation_seqno() -> None:
    s = session(HelloFeature.MUTATION_SEQNO)
    vb = key_vb(s, b"k")
    r = reply(s, Set(opaque=3, key=b"k", vbucket=vb, value=b'{"a":1}', flags=5))
    assert r.status == Status.SUCCESS
    item = s.node.bucket.vbucket(vb).get(b"k")
    assert item is not None
    assert r.cas == item.cas
    uuid = s.node.bucket.vbucket(vb).failover.newest_uuid
    assert r.extras == struct.pack(">QQ", uuid, item.seqno)


def test_set_without_mutation_seqno_has_no_extras() -> None:
    s = session()
    r = reply(s, Set(opaque=3, key=b"k", vbucket=key_vb(s, b"k"), value=b"1"))
    assert (r.status, r.extras) == (Status.SUCCESS, b"")


def test_get_returns_flags_value_and_json_datatype() -> None:
    s = session()
    vb = key_vb(s, b"k")
    reply(s, Set(opaque=1, key=b"k", vbucket=vb, value=b'{"a":1}', flags=5))
    r = reply(s, Get(opaque=2, key=b"k", vbucket=vb))
    assert (r.status, r.extras, r.value, r.datatype) == (
        Status.SUCCESS,
        b"\0\0\0\x05",
        b'{"a":1}',
        1,
    )


def test_collection_aware_keys_carry_the_leb128_prefix() -> None:
    s = session(HelloFeature.COLLECTIONS)
    vb = key_vb(s, b"k")
    key = encode_leb128(0) + b"k"
    assert reply(s, Set(opaque=1, key=key, vbucket=vb, value=b"1")).status == Status.SUCCESS
    assert s.node.bucket.vbucket(vb).get(b"k") is not None
    r = reply(s, Get(opaque=2, key=encode_leb128(8) + b"k", vbucket=vb))
    assert r.status == Status.UNKNOWN_COLLECTION


@pytest.mark.parametrize(
    ("msg", "status"),
    [
        (Get(opaque=1, key=b"nope", vbucket=0), Status.KEY_ENOENT),
        (Delete(opaque=1, key=b"nope", vbucket=0), Status.KEY_ENOENT),
        (Touch(opaque=1, key=b"nope", vbucket=0, expiry=3), Status.KEY_ENOENT),
        (GetMeta(opaque=1, key=b"nope", vbucket=0), Status.KEY_ENOENT),
        (Get(opaque=1, key=b"k", vbucket=99), Status.NOT_MY_VBUCKET),
    ],
)
def test_statuses(msg: object, status: Status) -> None:
    assert reply(session(), msg).status == status


def test_add_of_an_existing_key_is_key_eexists() -> None:
    s = session()
    reply(s, Set(opaque=1, key=b"k", vbucket=0, value=b"1"))
    assert reply(s, Add(opaque=1, key=b"k", vbucket=0, value=b"1")).status == Status.KEY_EEXISTS


def test_document_commands_before_select_bucket_get_no_bucket() -> None:
    s = Session.__new__(Session)
    b = bucket()
    from mockdcp.producer import Node
    from mockdcp.protocol import Hello, SaslAuth

    s.node = Node(bucket=b, users={"Administrator": "password"})
    s.conn = s.node.open_connection(0.0)
    s.collections = False
    s.call(Hello(opaque=0, agent=b"t", features=FEATURES))
    s.call(SaslAuth(opaque=0, mechanism="PLAIN", payload=b"\0Administrator\0password"))
    assert reply(s, Get(opaque=1, key=b"k", vbucket=0)).status == Status.NO_BUCKET


def test_get_meta_of_a_tombstone_reports_deleted() -> None:
    s = session()
    reply(s, Set(opaque=1, key=b"k", vbucket=0, value=b"1", flags=9))
    reply(s, Delete(opaque=1, key=b"k", vbucket=0))
    r = reply(s, GetMeta(opaque=1, key=b"k", vbucket=0, version=2))
    deleted, _flags, _expiry, rev = struct.unpack(">IIIQ", r.extras[:20])
    assert (r.status, deleted, rev, len(r.extras)) == (Status.SUCCESS, 1, 2, 21)


def test_godcp_membership_index_with_mkdoc_then_read_back() -> None:
    s = session(HelloFeature.COLLECTIONS, HelloFeature.MUTATION_SEQNO)
    key = b"_connector:cbgo:group:instance:all"
    vb = key_vb(s, key)
    spec = SubdocSpec(Op.DICT_UPSERT, 0, b"`_connector:cbgo:group:instance:x`", b"123")
    r = reply(
        s,
        SubdocMultiMutation(
            opaque=1, key=b"\0" + key, vbucket=vb, specs=(spec,), doc_flags=DocFlag.MKDOC
        ),
    )
    assert (r.status, len(r.extras)) == (Status.SUCCESS, 16)
    r = reply(s, Get(opaque=2, key=b"\0" + key, vbucket=vb))
    assert r.value == b'{"_connector:cbgo:group:instance:x":123}'


def test_multi_mutation_failure_carries_index_and_status() -> None:
    s = session()
    reply(s, Set(opaque=1, key=b"k", vbucket=0, value=b"{}"))
    specs = (
        SubdocSpec(Op.DICT_UPSERT, 0, b"a", b"1"),
        SubdocSpec(Op.DICT_ADD, 0, b"a", b"1"),
    )
    r = reply(s, SubdocMultiMutation(opaque=1, key=b"k", vbucket=0, specs=specs))
    assert r.status == Status.SUBDOC_MULTI_PATH_FAILURE
    assert r.value == b"\x01\x00\xc9"


def test_multi_lookup_of_an_xattr_checkpoint() -> None:
    s = session()
    reply(s, Set(opaque=1, key=b"cp", vbucket=0, value=b""))
    xspec = SubdocSpec(Op.DICT_UPSERT, PathFlag.XATTR_PATH, b"cbgo", b'{"n":1}')
    reply(s, SubdocMultiMutation(opaque=1, key=b"cp", vbucket=0, specs=(xspec,)))
    lookup = SubdocSpec(Op.GET, PathFlag.XATTR_PATH, b"cbgo")
    r = reply(s, SubdocMultiLookup(opaque=2, key=b"cp", vbucket=0, specs=(lookup,)))
    assert r.status == Status.SUCCESS
    assert decode_lookup_results(r.value) == [(0, b'{"n":1}')]


@pytest.mark.parametrize(
    ("expiry", "user_flags", "doc_flags"),
    [(0, None, 0), (0, None, 1), (60, None, 0), (60, None, 1), (60, 7, 0), (60, 7, 1)],
)
def test_multi_mutation_extras_round_trip(
    expiry: int, user_flags: int | None, doc_flags: int
) -> None:
    from mockdcp.protocol import FrameReader, decode_client_message

    msg = SubdocMultiMutation(
        opaque=1,
        key=b"k",
        specs=(SubdocSpec(Op.DICT_UPSERT, 0, b"a", b"1"),),
        expiry=expiry,
        user_flags=user_flags,
        doc_flags=doc_flags,
    )
    reader = FrameReader()
    reader.feed(msg.encode())
    frame = reader.next_frame()
    assert frame is not None
    assert decode_client_message(frame) == msg


def test_a_write_through_kv_reaches_an_open_stream() -> None:
    from mockdcp.protocol import DcpStreamRequest, Mutation

    b = bucket()
    consumer = Session(b)
    consumer.open_dcp()
    writer = Session(b)
    vb = b.vbucket_of(b"live")
    consumer.call(
        DcpStreamRequest(
            opaque=9,
            vbucket=vb,
            flags=0,
            start_seqno=0,
            end_seqno=2**64 - 1,
            vbucket_uuid=0,
            snap_start_seqno=0,
            snap_end_seqno=0,
        )
    )
    reply(writer, Set(opaque=1, key=b"live", vbucket=vb, value=b'{"v":1}'))
    got = [m for m in consumer.read() if isinstance(m, Mutation)]
    assert [(m.key, m.value) for m in got] == [(b"live", b'{"v":1}')]


def test_set_with_durability_and_preserve_ttl_framing_extras() -> None:
    from mockdcp.protocol import Magic, Opcode, encode_frame

    s = session()
    reply(s, Set(opaque=1, key=b"k", vbucket=0, value=b"1", expiry=600))
    expiry = s.node.bucket.vbucket(0).get(b"k").expiry  # type: ignore[union-attr]
    # durability majority with a 100 ms timeout (id 1, 3 bytes), preserve TTL (id 5)
    framing = bytes([0x13, 0x01, 0x00, 0x64, 0x50])
    s.send(
        encode_frame(
            Magic.ALT_REQUEST,
            Opcode.SET,
            opaque=2,
            framing_extras=framing,
            extras=struct.pack(">II", 0, 0),
            key=b"k",
            value=b"2",
        )
    )
    out = s.read()
    assert isinstance(out[0], Response)
    assert out[0].status == Status.SUCCESS
    item = s.node.bucket.vbucket(0).get(b"k")
    assert item is not None
    assert (item.value, item.expiry) == (b"2", expiry)
    # the durable write is a prepare (seqno 2) and its commit (seqno 3)
    assert (item.seqno, s.node.bucket.vbucket(0).high_completed_seqno) == (3, 2)


def test_a_write_of_a_key_with_only_a_pending_durable_write_is_sync_write_in_progress() -> None:
    # kv_engine checks the pending prepare before the document: not KEY_ENOENT
    s = session()
    s.node.bucket.sync_write("k", "1", vbucket=0, outcome="pending")
    vb = s.node.bucket.vbucket(0)
    before = (vb.high_seqno, vb.max_visible_seqno, vb.high_completed_seqno)
    assert reply(s, Set(opaque=3, key=b"k", vbucket=0, value=b"2")).status == (
        Status.SYNC_WRITE_IN_PROGRESS
    )
    # a second durable write of it (a second prepare) and a delete: the same, and
    # nothing changes
    second = Set(opaque=4, key=b"k", vbucket=0, value=b"3", durability=1)
    assert reply(s, second).status == Status.SYNC_WRITE_IN_PROGRESS
    assert reply(s, Delete(opaque=5, key=b"k", vbucket=0)).status == (Status.SYNC_WRITE_IN_PROGRESS)
    assert reply(s, Touch(opaque=6, key=b"k", vbucket=0, expiry=60)).status == (
        Status.SYNC_WRITE_IN_PROGRESS
    )
    spec = SubdocSpec(Op.DICT_UPSERT, 0, b"a", b"1")
    mutate = SubdocMultiMutation(
        opaque=7, key=b"k", vbucket=0, specs=(spec,), doc_flags=DocFlag.MKDOC
    )
    assert reply(s, mutate).status == Status.SYNC_WRITE_IN_PROGRESS
    assert (vb.high_seqno, vb.max_visible_seqno, vb.high_completed_seqno) == before
    assert vb.get(b"k") is None


def test_a_bad_durability_level_is_einval() -> None:
    from mockdcp.protocol import Magic, Opcode, encode_frame

    s = session()
    s.send(
        encode_frame(
            Magic.ALT_REQUEST,
            Opcode.SET,
            opaque=2,
            framing_extras=bytes([0x11, 0x07]),
            extras=struct.pack(">II", 0, 0),
            key=b"k",
            value=b"2",
        )
    )
    out = s.read()
    assert isinstance(out[0], Response)
    assert out[0].status == Status.EINVAL
