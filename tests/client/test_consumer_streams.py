from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from mockdcp.client import (
    CollectionInfo,
    ConsumerCore,
    ConsumerError,
    DcpConsumer,
    Emit,
    Reopen,
    StreamFilter,
    StreamRefused,
)
from mockdcp.client._core import OPAQUE_SLOT, STREAM_OPAQUE_BASE
from mockdcp.protocol import (
    CollectionEventData,
    Datatype,
    DcpStreamRequest,
    Frame,
    FrameReader,
    Mutation,
    Opcode,
    OsoSnapshot,
    OsoSnapshotFlag,
    RemoteProtocolError,
    Response,
    ScopeEventData,
    SeqnoAdvanced,
    SnapshotMarker,
    Status,
    StreamEnd,
    StreamEndReason,
    StreamRequestValue,
    SystemEvent,
    SystemEventType,
    collection_event,
    encode_failover_log,
    encode_xattrs,
    scope_event,
)
from mockdcp.protocol._flatbuffers import (
    CollectionEventV2,
    DroppedCollectionV2,
    encode_flatbuffers_value,
)

OPAQUE = STREAM_OPAQUE_BASE  # vbucket 0, first filter


def _frame(data: bytes) -> Frame:
    reader = FrameReader()
    reader.feed(data)
    frame = reader.next_frame()
    assert frame is not None
    return frame


class Recorder:
    """The stream requests the core asked to send (``requests`` takes them)."""

    def __init__(self) -> None:
        self.sent: list[DcpStreamRequest] = []

    def requests(self) -> list[DcpStreamRequest]:
        out, self.sent = self.sent, []
        return out


class Fed:
    """The consumer's sans-IO core: frames are fed to it, the stream requests it makes
    (first ones, and the re-opens its actions ask for) are recorded, its events kept."""

    def __init__(self, **options: Any) -> None:  # noqa: ANN401
        self.events: list[object] = []
        self.sent = Recorder()
        options.setdefault("vbuckets", [0])
        self.core = ConsumerCore(buffer_size=0, **options)
        self.state = self.core.state

    def open(self, vb: int = 0) -> list[DcpStreamRequest]:
        self.sent.sent += self.core.stream_requests(vb)
        return self.sent.requests()

    def accept(self, opaque: int = OPAQUE) -> None:
        log = encode_failover_log([(0xAB, 0)])
        self.feed_bytes(
            Response(
                opcode=Opcode.DCP_STREAM_REQ, status=Status.SUCCESS, opaque=opaque, value=log
            ).encode()
        )

    def feed_bytes(self, data: bytes) -> None:
        for action in self.core.receive(_frame(data)):
            if isinstance(action, Emit):
                self.events.append(action.event)
            elif isinstance(action, Reopen):
                self.sent.sent.append(self.core.stream_request(*action.key))

    def feed(self, *messages: Any) -> None:  # noqa: ANN401
        for message in messages:
            self.feed_bytes(message.encode())


def _marker(start: int, end: int, opaque: int = OPAQUE, sid: int | None = None) -> SnapshotMarker:
    return SnapshotMarker(
        opaque=opaque, vbucket=0, stream_id=sid, start_seqno=start, end_seqno=end, flags=1
    )


def _mutation(
    seqno: int, key: bytes, cid: int = 0, opaque: int = OPAQUE, sid: int | None = None
) -> Mutation:
    return Mutation(
        opaque=opaque,
        vbucket=0,
        stream_id=sid,
        by_seqno=seqno,
        rev_seqno=1,
        key=key,
        collection_id=cid,
        value=b"{}",
    )


def _begin(seqno: int, cid: int, name: bytes, scope: int = 0, uid: int = 1) -> Any:  # noqa: ANN401
    data = CollectionEventData(manifest_uid=uid, scope_id=scope, collection_id=cid)
    return collection_event(opaque=OPAQUE, vbucket=0, by_seqno=seqno, name=name, data=data)


