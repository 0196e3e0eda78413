from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from mockdcp.model import Bucket
from mockdcp.producer import Node, _lookups as lookups
from mockdcp.producer._controls import DcpSettings
from mockdcp.producer._encoder import ItemEncoder
from mockdcp.producer._stream import Stream
from mockdcp.producer._stream_request import (
    StreamRequestDecision,
    decide_stream_request,
    stream_filter,
)
from mockdcp.protocol import (
    DcpOpenFlag,
    DcpStreamRequest,
    GetAllVbSeqnos,
    GetCollectionId,
    GetScopeId,
    Mutation,
    SnapshotMarker,
    Status,
    StreamRequestValue,
    SystemEvent,
    SystemEventType,
    decode_all_vb_seqnos,
    decode_id_lookup_extras,
)
from tests.producer._session import drain

if TYPE_CHECKING:
    from collections.abc import Sequence

MAX = 2**64 - 1


def bucket(collections: dict[str, list[str]] | None = None, vbuckets: int = 2) -> Bucket:
    return Bucket(
        "default",
        vbuckets,
        seed=5,
        clock=lambda: 1_700_000_000.0,
        collections=collections if collections is not None else {"inventory": ["hotel", "air"]},
    )


def filtered(b: Bucket, *, aware: bool = True, **value: object) -> object:
    return stream_filter(
        StreamRequestValue(**value),  # type: ignore[arg-type]
        b.manifest,
        collections=aware,
        vbucket_uid=b.vbucket(0).manifest_uid,
    )


def failure(result: object) -> tuple[Status, dict[str, str]]:
    assert isinstance(result, StreamRequestDecision)
    return result.status, json.loads(result.error_body)


# -- the stream-request filter, one rule each ------------------------------------------


def test_filter_uid_ahead_of_the_manifest_is_collections_manifest_is_ahead() -> None:
    result = filtered(bucket(), uid=4)
    assert isinstance(result, StreamRequestDecision)
    assert (result.status, result.error_body) == (Status.COLLECTIONS_MANIFEST_IS_AHEAD, b"")
    assert result.status == 0x8B
    assert "4" in result.reason


def test_filter_uid_at_or_below_the_manifest_is_accepted() -> None:
    b = bucket()
    assert filtered(b, uid=3) is None
    assert filtered(b, uid=0) is None


def test_filter_unknown_collection_is_unknown_collection_with_the_manifest_uid() -> None:
    result = filtered(bucket(), collections=(8, 0x1E))
    assert failure(result) == (Status.UNKNOWN_COLLECTION, {"manifest_uid": "3"})
    assert isinstance(result, StreamRequestDecision)
    assert "1e" in result.reason


def test_filter_dropped_collection_is_unknown() -> None:
    b = bucket()
    b.drop_collection("inventory", "hotel")
    assert failure(filtered(b, collections=(8,)))[0] == Status.UNKNOWN_COLLECTION


def test_filter_known_collections_are_the_filter() -> None:
    assert filtered(bucket(), collections=(0, 9)) == frozenset({0, 9})


def test_filter_unknown_scope_is_unknown_scope_with_the_manifest_uid() -> None:
    assert failure(filtered(bucket(), scope=9)) == (Status.UNKNOWN_SCOPE, {"manifest_uid": "3"})


def test_filter_scope_lets_its_collections_through() -> None:
    b = bucket()
    assert filtered(b, scope=8) == frozenset({8, 9})
    assert filtered(b, scope=0) == frozenset({0})


def test_filter_collection_aware_without_a_filter_passes_everything() -> None:
    assert filtered(bucket(), sid=None) is None


def test_filter_legacy_connection_sees_only_the_default_collection() -> None:
    assert filtered(bucket(), aware=False) == frozenset({0})


def test_filter_legacy_connection_after_default_was_dropped_is_unknown_collection() -> None:
    b = bucket()
    b.drop_collection("_default", "_default")
    assert failure(filtered(b, aware=False))[0] == Status.UNKNOWN_COLLECTION


