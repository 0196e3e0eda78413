from __future__ import annotations

import json

import pytest

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
    FrameReader,
    GetAllVbSeqnos,
    GetErrorMap,
    Hello,
    Message,
    Mutation,
    Opcode,
    OsoSnapshot,
    Prepare,
    Response,
    SaslAuth,
    SelectBucket,
    SeqnoAdvanced,
    SetVbucketState,
    SnapshotMarker,
    SnapshotMarkerVersion,
    Status,
    StreamEnd,
    StreamEndReason,
    StreamRequestValue,
    SystemEvent,
    SystemEventType,
    VBucketState,
    decode_all_vb_seqnos,
    decode_client_message,
    decode_failover_log,
    decode_hello_features,
    decode_id_lookup_extras,
    decode_leb128,
    decode_rollback_value,
    decode_server_message,
    encode_all_vb_seqnos,
    encode_failover_log,
    encode_hello_features,
    encode_id_lookup_extras,
    encode_leb128,
    encode_rollback_value,
    encode_xattrs,
    split_xattrs,
)
from mockdcp.protocol._values import CollectionEventData, parse_system_event_value


def unhex(text: str) -> bytes:
    # "00 x8" means eight 0x00 bytes; "|" separates header rows
    out: list[int] = []
    for token in text.replace("|", " ").split():
        if token.startswith("x"):
            out.extend([out[-1]] * (int(token[1:]) - 1))
        else:
            out.append(int(token, 16))
    return bytes(out)


CAS_MUTATION = 0x17B0E1A2C3D40000
CAS_DELETION = 0x17B0E1A2C3D50000
# the expiration vector leaves its CAS open ("<cas>"); any value will do
CAS_EXPIRATION = 0x17B0E1A2C3D60000
XATTR_VALUE = unhex(
    "00 00 00 14 00 00 00 10 5f 73 79 6e 63 00 7b 22 72 65 76 22 3a 31 7d 00 7b 22 61 22 3a 31 7d"
)