def _drop(seqno: int, cid: int, scope: int = 0, uid: int = 2) -> Any:  # noqa: ANN401
    data = CollectionEventData(manifest_uid=uid, scope_id=scope, collection_id=cid)
    return collection_event(opaque=OPAQUE, vbucket=0, by_seqno=seqno, name=b"", data=data, end=True)


def _end(reason: StreamEndReason, opaque: int = OPAQUE, sid: int | None = None) -> StreamEnd:
    return StreamEnd(opaque=opaque, vbucket=0, stream_id=sid, reason=reason)


class TestStreamFilter:
    def test_collections_and_sid_make_the_stream_request_value(self) -> None:
        value = StreamFilter(collections=[8, 0x1A], sid=3).value()
        assert json.loads(value) == {"sid": 3, "collections": ["8", "1a"]}
        parsed = StreamRequestValue.parse(value)
        assert parsed.collections == (8, 0x1A)
        assert parsed.sid == 3

    def test_scope_is_a_hex_string(self) -> None:
        assert json.loads(StreamFilter(scope=0x2B).value()) == {"scope": "2b"}

    def test_pass_through_without_sid_sends_no_value(self) -> None:
        assert StreamFilter().value() == b""
        assert StreamFilter().passes_through

    def test_reject_collections_and_scope_together(self) -> None:
        with pytest.raises(ValueError, match="not both"):
            StreamFilter(collections=[8], scope=8)

    @pytest.mark.parametrize("sid", [0, 0x10000])
    def test_reject_a_sid_outside_u16(self, sid: int) -> None:
        with pytest.raises(ValueError, match="stream-id"):
            StreamFilter(sid=sid)


class TestConsumerOptions:
    def test_reject_stream_ids_on_some_streams_only(self) -> None:
        with pytest.raises(ValueError, match="every stream needs one"):
            DcpConsumer("h", 1, vbuckets=[0], streams=[StreamFilter(sid=1), StreamFilter()])

    def test_reject_two_streams_with_one_sid(self) -> None:
        with pytest.raises(ValueError, match="distinct"):
            DcpConsumer("h", 1, vbuckets=[0], streams=[StreamFilter(sid=1), StreamFilter(sid=1)])

    def test_reject_a_filter_without_collections(self) -> None:
        with pytest.raises(ValueError, match="collections=True"):
            DcpConsumer("h", 1, vbuckets=[0], collections=False, streams=[StreamFilter(scope=8)])


class TestStreamIds:
    def test_each_stream_of_a_vbucket_is_asked_with_its_own_sid_and_opaque(self) -> None:
        fed = Fed(streams=[StreamFilter(collections=[8], sid=1), StreamFilter(scope=9, sid=2)])
        requests = fed.open()
        assert [json.loads(r.value) for r in requests] == [
            {"sid": 1, "collections": ["8"]},
            {"sid": 2, "scope": "9"},
        ]
        assert [r.opaque for r in requests] == [OPAQUE, OPAQUE + OPAQUE_SLOT]
        assert fed.core.stream_ids

    def test_positions_and_snapshots_are_kept_per_stream(self) -> None:
        fed = Fed(
            streams=[StreamFilter(collections=[8], sid=1), StreamFilter(collections=[9], sid=2)]
        )
        fed.open()
        two = OPAQUE + OPAQUE_SLOT
        fed.accept(OPAQUE)
        fed.accept(two)
        fed.feed(
            _marker(1, 6, OPAQUE, 1),
            _marker(1, 9, two, 2),
            _mutation(3, b"h", 8, OPAQUE, 1),
            _mutation(4, b"a", 9, two, 2),
            _mutation(6, b"h2", 8, OPAQUE, 1),
        )
        one_pos, two_pos = fed.state.position(0, 1), fed.state.position(0, 2)
        assert (one_pos.seqno, one_pos.snap_start, one_pos.snap_end) == (6, 6, 6)
        assert (two_pos.seqno, two_pos.snap_start, two_pos.snap_end) == (4, 1, 9)
        assert fed.state.consistent[(0, 1)] == [0, 6]
        assert (0, 2) not in fed.state.consistent
        assert fed.state.violations == []
        assert {v.sid for v in fed.state.documents().values()} == {1, 2}

    def test_a_rollback_undoes_only_its_streams_versions(self) -> None:
        fed = Fed(
            streams=[StreamFilter(collections=[8], sid=1), StreamFilter(collections=[9], sid=2)]
        )
        fed.open()
        two = OPAQUE + OPAQUE_SLOT
        fed.feed(
            _marker(1, 2, OPAQUE, 1),
            _mutation(2, b"h", 8, OPAQUE, 1),
            _marker(1, 3, two, 2),
            _mutation(3, b"a", 9, two, 2),
        )
        fed.state.roll_back(0, 0, sid=1)
        assert set(fed.state.documents()) == {(9, b"a")}
        assert fed.state.position(0, 2).seqno == 3


