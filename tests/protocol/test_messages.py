from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from mockdcp import RemoteProtocolError
from mockdcp.protocol import (
    CollectionEventData,
    Datatype,
    DcpCloseStream,
    DcpNoop,
    DcpOpen,
    DcpStreamRequest,
    Deletion,
    Frame,
    GetAllVbSeqnos,
    GetClusterConfig,
    GetCollectionId,
    GetScopeId,
    Hello,
    Magic,
    Mutation,
    ObserveSeqnoResult,
    Opcode,
    Response,
    SaslAuth,
    SaslStep,
    ScopeEventData,
    SnapshotMarker,
    SnapshotMarkerVersion,
    Status,
    StreamEnd,
    StreamEndReason,
    SystemEvent,
    SystemEventType,
    collection_event,
    decode_client_message,
    decode_failover_log,
    decode_hello_features,
    decode_rollback_value,
    decode_server_message,
    encode_xattrs,
    failover_log_uuids,
    parse_system_event_value,
    scope_event,
    split_xattrs,
    strip_user_xattrs,
)
from mockdcp.protocol._flatbuffers import ScopeEventV2, encode_flatbuffers_value

if TYPE_CHECKING:
    from collections.abc import Callable


def request(opcode: int, magic: Magic = Magic.REQUEST, **parts: Any) -> Frame:  # noqa: ANN401
    return Frame(magic=magic, opcode=opcode, **parts)


def client_error(frame: Frame) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        decode_client_message(frame)
    return info.value


def server_error(frame: Frame, collections: bool = False) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        decode_server_message(frame, collections=collections)
    return info.value