# (id, message, bytes, side): side is "client" (what a producer decodes), "server" (what a
# consumer without COLLECTIONS decodes) or "server+collections".
CASES: list[tuple[str, Message | Response, str, str]] = [
    (
        "wire-1.3-hello",
        Hello(opaque=1, agent=b"mock", features=(0x06, 0x07, 0x08, 0x0B, 0x12)),
        "80 1f 00 04 00 00 00 00 | 00 00 00 0e 00 00 00 01 | 00 x8 | 6d 6f 63 6b"
        " 00 06 00 07 00 08 00 0b 00 12",
        "client",
    ),
    (
        "wire-2-stream-end-with-sid",
        StreamEnd(opaque=0x10, vbucket=3, reason=StreamEndReason.OK, stream_id=5),
        "08 55 03 00 04 00 00 03 | 00 00 00 07 00 00 00 10 | 00 x8 | 22 00 05 00 00 00 00",
        "server",
    ),
    (
        "wire-7-hello-reply",
        Response(
            opcode=Opcode.HELLO,
            status=Status.SUCCESS,
            opaque=1,
            value=encode_hello_features([0x06, 0x07, 0x08, 0x0B, 0x12]),
        ),
        "81 1f 00 00 00 00 00 00 | 00 00 00 0a 00 00 00 01 | 00 x8 | 00 06 00 07 00 08 00 0b 00 12",
        "client",
    ),
    (
        "wire-8.1-dcp-open",
        DcpOpen(opaque=2, name=b"mockdcp:t1", flags=0x25),
        "80 50 00 0a 08 00 00 00 | 00 00 00 12 00 00 00 02 | 00 x8 | 00 00 00 00 00 00 00 25"
        " 6d 6f 63 6b 64 63 70 3a 74 31",
        "client",
    ),
    (
        "wire-8.1-dcp-open-response",
        Response(opcode=Opcode.DCP_OPEN, status=Status.SUCCESS, opaque=2),
        "81 50 00 00 00 00 00 00 | 00 00 00 00 00 00 00 02 | 00 x8",
        "server",
    ),
    (
        "wire-8.2-dcp-control",
        DcpControl(opaque=3, key="enable_noop", value="true"),
        "80 5e 00 0b 00 00 00 00 | 00 00 00 0f 00 00 00 03 | 00 x8"
        " 65 6e 61 62 6c 65 5f 6e 6f 6f 70 74 72 75 65",
        "client",
    ),
    (
        "wire-8.2-dcp-control-ok",
        Response(opcode=Opcode.DCP_CONTROL, status=Status.SUCCESS, opaque=3),
        "81 5e 00 00 00 00 00 00 | 00 00 00 00 00 00 00 03 | 00 x8",
        "server",
    ),
    (
        "wire-8.2-dcp-control-einval",
        Response(opcode=Opcode.DCP_CONTROL, status=Status.EINVAL, opaque=3),
        "81 5e 00 00 00 00 00 04 | 00 00 00 00 00 00 00 03 | 00 x8",
        "server",
    ),
    (
        "wire-8.3-stream-request-from-zero",
        DcpStreamRequest(
            opaque=0x10,
            vbucket=3,
            flags=0,
            start_seqno=0,
            end_seqno=0xFFFFFFFFFFFFFFFF,
            vbucket_uuid=0,
            snap_start_seqno=0,
            snap_end_seqno=0,
        ),
        "80 53 00 00 30 00 00 03 | 00 00 00 30 00 00 00 10 | 00 x8 | 00 x16"
        " ff ff ff ff ff ff ff ff | 00 x24",
        "client",
    ),
    (
        "wire-8.3-stream-request-resume-with-filter",
        DcpStreamRequest(
            opaque=0x11,
            vbucket=3,
            flags=0x80,
            start_seqno=100,
            end_seqno=0xFFFFFFFFFFFFFFFF,
            vbucket_uuid=0x00001234ABCD5678,
            snap_start_seqno=90,
            snap_end_seqno=100,
            value=StreamRequestValue(collections=(8,)).encode(),
        ),
        "80 53 00 00 30 00 00 03 | 00 00 00 45 00 00 00 11 | 00 x8"
        " 00 00 00 80 00 00 00 00 | 00 00 00 00 00 00 00 64 | ff ff ff ff ff ff ff ff"
        " 00 00 12 34 ab cd 56 78 | 00 00 00 00 00 00 00 5a | 00 00 00 00 00 00 00 64"
        " 7b 22 63 6f 6c 6c 65 63 74 69 6f 6e 73 22 3a 5b 22 38 22 5d 7d",
        "client",
    ),
    (
        "wire-8.3-stream-request-success",
        Response(
            opcode=Opcode.DCP_STREAM_REQ,
            status=Status.SUCCESS,
            opaque=0x10,
            value=encode_failover_log([(0x00001234ABCD5678, 50), (0x0000AAAABBBBCCCC, 0)]),
        ),
        "81 53 00 00 00 00 00 00 | 00 00 00 20 00 00 00 10 | 00 x8"
        " 00 00 12 34 ab cd 56 78 | 00 00 00 00 00 00 00 32"
        " 00 00 aa aa bb bb cc cc | 00 00 00 00 00 00 00 00",
        "server",
    ),
    (
        "wire-8.3-stream-request-rollback",
        Response(
            opcode=Opcode.DCP_STREAM_REQ,
            status=Status.ROLLBACK,
            opaque=0x11,
            value=encode_rollback_value(50),
        ),
        "81 53 00 00 00 00 00 23 | 00 00 00 08 00 00 00 11 | 00 x8 | 00 00 00 00 00 00 00 32",
        "server",
    ),
    (
        "wire-8.4-add-stream",
        DcpAddStream(opaque=0x30, vbucket=3, flags=0),
        "80 51 00 00 04 00 00 03 | 00 00 00 04 00 00 00 30 | 00 x8 | 00 00 00 00",
        "client",
    ),
    (
        "wire-8.5-get-failover-log",
        DcpGetFailoverLog(opaque=0x12, vbucket=3),
        "80 54 00 00 00 00 00 03 | 00 00 00 00 00 00 00 12 | 00 x8",
        "client",
    ),
    (
        "wire-8.6-close-stream",
        DcpCloseStream(opaque=0x13, vbucket=3),
        "80 52 00 00 00 00 00 03 | 00 00 00 00 00 00 00 13 | 00 x8",
        "client",
    ),
    (
        "wire-8.6-close-stream-response",
        Response(opcode=Opcode.DCP_CLOSE_STREAM, status=Status.SUCCESS, opaque=0x13),
        "81 52 00 00 00 00 00 00 | 00 00 00 00 00 00 00 13 | 00 x8",
        "server",
    ),
    (
        "wire-8.7-stream-end-closed",
        StreamEnd(opaque=0x10, vbucket=3, reason=StreamEndReason.CLOSED),
        "80 55 00 00 04 00 00 03 | 00 00 00 04 00 00 00 10 | 00 x8 | 00 00 00 01",
        "server",
    ),
    (
        "wire-8.8-snapshot-marker-v1",
        SnapshotMarker(opaque=0x10, vbucket=3, start_seqno=1, end_seqno=5, flags=0x05),
        "80 56 00 00 14 00 00 03 | 00 00 00 14 00 00 00 10 | 00 x8"
        " 00 00 00 00 00 00 00 01 | 00 00 00 00 00 00 00 05 | 00 00 00 05",
        "server",
    ),
    (
        "wire-8.9-mutation-with-collections",
        Mutation(
            opaque=0x10,
            vbucket=3,
            cas=CAS_MUTATION,
            by_seqno=5,
            rev_seqno=1,
            flags=0x02000000,
            expiration=0,
            key=b"doc1",
            collection_id=0,
            value=b'{"a":1}',
            datatype=0x01,
        ),
        "80 57 00 05 1f 01 00 03 | 00 00 00 2b 00 00 00 10 | 17 b0 e1 a2 c3 d4 00 00"
        " 00 00 00 00 00 00 00 05 | 00 00 00 00 00 00 00 01 | 02 00 00 00 00 00 00 00"
        " 00 00 00 00 00 00 00 00 | 64 6f 63 31 7b 22 61 22 | 3a 31 7d",
        "server+collections",
    ),
    (
        "wire-8.9-mutation-without-collections",
        Mutation(
            opaque=0x10,
            vbucket=3,
            cas=CAS_MUTATION,
            by_seqno=5,
            rev_seqno=1,
            flags=0x02000000,
            expiration=0,
            key=b"doc1",
            value=b'{"a":1}',
            datatype=0x01,
        ),
        "80 57 00 04 1f 01 00 03 | 00 00 00 2a 00 00 00 10 | 17 b0 e1 a2 c3 d4 00 00"
        " 00 00 00 00 00 00 00 05 | 00 00 00 00 00 00 00 01 | 02 00 00 00 00 00 00 00"
        " 00 00 00 00 00 00 00 | 64 6f 63 31 7b 22 61 22 | 3a 31 7d",
        "server",
    ),
    (
        "wire-8.9-mutation-with-xattrs",
        Mutation(
            opaque=0x10,
            vbucket=3,
            cas=CAS_MUTATION,
            by_seqno=5,
            rev_seqno=1,
            flags=0x02000000,
            expiration=0,
            key=b"doc1",
            collection_id=0,
            value=XATTR_VALUE,
            datatype=0x05,
        ),
        "80 57 00 05 1f 05 00 03 | 00 00 00 43 00 00 00 10 | 17 b0 e1 a2 c3 d4 00 00"
        " 00 00 00 00 00 00 00 05 | 00 00 00 00 00 00 00 01 | 02 00 00 00 00 00 00 00"
        " 00 00 00 00 00 00 00 00 | 64 6f 63 31"
        " 00 00 00 14 00 00 00 10 5f 73 79 6e 63 00 7b 22 72 65 76 22 3a 31 7d 00"
        " 7b 22 61 22 3a 31 7d",
        "server+collections",
    ),
    (
        "wire-8.9-mutation-with-sid",
        Mutation(
            opaque=0x10,
            vbucket=3,
            cas=CAS_MUTATION,
            by_seqno=5,
            rev_seqno=1,
            flags=0x02000000,
            expiration=0,
            key=b"doc1",
            collection_id=0,
            value=b'{"a":1}',
            datatype=0x01,
            stream_id=5,
        ),
        "08 57 03 05 1f 01 00 03 | 00 00 00 2e 00 00 00 10 | 17 b0 e1 a2 c3 d4 00 00"
        " 22 00 05"
        " 00 00 00 00 00 00 00 05 | 00 00 00 00 00 00 00 01 | 02 00 00 00 00 00 00 00"
        " 00 00 00 00 00 00 00 00 | 64 6f 63 31 7b 22 61 22 | 3a 31 7d",
        "server+collections",
    ),
    (
        "wire-8.10-deletion-v1",
        Deletion(
            opaque=0x10,
            vbucket=3,
            cas=CAS_DELETION,
            by_seqno=6,
            rev_seqno=2,
            key=b"doc1",
            collection_id=0,
        ),
        "80 58 00 05 12 00 00 03 | 00 00 00 17 00 00 00 10 | 17 b0 e1 a2 c3 d5 00 00"
        " 00 00 00 00 00 00 00 06 | 00 00 00 00 00 00 00 02 | 00 00 | 00 64 6f 63 31",
        "server+collections",
    ),
    (
        "wire-8.10-deletion-v2",
        Deletion(
            opaque=0x10,
            vbucket=3,
            cas=CAS_DELETION,
            by_seqno=6,
            rev_seqno=2,
            delete_time=0x66A1B2C3,
            key=b"doc1",
            collection_id=0,
        ),
        "80 58 00 05 15 00 00 03 | 00 00 00 1a 00 00 00 10 | 17 b0 e1 a2 c3 d5 00 00"
        " 00 00 00 00 00 00 00 06 | 00 00 00 00 00 00 00 02 | 66 a1 b2 c3 | 00 | 00 64 6f 63 31",
        "server+collections",
    ),
    (
        "wire-8.11-expiration",
        Expiration(
            opaque=0x10,
            vbucket=3,
            cas=CAS_EXPIRATION,
            by_seqno=7,
            rev_seqno=3,
            delete_time=0x66A1B2C4,
            key=b"doc1",
            collection_id=0,
        ),
        "80 59 00 05 14 00 00 03 | 00 00 00 19 00 00 00 10 | 17 b0 e1 a2 c3 d6 00 00"
        " 00 00 00 00 00 00 00 07 | 00 00 00 00 00 00 00 03 | 66 a1 b2 c4 | 00 64 6f 63 31",
        "server+collections",
    ),
    (
        "wire-8.12-set-vbucket-state-dead",
        SetVbucketState(opaque=0x10, vbucket=3, state=VBucketState.DEAD),
        "80 5b 00 00 01 00 00 03 | 00 00 00 01 00 00 00 10 | 00 x8 | 04",
        "server",
    ),
    (
        "wire-8.13-dcp-noop",
        DcpNoop(opaque=10000001),
        "80 5c 00 00 00 00 00 00 | 00 00 00 00 00 98 96 81 | 00 x8",
        "server",
    ),
    (
        "wire-8.13-dcp-noop-response",
        Response(opcode=Opcode.DCP_NOOP, status=Status.SUCCESS, opaque=10000001),
        "81 5c 00 00 00 00 00 00 | 00 00 00 00 00 98 96 81 | 00 x8",
        "client",
    ),
    (
        "wire-8.14-buffer-ack",
        DcpBufferAck(opaque=0, nbytes=4096),
        "80 5d 00 00 04 00 00 00 | 00 00 00 04 00 00 00 00 | 00 x8 | 00 00 10 00",
        "client",
    ),
    (
        "wire-8.15-system-event-begin-collection",
        SystemEvent(
            opaque=0x10,
            vbucket=3,
            by_seqno=8,
            event=SystemEventType.BEGIN_COLLECTION,
            version=0,
            key=b"c1",
            value=CollectionEventData(manifest_uid=2, scope_id=0, collection_id=8).encode(),
        ),
        "80 5f 00 02 0d 00 00 03 | 00 00 00 1f 00 00 00 10 | 00 x8"
        " 00 00 00 00 00 00 00 08 | 00 00 00 00 00 | 63 31"
        " 00 00 00 00 00 00 00 02 | 00 00 00 00 00 00 00 08",
        "server+collections",
    ),
    (
        "wire-8.16-commit",
        Commit(
            opaque=0x10, vbucket=3, prepared_seqno=9, commit_seqno=10, key=b"doc1", collection_id=0
        ),
        "80 62 00 05 10 00 00 03 | 00 00 00 15 00 00 00 10 | 00 x8"
        " 00 00 00 00 00 00 00 09 | 00 00 00 00 00 00 00 0a | 00 64 6f 63 31",
        "server+collections",
    ),
    (
        "wire-8.17-seqno-advanced",
        SeqnoAdvanced(opaque=0x10, vbucket=3, by_seqno=12),
        "80 64 00 00 08 00 00 03 | 00 00 00 08 00 00 00 10 | 00 x8 | 00 00 00 00 00 00 00 0c",
        "server",
    ),
    (
        "wire-8.18-oso-start",
        OsoSnapshot(opaque=0x10, vbucket=3, flags=1),
        "80 65 00 00 04 00 00 03 | 00 00 00 04 00 00 00 10 | 00 x8 | 00 00 00 01",
        "server",
    ),
    (
        "wire-8.18-oso-end",
        OsoSnapshot(opaque=0x10, vbucket=3, flags=2),
        "80 65 00 00 04 00 00 03 | 00 00 00 04 00 00 00 10 | 00 x8 | 00 00 00 02",
        "server",
    ),
    (
        "wire-8.19-get-all-vb-seqnos-active",
        GetAllVbSeqnos(opaque=0x20, state=1),
        "80 48 00 00 04 00 00 00 | 00 00 00 04 00 00 00 20 | 00 x8 | 00 00 00 01",
        "client",
    ),
    (
        "wire-8.19-get-all-vb-seqnos-reply",
        Response(
            opcode=Opcode.GET_ALL_VB_SEQNOS,
            status=Status.SUCCESS,
            opaque=0x20,
            value=encode_all_vb_seqnos([(0, 5), (3, 12)]),
        ),
        "81 48 00 00 00 00 00 00 | 00 00 00 14 00 00 00 20 | 00 x8"
        " 00 00 00 00 00 00 00 00 00 05 00 03 00 00 00 00 00 00 00 0c",
        "server",
    ),
    (
        "wire-8.19-version-reply",
        Response(opcode=Opcode.VERSION, status=Status.SUCCESS, opaque=4, value=b"7.6.2"),
        "81 0b 00 00 00 00 00 00 | 00 00 00 05 00 00 00 04 | 00 x8 | 37 2e 36 2e 32",
        "server",
    ),
    (
        "wire-8.19-sasl-auth-plain",
        SaslAuth(opaque=6, mechanism="PLAIN", payload=b"\0user\0pass"),
        "80 21 00 05 00 00 00 00 | 00 00 00 0f 00 00 00 06 | 00 x8"
        " 50 4c 41 49 4e 00 75 73 65 72 00 70 61 73 73",
        "client",
    ),
    (
        "wire-8.19-select-bucket",
        SelectBucket(opaque=7, bucket="default"),
        "80 89 00 07 00 00 00 00 | 00 00 00 07 00 00 00 07 | 00 x8 | 64 65 66 61 75 6c 74",
        "client",
    ),
    (
        "wire-8.19-get-error-map-v2",
        GetErrorMap(opaque=9, version=2),
        "80 fe 00 00 00 00 00 00 | 00 00 00 02 00 00 00 09 | 00 x8 | 00 02",
        "client",
    ),
    (
        "wire-8.19-get-collection-id-reply",
        Response(
            opcode=Opcode.GET_COLLECTION_ID,
            status=Status.SUCCESS,
            opaque=0x0A,
            extras=encode_id_lookup_extras(0, 0),
        ),
        "81 bb 00 00 0c 00 00 00 | 00 00 00 0c 00 00 00 0a | 00 x8 | 00 x12",
        "server",
    ),
    (
        "wire-8.19-not-my-vbucket-empty",
        Response(opcode=Opcode.DCP_STREAM_REQ, status=Status.NOT_MY_VBUCKET, opaque=0x11),
        "81 53 00 00 00 00 00 07 | 00 00 00 00 00 00 00 11 | 00 x8",
        "server",
    ),
    (
        # kv_engine docs/dcp/documentation/commands/snapshot-marker.md V1: the diagram draws
        # total body (bytes 8-11) as 0; the field breakdown says 0x14, which is what 20
        # bytes of extras need. Flags 0x01 is MEMORY, not "disk".
        "snapshot-marker-page-v1",
        SnapshotMarker(opaque=0xDEADBEEF, vbucket=0, start_seqno=0, end_seqno=8, flags=0x01),
        "80 56 00 00 14 00 00 00 | 00 00 00 14 de ad be ef | 00 x8"
        " 00 00 00 00 00 00 00 00 | 00 00 00 00 00 00 00 08 | 00 00 00 01",
        "server",
    ),
    (
        # snapshot-marker.md V2.0: the diagram shows extras 0x14, body 0 and little-endian
        # fields; the breakdown (extras 1, body 0x25, version 0 at 24, big-endian fields) is
        # right.
        "snapshot-marker-page-v2.0",
        SnapshotMarker(
            opaque=0xDEADBEEF,
            vbucket=0,
            start_seqno=1,
            end_seqno=8,
            flags=0x02,
            version=SnapshotMarkerVersion.V2_0,
            max_visible_seqno=8,
            high_completed_seqno=7,
        ),
        "80 56 00 00 01 00 00 00 | 00 00 00 25 de ad be ef | 00 x8 | 00"
        " 00 00 00 00 00 00 00 01 | 00 00 00 00 00 00 00 08 | 00 00 00 02"
        " 00 00 00 00 00 00 00 08 | 00 00 00 00 00 00 00 07",
        "server",
    ),
    (
        # kv_engine docs/dcp/documentation/commands/system_event.md begin collection v1:
        # bytes 57-60 are labelled Collection-ID and 61-64 Scope-ID (drawn as 8 then 0),
        # against the page's own value layout (manifest uid, scope id, collection id, max
        # ttl): scope id 0 goes first, collection id 8 second.
        "system-event-page-begin-collection-v1",
        SystemEvent(
            opaque=0x1210,
            vbucket=0x0210,
            by_seqno=4,
            event=SystemEventType.BEGIN_COLLECTION,
            version=1,
            key=b"mycollection",
            value=CollectionEventData(
                manifest_uid=2, scope_id=0, collection_id=8, max_ttl=72000
            ).encode(),
        ),
        "80 5f 00 0c 0d 00 02 10 | 00 00 00 2d 00 00 12 10 | 00 x8"
        " 00 00 00 00 00 00 00 04 | 00 00 00 00 | 01"
        " 6d 79 63 6f 6c 6c 65 63 74 69 6f 6e"
        " 00 00 00 00 00 00 00 02 | 00 00 00 00 | 00 00 00 08 | 00 01 19 40",
        "server+collections",
    ),
    (
        # kv_engine docs/dcp/documentation/commands/expiration.md: the example says extras
        # length 0x12 and total body 0x17, but its extras are the 20 bytes at offsets
        # 24-43; consistent form: extras 0x14, body 0x19.
        "expiration-page",
        Expiration(
            opaque=0x1210,
            vbucket=0x0210,
            cas=0,
            by_seqno=5,
            rev_seqno=1,
            delete_time=0,
            key=b"hello",
        ),
        "80 59 00 05 14 00 02 10 | 00 00 00 19 00 00 12 10 | 00 x8"
        " 00 00 00 00 00 00 00 05 | 00 00 00 00 00 00 00 01 | 00 00 00 00 | 68 65 6c 6c 6f",
        "server",
    ),
    (
        # kv_engine docs/dcp/documentation/commands/prepare.md: the diagram draws the opcode
        # as 0x57 (a DCP_MUTATION); the breakdown says 0x60. Durability 1 is Majority.
        "prepare-page",
        Prepare(
            opaque=0x1210,
            vbucket=0x0210,
            by_seqno=4,
            rev_seqno=1,
            durability_level=1,
            key=b"hello",
            value=b"world",
        ),
        "80 60 00 05 1f 00 02 10 | 00 00 00 29 00 00 12 10 | 00 x8"
        " 00 00 00 00 00 00 00 04 | 00 00 00 00 00 00 00 01 | 00 00 00 00 | 00 00 00 00"
        " 00 00 00 00 | 00 00 01 | 68 65 6c 6c 6f | 77 6f 72 6c 64",
        "server",
    ),
    (
        # kv_engine docs/dcp/documentation/commands/commit.md: prepare at 4 committed at 5.
        "commit-page",
        Commit(opaque=0x1210, vbucket=0x0210, prepared_seqno=4, commit_seqno=5, key=b"hello"),
        "80 62 00 05 10 00 02 10 | 00 00 00 15 00 00 12 10 | 00 x8"
        " 00 00 00 00 00 00 00 04 | 00 00 00 00 00 00 00 05 | 68 65 6c 6c 6f",
        "server",
    ),
    (
        # kv_engine docs/dcp/documentation/commands/abort.md: prepare at 4 aborted at 5.
        "abort-page",
        Abort(opaque=0x1210, vbucket=0x0210, prepared_seqno=4, abort_seqno=5, key=b"hello"),
        "80 63 00 05 10 00 02 10 | 00 00 00 15 00 00 12 10 | 00 x8"
        " 00 00 00 00 00 00 00 04 | 00 00 00 00 00 00 00 05 | 68 65 6c 6c 6f",
        "server",
    ),
    (
        # kv_engine docs/dcp/documentation/commands/seqno-acknowledged.md: prepared seqno 4.
        "seqno-acknowledged-page",
        DcpSeqnoAcknowledged(opaque=0x1210, vbucket=0x0210, prepared_seqno=4),
        "80 61 00 00 08 00 02 10 | 00 00 00 08 00 00 12 10 | 00 x8 | 00 00 00 00 00 00 00 04",
        "client",
    ),
    (
        # snapshot-marker.md flag table: a history disk snapshot is Disk|Checkpoint|History|
        # MayDuplicateKeys (0x02|0x04|0x10|0x20 = 0x36), as kv_engine's active_stream.cc
        # marks the snapshot a history backfill makes.
        "snapshot-marker-v1-history-disk",
        SnapshotMarker(opaque=0x10, vbucket=3, start_seqno=4, end_seqno=9, flags=0x36),
        "80 56 00 00 14 00 00 03 | 00 00 00 14 00 00 00 10 | 00 x8"
        " 00 00 00 00 00 00 00 04 | 00 00 00 00 00 00 00 09 | 00 00 00 36",
        "server",
    ),
    (
        # A memory checkpoint of a history-retaining bucket: Memory|Checkpoint|History, V2.0
        # with a max visible seqno below the end (a prepare at the tail) and, being a
        # memory snapshot, a high completed seqno of 0.
        "snapshot-marker-v2.0-history-memory",
        SnapshotMarker(
            opaque=0x10,
            vbucket=3,
            start_seqno=10,
            end_seqno=12,
            flags=0x15,
            version=SnapshotMarkerVersion.V2_0,
            max_visible_seqno=11,
            high_completed_seqno=0,
        ),
        "80 56 00 00 01 00 00 03 | 00 00 00 25 00 00 00 10 | 00 x8 | 00"
        " 00 00 00 00 00 00 00 0a | 00 00 00 00 00 00 00 0c | 00 00 00 15"
        " 00 00 00 00 00 00 00 0b | 00 x8",
        "server",
    ),
    (
        # V2.2 (kv_engine include/memcached/protocol_binary.h DcpSnapshotMarkerV2_2Value)
        # carrying History|MayDuplicateKeys on a disk snapshot: start 1, end 8, mvs 8,
        # hcs 7, purge 3, hps 7.
        "snapshot-marker-v2.2-history-disk",
        SnapshotMarker(
            opaque=0x10,
            vbucket=3,
            start_seqno=1,
            end_seqno=8,
            flags=0x36,
            version=SnapshotMarkerVersion.V2_2,
            max_visible_seqno=8,
            high_completed_seqno=7,
            purge_seqno=3,
            high_prepared_seqno=7,
        ),
        "80 56 00 00 01 00 00 03 | 00 00 00 35 00 00 00 10 | 00 x8 | 02"
        " 00 00 00 00 00 00 00 01 | 00 00 00 00 00 00 00 08 | 00 00 00 36"
        " 00 00 00 00 00 00 00 08 | 00 00 00 00 00 00 00 07 | 00 00 00 00 00 00 00 03"
        " 00 00 00 00 00 00 00 07",
        "server",
    ),
]