class TestSeqnoAdvanced:
    def test_at_the_snapshot_end_it_completes_the_snapshot(self) -> None:
        fed = Fed(streams=[StreamFilter(collections=[8])])
        fed.open()
        fed.feed(_marker(1, 10), _mutation(4, b"k", 8))
        fed.feed(SeqnoAdvanced(opaque=OPAQUE, vbucket=0, by_seqno=10))
        pos = fed.state.position(0)
        assert (pos.seqno, pos.snap_start, pos.snap_end) == (10, 10, 10)
        assert fed.state.consistent[(0, None)] == [0, 10]
        assert fed.state.seqno_advances == 1

    def test_inside_a_snapshot_it_moves_the_position_within_the_snapshot(self) -> None:
        fed = Fed(streams=[StreamFilter(collections=[8])])
        fed.open()
        fed.feed(_marker(1, 20), SeqnoAdvanced(opaque=OPAQUE, vbucket=0, by_seqno=7))
        pos = fed.state.position(0)
        assert (pos.seqno, pos.snap_start, pos.snap_end) == (7, 1, 20)
        fed.feed(_end(StreamEndReason.STATE_CHANGED))
        (request,) = fed.sent.requests()
        assert (request.start_seqno, request.snap_start_seqno, request.snap_end_seqno) == (
            7,
            1,
            20,
        )


