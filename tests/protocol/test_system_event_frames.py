from __future__ import annotations

import struct

import pytest

from mockdcp import RemoteProtocolError
from mockdcp.model._item import SystemEventItem
from mockdcp.protocol import FrameReader, SystemEvent, SystemEventType, decode_server_message
from mockdcp.protocol._flatbuffers import (
    CollectionEventV2,
    DroppedCollectionV2,
    DroppedScopeV2,
    FlatBuffersEvent,
    ScopeEventV2,
    decode_flatbuffers_value,
    encode_flatbuffers_value,
)
from tests.protocol.test_golden import unhex

E = SystemEventType


def with_opaque(wire: bytes, opaque: int) -> bytes:
    buf = bytearray(wire)
    struct.pack_into(">I", buf, 12, opaque)
    return bytes(buf)


def decoded(wire: bytes) -> SystemEvent:
    reader = FrameReader()
    reader.feed(wire)
    frame = reader.next_frame()
    assert frame is not None
    msg = decode_server_message(frame, collections=True)
    assert isinstance(msg, SystemEvent)
    return msg


def test_system_event_page_begin_collection_v1_is_the_canonical_frame_of_its_item() -> None:
    # kv_engine docs/dcp/documentation/commands/system_event.md labels bytes 57-60
    # Collection-ID and 61-64 Scope-ID; its value layout puts the scope id (0) first and
    # the collection id (8) second, as encoded here.
    item = SystemEventItem(
        vbucket=0x0210,
        seqno=4,
        cas=0x1234,
        event=E.BEGIN_COLLECTION,
        manifest_uid=2,
        scope_id=0,
        collection_id=8,
        name="mycollection",
        max_ttl=72000,
    )
    seed = unhex(
        "80 5f 00 0c 0d 00 02 10 | 00 00 00 2d 00 00 12 10 | 00 x8"
        " 00 00 00 00 00 00 00 04 | 00 00 00 00 | 01"
        " 6d 79 63 6f 6c 6c 65 63 74 69 6f 6e"
        " 00 00 00 00 00 00 00 02 | 00 00 00 00 | 00 00 00 08 | 00 01 19 40"
    )
    assert with_opaque(item.wire, 0x1210) == seed


def test_wire_8_15_begin_collection_v0_is_the_canonical_frame_without_max_ttl() -> None:
    item = SystemEventItem(
        vbucket=3,
        seqno=8,
        cas=1,
        event=E.BEGIN_COLLECTION,
        manifest_uid=2,
        scope_id=0,
        collection_id=8,
        name="c1",
    )
    assert with_opaque(item.wire, 0x10) == unhex(
        "80 5f 00 02 0d 00 00 03 | 00 00 00 1f 00 00 00 10 | 00 x8"
        " 00 00 00 00 00 00 00 08 | 00 00 00 00 00 | 63 31"
        " 00 00 00 00 00 00 00 02 | 00 00 00 00 00 00 00 08"
    )


@pytest.mark.parametrize(
    ("event", "collection_id", "value"),
    [
        # end collection v0: uid, scope id, collection id; no key
        (E.END_COLLECTION, 9, "00 00 00 00 00 00 00 05 | 00 00 00 08 | 00 00 00 09"),
        # create scope v0: uid, scope id; key = name
        (E.CREATE_SCOPE, None, "00 00 00 00 00 00 00 05 | 00 00 00 08"),
        # drop scope v0: uid, scope id; no key
        (E.DROP_SCOPE, None, "00 00 00 00 00 00 00 05 | 00 00 00 08"),
    ],
)
def test_system_event_page_v0_layouts(event: E, collection_id: int | None, value: str) -> None:
    item = SystemEventItem(
        vbucket=1,
        seqno=7,
        cas=0,
        event=event,
        manifest_uid=5,
        scope_id=8,
        collection_id=collection_id,
        name="sc",
    )
    key = b"sc" if event is E.CREATE_SCOPE else b""
    body = unhex(value)
    head = struct.pack(
        ">BBHBBHIIQ", 0x80, 0x5F, len(key), 13, 0, 1, 13 + len(key) + len(body), 0, 0
    )
    extras = struct.pack(">QIB", 7, int(event), 0)
    assert item.wire == head + extras + key + body
    msg = decoded(item.wire)
    assert msg.data().manifest_uid == 5


CASES_V2: list[FlatBuffersEvent] = [
    CollectionEventV2(manifest_uid=2, scope_id=0, collection_id=8, name="mycollection"),
    CollectionEventV2(
        manifest_uid=0x1_0000_0001,
        scope_id=9,
        collection_id=0xFFFF_FFFF,
        name="t",
        max_ttl=72000,
        history=True,
        metered=True,
        flush_uid=7,
    ),
    DroppedCollectionV2(manifest_uid=3, scope_id=8, collection_id=9, system=True),
    ScopeEventV2(manifest_uid=1, scope_id=8, name="inventory"),
    DroppedScopeV2(manifest_uid=4, scope_id=8),
]
EVENT_OF = {
    CollectionEventV2: E.BEGIN_COLLECTION,
    DroppedCollectionV2: E.END_COLLECTION,
    ScopeEventV2: E.CREATE_SCOPE,
    DroppedScopeV2: E.DROP_SCOPE,
}


@pytest.mark.parametrize("data", CASES_V2)
def test_flatbuffers_values_round_trip(data: FlatBuffersEvent) -> None:
    value = encode_flatbuffers_value(data)
    assert decode_flatbuffers_value(EVENT_OF[type(data)], value) == data


def test_flatbuffers_drop_scope_bytes() -> None:
    # root offset 16 | padding | vtable at 8: 8 bytes (two fields: the absent trailing
    # systemScope is left out), table of 16 bytes, uid at +8, scopeId at +4 | the table
    # at 16: its vtable 8 bytes back, scopeId 8, uid 4 (all little-endian)
    value = encode_flatbuffers_value(DroppedScopeV2(manifest_uid=4, scope_id=8))
    assert value == unhex(
        "10 00 00 00 | 00 00 00 00 | 08 00 10 00 08 00 04 00"
        " | 08 00 00 00 | 08 00 00 00 | 04 00 00 00 00 00 00 00"
    )


def test_item_flatbuffers_frame_is_version_2_with_the_name_as_key() -> None:
    item = SystemEventItem(
        vbucket=0,
        seqno=2,
        cas=0,
        event=E.BEGIN_COLLECTION,
        manifest_uid=2,
        scope_id=8,
        collection_id=8,
        name="hotel",
        max_ttl=60,
    )
    msg = decoded(item.frame(flatbuffers=True) or b"")
    assert (msg.version, msg.key, msg.by_seqno) == (2, b"hotel", 2)
    assert msg.data() == CollectionEventV2(
        manifest_uid=2, scope_id=8, collection_id=8, name="hotel", max_ttl=60
    )


@pytest.mark.parametrize("value", [b"", b"\x01\x02", b"\xff\xff\xff\xff" * 2])
def test_malformed_flatbuffers_value_is_rejected(value: bytes) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_flatbuffers_value(0, value)
    assert info.value.field == "value"


def test_flatbuffers_value_of_an_event_without_a_table_is_rejected() -> None:
    with pytest.raises(RemoteProtocolError):
        decode_flatbuffers_value(2, encode_flatbuffers_value(CASES_V2[0]))
