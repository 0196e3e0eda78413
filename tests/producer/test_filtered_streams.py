"""The stream side of collections: what filtered, scope, legacy, FlatBuffers, OSO and
stream-id streams send (kv_engine ``Collections::VB::Filter``, ``ActiveStream``;
docs/dcp/documentation/collections.md, seqno-advanced.md, oso_snapshot.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from mockdcp.model import Bucket
from mockdcp.producer import StreamRequestDecision
from mockdcp.producer._controls import DcpSettings
from mockdcp.producer._encoder import ItemEncoder
from mockdcp.producer._stream import Stream
from mockdcp.producer._stream_request import decide_stream_request
from mockdcp.protocol import (
    DcpControl,
    DcpStreamRequest,
    Deletion,
    HelloFeature,
    Mutation,
    OsoSnapshot,
    OsoSnapshotFlag,
    Response,
    SeqnoAdvanced,
    SnapshotFlag,
    SnapshotMarker,
    Status,
    StreamEnd,
    StreamEndReason,
    StreamFlag,
    SystemEvent,
    SystemEventType,
)
from tests.producer._session import FEATURES, Session, drain

if TYPE_CHECKING:
    from collections.abc import Sequence

MAX = 2**64 - 1
HOTEL, AIR, INVENTORY = 8, 9, 8
AWARE = DcpSettings(collections=True, noop_enabled=True)
LEGACY = DcpSettings(collections=False)


def bucket(vbuckets: int = 1) -> Bucket:
    return Bucket(
        "default",
        vbuckets,
        seed=5,
        clock=lambda: 1_700_000_000.0,
        collections={"inventory": ["hotel", "air"]},
    )


def stream(
    b: Bucket,
    settings: DcpSettings = AWARE,
    collections: frozenset[int] | None = None,
    *,
    scope: int | None = None,
    start: int = 0,
    end: int = MAX,
    snap: tuple[int, int] = (0, 0),
    vbucket: int = 0,
) -> Stream:
    return Stream(
        vb=b.vbucket(vbucket),
        opaque=7,
        request=StreamRequestDecision(
            status=Status.SUCCESS,
            stream_id=None,
            start_seqno=start,
            end_seqno=end,
            snap_start_seqno=snap[0],
            snap_end_seqno=snap[1],
            collections=collections,
            scope=scope,
        ),
        encoder=ItemEncoder(settings),
        cursor_name="t",
        oso=settings.oso,
    )


def summary(messages: Sequence[object]) -> list[tuple[object, ...]]:
    """(kind, seqno or range or event, collection) of each message."""
    out: list[tuple[object, ...]] = []
    for m in messages:
        if isinstance(m, SnapshotMarker):
            out.append(("marker", m.start_seqno, m.end_seqno))
        elif isinstance(m, SystemEvent):
            out.append(("event", m.by_seqno, SystemEventType(m.event).name))
        elif isinstance(m, Mutation | Deletion):
            out.append((type(m).__name__.lower(), m.by_seqno, m.collection_id))
        elif isinstance(m, SeqnoAdvanced):
            out.append(("advanced", m.by_seqno))
        elif isinstance(m, StreamEnd):
            out.append(("end", StreamEndReason(m.reason).name))
        elif isinstance(m, OsoSnapshot):
            out.append(("oso", OsoSnapshotFlag(m.flags).name))
    return out


def on_disk(b: Bucket) -> None:
    """Everything written so far only on disk: a stream from 0 backfills."""
    b.checkpoint()
    b.persist()


# -- a collection filter ----------------------------------------------------------------


def test_collection_filtered_stream_gets_its_documents_and_creation_and_advances_past_others() -> (
    None
):
    b = bucket()
    b.set("h1", "{}", collection_id=HOTEL)  # 4
    b.set("a1", "{}", collection_id=AIR)  # 5
    b.set("d1", "{}")  # 6
    messages = summary(drain(stream(b, collections=frozenset({HOTEL}))))
    assert messages == [
        ("marker", 0, 6),
        ("event", 2, "BEGIN_COLLECTION"),
        ("mutation", 4, HOTEL),
        ("advanced", 6),
    ]


@pytest.mark.parametrize("where", ["memory", "disk"])
def test_filtered_stream_from_disk_and_memory_sends_the_same_documents(where: str) -> None:
    b = bucket()
    for i in range(20):
        b.set(f"h{i}", "{}", collection_id=HOTEL if i % 2 else AIR)
    b.set("last", "{}")
    if where == "disk":
        on_disk(b)
    messages = summary(drain(stream(b, collections=frozenset({AIR}))))
    docs = [m[1] for m in messages if m[0] == "mutation"]
    assert docs == [4 + i for i in range(0, 20, 2)]
    assert ("event", 3, "BEGIN_COLLECTION") in messages
    assert messages[0] == ("marker", 0, 24)
    assert messages[-1] == ("advanced", 24)
    if where == "disk":
        marker = drain(stream(b, collections=frozenset({AIR})))[0]
        assert isinstance(marker, SnapshotMarker)
        assert marker.flags & SnapshotFlag.DISK


def test_filtered_stream_sends_nothing_for_a_batch_without_its_collections() -> None:
    b = bucket()
    s = stream(b, collections=frozenset({HOTEL}), start=3, snap=(3, 3))
    assert summary(drain(s)) == []  # seqnos 1..3 are before the start
    b.set("a1", "{}", collection_id=AIR)
    b.set("d1", "{}")
    assert summary(drain(s)) == []
    b.set("h1", "{}", collection_id=HOTEL)
    # the stream's first marker starts at the requested snapshot start
    assert summary(drain(s)) == [("marker", 3, 6), ("mutation", 6, HOTEL)]


def test_filtered_stream_resuming_inside_a_snapshot_completes_it_with_seqno_advanced() -> None:
    b = bucket()
    b.set("a1", "{}", collection_id=AIR)  # 4
    b.set("a2", "{}", collection_id=AIR)  # 5
    s = stream(b, collections=frozenset({HOTEL}), start=3, snap=(3, 5))
    assert summary(drain(s)) == [("marker", 3, 5), ("advanced", 5)]


def test_dropping_the_filtered_collection_sends_its_drop_then_filter_empty() -> None:
    b = bucket()
    b.set("h1", "{}", collection_id=HOTEL)  # 4
    s = stream(b, collections=frozenset({HOTEL}))
    first = summary(drain(s))
    assert first[-1] == ("mutation", 4, HOTEL)
    b.set("h2", "{}", collection_id=HOTEL)  # 5
    b.drop_collection("inventory", "hotel")  # 6
    b.set("a1", "{}", collection_id=AIR)  # 7
    assert summary(drain(s)) == [
        ("marker", 5, 6),
        ("mutation", 5, HOTEL),
        ("event", 6, "END_COLLECTION"),
        ("end", "FILTER_EMPTY"),
    ]
    assert not s.alive


def test_a_vbucket_that_never_held_the_collection_ends_with_filter_empty_too() -> None:
    b = bucket(vbuckets=4)
    key = next(k for k in (f"k{i}" for i in range(100)) if b.vbucket_of(k) == 0)
    b.set(key, "{}", collection_id=HOTEL)
    empty_vb = next(v for v in range(4) if v != 0)
    s = stream(b, collections=frozenset({HOTEL}), vbucket=empty_vb)
    drain(s)
    b.drop_collection("inventory", "hotel")
    assert summary(drain(s))[-2:] == [("event", 4, "END_COLLECTION"), ("end", "FILTER_EMPTY")]


def test_filter_of_two_collections_ends_only_when_both_are_dropped() -> None:
    b = bucket()
    s = stream(b, collections=frozenset({HOTEL, AIR}))
    drain(s)
    b.drop_collection("inventory", "hotel")
    b.set("a1", "{}", collection_id=AIR)
    assert summary(drain(s)) == [
        ("marker", 4, 5),
        ("event", 4, "END_COLLECTION"),
        ("mutation", 5, AIR),
    ]
    b.drop_collection("inventory", "air")
    assert summary(drain(s))[-1] == ("end", "FILTER_EMPTY")


def test_disk_backfill_after_a_drop_skips_the_collection_but_sends_its_drop() -> None:
    b = bucket()
    b.set("h1", "{}", collection_id=HOTEL)  # 4
    b.set("a1", "{}", collection_id=AIR)  # 5
    b.drop_collection("inventory", "hotel")  # 6
    on_disk(b)
    messages = summary(drain(stream(b)))
    assert ("mutation", 4, HOTEL) not in messages
    assert ("mutation", 5, AIR) in messages
    assert ("event", 6, "END_COLLECTION") in messages


def test_memory_stream_sends_documents_written_before_a_drop_then_the_drop() -> None:
    b = bucket()
    b.set("h1", "{}", collection_id=HOTEL)  # 4
    b.drop_collection("inventory", "hotel")  # 5
    messages = summary(drain(stream(b)))
    assert messages[-2:] == [("mutation", 4, HOTEL), ("event", 5, "END_COLLECTION")]


# -- a scope filter ----------------------------------------------------------------------


def test_scope_filter_takes_in_a_collection_created_later() -> None:
    b = bucket()
    s = stream(b, collections=frozenset({HOTEL, AIR}), scope=INVENTORY)
    assert [m[2] for m in summary(drain(s)) if m[0] == "event"] == [
        "CREATE_SCOPE",
        "BEGIN_COLLECTION",
        "BEGIN_COLLECTION",
    ]
    rail = b.create_collection("inventory", "rail")  # 4
    b.set("r1", "{}", collection_id=rail)  # 5
    b.set("d1", "{}")  # 6
    assert summary(drain(s)) == [
        ("marker", 4, 6),
        ("event", 4, "BEGIN_COLLECTION"),
        ("mutation", 5, rail),
        ("advanced", 6),
    ]


def test_scope_filter_ends_with_filter_empty_when_its_scope_is_dropped() -> None:
    b = bucket()
    b.create_scope("other")  # 4
    s = stream(b, collections=frozenset({HOTEL, AIR}), scope=INVENTORY)
    drain(s)
    b.drop_scope("inventory")
    messages = summary(drain(s))
    assert messages[-1] == ("end", "FILTER_EMPTY")
    assert ("event", 5, "END_COLLECTION") in messages or messages[1][2] == "END_COLLECTION"
    assert [m for m in messages if m[0] == "event"][-1][2] == "DROP_SCOPE"


def test_collection_filter_gets_no_scope_event() -> None:
    b = bucket()
    b.create_scope("other")
    messages = summary(drain(stream(b, collections=frozenset({HOTEL}))))
    assert [m[2] for m in messages if m[0] == "event"] == ["BEGIN_COLLECTION"]


# -- legacy consumers ----------------------------------------------------------------------


def test_legacy_stream_ends_with_ok_when_the_default_collection_is_dropped() -> None:
    b = bucket()
    b.set("d1", "{}")  # 4
    s = stream(b, LEGACY, frozenset({0}))
    assert summary(drain(s, collections=False)) == [("marker", 0, 4), ("mutation", 4, None)]
    b.set("h1", "{}", collection_id=HOTEL)
    b.drop_collection("_default", "_default")
    assert summary(drain(s, collections=False)) == [("end", "OK")]


def test_legacy_disk_snapshot_ends_on_the_default_collections_last_item() -> None:
    b = bucket()
    b.set("d1", "{}")  # 4
    b.set("h1", "{}", collection_id=HOTEL)  # 5
    on_disk(b)
    messages = summary(drain(stream(b, LEGACY, frozenset({0})), collections=False))
    assert messages == [("marker", 0, 4), ("mutation", 4, None)]


def test_legacy_disk_backfill_without_default_documents_sends_nothing() -> None:
    b = bucket()
    b.set("h1", "{}", collection_id=HOTEL)
    on_disk(b)
    assert drain(stream(b, LEGACY, frozenset({0})), collections=False) == []


# -- FlatBuffers and modifications -------------------------------------------------------------


def test_modify_goes_as_a_version_2_event_with_flatbuffers_and_as_seqno_advanced_without() -> None:
    b = bucket()
    b.modify_collection("inventory", "hotel", max_ttl=60)  # 4
    fb = DcpSettings(collections=True, noop_enabled=True, flatbuffers_events=True)
    with_fb = drain(stream(b, fb, frozenset({HOTEL})))
    events = [m for m in with_fb if isinstance(m, SystemEvent)]
    assert [(e.event, e.version) for e in events] == [
        (SystemEventType.BEGIN_COLLECTION, 2),
        (SystemEventType.MODIFY_COLLECTION, 2),
    ]
    without = summary(drain(stream(b, AWARE, frozenset({HOTEL}))))
    assert without[-2:] == [("event", 2, "BEGIN_COLLECTION"), ("advanced", 4)]


@pytest.mark.parametrize("from_disk", [False, True], ids=["memory", "disk"])
@pytest.mark.parametrize("collections", [None, frozenset({HOTEL})], ids=["all", "hotel"])
def test_a_modification_inside_a_snapshot_is_skipped_without_flatbuffers(
    from_disk: bool, collections: frozenset[int] | None
) -> None:
    """kv_engine ``ActiveStream::shouldProcessItem`` skips a modification for a
    connection without FlatBuffers, as it skips a prepare: no message at its seqno in
    the middle of a snapshot (go-dcp panics on an item after a SEQNO_ADVANCED inside
    its marker: it takes the SEQNO_ADVANCED as a snapshot of its own,
    couchbase/observer.go ``SeqNoAdvanced``, ``IsInSnapshotMarker``); at the snapshot's
    end it is reached with a SEQNO_ADVANCED."""
    b = bucket()
    b.set("h1", "{}", collection_id=HOTEL)  # 4
    b.modify_collection("inventory", "hotel", max_ttl=60)  # 5
    b.set("h2", "{}", collection_id=HOTEL)  # 6
    if from_disk:
        on_disk(b)
    mid = summary(drain(stream(b, AWARE, collections)))
    assert ("advanced", 5) not in mid
    assert mid[-2:] == [("mutation", 4, HOTEL), ("mutation", 6, HOTEL)]
    fb = DcpSettings(collections=True, noop_enabled=True, flatbuffers_events=True)
    assert ("event", 5, "MODIFY_COLLECTION") in summary(drain(stream(b, fb, collections)))
    # at the tail of a snapshot: reached with a SEQNO_ADVANCED
    b2 = bucket()
    b2.set("h1", "{}", collection_id=HOTEL)  # 4
    b2.modify_collection("inventory", "hotel", max_ttl=60)  # 5
    if from_disk:
        on_disk(b2)
    tail = summary(drain(stream(b2, AWARE, collections)))
    assert tail[-2:] == [("mutation", 4, HOTEL), ("advanced", 5)]
    assert tail[0] == ("marker", 0, 5)


# -- TO_LATEST, end seqnos --------------------------------------------------------------------


def test_filtered_stream_stops_at_its_end_seqno_inside_a_batch() -> None:
    b = bucket()
    for i in range(6):
        b.set(f"h{i}", "{}", collection_id=HOTEL)  # 4..9
    s = stream(b, collections=frozenset({HOTEL}), end=6)
    messages = summary(drain(s))
    assert messages[-3:] == [("mutation", 5, HOTEL), ("mutation", 6, HOTEL), ("end", "OK")]


# -- OSO backfill --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["true", "true_with_seqno_advanced"])
def test_oso_backfill_sends_one_collection_in_key_order_between_oso_markers(mode: str) -> None:
    b = bucket()
    for key in ("m", "c", "x", "a"):
        b.set(key, "{}", collection_id=HOTEL)  # 4..7
    b.set("z", "{}", collection_id=AIR)  # 8
    on_disk(b)
    settings = DcpSettings(collections=True, noop_enabled=True, oso=mode)
    s = stream(b, settings, frozenset({HOTEL}))
    messages = drain(s)
    keys = [m.key for m in messages if isinstance(m, Mutation)]
    assert keys == [b"a", b"c", b"m", b"x"]
    kinds = summary(messages)
    assert kinds[0] == ("oso", "START")
    assert kinds[1] == ("event", 2, "BEGIN_COLLECTION")
    expected_tail = [("advanced", 8), ("oso", "END")] if mode != "true" else [("oso", "END")]
    assert kinds[-len(expected_tail) :] == expected_tail
    # memory streaming goes on from the disk snapshot's end
    b.set("n", "{}", collection_id=HOTEL)  # 9
    assert summary(drain(s)) == [("marker", 9, 9), ("mutation", 9, HOTEL)]


def test_no_oso_for_a_pass_through_stream() -> None:
    b = bucket()
    b.set("h", "{}", collection_id=HOTEL)
    on_disk(b)
    settings = DcpSettings(collections=True, noop_enabled=True, oso="true")
    assert not any(isinstance(m, OsoSnapshot) for m in drain(stream(b, settings)))


# -- stream ids, through a connection ------------------------------------------------------------


def stream_request(
    vbucket: int, opaque: int, value: dict[str, object], flags: int = 0
) -> DcpStreamRequest:
    return DcpStreamRequest(
        opaque=opaque,
        vbucket=vbucket,
        flags=flags,
        start_seqno=0,
        end_seqno=MAX,
        vbucket_uuid=0,
        snap_start_seqno=0,
        snap_end_seqno=0,
        value=json.dumps(value).encode() if value else b"",
    )


def test_two_stream_ids_on_one_vbucket_each_get_their_collection_with_their_sid() -> None:
    b = bucket()
    b.set("h1", "{}", collection_id=HOTEL)
    b.set("a1", "{}", collection_id=AIR)
    session = Session(b, features=(*FEATURES, HelloFeature.COLLECTIONS))
    session.open_dcp()
    for key in ("enable_noop", "enable_stream_id"):
        replies = session.call(DcpControl(opaque=0, key=key, value="true"))
        assert [r.status for r in replies if isinstance(r, Response)] == [Status.SUCCESS]
    hotel = session.call(stream_request(0, 10, {"collections": ["8"], "sid": 1}))
    air = session.call(stream_request(0, 11, {"collections": ["9"], "sid": 2}))
    statuses = [r.status for r in hotel + air if isinstance(r, Response)]
    assert statuses == [Status.SUCCESS, Status.SUCCESS]
    messages = [m for m in hotel + air + session.read() if not isinstance(m, Response)]
    by_sid: dict[int | None, list[tuple[object, ...]]] = {}
    for m in messages:
        by_sid.setdefault(getattr(m, "stream_id", None), []).append(summary([m])[0])
    assert set(by_sid) == {1, 2}
    assert [m for m in by_sid[1] if m[0] == "mutation"] == [("mutation", 4, HOTEL)]
    assert [m for m in by_sid[2] if m[0] == "mutation"] == [("mutation", 5, AIR)]
    again = session.call(stream_request(0, 12, {"collections": ["8"], "sid": 1}))
    assert [r.status for r in again if isinstance(r, Response)] == [Status.KEY_EEXISTS]
    # every frame of a sid stream carries its sid, the markers and events too
    assert all(getattr(m, "stream_id", None) in (1, 2) for m in messages)


# -- TO_LATEST ends at the filter's own high seqno -------------------------------------------


def test_to_latest_on_a_filtered_stream_ends_at_its_collections_high_seqno() -> None:
    b = bucket()
    b.set("h1", "{}", collection_id=HOTEL)  # 4
    b.set("a1", "{}", collection_id=AIR)  # 5
    b.set("d1", "{}")  # 6
    latest = int(StreamFlag.TO_LATEST)
    request = stream_request(0, 1, {"collections": ["8"]}, latest)
    decision = decide_stream_request(request, bucket=b, settings=AWARE, active_stream_exists=False)
    assert (decision.status, decision.end_seqno) == (Status.SUCCESS, 4)
    s = stream(b, collections=decision.collections, end=decision.end_seqno)
    assert summary(drain(s))[-2:] == [("mutation", 4, HOTEL), ("end", "OK")]
    everything = decide_stream_request(
        stream_request(0, 1, {}, latest), bucket=b, settings=AWARE, active_stream_exists=False
    )
    assert everything.end_seqno == 6


def test_legacy_backfill_ends_with_ok_at_a_dropped_default_collection() -> None:
    b = bucket()
    b.set("h1", "{}", collection_id=HOTEL)
    b.drop_collection("_default", "_default")
    on_disk(b)
    assert summary(drain(stream(b, LEGACY, frozenset({0})), collections=False)) == [("end", "OK")]