class TestStreamEnd:
    def test_filter_empty_ends_the_stream_without_asking_again(self) -> None:
        fed = Fed(streams=[StreamFilter(collections=[8])])
        fed.open()
        fed.feed(_marker(1, 2), _begin(1, 8, b"hotel"), _drop(2, 8))
        fed.feed(_end(StreamEndReason.FILTER_EMPTY))
        assert fed.sent.requests() == []
        pos = fed.state.position(0)
        assert pos.ended
        assert pos.end_reason == StreamEndReason.FILTER_EMPTY
        assert fed.core.finished
        assert fed.open() == []  # a reconnect does not bring it back

    def test_finished_waits_for_every_stream(self) -> None:
        fed = Fed(
            vbuckets=[0, 1],
            streams=[StreamFilter(collections=[8], sid=1), StreamFilter(collections=[9], sid=2)],
        )
        fed.open()
        fed.feed(_end(StreamEndReason.FILTER_EMPTY, OPAQUE, 1))
        assert not fed.core.finished
        assert fed.state.position(0, 1).ended
        assert not fed.state.position(0, 2).ended

    @pytest.mark.parametrize("reason", [StreamEndReason.STATE_CHANGED, StreamEndReason.ROLLBACK])
    def test_a_reason_worth_retrying_asks_again_from_the_position(
        self, reason: StreamEndReason
    ) -> None:
        fed = Fed()
        fed.open()
        fed.feed(_marker(1, 3), _mutation(3, b"k"), _end(reason))
        (request,) = fed.sent.requests()
        assert request.start_seqno == 3
        assert not fed.state.position(0).ended

    def test_ok_is_the_end(self) -> None:
        fed = Fed()
        fed.open()
        fed.feed(_end(StreamEndReason.OK))
        assert fed.sent.requests() == []
        assert fed.state.position(0).ended

    def test_closed_is_asked_again_only_when_reconnecting(self) -> None:
        fed = Fed(reconnect=False)
        fed.open()
        fed.feed(_end(StreamEndReason.CLOSED))
        assert fed.sent.requests() == []
        assert not fed.state.position(0).ended
        fed = Fed()
        fed.open()
        fed.feed(_end(StreamEndReason.CLOSED))
        assert len(fed.sent.requests()) == 1

    def test_a_stream_already_open_answered_key_eexists_goes_on(self) -> None:
        """KEY_EEXISTS to a second request for an open stream (kv_engine
        ``DcpProducer::streamRequest``): the stream is already open, as java-dcp-client's
        ``DcpChannel.openStream`` takes it; its frames go on, nothing is asked again."""
        fed = Fed()
        fed.open()
        fed.accept()
        fed.feed(_marker(1, 1), _mutation(1, b"k1"))
        fed.open()  # a second request for the open stream
        fed.feed_bytes(
            Response(
                opcode=Opcode.DCP_STREAM_REQ, status=Status.KEY_EEXISTS, opaque=OPAQUE
            ).encode()
        )
        assert (0, None) in fed.core.open
        assert fed.sent.requests() == []
        fed.feed(_marker(2, 2), _mutation(2, b"k2"))
        assert fed.state.position(0).seqno == 2
        assert not fed.state.violations

    def test_a_refused_filter_of_dropped_collections_is_over(self) -> None:
        fed = Fed(streams=[StreamFilter(collections=[8])])
        fed.open()
        fed.feed_bytes(
            Response(
                opcode=Opcode.DCP_STREAM_REQ, status=Status.UNKNOWN_COLLECTION, opaque=OPAQUE
            ).encode()
        )
        assert fed.state.position(0).ended
        assert fed.events == [
            StreamRefused(vbucket=0, stream_id=None, status=Status.UNKNOWN_COLLECTION)
        ]

    def test_a_refused_scope_filter_clears_the_scopes_collections_it_saw(self) -> None:
        """The scope was dropped while the consumer was away: every collection of it the
        stream's manifest knows is gone (``StreamFilter.collections_in``), not others."""
        fed = Fed(streams=[StreamFilter(scope=8)])
        fed.open()
        fed.accept()
        fed.feed(_marker(1, 2), _begin(1, 9, b"rail", 8, 2), _begin(2, 10, b"bus", 8, 3))
        fed.feed(_end(StreamEndReason.STATE_CHANGED))
        assert len(fed.sent.requests()) == 1
        fed.feed_bytes(
            Response(
                opcode=Opcode.DCP_STREAM_REQ, status=Status.UNKNOWN_SCOPE, opaque=OPAQUE
            ).encode()
        )
        assert fed.state.position(0).ended
        # their creations cleared what came before them; now everything of them is gone
        assert fed.state.cleared == {(0, 9): 1 << 64, (0, 10): 1 << 64}

    def test_an_unknown_collection_on_a_pass_through_stream_is_an_error(self) -> None:
        fed = Fed()
        fed.open()
        with pytest.raises(ConsumerError, match="0x88"):
            fed.feed_bytes(
                Response(
                    opcode=Opcode.DCP_STREAM_REQ, status=Status.UNKNOWN_COLLECTION, opaque=OPAQUE
                ).encode()
            )