def request(value: dict[str, object] | None = None) -> DcpStreamRequest:
    return DcpStreamRequest(
        opaque=1,
        vbucket=0,
        flags=0,
        start_seqno=0,
        end_seqno=MAX,
        vbucket_uuid=0,
        snap_start_seqno=0,
        snap_end_seqno=0,
        value=json.dumps(value).encode() if value else b"",
    )


def test_stream_request_for_an_unknown_collection_is_refused_with_its_body() -> None:
    decision = decide_stream_request(
        request({"collections": ["a"]}),
        bucket=bucket(),
        settings=DcpSettings(collections=True, noop_enabled=True),
        active_stream_exists=False,
    )
    assert decision.status == Status.UNKNOWN_COLLECTION
    assert decision.error_body == b'{"manifest_uid": "3"}'


def test_stream_request_for_a_declared_collection_succeeds() -> None:
    decision = decide_stream_request(
        request({"collections": ["8"], "uid": "3"}),
        bucket=bucket(),
        settings=DcpSettings(collections=True, noop_enabled=True),
        active_stream_exists=False,
    )
    assert decision.status == Status.SUCCESS
    assert decision.collections == frozenset({8})


def decide(
    value: dict[str, object] | None, *, exists: bool = False, **settings: object
) -> StreamRequestDecision:
    base: dict[str, object] = {"collections": True, "noop_enabled": True}
    return decide_stream_request(
        request(value),
        bucket=bucket(),
        settings=DcpSettings(**{**base, **settings}),  # type: ignore[arg-type]
        active_stream_exists=exists,
    )


def test_stream_request_value_without_hello_collections_is_einval() -> None:
    decision = decide({"uid": "0"}, collections=False)
    assert decision.status == Status.EINVAL


def test_stream_request_value_without_noop_is_not_supported() -> None:
    assert decide({"uid": "0"}, noop_enabled=False).status == Status.NOT_SUPPORTED


def test_stream_request_sid_without_enable_stream_id_is_streamid_invalid() -> None:
    assert decide({"sid": 7}).status == Status.DCP_STREAMID_INVALID


def test_stream_request_without_sid_when_stream_ids_are_on_is_streamid_invalid() -> None:
    assert decide({"uid": "3"}, stream_ids=True).status == Status.DCP_STREAMID_INVALID


def test_stream_request_sid_in_use_is_key_eexists() -> None:
    assert decide({"sid": 7}, stream_ids=True, exists=True).status == Status.KEY_EEXISTS


def test_stream_request_collection_filter_with_sync_writes_is_not_supported() -> None:
    # kv_engine ``DcpProducer::streamRequest`` refuses FilterType::Collection only
    assert decide({"collections": ["8"]}, sync_writes=True).status == Status.NOT_SUPPORTED
    assert decide({"scope": "8"}, sync_writes=True).status == Status.SUCCESS


def test_stream_request_scope_filter_succeeds_with_the_scopes_collections() -> None:
    decision = decide({"scope": "8", "sid": 3}, stream_ids=True)
    assert (decision.status, decision.collections) == (Status.SUCCESS, frozenset({8, 9}))


# -- lookups -----------------------------------------------------------------------


def test_get_collections_manifest_is_the_bucket_manifest() -> None:
    b = bucket()
    reply = lookups.collections_manifest(b)
    assert json.loads(reply.value) == b.manifest.to_json()
    assert json.loads(reply.value)["uid"] == "3"


