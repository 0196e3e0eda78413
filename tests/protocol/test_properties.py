from __future__ import annotations

import contextlib
import itertools
from typing import Any

from hypothesis import given, settings, strategies as st

from mockdcp import RemoteProtocolError
from mockdcp.protocol import (
    Abort,
    ClusterMapChangeNotification,
    Commit,
    DcpAddStream,
    DcpBufferAck,
    DcpCloseStream,
    DcpControl,
    DcpGetFailoverLog,
    DcpNoop,
    DcpOpen,
    DcpSeqnoAcknowledged,
    DcpStreamRequest,
    Deletion,
    Expiration,
    Frame,
    FrameReader,
    GetAllVbSeqnos,
    GetClusterConfig,
    GetCollectionId,
    GetCollectionsManifest,
    GetErrorMap,
    GetScopeId,
    Hello,
    Magic,
    Message,
    Mutation,
    Noop,
    ObserveSeqno,
    ObserveSeqnoResult,
    Opcode,
    OsoSnapshot,
    Prepare,
    Response,
    SaslAuth,
    SaslListMechs,
    SaslStep,
    SelectBucket,
    SeqnoAdvanced,
    SetVbucketState,
    SnapshotMarker,
    SnapshotMarkerVersion,
    StreamEnd,
    StreamRequestValue,
    SystemEvent,
    Version,
    decode_client_message,
    decode_failover_log,
    decode_leb128,
    decode_server_message,
    encode_failover_log,
    encode_frame,
    encode_leb128,
    encode_xattrs,
    failover_log_uuids,
    split_xattrs,
)

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 2**64 - 1)
text = st.text(st.characters(codec="utf-8"), max_size=20)
nonempty_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)
small_bytes = st.binary(max_size=40)
doc_key = st.binary(min_size=1, max_size=60)
sid = st.none() | u16
datatype = st.integers(0, 7)
ids = {"opaque": u32}
stream = {"opaque": u32, "vbucket": u16, "stream_id": sid}