class TestShapeChecks:
    @pytest.mark.parametrize(
        ("frame", "field"),
        [
            (request(Opcode.DCP_CONTROL, value=b"true"), "key"),
            (request(Opcode.DCP_CONTROL, key=b"enable_noop"), "value"),
            (request(Opcode.DCP_CONTROL, key=b"k", value=b"v", extras=bytes(4)), "extras"),
            (request(Opcode.DCP_CONTROL, key=b"k", value=b"v", datatype=Datatype.JSON), "datatype"),
            (request(Opcode.DCP_STREAM_REQ, extras=bytes(47)), "extras"),
            (request(Opcode.DCP_STREAM_REQ, extras=bytes(48), key=b"k"), "key"),
            (request(Opcode.DCP_STREAM_REQ, extras=bytes(48), value=b"{}", datatype=1), "datatype"),
            (request(Opcode.DCP_BUFFER_ACKNOWLEDGEMENT), "extras"),
            (request(Opcode.DCP_BUFFER_ACKNOWLEDGEMENT, extras=bytes(4), value=b"x"), "value"),
            (request(Opcode.DCP_CLOSE_STREAM, value=b"x"), "value"),
            (request(Opcode.SASL_AUTH, value=b"x"), "key"),
            (request(Opcode.NOOP, key=b"x"), "key"),
            (request(Opcode.HELLO, value=b"\x00\x06\x00"), "value"),
            (request(Opcode.GET_ALL_VB_SEQNOS, extras=bytes(2)), "extras"),
            (request(Opcode.GET_ALL_VB_SEQNOS, extras=(5).to_bytes(4, "big")), "extras"),
            (request(Opcode.OBSERVE_SEQNO, value=bytes(7)), "value"),
            (request(Opcode.GET_ERROR_MAP, value=b"\x02"), "value"),
            (request(Opcode.GET_ERROR_MAP, value=b"\x00\x02", vbucket_or_status=1), "vbucket"),
            (request(Opcode.GET_COLLECTIONS_MANIFEST, vbucket_or_status=3), "vbucket"),
            (request(Opcode.GET_COLLECTION_ID, key=b"a.b", value=b"a.b"), "key"),
            (request(Opcode.GET_CLUSTER_CONFIG, extras=bytes(8)), "extras"),
            (request(Opcode.SELECT_BUCKET, key=b"\xff"), "key"),
            (request(Opcode.DCP_CONTROL, key=b"k", value=b"\xff"), "value"),
        ],
    )
    def test_malformed_client_request_is_einval_naming_the_field(
        self, frame: Frame, field: str
    ) -> None:
        error = client_error(frame)
        assert (error.status, error.field) == (Status.EINVAL, field)

    def test_dcp_open_name_must_be_1_to_250_bytes(self) -> None:
        assert client_error(request(Opcode.DCP_OPEN, extras=bytes(8))).field == "key"
        assert (
            client_error(request(Opcode.DCP_OPEN, extras=bytes(8), key=b"n" * 251)).field == "key"
        )
        assert decode_client_message(request(Opcode.DCP_OPEN, extras=bytes(8), key=b"n" * 250))

    def test_dcp_open_value_needs_json_datatype_and_empty_value_raw(self) -> None:
        base: dict[str, Any] = {"extras": bytes(8), "key": b"n"}
        assert client_error(request(Opcode.DCP_OPEN, value=b"{}", **base)).field == "datatype"
        assert client_error(request(Opcode.DCP_OPEN, datatype=1, **base)).field == "datatype"
        msg = decode_client_message(request(Opcode.DCP_OPEN, value=b"{}", datatype=1, **base))
        assert msg == DcpOpen(opaque=0, name=b"n", flags=0, value=b"{}")

    def test_dcp_open_with_value_encodes_json_datatype(self) -> None:
        assert DcpOpen(opaque=1, name=b"n", flags=1, value=b"{}").encode()[5] == Datatype.JSON

    @pytest.mark.parametrize(("epoch", "revision"), [(1, 0), (0, 1), (-2, 5)])
    def test_cluster_config_version_must_be_valid(self, epoch: int, revision: int) -> None:
        extras = epoch.to_bytes(8, "big", signed=True) + revision.to_bytes(8, "big", signed=True)
        assert client_error(request(Opcode.GET_CLUSTER_CONFIG, extras=extras)).field == "extras"

    def test_cluster_config_with_epoch_minus_one_is_accepted(self) -> None:
        msg = GetClusterConfig(opaque=1, epoch=-1, revision=9)
        assert (
            decode_client_message(
                Frame(
                    magic=Magic.REQUEST,
                    opcode=Opcode.GET_CLUSTER_CONFIG,
                    opaque=1,
                    extras=msg.encode()[24:],
                )
            )
            == msg
        )

    def test_get_all_vb_seqnos_with_collection(self) -> None:
        msg = GetAllVbSeqnos(opaque=1, state=0, collection_id=8)
        assert msg.encode()[4] == 8
        frame = request(Opcode.GET_ALL_VB_SEQNOS, opaque=1, extras=msg.encode()[24:])
        assert decode_client_message(frame) == msg

    def test_collection_id_path_may_come_in_the_key(self) -> None:
        frame = request(Opcode.GET_COLLECTION_ID, key=b"_default._default")
        assert decode_client_message(frame) == GetCollectionId(opaque=0, path="_default._default")

    def test_scope_id_and_collection_id_are_distinct_messages(self) -> None:
        scope = decode_client_message(request(Opcode.GET_SCOPE_ID, value=b"_default"))
        assert scope == GetScopeId(opaque=0, path="_default")
        assert not isinstance(scope, GetCollectionId)

    def test_sasl_step_is_not_a_sasl_auth(self) -> None:
        step = decode_client_message(request(Opcode.SASL_STEP, key=b"PLAIN", value=b"x"))
        assert step == SaslStep(opaque=0, mechanism="PLAIN", payload=b"x")
        assert not isinstance(step, SaslAuth)

    def test_hello_with_empty_key_and_value_is_accepted(self) -> None:
        assert decode_client_message(request(Opcode.HELLO)) == Hello(opaque=0)


