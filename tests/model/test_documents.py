from __future__ import annotations

import json

import pytest

from mockdcp.model import Bucket, ItemKind
from mockdcp.model._documents import Documents, KvError
from mockdcp.protocol import Datatype, Status, split_xattrs
from mockdcp.protocol._document_requests import DocFlag, PathFlag, SubdocOpcode as Op, SubdocSpec

NOW = 1_700_000_000


class Clock:
    def __init__(self) -> None:
        self.now = float(NOW)

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def docs(clock: Clock) -> Documents:
    return Documents(Bucket("default", 4, seed=2, clock=clock))


def status_of(call: object) -> Status:
    assert isinstance(call, pytest.ExceptionInfo)
    assert isinstance(call.value, KvError)
    return call.value.status


def test_set_then_get_returns_body_flags_and_cas(docs: Documents) -> None:
    w = docs.store("set", 1, 0, b"k", b'{"a":1}', flags=7)
    item, body, datatype = docs.get(1, 0, b"k")
    assert (body, datatype, item.flags, item.cas) == (b'{"a":1}', Datatype.JSON, 7, w.item.cas)
    assert w.vbucket_uuid == docs.bucket.vbuckets[1].failover.newest_uuid


def test_a_write_is_a_model_write_at_the_next_seqno(docs: Documents) -> None:
    docs.store("set", 2, 0, b"k", b"1")
    w = docs.store("set", 2, 0, b"k", b"2")
    assert w.item.seqno == docs.bucket.vbuckets[2].high_seqno == 2
    assert w.item.rev_seqno == 2


def test_get_of_a_missing_document_is_key_enoent(docs: Documents) -> None:
    with pytest.raises(KvError) as info:
        docs.get(0, 0, b"nope")
    assert info.value.status == Status.KEY_ENOENT


def test_add_refuses_a_live_document_but_not_a_tombstone(docs: Documents) -> None:
    docs.store("add", 0, 0, b"k", b"1")
    with pytest.raises(KvError) as info:
        docs.store("add", 0, 0, b"k", b"2")
    assert info.value.status == Status.KEY_EEXISTS
    docs.delete(0, 0, b"k")
    docs.store("add", 0, 0, b"k", b"3")


def test_replace_needs_a_document(docs: Documents) -> None:
    with pytest.raises(KvError) as info:
        docs.store("replace", 0, 0, b"k", b"1")
    assert info.value.status == Status.KEY_ENOENT


@pytest.mark.parametrize("mode", ["set", "replace"])
def test_a_wrong_cas_is_key_eexists_and_the_right_one_stores(docs: Documents, mode: str) -> None:
    cas = docs.store("set", 0, 0, b"k", b"1").item.cas
    with pytest.raises(KvError) as info:
        docs.store(mode, 0, 0, b"k", b"2", cas=cas + 1)
    assert info.value.status == Status.KEY_EEXISTS
    assert docs.store(mode, 0, 0, b"k", b"2", cas=cas).item.cas != cas


def test_a_cas_on_a_missing_document_is_key_enoent(docs: Documents) -> None:
    with pytest.raises(KvError) as info:
        docs.store("set", 0, 0, b"k", b"1", cas=99)
    assert info.value.status == Status.KEY_ENOENT


def test_delete_writes_a_tombstone_and_checks_cas(docs: Documents) -> None:
    cas = docs.store("set", 0, 0, b"k", b"1").item.cas
    with pytest.raises(KvError) as info:
        docs.delete(0, 0, b"k", cas=cas + 1)
    assert info.value.status == Status.KEY_EEXISTS
    w = docs.delete(0, 0, b"k", cas=cas)
    assert w.item.kind is ItemKind.DELETION
    with pytest.raises(KvError) as info:
        docs.delete(0, 0, b"k")
    assert info.value.status == Status.KEY_ENOENT