def document(cls: type[Message], **extra: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.builds(
        cls,
        cas=u64,
        by_seqno=u64,
        rev_seqno=u64,
        key=doc_key,
        collection_id=st.none() | u32,
        value=small_bytes,
        datatype=datatype,
        **stream,
        **extra,
    )


def marker() -> st.SearchStrategy[SnapshotMarker]:
    common = {"start_seqno": u64, "end_seqno": u64, "flags": u32, **stream}
    v1 = st.builds(SnapshotMarker, **common)
    v20 = st.builds(
        SnapshotMarker,
        version=st.just(SnapshotMarkerVersion.V2_0),
        max_visible_seqno=u64,
        high_completed_seqno=u64,
        **common,
    )
    v22 = st.builds(
        SnapshotMarker,
        version=st.just(SnapshotMarkerVersion.V2_2),
        max_visible_seqno=u64,
        high_completed_seqno=u64,
        purge_seqno=u64,
        high_prepared_seqno=u64,
        **common,
    )
    return v1 | v20 | v22


config_version = st.tuples(st.just(-1) | st.integers(1, 2**63 - 1), st.integers(1, 2**63 - 1))

CLIENT_MESSAGES = st.one_of(
    st.builds(Hello, agent=small_bytes, features=st.lists(u16, max_size=8).map(tuple), **ids),
    st.builds(SaslListMechs, **ids),
    st.builds(SaslAuth, mechanism=nonempty_text, payload=small_bytes, **ids),
    st.builds(SaslStep, mechanism=nonempty_text, payload=small_bytes, **ids),
    st.builds(SelectBucket, bucket=text, **ids),
    st.builds(GetErrorMap, version=u16, **ids),
    st.builds(GetClusterConfig, **ids),
    config_version.flatmap(
        lambda v: st.builds(GetClusterConfig, epoch=st.just(v[0]), revision=st.just(v[1]), **ids)
    ),
    st.builds(Version, **ids),
    st.builds(Noop, **ids),
    st.builds(GetAllVbSeqnos, **ids),
    st.builds(GetAllVbSeqnos, state=st.integers(0, 4), collection_id=st.none() | u32, **ids),
    st.builds(ObserveSeqno, vbucket=u16, vbucket_uuid=u64, **ids),
    st.builds(GetCollectionsManifest, **ids),
    st.builds(GetCollectionId, path=text, **ids),
    st.builds(GetScopeId, path=text, **ids),
    st.builds(
        DcpOpen, name=st.binary(min_size=1, max_size=250), flags=u32, value=small_bytes, **ids
    ),
    st.builds(DcpControl, key=nonempty_text, value=nonempty_text, **ids),
    st.builds(
        DcpStreamRequest,
        flags=u32,
        start_seqno=u64,
        end_seqno=u64,
        vbucket_uuid=u64,
        snap_start_seqno=u64,
        snap_end_seqno=u64,
        value=small_bytes,
        **stream,
    ),
    st.builds(DcpCloseStream, **stream),
    st.builds(DcpGetFailoverLog, vbucket=u16, **ids),
    st.builds(DcpBufferAck, nbytes=u32, **ids),
    st.builds(DcpAddStream, vbucket=u16, flags=u32, **ids),
    st.builds(DcpSeqnoAcknowledged, vbucket=u16, prepared_seqno=u64, **ids),
)

SERVER_MESSAGES = st.one_of(
    marker(),
    document(Mutation, flags=u32, expiration=u32, lock_time=u32, nru=u8),
    document(Deletion, delete_time=st.none() | u32),
    document(Expiration, delete_time=u32),
    st.builds(StreamEnd, reason=u32, **stream),
    st.builds(DcpNoop, **ids),
    st.builds(SetVbucketState, vbucket=u16, state=st.integers(1, 4), **ids),
    st.builds(
        SystemEvent,
        by_seqno=u64,
        event=st.sampled_from([0, 1, 3, 4, 5]),
        version=st.integers(0, 2),
        key=small_bytes,
        value=small_bytes,
        **stream,
    ),
    st.builds(SeqnoAdvanced, by_seqno=u64, **stream),
    st.builds(OsoSnapshot, flags=u32, **stream),
    st.builds(
        Prepare,
        vbucket=u16,
        cas=u64,
        by_seqno=u64,
        rev_seqno=u64,
        flags=u32,
        expiration=u32,
        lock_time=u32,
        nru=u8,
        deleted=st.booleans(),
        durability_level=st.integers(1, 3),
        key=doc_key,
        collection_id=st.none() | u32,
        value=small_bytes,
        datatype=datatype,
        **ids,
    ),
    st.builds(
        Commit,
        vbucket=u16,
        prepared_seqno=u64,
        commit_seqno=u64,
        key=doc_key,
        collection_id=st.none() | u32,
        **ids,
    ),
    st.builds(
        Abort,
        vbucket=u16,
        prepared_seqno=u64,
        abort_seqno=u64,
        key=doc_key,
        collection_id=st.none() | u32,
        **ids,
    ),
    st.builds(
        ClusterMapChangeNotification,
        bucket=text,
        epoch=st.integers(-(2**63), 2**63 - 1),
        revision=st.integers(-(2**63), 2**63 - 1),
        config=small_bytes,
        **ids,
    ),
)

RESPONSES = st.builds(
    Response,
    opcode=u8,
    status=u16,
    opaque=u32,
    extras=small_bytes,
    key=small_bytes,
    value=small_bytes,
    datatype=u8,
    cas=u64,
    magic=st.sampled_from([Magic.RESPONSE, Magic.SERVER_RESPONSE]),
)


def one_frame(data: bytes) -> Frame:
    reader = FrameReader()
    reader.feed(data)
    frame = reader.next_frame()
    assert frame is not None
    assert reader.buffered == 0
    return frame


def uses_collections(message: Message) -> bool:
    return getattr(message, "collection_id", None) is not None


@settings(max_examples=200)
@given(CLIENT_MESSAGES)
def test_client_messages_round_trip(message: Message) -> None:
    assert decode_client_message(one_frame(message.encode())) == message


@settings(max_examples=200)
@given(SERVER_MESSAGES)
def test_server_messages_round_trip(message: Message) -> None:
    frame = one_frame(message.encode())
    assert decode_server_message(frame, collections=uses_collections(message)) == message
    assert frame.size == len(message.encode())


@settings(max_examples=100)
@given(RESPONSES)
def test_responses_round_trip(response: Response) -> None:
    assert decode_client_message(one_frame(response.encode())) == response


@settings(max_examples=100)
@given(st.lists(st.tuples(u64, u64), max_size=10))
def test_failover_log_round_trips(entries: list[tuple[int, int]]) -> None:
    assert decode_failover_log(encode_failover_log(entries)) == entries
    assert failover_log_uuids(encode_failover_log(entries)) == tuple(u for u, _ in entries)


@settings(max_examples=100)
@given(u16, u64, u64, u64, st.none() | st.tuples(u64, u64))
def test_observe_seqno_result_round_trips(
    vb: int, uuid: int, p: int, c: int, old: tuple[int, int] | None
) -> None:
    result = ObserveSeqnoResult(
        vbucket=vb,
        vbucket_uuid=uuid,
        persisted_seqno=p,
        current_seqno=c,
        old_vbucket_uuid=old and old[0],
        last_seqno=old and old[1],
    )
    assert ObserveSeqnoResult.decode(result.encode()) == result


@settings(max_examples=200)
@given(u32)
def test_leb128_round_trips_in_at_most_five_bytes(n: int) -> None:
    wire = encode_leb128(n)
    assert len(wire) <= 5
    assert decode_leb128(wire + b"rest") == (n, len(wire))


xattr_key = st.binary(min_size=1, max_size=10).filter(lambda b: b"\0" not in b)
xattr_value = st.binary(max_size=10).filter(lambda b: b"\0" not in b)


@settings(max_examples=100)
@given(st.lists(st.tuples(xattr_key, xattr_value), max_size=5), small_bytes)
def test_xattrs_round_trip(pairs: list[tuple[bytes, bytes]], body: bytes) -> None:
    assert split_xattrs(encode_xattrs(pairs, body)) == (pairs, body)


hex_u32 = st.integers(0, 0xFFFFFFFF)


@settings(max_examples=100)
@given(
    st.builds(
        StreamRequestValue,
        uid=st.none() | u64,
        sid=st.none() | st.integers(1, 0xFFFF),
        collections=st.none() | st.lists(hex_u32, max_size=4).map(tuple),
        purge_seqno=st.none() | u64,
    )
    | st.builds(StreamRequestValue, uid=st.just(0), scope=hex_u32)
)
def test_stream_request_value_round_trips(value: StreamRequestValue) -> None:
    if value.encode():
        assert StreamRequestValue.parse(value.encode()) == value


def feed_in_pieces(data: bytes, cuts: list[int]) -> tuple[list[Frame], FrameReader]:
    reader = FrameReader(max_frame_size=4096)
    frames: list[Frame] = []
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    for start, end in itertools.pairwise(bounds):
        reader.feed(data[start:end])
        frames.extend(reader.frames())
    return frames, reader


@settings(max_examples=200)
@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=10))
def test_random_bytes_split_anywhere_raise_only_remote_protocol_errors(
    data: bytes, cuts: list[int]
) -> None:
    try:
        frames, _ = feed_in_pieces(data, cuts)
    except RemoteProtocolError:
        return
    for frame in frames:
        check_decoders_raise_only_protocol_errors(frame)