class TestStreamMessages:
    def test_mutation_with_nmeta_is_rejected(self) -> None:
        wire = bytearray(Mutation(opaque=1, vbucket=0, by_seqno=1, rev_seqno=1, key=b"k").encode())
        wire[24 + 29] = 1
        frame = Frame(
            magic=Magic.REQUEST, opcode=Opcode.DCP_MUTATION, extras=bytes(wire[24:55]), key=b"k"
        )
        assert server_error(frame).field == "extras"

    def test_mutation_without_key_is_rejected(self) -> None:
        frame = request(Opcode.DCP_MUTATION, extras=bytes(31))
        assert server_error(frame).field == "key"

    def test_mutation_with_collection_prefix_only_is_rejected(self) -> None:
        frame = request(Opcode.DCP_MUTATION, extras=bytes(31), key=b"\x08")
        assert server_error(frame, collections=True).field == "key"

    def test_mutation_with_truncated_leb128_prefix_is_rejected(self) -> None:
        frame = request(Opcode.DCP_MUTATION, extras=bytes(31), key=b"\x80")
        assert server_error(frame, collections=True).field == "key"

    def test_collection_prefix_is_part_of_the_key_without_collections(self) -> None:
        frame = request(Opcode.DCP_MUTATION, extras=bytes(31), key=b"\x08doc")
        msg = decode_server_message(frame, collections=False)
        assert isinstance(msg, Mutation)
        assert (msg.key, msg.collection_id) == (b"\x08doc", None)

    def test_mutation_datatype_beyond_defined_bits_is_rejected(self) -> None:
        frame = request(Opcode.DCP_MUTATION, extras=bytes(31), key=b"k", datatype=0x08)
        assert server_error(frame).field == "datatype"

    def test_deletion_extras_length_selects_v1_or_v2(self) -> None:
        v1 = decode_server_message(
            request(Opcode.DCP_DELETION, extras=bytes(18), key=b"k"), collections=False
        )
        v2 = decode_server_message(
            request(Opcode.DCP_DELETION, extras=bytes(21), key=b"k"), collections=False
        )
        assert isinstance(v1, Deletion)
        assert v1.delete_time is None
        assert isinstance(v2, Deletion)
        assert v2.delete_time == 0
        assert (
            server_error(request(Opcode.DCP_DELETION, extras=bytes(20), key=b"k")).field == "extras"
        )

    def test_snapshot_marker_v1_with_value_is_rejected(self) -> None:
        frame = request(Opcode.DCP_SNAPSHOT_MARKER, extras=bytes(20), value=b"x")
        assert server_error(frame).field == "value"

    @pytest.mark.parametrize(
        ("version", "size", "field"), [(1, 36, "extras"), (0, 44, "value"), (2, 36, "value")]
    )
    def test_snapshot_marker_v2_with_bad_version_or_size_is_rejected(
        self, version: int, size: int, field: str
    ) -> None:
        frame = request(Opcode.DCP_SNAPSHOT_MARKER, extras=bytes((version,)), value=bytes(size))
        assert server_error(frame).field == field

    def test_snapshot_marker_v2_0_is_37_bytes_of_body(self) -> None:
        marker = SnapshotMarker(
            opaque=1,
            vbucket=0,
            start_seqno=1,
            end_seqno=2,
            flags=2,
            version=SnapshotMarkerVersion.V2_0,
            max_visible_seqno=2,
        )
        assert len(marker.encode()) == 24 + 37

    def test_stream_end_with_unknown_reason_keeps_the_number(self) -> None:
        msg = decode_server_message(
            request(Opcode.DCP_STREAM_END, extras=(99).to_bytes(4, "big")), collections=False
        )
        assert isinstance(msg, StreamEnd)
        assert msg.reason == 99
        known = decode_server_message(
            request(Opcode.DCP_STREAM_END, extras=(7).to_bytes(4, "big")), collections=False
        )
        assert isinstance(known, StreamEnd)
        assert known.reason is StreamEndReason.FILTER_EMPTY

    @pytest.mark.parametrize("state", [0, 5])
    def test_set_vbucket_state_outside_1_to_4_is_rejected(self, state: int) -> None:
        frame = request(Opcode.DCP_SET_VBUCKET_STATE, extras=bytes((state,)))
        assert server_error(frame).field == "extras"

    @pytest.mark.parametrize(("event", "version"), [(2, 0), (6, 0), (0, 3)])
    def test_system_event_with_invalid_event_or_version_is_rejected(
        self, event: int, version: int
    ) -> None:
        extras = bytes(8) + event.to_bytes(4, "big") + bytes((version,))
        assert server_error(request(Opcode.DCP_SYSTEM_EVENT, extras=extras)).field == "extras"

    @pytest.mark.parametrize(("level", "deleted"), [(0, 0), (4, 0), (1, 2)])
    def test_prepare_with_bad_durability_or_deleted_flag_is_rejected(
        self, level: int, deleted: int
    ) -> None:
        extras = bytes(29) + bytes((deleted, level))
        assert server_error(request(Opcode.DCP_PREPARE, extras=extras, key=b"k")).field == "extras"

    def test_commit_with_value_is_rejected(self) -> None:
        frame = request(Opcode.DCP_COMMIT, extras=bytes(16), key=b"k", value=b"v")
        assert server_error(frame).field == "value"

    def test_stream_message_keeps_stream_id_from_framing(self) -> None:
        wire = DcpCloseStream(opaque=1, vbucket=2, stream_id=9).encode()
        assert wire[:4] == bytes.fromhex("08520300")
        frame = Frame(
            magic=Magic.ALT_REQUEST,
            opcode=Opcode.DCP_CLOSE_STREAM,
            vbucket_or_status=2,
            opaque=1,
            framing_extras=wire[24:27],
        )
        assert decode_client_message(frame) == DcpCloseStream(opaque=1, vbucket=2, stream_id=9)

    def test_alt_request_without_stream_id_frame_has_no_stream_id(self) -> None:
        frame = request(
            Opcode.DCP_STREAM_REQ, magic=Magic.ALT_REQUEST, framing_extras=b"\x00", extras=bytes(48)
        )
        msg = decode_client_message(frame)
        assert isinstance(msg, DcpStreamRequest)
        assert msg.stream_id is None