def test_get_meta_reads_tombstones(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b"1", flags=3)
    assert not docs.get_meta(0, 0, b"k").deleted
    docs.delete(0, 0, b"k")
    assert docs.get_meta(0, 0, b"k").deleted
    with pytest.raises(KvError) as info:
        docs.get_meta(0, 0, b"never")
    assert info.value.status == Status.KEY_ENOENT


def test_relative_expiry_becomes_absolute_and_expires_on_access(
    docs: Documents, clock: Clock
) -> None:
    w = docs.store("set", 0, 0, b"k", b"1", expiry=10)
    assert w.item.expiry == NOW + 10
    clock.now += 11
    with pytest.raises(KvError) as info:
        docs.get(0, 0, b"k")
    assert info.value.status == Status.KEY_ENOENT
    assert docs.bucket.vbuckets[0].get(b"k") is not None
    assert docs.bucket.vbuckets[0].get(b"k").kind is ItemKind.EXPIRATION  # type: ignore[union-attr]


def test_touch_sets_a_new_expiry(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b"1")
    assert docs.touch(0, 0, b"k", 5).item.expiry == NOW + 5
    with pytest.raises(KvError) as info:
        docs.touch(0, 0, b"missing", 5)
    assert info.value.status == Status.KEY_ENOENT


def test_preserve_ttl_keeps_the_expiry(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b"1", expiry=100)
    assert docs.store("set", 0, 0, b"k", b"2", preserve_ttl=True).item.expiry == NOW + 100


def test_snappy_values_are_stored_decompressed(docs: Documents) -> None:
    import cramjam

    body = b'{"z":"' + b"z" * 200 + b'"}'
    packed = bytes(cramjam.snappy.compress_raw(body))
    docs.store("set", 0, 0, b"k", packed, datatype=Datatype.SNAPPY | Datatype.JSON)
    assert docs.get(0, 0, b"k")[1] == body


@pytest.mark.parametrize(
    ("vbid", "cid", "status"),
    [(9, 0, Status.NOT_MY_VBUCKET), (0, 8, Status.UNKNOWN_COLLECTION)],
)
def test_unknown_vbucket_or_collection(
    docs: Documents, vbid: int, cid: int, status: Status
) -> None:
    with pytest.raises(KvError) as info:
        docs.store("set", vbid, cid, b"k", b"1")
    assert info.value.status == status


def test_a_replica_vbucket_is_not_my_vbucket(docs: Documents) -> None:
    docs.bucket.set_vbucket_state(0, 2)
    with pytest.raises(KvError) as info:
        docs.get(0, 0, b"k")
    assert info.value.status == Status.NOT_MY_VBUCKET


# -- sub-document -------------------------------------------------------------------------


def spec(op: int, path: str = "", value: bytes = b"", *, xattr: bool = False) -> SubdocSpec:
    return SubdocSpec(op, PathFlag.XATTR_PATH if xattr else 0, path.encode(), value)


def test_mutate_in_on_a_missing_document_is_key_enoent_without_mkdoc(docs: Documents) -> None:
    with pytest.raises(KvError) as info:
        docs.mutate_in(0, 0, b"k", [spec(Op.DICT_UPSERT, "a", b"1")])
    assert info.value.status == Status.KEY_ENOENT


def test_mkdoc_creates_the_document(docs: Documents) -> None:
    path = "`_connector:cbgo:g:instance:abc`"
    docs.mutate_in(0, 0, b"all", [spec(Op.DICT_UPSERT, path, b"12")], doc_flags=DocFlag.MKDOC)
    docs.mutate_in(0, 0, b"all", [spec(Op.DICT_UPSERT, "`b`", b"13")], doc_flags=DocFlag.MKDOC)
    _, body, datatype = docs.get(0, 0, b"all")
    assert json.loads(body) == {"_connector:cbgo:g:instance:abc": 12, "b": 13}
    assert datatype == Datatype.JSON