def check_decoders_raise_only_protocol_errors(frame: Frame) -> None:
    for decode in (
        decode_client_message,
        lambda f: decode_server_message(f, collections=False),
        lambda f: decode_server_message(f, collections=True),
    ):
        with contextlib.suppress(RemoteProtocolError):
            decode(frame)


known_opcodes = st.sampled_from([int(op) for op in Opcode] + [0x01, 0xE0])
magics = st.sampled_from(list(Magic))


@st.composite
def random_frames(draw: st.DrawFn) -> bytes:
    magic = draw(magics)
    alt = magic in (Magic.ALT_REQUEST, Magic.ALT_RESPONSE)
    return encode_frame(
        magic,
        draw(known_opcodes),
        datatype=draw(u8),
        vbucket_or_status=draw(u16),
        opaque=draw(u32),
        cas=draw(u64),
        framing_extras=draw(st.sampled_from([b"", b"\x22\x00\x05", b"\x21\x05", b"\x00", b"\xf0"]))
        if alt
        else b"",
        extras=draw(
            st.sampled_from(
                [
                    b"",
                    bytes(1),
                    b"\x02",
                    bytes(4),
                    bytes(8),
                    bytes(13),
                    bytes(16),
                    bytes(18),
                    bytes(20),
                    bytes(21),
                    bytes(31),
                    bytes(48),
                ]
            )
            | st.binary(max_size=50)
        ),
        key=draw(st.binary(max_size=20) | st.just(b"\x80")),
        value=draw(st.binary(max_size=60)),
    )


@settings(max_examples=200)
@given(random_frames())
def test_well_framed_garbage_decodes_or_raises_remote_protocol_error(data: bytes) -> None:
    check_decoders_raise_only_protocol_errors(one_frame(data))


@settings(max_examples=200)
@given(
    st.lists(CLIENT_MESSAGES | SERVER_MESSAGES, min_size=1, max_size=6),
    st.lists(st.integers(0, 2000), max_size=12),
)
def test_valid_stream_split_anywhere_gives_the_same_frames(
    messages: list[Message], cuts: list[int]
) -> None:
    data = b"".join(m.encode() for m in messages)
    whole, _ = feed_in_pieces(data, [])
    split, reader = feed_in_pieces(data, cuts)
    assert split == whole
    assert len(whole) == len(messages)
    assert reader.buffered == 0