@pytest.mark.parametrize(
    ("path", "status", "ident"),
    [
        ("inventory.hotel", Status.SUCCESS, 8),
        ("inventory.air", Status.SUCCESS, 9),
        ("_default._default", Status.SUCCESS, 0),
        (".", Status.SUCCESS, 0),
        ("inventory.", Status.UNKNOWN_COLLECTION, None),  # inventory._default
        ("_default", Status.EINVAL, None),  # exactly one dot
        ("", Status.EINVAL, None),
        ("inventory.nope", Status.UNKNOWN_COLLECTION, None),
        ("nope.hotel", Status.UNKNOWN_SCOPE, None),
        ("a.b.c", Status.EINVAL, None),
    ],
)
def test_get_collection_id(path: str, status: Status, ident: int | None) -> None:
    reply = lookups.collection_id(bucket(), GetCollectionId(opaque=1, path=path))
    assert reply.status == status
    if ident is not None:
        assert decode_id_lookup_extras(reply.extras) == (3, ident)
    elif status != Status.EINVAL:
        assert json.loads(reply.value) == {"manifest_uid": "3"}


@pytest.mark.parametrize(
    ("path", "status", "ident"),
    [
        ("inventory", Status.SUCCESS, 8),
        ("inventory.", Status.SUCCESS, 8),
        ("inventory.hotel", Status.SUCCESS, 8),
        ("", Status.SUCCESS, 0),
        (".x", Status.SUCCESS, 0),
        ("nope", Status.UNKNOWN_SCOPE, None),
        ("a.b.c", Status.EINVAL, None),
    ],
)
def test_get_scope_id(path: str, status: Status, ident: int | None) -> None:
    reply = lookups.scope_id(bucket(), GetScopeId(opaque=1, path=path))
    assert reply.status == status
    if ident is not None:
        assert decode_id_lookup_extras(reply.extras) == (3, ident)


def test_get_all_vb_seqnos_per_collection() -> None:
    b = bucket(vbuckets=1)
    b.set("k", "{}", collection_id=9)
    b.set("j", "{}")
    seqnos = lookups.all_vb_seqnos(
        b, GetAllVbSeqnos(opaque=1, state=0, collection_id=9), collections=True
    )
    assert decode_all_vb_seqnos(seqnos.value) == [(0, 4)]
    hotel = lookups.all_vb_seqnos(
        b, GetAllVbSeqnos(opaque=1, state=0, collection_id=8), collections=True
    )
    assert decode_all_vb_seqnos(hotel.value) == [(0, 2)]
    every = lookups.all_vb_seqnos(b, GetAllVbSeqnos(opaque=1), collections=True)
    assert decode_all_vb_seqnos(every.value) == [(0, 5)]


def test_get_all_vb_seqnos_of_a_legacy_connection_is_the_default_collections() -> None:
    b = bucket(vbuckets=1)
    b.set("j", "{}")
    b.set("k", "{}", collection_id=9)
    legacy = lookups.all_vb_seqnos(b, GetAllVbSeqnos(opaque=1), collections=False)
    assert decode_all_vb_seqnos(legacy.value) == [(0, 4)]


def test_get_all_vb_seqnos_of_an_unknown_collection() -> None:
    reply = lookups.all_vb_seqnos(
        bucket(), GetAllVbSeqnos(opaque=1, state=0, collection_id=0x55), collections=True
    )
    assert reply.status == Status.UNKNOWN_COLLECTION
    assert json.loads(reply.value) == {"manifest_uid": "3"}


def test_cluster_map_carries_the_manifest_uid() -> None:
    b = bucket()
    node = Node(bucket=b, users={"u": "p"})
    assert (node.config()["collectionsManifestUid"], node.config()["rev"]) == ("3", 1)
    b.create_collection("inventory", "rail")
    assert (node.config()["collectionsManifestUid"], node.config()["rev"]) == ("4", 2)
    b.set("k", "{}")  # a write is no new config
    assert node.config()["rev"] == 2


# -- what the present stream code sends of system events ----------------------------------


def stream(b: Bucket, settings: DcpSettings, collections: frozenset[int] | None) -> Stream:
    return Stream(
        vb=b.vbucket(0),
        opaque=7,
        request=StreamRequestDecision(
            status=Status.SUCCESS,
            stream_id=None,
            start_seqno=0,
            end_seqno=MAX,
            snap_start_seqno=0,
            collections=collections,
        ),
        encoder=ItemEncoder(settings),
        cursor_name="t",
    )