def test_add_flag_refuses_an_existing_document_and_mkdoc_with_add_is_einval(
    docs: Documents,
) -> None:
    docs.store("set", 0, 0, b"k", b"{}")
    with pytest.raises(KvError) as info:
        docs.mutate_in(0, 0, b"k", [spec(Op.DICT_UPSERT, "a", b"1")], doc_flags=DocFlag.ADD)
    assert info.value.status == Status.KEY_EEXISTS
    with pytest.raises(KvError) as info:
        docs.mutate_in(
            0, 0, b"k", [spec(Op.DICT_UPSERT, "a", b"1")], doc_flags=DocFlag.ADD | DocFlag.MKDOC
        )
    assert info.value.status == Status.EINVAL


def test_set_doc_replaces_the_body_and_checks_cas(docs: Documents) -> None:
    cas = docs.store("set", 0, 0, b"k", b'{"old":1}').item.cas
    with pytest.raises(KvError) as info:
        docs.mutate_in(0, 0, b"k", [spec(Op.SET_DOC, "", b'{"new":1}')], cas=cas + 1)
    assert info.value.status == Status.KEY_EEXISTS
    docs.mutate_in(0, 0, b"k", [spec(Op.SET_DOC, "", b'{"new":1}')], cas=cas, expiry=120)
    item, body, _ = docs.get(0, 0, b"k")
    assert body == b'{"new":1}'
    assert item.expiry == NOW + 120


def test_a_failing_spec_applies_nothing_and_names_its_index(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b'{"a":1}')
    before = docs.bucket.vbuckets[0].high_seqno
    specs = [spec(Op.DICT_UPSERT, "b", b"2"), spec(Op.REPLACE, "missing", b"3")]
    with pytest.raises(KvError) as info:
        docs.mutate_in(0, 0, b"k", specs)
    assert info.value.status == Status.SUBDOC_MULTI_PATH_FAILURE
    assert info.value.value == bytes([1]) + Status.SUBDOC_PATH_ENOENT.to_bytes(2, "big")
    assert docs.bucket.vbuckets[0].high_seqno == before


def test_xattr_upsert_keeps_the_body_and_is_stored_with_the_xattr_datatype(
    docs: Documents,
) -> None:
    docs.store("set", 0, 0, b"cp", b"")
    docs.mutate_in(0, 0, b"cp", [spec(Op.DICT_UPSERT, "cbgo", b'{"seqNo":5}', xattr=True)])
    item = docs.bucket.vbuckets[0].get(b"cp")
    assert item is not None
    assert item.datatype & Datatype.XATTR
    assert split_xattrs(item.value) == ([(b"cbgo", b'{"seqNo":5}')], b"")
    assert docs.get(0, 0, b"cp")[1] == b""  # GET returns the body only
    looked = docs.lookup_in(0, 0, b"cp", [spec(Op.GET, "cbgo", xattr=True)])
    assert looked.status == Status.SUCCESS
    assert looked.results == [(Status.SUCCESS, b'{"seqNo":5}')]


def test_xattr_specs_must_come_before_body_specs(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b"{}")
    specs = [spec(Op.DICT_UPSERT, "a", b"1"), spec(Op.DICT_UPSERT, "x", b"1", xattr=True)]
    with pytest.raises(KvError) as info:
        docs.mutate_in(0, 0, b"k", specs)
    assert info.value.status == Status.SUBDOC_INVALID_XATTR_ORDER


def test_virtual_xattrs_cannot_be_modified(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b"{}")
    with pytest.raises(KvError) as info:
        docs.mutate_in(0, 0, b"k", [spec(Op.DICT_UPSERT, "$document.x", b"1", xattr=True)])
    assert info.value.value[1:] == Status.SUBDOC_XATTR_CANT_MODIFY_VATTR.to_bytes(2, "big")


def test_a_full_store_keeps_system_xattrs_and_drops_user_xattrs(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b"{}")
    specs = [
        spec(Op.DICT_UPSERT, "_sys", b"1", xattr=True),
        spec(Op.DICT_UPSERT, "user", b"2", xattr=True),
    ]
    docs.mutate_in(0, 0, b"k", specs)
    docs.store("set", 0, 0, b"k", b'{"v":2}')
    item = docs.bucket.vbuckets[0].get(b"k")
    assert item is not None
    assert split_xattrs(item.value) == ([(b"_sys", b"1")], b'{"v":2}')