class TestDispatch:
    def test_unknown_client_opcode_is_unknown_command(self) -> None:
        error = client_error(request(0xE0))
        assert (error.status, error.field) == (Status.UNKNOWN_COMMAND, "opcode")

    def test_producer_message_sent_by_a_client_is_unknown_command(self) -> None:
        assert client_error(request(Opcode.DCP_MUTATION)).status == Status.UNKNOWN_COMMAND

    def test_unknown_server_opcode_is_unknown_command(self) -> None:
        error = server_error(request(Opcode.DCP_CACHE_TRANSFER))
        assert (error.status, error.field) == (Status.UNKNOWN_COMMAND, "opcode")

    def test_unknown_server_push_opcode_is_unknown_command(self) -> None:
        assert (
            server_error(request(0x02, magic=Magic.SERVER_REQUEST)).status == Status.UNKNOWN_COMMAND
        )

    def test_client_responses_decode_as_response(self) -> None:
        frame = Frame(magic=Magic.SERVER_RESPONSE, opcode=0x01, opaque=5, vbucket_or_status=0)
        assert decode_client_message(frame) == Response(
            magic=Magic.SERVER_RESPONSE, opcode=0x01, status=Status.SUCCESS, opaque=5
        )

    @pytest.mark.parametrize("magic", [Magic.SERVER_REQUEST, Magic.ALT_RESPONSE])
    def test_client_cannot_send_server_magics(self, magic: Magic) -> None:
        assert client_error(request(Opcode.NOOP, magic=magic)).field == "magic"

    @pytest.mark.parametrize("magic", [Magic.SERVER_RESPONSE, Magic.ALT_RESPONSE])
    def test_producer_cannot_send_client_response_magics(self, magic: Magic) -> None:
        assert server_error(request(Opcode.NOOP, magic=magic)).field == "magic"

    def test_dcp_noop_reaches_the_consumer(self) -> None:
        assert decode_server_message(
            request(Opcode.DCP_NOOP, opaque=7), collections=False
        ) == DcpNoop(opaque=7)

    def test_response_with_unknown_status_keeps_the_number(self) -> None:
        frame = Frame(magic=Magic.RESPONSE, opcode=Opcode.DCP_STREAM_REQ, vbucket_or_status=0x9F)
        msg = decode_server_message(frame, collections=False)
        assert isinstance(msg, Response)
        assert msg.status == 0x9F

    def test_response_decode_refuses_a_request(self) -> None:
        with pytest.raises(RemoteProtocolError):
            Response.decode(request(Opcode.NOOP))