def system_events_of(messages: Sequence[object]) -> list[SystemEvent]:
    return [m for m in messages if isinstance(m, SystemEvent)]


@pytest.mark.parametrize("persisted", [False, True])
def test_legacy_stream_of_a_bucket_with_collections_gets_no_system_event(persisted: bool) -> None:
    b = bucket(vbuckets=1)
    b.set("k", "{}")
    b.set("h", "{}", collection_id=8)
    if persisted:
        b.persist()
        b.drop_cursor()
    legacy = DcpSettings(collections=False)
    filt = filtered(b, aware=False)
    assert filt == frozenset({0})
    messages = drain(stream(b, legacy, filt), collections=False)
    assert [type(m) for m in messages] == [SnapshotMarker, Mutation]
    mutation = messages[1]
    assert isinstance(mutation, Mutation)
    assert (mutation.key, mutation.by_seqno) == (b"k", 4)


def test_collection_aware_stream_gets_system_events_in_seqno_order() -> None:
    b = bucket(vbuckets=1)
    b.set("h", "{}", collection_id=8)
    messages = drain(stream(b, DcpSettings(collections=True), None), collections=True)
    kinds = [(type(m).__name__, getattr(m, "by_seqno", None)) for m in messages]
    assert kinds == [
        ("SnapshotMarker", None),
        ("SystemEvent", 1),
        ("SystemEvent", 2),
        ("SystemEvent", 3),
        ("Mutation", 4),
    ]
    assert all(m.opaque == 7 for m in messages if isinstance(m, SystemEvent))


def test_no_value_pass_through_stream_gets_system_events_with_their_values() -> None:
    # NO_VALUE cuts documents' values on the joined frames; an event keeps its value
    b = bucket(vbuckets=1)
    b.set("h", "{}", collection_id=8)
    b.set("k", "{}")
    settings = DcpSettings(collections=True, noop_enabled=True, open_flags=DcpOpenFlag.NO_VALUE)
    decision = decide_stream_request(
        request(), bucket=b, settings=settings, active_stream_exists=False
    )
    assert decision.status == Status.SUCCESS
    assert decision.collections is None
    messages = drain(stream(b, settings, decision.collections), collections=True)
    assert [(type(m).__name__, getattr(m, "collection_id", None)) for m in messages] == [
        ("SnapshotMarker", None),
        ("SystemEvent", None),
        ("SystemEvent", None),
        ("SystemEvent", None),
        ("Mutation", 8),
        ("Mutation", 0),
    ]
    events = system_events_of(messages)
    assert [e.data().manifest_uid for e in events] == [1, 2, 3]
    assert all(m.value == b"" for m in messages if isinstance(m, Mutation))


def test_canonical_pass_through_stream_keeps_no_filter() -> None:
    settings = DcpSettings(collections=True, noop_enabled=True)
    decision = decide_stream_request(
        request(), bucket=bucket(), settings=settings, active_stream_exists=False
    )
    assert decision.status == Status.SUCCESS
    assert decision.collections is None


def test_collection_aware_stream_with_delete_times_gets_system_events() -> None:
    b = bucket(vbuckets=1)
    settings = DcpSettings(collections=True, open_flags=DcpOpenFlag.INCLUDE_DELETE_TIMES)
    messages = drain(stream(b, settings, None), collections=True)
    assert len(system_events_of(messages)) == 3


def test_flatbuffers_stream_gets_version_2_events() -> None:
    b = bucket(vbuckets=1)
    settings = DcpSettings(collections=True, flatbuffers_events=True)
    messages = drain(stream(b, settings, None), collections=True)
    assert [e.version for e in system_events_of(messages)] == [2, 2, 2]


def test_collection_filtered_stream_gets_its_collections_creation() -> None:
    b = bucket(vbuckets=1)
    messages = drain(stream(b, DcpSettings(collections=True), frozenset({8})), collections=True)
    assert [e.event for e in system_events_of(messages)] == [SystemEventType.BEGIN_COLLECTION]