def test_lookup_in_reports_each_spec_and_multi_path_failure(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b'{"a":[1,2]}')
    looked = docs.lookup_in(
        0,
        0,
        b"k",
        [spec(Op.GET, "a[0]"), spec(Op.GET, "zz"), spec(Op.GET_COUNT, "a"), spec(Op.GET_DOC)],
    )
    assert looked.status == Status.SUBDOC_MULTI_PATH_FAILURE
    assert looked.results == [
        (Status.SUCCESS, b"1"),
        (Status.SUBDOC_PATH_ENOENT, b""),
        (Status.SUCCESS, b"2"),
        (Status.SUCCESS, b'{"a":[1,2]}'),
    ]


def test_lookup_of_a_body_that_is_not_json_is_doc_not_json(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b"\x00raw")
    looked = docs.lookup_in(0, 0, b"k", [spec(Op.GET, "a")])
    assert looked.results == [(Status.SUBDOC_DOC_NOT_JSON, b"")]


def test_lookup_of_a_tombstone_needs_access_deleted(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b"{}")
    docs.delete(0, 0, b"k")
    with pytest.raises(KvError) as info:
        docs.lookup_in(0, 0, b"k", [spec(Op.GET, "x", xattr=True)])
    assert info.value.status == Status.KEY_ENOENT
    looked = docs.lookup_in(
        0, 0, b"k", [spec(Op.GET, "x", xattr=True)], doc_flags=DocFlag.ACCESS_DELETED
    )
    assert looked.status == Status.SUBDOC_MULTI_PATH_FAILURE_DELETED


def test_document_virtual_xattr(docs: Documents) -> None:
    w = docs.store("set", 0, 0, b"k", b"{}", expiry=60)
    looked = docs.lookup_in(0, 0, b"k", [spec(Op.GET, "$document.exptime", xattr=True)])
    assert looked.results == [(Status.SUCCESS, str(w.item.expiry).encode())]


def test_counter_result_comes_back(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b'{"n":1}')
    w = docs.mutate_in(0, 0, b"k", [spec(Op.DICT_UPSERT, "x", b"1"), spec(Op.COUNTER, "n", b"4")])
    assert w.results == [(1, b"5")]


def test_delete_doc_spec_deletes(docs: Documents) -> None:
    docs.store("set", 0, 0, b"k", b"{}")
    w = docs.mutate_in(0, 0, b"k", [spec(Op.DELETE_DOC)])
    assert w.item.deleted


@pytest.mark.parametrize(
    "value",
    [b"\x00\x00\x00\x09short", b"\x00\x00\x00\x08\x00\x00\x00\x04a\x00{\x00"],
)
def test_a_malformed_xattr_section_is_einval(docs: Documents, value: bytes) -> None:
    with pytest.raises(KvError) as info:
        docs.store("set", 0, 0, b"k", value, datatype=Datatype.XATTR)
    assert info.value.status == Status.EINVAL


def test_a_value_that_is_not_snappy_is_einval(docs: Documents) -> None:
    with pytest.raises(KvError) as info:
        docs.store("set", 0, 0, b"k", b"\xff\xff\xff\xff", datatype=Datatype.SNAPPY)
    assert info.value.status == Status.EINVAL


def test_a_declared_collection_takes_documents(clock: Clock) -> None:
    bucket = Bucket("default", 4, seed=2, clock=clock, collections={"inventory": ["hotel"]})
    docs = Documents(bucket)
    cid = next(c for c in bucket.manifest.collections if c != 0)
    w = docs.store("set", 0, cid, b"h", b'{"n":1}')
    assert w.item.collection_id == cid
    assert docs.get(0, cid, b"h")[1] == b'{"n":1}'
    with pytest.raises(KvError) as info:
        docs.get(0, 0, b"h")  # not in the default collection
    assert info.value.status == Status.KEY_ENOENT