class TestValues:
    @pytest.mark.parametrize("decode", [decode_failover_log, failover_log_uuids])
    def test_failover_log_with_partial_entry_is_rejected(
        self, decode: Callable[[bytes], object]
    ) -> None:
        with pytest.raises(RemoteProtocolError) as info:
            decode(bytes(17))
        assert info.value.field == "value"

    def test_rollback_value_must_be_eight_bytes(self) -> None:
        with pytest.raises(RemoteProtocolError):
            decode_rollback_value(bytes(4))

    def test_hello_features_with_odd_length_are_rejected(self) -> None:
        with pytest.raises(RemoteProtocolError):
            decode_hello_features(b"\x00")

    def test_observe_seqno_format_0_is_27_bytes(self) -> None:
        result = ObserveSeqnoResult(
            vbucket=3, vbucket_uuid=0xAB, persisted_seqno=4, current_seqno=5
        )
        wire = result.encode()
        assert wire == bytes.fromhex("00 0003 00000000000000ab 0000000000000004 0000000000000005")
        assert ObserveSeqnoResult.decode(wire) == result

    def test_observe_seqno_format_1_adds_old_uuid_and_last_seqno(self) -> None:
        result = ObserveSeqnoResult(
            vbucket=3,
            vbucket_uuid=0xAB,
            persisted_seqno=4,
            current_seqno=5,
            old_vbucket_uuid=0xCD,
            last_seqno=2,
        )
        wire = result.encode()
        assert (wire[0], len(wire)) == (1, 43)
        assert ObserveSeqnoResult.decode(wire) == result

    @pytest.mark.parametrize("wire", [b"", bytes(26), b"\x02" + bytes(26), b"\x01" + bytes(26)])
    def test_observe_seqno_with_bad_format_or_length_is_rejected(self, wire: bytes) -> None:
        with pytest.raises(RemoteProtocolError):
            ObserveSeqnoResult.decode(wire)

    def test_xattrs_round_trip_and_strip_user_xattrs_keeps_system_ones(self) -> None:
        value = encode_xattrs([("_sync", '{"rev":1}'), ("user", '"x"')], b"body")
        assert split_xattrs(value) == ([(b"_sync", b'{"rev":1}'), (b"user", b'"x"')], b"body")
        stripped, datatype = strip_user_xattrs(value, Datatype.XATTR | Datatype.JSON)
        assert split_xattrs(stripped) == ([(b"_sync", b'{"rev":1}')], b"body")
        assert datatype == Datatype.XATTR | Datatype.JSON

    def test_strip_user_xattrs_clears_xattr_bit_when_none_remain(self) -> None:
        value = encode_xattrs([("user", "1")], b"{}")
        assert strip_user_xattrs(value, Datatype.XATTR | Datatype.JSON) == (b"{}", Datatype.JSON)
        assert strip_user_xattrs(b"{}", Datatype.JSON) == (b"{}", Datatype.JSON)

    @pytest.mark.parametrize(
        "value",
        [
            b"\x00\x00",
            b"\x00\x00\x00\x09\x00",
            b"\x00\x00\x00\x06\x00\x00\x00\x09ab",
            b"\x00\x00\x00\x07\x00\x00\x00\x03a\x00b",
            b"\x00\x00\x00\x02\x00\x00",
        ],
    )
    def test_malformed_xattr_section_is_rejected(self, value: bytes) -> None:
        with pytest.raises(RemoteProtocolError) as info:
            split_xattrs(value)
        assert info.value.field == "value"

    def test_xattr_with_nul_byte_cannot_be_encoded(self) -> None:
        with pytest.raises(ValueError, match="NUL"):
            encode_xattrs([("a\0b", "1")], b"")

    def test_begin_and_end_collection_builders(self) -> None:
        data = CollectionEventData(manifest_uid=5, scope_id=0, collection_id=9)
        begin = collection_event(opaque=1, vbucket=0, by_seqno=3, name=b"c", data=data)
        end = collection_event(opaque=1, vbucket=0, by_seqno=4, name=b"c", data=data, end=True)
        assert (begin.event, begin.key, begin.version) == (
            SystemEventType.BEGIN_COLLECTION,
            b"c",
            0,
        )
        assert (end.event, end.key) == (SystemEventType.END_COLLECTION, b"")
        assert begin.data() == end.data() == data

    def test_create_and_drop_scope_builders(self) -> None:
        data = ScopeEventData(manifest_uid=5, scope_id=8)
        create = scope_event(opaque=1, vbucket=0, by_seqno=3, name=b"s", data=data)
        drop = scope_event(opaque=1, vbucket=0, by_seqno=4, name=b"s", data=data, drop=True)
        assert (create.event, create.key, len(create.value)) == (
            SystemEventType.CREATE_SCOPE,
            b"s",
            12,
        )
        assert (drop.event, drop.key) == (SystemEventType.DROP_SCOPE, b"")
        assert drop.data() == data

    def test_flatbuffers_system_event_value_is_decoded(self) -> None:
        data = ScopeEventV2(manifest_uid=3, scope_id=8, name="inventory")
        value = encode_flatbuffers_value(data)
        event = SystemEvent(opaque=1, vbucket=0, by_seqno=1, event=3, version=2, value=value)
        assert event.data() == data

    def test_flatbuffers_system_event_value_that_is_not_a_table_is_rejected(self) -> None:
        event = SystemEvent(opaque=1, vbucket=0, by_seqno=1, event=5, version=2, value=b"\x01")
        with pytest.raises(RemoteProtocolError) as info:
            event.data()
        assert (info.value.status, info.value.field) == (Status.EINVAL, "value")

    @pytest.mark.parametrize(
        ("event", "version", "size"), [(0, 0, 12), (1, 1, 20), (3, 0, 16), (4, 1, 12)]
    )
    def test_system_event_value_of_wrong_size_is_rejected(
        self, event: int, version: int, size: int
    ) -> None:
        with pytest.raises(RemoteProtocolError) as info:
            parse_system_event_value(event, version, bytes(size))
        assert info.value.field == "value"


def test_the_document_commands_load_when_a_producer_decodes_its_first_request() -> None:
    """A consumer decodes only what a producer sends: importing the messages does not
    create the KV document commands' classes; a producer's first decoded request does,
    and a document command (GET) is then decoded as before."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from mockdcp.protocol import Frame, Magic, Opcode, decode_client_message\n"
        "from mockdcp.protocol import decode_server_message\n"
        "doc = 'mockdcp.protocol._document_requests'\n"
        "print(doc in sys.modules)\n"
        "get = Frame(magic=Magic.REQUEST, opcode=Opcode.GET, key=b'k')\n"
        "print(type(decode_client_message(get)).__name__, doc in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)  # fmt: skip
    assert done.stdout.split("\n")[:2] == ["False", "Get True"]