class TestManifestView:
    def test_system_events_build_the_streams_manifest(self) -> None:
        fed = Fed(streams=[StreamFilter(scope=8)])
        fed.open()
        scope = scope_event(
            opaque=OPAQUE,
            vbucket=0,
            by_seqno=1,
            name=b"inventory",
            data=ScopeEventData(manifest_uid=1, scope_id=8),
        )
        fed.feed(_marker(1, 3), scope, _begin(2, 8, b"hotel", 8, 2), _begin(3, 9, b"rail", 8, 3))
        view = fed.state.manifest(0)
        assert view.scopes == {8: "inventory"}
        assert {cid: info.name for cid, info in view.collections.items()} == {8: "hotel", 9: "rail"}
        assert view.uid == 3
        assert fed.state.system_events == 3
        assert fed.state.position(0).seqno == 3

    def test_a_drop_forgets_the_documents_and_a_rollback_below_it_restores_them(
        self,
    ) -> None:
        fed = Fed()
        fed.open()
        fed.feed(_marker(1, 3), _begin(1, 8, b"hotel"), _mutation(2, b"k", 8), _mutation(3, b"d"))
        fed.feed(_marker(4, 4), _drop(4, 8))
        assert set(fed.state.documents()) == {(0, b"d")}
        assert 8 not in fed.state.manifest(0).collections
        fed.state.roll_back(0, 3)
        assert set(fed.state.documents()) == {(0, b"d"), (8, b"k")}
        assert 8 in fed.state.manifest(0).collections


class TestOso:
    def _start(self, fed: Fed) -> None:
        fed.open()
        fed.feed(OsoSnapshot(opaque=OPAQUE, vbucket=0, flags=OsoSnapshotFlag.START))
        fed.feed(_begin(1, 8, b"hotel"), _mutation(9, b"a", 8), _mutation(4, b"b", 8))

    def test_the_position_waits_for_the_end_then_takes_the_highest_seqno(self) -> None:
        fed = Fed(streams=[StreamFilter(collections=[8])])
        self._start(fed)
        assert fed.state.position(0).seqno == 0
        fed.feed(SeqnoAdvanced(opaque=OPAQUE, vbucket=0, by_seqno=12))
        fed.feed(OsoSnapshot(opaque=OPAQUE, vbucket=0, flags=OsoSnapshotFlag.END))
        pos = fed.state.position(0)
        assert (pos.seqno, pos.snap_start, pos.snap_end) == (12, 12, 12)
        assert fed.state.consistent[(0, None)] == [0, 12]
        assert fed.state.violations == []
        assert set(fed.state.documents()) == {(8, b"a"), (8, b"b")}
        fed.feed(_marker(13, 13), _mutation(13, b"c", 8))
        assert fed.state.violations == []

    def test_a_stream_cut_inside_an_oso_snapshot_resumes_from_before_it(self) -> None:
        fed = Fed(streams=[StreamFilter(collections=[8])])
        self._start(fed)
        fed.feed(_end(StreamEndReason.STATE_CHANGED))
        (request,) = fed.sent.requests()
        assert (request.start_seqno, request.snap_start_seqno, request.snap_end_seqno) == (0, 0, 0)


class TestFlatBuffersEvents:
    def _event(self, seqno: int, kind: SystemEventType, data: Any, name: bytes) -> SystemEvent:  # noqa: ANN401
        return SystemEvent(
            opaque=OPAQUE,
            vbucket=0,
            by_seqno=seqno,
            event=kind,
            version=2,
            key=name,
            value=encode_flatbuffers_value(data),
        )

    def test_version_2_events_and_modify_collection_update_the_view(self) -> None:
        fed = Fed()
        fed.open()
        begin = CollectionEventV2(manifest_uid=4, scope_id=0, collection_id=8, name="hotel")
        modify = attrs.evolve(begin, manifest_uid=5, max_ttl=60)
        dropped = DroppedCollectionV2(manifest_uid=6, scope_id=0, collection_id=8)
        fed.feed(
            _marker(1, 3),
            self._event(1, SystemEventType.BEGIN_COLLECTION, begin, b"hotel"),
            self._event(2, SystemEventType.MODIFY_COLLECTION, modify, b"hotel"),
        )
        view = fed.state.manifest(0)
        assert view.collections[8] == CollectionInfo(0, "hotel", 60)
        assert view.uid == 5
        fed.feed(self._event(3, SystemEventType.END_COLLECTION, dropped, b""))
        assert 8 not in view.collections
        assert fed.state.cleared[(0, 8)] == 3