def decode_as(data: bytes, side: str) -> Message | Response:
    reader = FrameReader()
    reader.feed(data)
    frames = list(reader.frames())
    assert len(frames) == 1
    assert reader.buffered == 0
    if side == "client":
        return decode_client_message(frames[0])
    return decode_server_message(frames[0], collections=side == "server+collections")


@pytest.mark.parametrize(("message", "wire"), [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
def test_encode_golden(message: Message | Response, wire: str) -> None:
    assert message.encode().hex(" ") == unhex(wire).hex(" ")


@pytest.mark.parametrize(
    ("message", "wire", "side"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decode_golden(message: Message | Response, wire: str, side: str) -> None:
    assert decode_as(unhex(wire), side) == message


def test_snapshot_marker_page_v1_as_drawn_with_zero_body_is_not_a_whole_marker() -> None:
    drawn = unhex("80 56 00 00 14 00 00 00 | 00 00 00 00 de ad be ef | 00 x8")
    reader = FrameReader()
    reader.feed(drawn + bytes(20))
    with pytest.raises(RemoteProtocolError, match="exceed body") as info:
        reader.next_frame()
    assert info.value.field == "total_body_length"


def test_expiration_page_expiration_as_drawn_is_rejected() -> None:
    drawn = unhex(
        "80 59 00 05 12 00 02 10 | 00 00 00 17 00 00 12 10 | 00 x8"
        " 00 00 00 00 00 00 00 05 | 00 00 00 00 00 00 00 01 | 00 00 | 00 00 68 65 6c 6c 6f"
    )
    reader = FrameReader()
    reader.feed(drawn)
    frame = reader.next_frame()
    assert frame is not None
    assert reader.buffered == 2  # the drawn bytes run 2 bytes past the announced body
    with pytest.raises(RemoteProtocolError) as info:
        decode_server_message(frame, collections=False)
    assert info.value.field == "extras"


def test_snapshot_marker_v2_2_seed_form_with_44_byte_value_decodes() -> None:
    value = unhex(
        "00 00 00 00 00 00 00 01 | 00 00 00 00 00 00 00 08 | 00 00 00 02"
        " 00 00 00 00 00 00 00 08 | 00 00 00 00 00 00 00 07 | 00 00 00 00 00 00 00 03"
    )
    wire = unhex("80 56 00 00 01 00 00 00 | 00 00 00 2d 00 00 00 01 | 00 x8 | 02") + value
    marker = decode_as(wire, "server")
    assert marker == SnapshotMarker(
        opaque=1,
        vbucket=0,
        start_seqno=1,
        end_seqno=8,
        flags=2,
        version=SnapshotMarkerVersion.V2_2,
        max_visible_seqno=8,
        high_completed_seqno=7,
        purge_seqno=3,
        high_prepared_seqno=0,
    )


def test_snapshot_marker_v2_2_is_encoded_in_the_52_byte_kv_engine_form() -> None:
    marker = SnapshotMarker(
        opaque=1,
        vbucket=0,
        start_seqno=1,
        end_seqno=8,
        flags=2,
        version=SnapshotMarkerVersion.V2_2,
        max_visible_seqno=8,
        high_completed_seqno=7,
        purge_seqno=3,
        high_prepared_seqno=6,
    )
    # kv_engine DcpSnapshotMarkerV2_2Value: start, end, flags, mvs, hcs, purge, hps
    expected = unhex(
        "80 56 00 00 01 00 00 00 | 00 00 00 35 00 00 00 01 | 00 x8 | 02"
        " 00 00 00 00 00 00 00 01 | 00 00 00 00 00 00 00 08 | 00 00 00 02"
        " 00 00 00 00 00 00 00 08 | 00 00 00 00 00 00 00 07 | 00 00 00 00 00 00 00 03"
        " 00 00 00 00 00 00 00 06"
    )
    assert marker.encode() == expected
    assert decode_as(expected, "server") == marker


def test_wire_3_1_xattr_value_splits_into_pair_and_body() -> None:
    assert split_xattrs(XATTR_VALUE) == ([(b"_sync", b'{"rev":1}')], b'{"a":1}')
    assert encode_xattrs([("_sync", '{"rev":1}')], b'{"a":1}') == XATTR_VALUE


LEB128_TABLE = [
    (0, "00"),
    (8, "08"),
    (0x7F, "7f"),
    (0x80, "80 01"),
    (0x3FFF, "ff 7f"),
    (0x4000, "80 80 01"),
    (0xFFFFFFFF, "ff ff ff ff 0f"),
]


@pytest.mark.parametrize(("value", "wire"), LEB128_TABLE)
def test_wire_4_leb128_table(value: int, wire: str) -> None:
    assert encode_leb128(value) == unhex(wire)
    assert decode_leb128(unhex(wire)) == (value, len(unhex(wire)))


def test_wire_8_3_failover_log_and_rollback_values_decode() -> None:
    log = unhex("00 00 12 34 ab cd 56 78 00 00 00 00 00 00 00 32 00 00 aa aa bb bb cc cc 00 x8")
    assert decode_failover_log(log) == [(0x00001234ABCD5678, 50), (0x0000AAAABBBBCCCC, 0)]
    assert decode_rollback_value(unhex("00 00 00 00 00 00 00 32")) == 50


def test_wire_8_19_all_vb_seqnos_and_id_lookup_values_decode() -> None:
    value = unhex("00 00 00 00 00 00 00 00 00 05 00 03 00 00 00 00 00 00 00 0c")
    assert decode_all_vb_seqnos(value) == [(0, 5), (3, 12)]
    assert decode_id_lookup_extras(bytes(12)) == (0, 0)
    assert decode_hello_features(unhex("00 06 00 07 00 08 00 0b 00 12")) == (6, 7, 8, 11, 18)


def test_system_event_page_begin_collection_v1_value_parses() -> None:
    data = parse_system_event_value(0, 1, unhex("00 x7 02 00 00 00 00 00 00 00 08 00 01 19 40"))
    assert data == CollectionEventData(manifest_uid=2, scope_id=0, collection_id=8, max_ttl=72000)


STREAM_REQUEST_VALUE_PAGE_EXAMPLES = [
    ('{\n    "uid" : "b4"\n}', StreamRequestValue(uid=0xB4)),
    ('{\n    "sid" : 71\n}', StreamRequestValue(sid=71)),
    ('{\n    "collections" : ["0", "8a"]\n}', StreamRequestValue(collections=(0, 0x8A))),
    ('{\n    "scope" : "9"\n}', StreamRequestValue(scope=9)),
    ('{\n    "purge_seqno" : "81021"\n}', StreamRequestValue(purge_seqno=81021)),
    (
        '{\n    "collections" : ["a", "1e"],\n    "purge_seqno" : "1000"\n}',
        StreamRequestValue(collections=(0xA, 0x1E), purge_seqno=1000),
    ),
]


@pytest.mark.parametrize(("text", "value"), STREAM_REQUEST_VALUE_PAGE_EXAMPLES)
def test_stream_request_value_page_examples_parse(text: str, value: StreamRequestValue) -> None:
    assert StreamRequestValue.parse(text.encode()) == value
    assert json.loads(value.encode()) == json.loads(text)


def test_cluster_map_change_notification_is_a_server_request() -> None:
    push = ClusterMapChangeNotification(
        opaque=0, bucket="default", epoch=1, revision=7, config=b'{"rev":7}'
    )
    wire = push.encode()
    assert wire[:2] == bytes((0x82, 0x01))
    assert decode_as(wire, "server") == push


def test_prepare_and_abort_round_trip_with_collections() -> None:
    prepare = Prepare(
        opaque=0x10,
        vbucket=3,
        cas=1,
        by_seqno=9,
        rev_seqno=1,
        key=b"doc1",
        collection_id=8,
        value=b"{}",
        datatype=1,
        durability_level=2,
    )
    abort = Abort(
        opaque=0x10, vbucket=3, prepared_seqno=9, abort_seqno=11, key=b"doc1", collection_id=8
    )
    assert decode_as(prepare.encode(), "server+collections") == prepare
    assert decode_as(abort.encode(), "server+collections") == abort
    assert len(prepare.encode()) == 24 + 31 + 5 + 2


def test_prepare_page_as_drawn_with_mutation_opcode_is_not_a_prepare() -> None:
    drawn = unhex(
        "80 57 00 05 1f 00 02 10 | 00 00 00 29 00 00 12 10 | 00 x8"
        " 00 00 00 00 00 00 00 04 | 00 00 00 00 00 00 00 01 | 00 00 00 00 | 00 00 00 00"
        " 00 00 00 00 | 00 00 01 | 68 65 6c 6c 6f | 77 6f 72 6c 64"
    )
    # the same 31 extras bytes read as a DCP_MUTATION (nmeta, nru), not as a prepare
    assert isinstance(decode_as(drawn, "server"), Mutation)


@pytest.mark.parametrize("level", [0, 4])
def test_prepare_with_durability_level_outside_1_to_3_is_rejected(level: int) -> None:
    good = Prepare(opaque=1, vbucket=0, by_seqno=4, rev_seqno=1, key=b"k").encode()
    bad = good[:54] + bytes((level,)) + good[55:]
    with pytest.raises(RemoteProtocolError) as info:
        decode_as(bad, "server")
    assert info.value.field == "extras"


def test_commit_with_a_value_is_rejected() -> None:
    good = Commit(opaque=1, vbucket=0, prepared_seqno=4, commit_seqno=5, key=b"k").encode()
    body = int.from_bytes(good[8:12], "big") + 1
    bad = good[:8] + body.to_bytes(4, "big") + good[12:] + b"v"
    with pytest.raises(RemoteProtocolError):
        decode_as(bad, "server")