class TestValuesAgainstTheirDatatype:
    """Issue 45: a value that contradicts its datatype is a protocol error (the driver
    reconnects and resumes), and nothing of it is taken."""

    def fed(self) -> Fed:
        fed = Fed()
        fed.open()
        fed.accept()
        fed.feed(_marker(1, 3), _mutation(1, b"a"))
        return fed

    @pytest.mark.parametrize(
        ("value", "datatype"),
        [
            (b'{"n": 1\x82', Datatype.JSON),  # `corrupt: value` on {"n": 1}
            (b"not json", Datatype.JSON),
            (encode_xattrs([("_sync", "{}")], b'{"n": '), Datatype.JSON | Datatype.XATTR),
            (b"\x00\x00\x00\x09abc", Datatype.XATTR),  # a section past the value
        ],
    )
    def test_a_value_that_contradicts_its_datatype_is_refused_before_it_counts(
        self, value: bytes, datatype: Datatype
    ) -> None:
        fed = self.fed()
        bad = attrs.evolve(_mutation(2, b"b"), value=value, datatype=int(datatype))
        with pytest.raises(RemoteProtocolError, match="value"):
            fed.feed(bad)
        assert fed.state.position(0).seqno == 1
        assert (0, b"b") not in fed.state.versions
        # the same item sent again, whole, is taken
        fed.feed(attrs.evolve(bad, value=b'{"n": 1}', datatype=int(Datatype.JSON)))
        assert fed.state.position(0).seqno == 2

    @pytest.mark.parametrize(
        ("value", "datatype"),
        [
            (b"raw bytes", Datatype.RAW),
            (b'{"n": 1}', Datatype.JSON),
            (encode_xattrs([("_sync", "{}")], b'{"n": 1}'), Datatype.JSON | Datatype.XATTR),
            (encode_xattrs([("_sync", "{}")], b"raw"), Datatype.XATTR),
            (b"\x01\x02", Datatype.SNAPPY | Datatype.JSON),  # not looked into
        ],
    )
    def test_a_value_that_is_what_its_datatype_says_is_taken(
        self, value: bytes, datatype: Datatype
    ) -> None:
        fed = self.fed()
        fed.feed(attrs.evolve(_mutation(2, b"b"), value=value, datatype=int(datatype)))
        assert fed.state.position(0).seqno == 2


class TestResponses:
    def test_a_stream_requests_answer_with_an_opcode_no_command_has_is_a_protocol_error(
        self,
    ) -> None:
        # explore --seed 39, schedule 5092: `corrupt: opcode` hit the answer to a stream
        # request; ignored, the stream ran on with vbucket uuid 0 and resumed with it
        fed = Fed()
        fed.open()
        log = encode_failover_log([(0xAB, 0)])
        answer = bytearray(
            Response(
                opcode=Opcode.DCP_STREAM_REQ, status=Status.SUCCESS, opaque=OPAQUE, value=log
            ).encode()
        )
        answer[1] = 0xEE  # as the corrupt step's `opcode` kind damages a frame
        with pytest.raises(RemoteProtocolError, match="opcode 0xee"):
            fed.feed_bytes(bytes(answer))
        assert fed.state.position(0).uuid == 0
        # the same answer, whole, is taken
        fed.accept()
        assert fed.state.position(0).uuid == 0xAB

    def test_a_response_to_no_stream_request_with_a_known_opcode_is_ignored(self) -> None:
        fed = Fed()
        fed.open()
        fed.feed_bytes(
            Response(
                opcode=Opcode.DCP_BUFFER_ACKNOWLEDGEMENT, status=Status.EINVAL, opaque=0
            ).encode()
        )
        assert fed.events == []
