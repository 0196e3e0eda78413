"""``mockdcp.server._pcap``: a struct-based reader checks every packet the writer makes, then
tshark (skipped when not installed) checks that Wireshark's TCP and couchbase dissectors
read mockdcp's own frames back out of the capture.
"""

from __future__ import annotations

import io
import ipaddress
import json
import random
import shutil
import struct
import subprocess
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from mockdcp.protocol import (
    DcpBufferAck,
    DcpNoop,
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    Deletion,
    Magic,
    Mutation,
    Opcode,
    Response,
    SnapshotFlag,
    SnapshotMarker,
    SnapshotMarkerVersion,
    Status,
    StreamEnd,
    StreamEndReason,
    encode_failover_log,
)
from mockdcp.server import _pcap
from mockdcp.server._pcap import LINKTYPE_IPV4, LINKTYPE_RAW, MAX_SEGMENT, SNAPLEN, PcapWriter

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from pathlib import Path

    from mockdcp.protocol import Message

CLIENT = ("127.0.0.1", 50123)
SERVER = ("127.0.0.1", 12000)
T0 = 1_700_000_000.25

FIN, SYN, PSH, ACK = 0x01, 0x02, 0x08, 0x10
#: The window every segment after the SYNs advertises: 0xffff scaled by the SYNs' shift 7.
WINDOW = 0xFFFF << 7


# -- a small pcap reader --------------------------------------------------------------------


class Packet(NamedTuple):
    seconds: int
    micros: int
    ip_version: int
    ip_id: int | None
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    ack: int
    flags: int
    window: int
    options: bytes
    payload: bytes


def internet_sum(data: bytes) -> int:
    """RFC 1071's one's-complement sum of 16-bit words, the slow, obvious way."""
    if len(data) % 2:
        data += b"\0"
    words: tuple[int, ...] = struct.unpack(f">{len(data) // 2}H", data)
    total = sum(words)
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def parse_packet(seconds: int, micros: int, pkt: bytes) -> Packet:
    """One raw IP packet; asserts its lengths and both checksums."""
    version = pkt[0] >> 4
    ip_id: int | None
    if version == 4:
        assert pkt[0] == 0x45  # no IP options
        _, _, total, ip_id, frag, ttl, proto = struct.unpack_from(">BBHHHBB", pkt)
        assert total == len(pkt) <= 0xFFFF
        assert (frag, ttl, proto) == (0x4000, 64, 6)  # DF, TTL 64, TCP
        assert internet_sum(pkt[:20]) == 0xFFFF, "bad IPv4 header checksum"
        src_ip, dst_ip, segment = pkt[12:16], pkt[16:20], pkt[20:]
        pseudo = src_ip + dst_ip + struct.pack(">HH", 6, len(segment))
    else:
        assert version == 6
        ip_id = None
        length, next_header, hops = struct.unpack_from(">HBB", pkt, 4)
        assert (length, next_header, hops) == (len(pkt) - 40, 6, 64)
        src_ip, dst_ip, segment = pkt[8:24], pkt[24:40], pkt[40:]
        pseudo = src_ip + dst_ip + struct.pack(">II", len(segment), 6)
    assert internet_sum(pseudo + segment) == 0xFFFF, "bad TCP checksum"
    sport, dport, seq, ack, offset, flags, window, _, urgent = struct.unpack_from(
        ">HHIIBBHHH", segment
    )
    assert urgent == 0
    header = (offset >> 4) * 4
    return Packet(
        seconds,
        micros,
        version,
        ip_id,
        (str(ipaddress.ip_address(src_ip)), sport),
        (str(ipaddress.ip_address(dst_ip)), dport),
        seq,
        ack,
        flags,
        window,
        segment[20:header],
        segment[header:],
    )


def read_pcap(raw: bytes) -> tuple[tuple[int, ...], list[Packet]]:
    """(global header fields, packets) of a little-endian microsecond pcap."""
    header = struct.unpack_from("<IHHiIII", raw)
    packets = []
    pos = 24
    while pos < len(raw):
        seconds, micros, caplen, length = struct.unpack_from("<IIII", raw, pos)
        pos += 16
        assert caplen == length <= SNAPLEN
        assert micros < 1_000_000
        packets.append(parse_packet(seconds, micros, raw[pos : pos + caplen]))
        pos += caplen
    assert pos == len(raw), "truncated record"
    return header, packets


def data_of(packets: list[Packet], src: tuple[str, int]) -> bytes:
    return b"".join(p.payload for p in packets if p.src == src)


def check_tcp(packets: list[Packet]) -> None:
    """Handshake first, then sequence numbers contiguous per direction and every ACK
    acknowledging all the peer sent before it; payloads within the segment limit."""
    syn, syn_ack, ack = packets[:3]
    assert (syn.flags, syn_ack.flags, ack.flags) == (SYN, SYN | ACK, ACK)
    for p in (syn, syn_ack):
        # MSS 65495, NOP, window scale 7.
        assert p.options == bytes((2, 4, 0xFF, 0xD7, 1, 3, 3, 7))
        assert p.window == 0xFFFF
    assert syn_ack.ack == (syn.seq + 1) & 0xFFFFFFFF
    assert (ack.seq, ack.ack) == (syn_ack.ack, (syn_ack.seq + 1) & 0xFFFFFFFF)
    next_seq = {syn.src: ack.seq, syn.dst: ack.ack}
    for p in packets[3:]:
        assert p.seq == next_seq[p.src]
        assert p.flags & ACK
        assert p.ack == next_seq[p.dst]
        assert p.options == b""
        assert p.window == 0xFFFF
        assert len(p.payload) <= MAX_SEGMENT
        if p.payload:
            assert p.flags == PSH | ACK
        else:
            assert p.flags in (ACK, FIN | ACK)
        step = len(p.payload) + (1 if p.flags & FIN else 0)
        next_seq[p.src] = (p.seq + step) & 0xFFFFFFFF


def capture(ipv6: bool = False) -> tuple[io.BytesIO, PcapWriter]:
    out = io.BytesIO()
    return out, PcapWriter(out, ipv6=ipv6)


# -- unit tests ---------------------------------------------------------------------------


@pytest.mark.parametrize(("ipv6", "linktype"), [(False, LINKTYPE_IPV4), (True, LINKTYPE_RAW)])
def test_global_header_names_the_link_type(ipv6: bool, linktype: int) -> None:
    out, writer = capture(ipv6)
    assert writer.linktype == linktype
    raw = out.getvalue()
    assert raw[:4] == b"\xd4\xc3\xb2\xa1"  # 0xa1b2c3d4 little-endian: microseconds
    assert read_pcap(raw) == ((0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype), [])


def test_a_flow_opens_with_a_three_way_handshake() -> None:
    out, writer = capture()
    writer.flow(CLIENT, SERVER, T0 + 0.123456)
    _, packets = read_pcap(out.getvalue())
    assert len(packets) == 3
    assert [p.src for p in packets] == [CLIENT, SERVER, CLIENT]
    assert [p.dst for p in packets] == [SERVER, CLIENT, SERVER]
    assert {(p.seconds, p.micros) for p in packets} == {(1_700_000_000, 373456)}
    assert [p.ip_id for p in packets] == [0, 1, 2]
    check_tcp(packets)


def test_data_both_ways_is_split_at_the_segment_limit() -> None:
    rng = random.Random(7)
    big = rng.randbytes(3 * MAX_SEGMENT + 12345)  # odd length, > 65535
    sends: list[tuple[str, bytes | bytearray | memoryview]] = [
        ("c", b"\x80\x1f" + bytes(22)),
        ("s", b"x"),
        ("s", big),
        ("c", b""),
        ("c", rng.randbytes(MAX_SEGMENT)),
        ("s", bytearray(b"ab")),
        ("c", memoryview(b"__tail__")[2:-2]),
    ]
    out, writer = capture()
    flow = writer.flow(CLIENT, SERVER, T0)
    for i, (who, data) in enumerate(sends):
        (flow.client_sent if who == "c" else flow.server_sent)(data, T0 + i)
    _, packets = read_pcap(out.getvalue())
    check_tcp(packets)
    for who, src in (("c", CLIENT), ("s", SERVER)):
        assert data_of(packets, src) == b"".join(bytes(d) for w, d in sends if w == who)
    # Each call's bytes: ceil(n / MAX_SEGMENT) segments; empty calls write nothing.
    sizes = [len(p.payload) for p in packets[3:]]
    assert sizes == [24, 1, MAX_SEGMENT, MAX_SEGMENT, MAX_SEGMENT, 12345, MAX_SEGMENT, 2, 4]
    assert max(20 + 20 + n for n in sizes) == 65040
    assert [p.seconds - int(T0) for p in packets[3:]] == [0, 1, 2, 2, 2, 2, 4, 5, 6]


def test_empty_data_writes_nothing() -> None:
    out, writer = capture()
    flow = writer.flow(CLIENT, SERVER, T0)
    before = out.getvalue()
    flow.client_sent(b"", T0)
    flow.server_sent(memoryview(b""), T0)
    assert out.getvalue() == before


@pytest.mark.parametrize("by_server", [False, True])
def test_close_writes_the_fin_exchange_once_and_ends_the_flow(by_server: bool) -> None:
    out, writer = capture()
    flow = writer.flow(CLIENT, SERVER, T0)
    flow.client_sent(b"request", T0)
    flow.server_sent(b"response", T0)
    assert not flow.closed
    flow.close(T0 + 1, by_server=by_server)
    assert flow.closed
    _, packets = read_pcap(out.getvalue())
    check_tcp(packets)
    closer, peer = (SERVER, CLIENT) if by_server else (CLIENT, SERVER)
    fin, fin2, last = packets[-3:]
    assert [(p.src, p.flags) for p in packets[-3:]] == [
        (closer, FIN | ACK),
        (peer, FIN | ACK),
        (closer, ACK),
    ]
    assert fin2.ack == (fin.seq + 1) & 0xFFFFFFFF
    assert last.ack == (fin2.seq + 1) & 0xFFFFFFFF
    size = len(out.getvalue())
    flow.close(T0 + 2)  # idempotent
    assert len(out.getvalue()) == size
    with pytest.raises(RuntimeError, match="closed"):
        flow.client_sent(b"late", T0 + 2)
    with pytest.raises(RuntimeError, match="closed"):
        flow.server_sent(b"late", T0 + 2)


def test_receiver_acks_before_the_window_fills() -> None:
    """Megabytes one way with nothing coming back: pure ACKs keep the unacknowledged
    bytes under the advertised window (else Wireshark reports a full window)."""
    out, writer = capture()
    flow = writer.flow(CLIENT, SERVER, T0)
    chunk = bytes(1_000_003)
    for _ in range(12):
        flow.server_sent(chunk, T0)
    _, packets = read_pcap(out.getvalue())
    check_tcp(packets)
    assert data_of(packets, SERVER) == chunk * 12
    pure_acks = [p for p in packets[3:] if p.src == CLIENT]
    assert pure_acks
    assert all(p.flags == ACK and not p.payload for p in pure_acks)
    acked = packets[2].ack
    for p in packets[3:]:
        if p.src == CLIENT:
            acked = p.ack
        else:
            assert (p.seq + len(p.payload) - acked) & 0xFFFFFFFF < WINDOW


def test_several_flows_share_one_file() -> None:
    out, writer = capture()
    other = ("127.0.0.1", 50124)
    a = writer.flow(CLIENT, SERVER, T0)
    b = writer.flow(other, SERVER, T0)
    a.client_sent(b"a1", T0)
    b.client_sent(b"b1", T0)
    a.server_sent(b"A1", T0)
    b.close(T0)
    a.close(T0)
    _, packets = read_pcap(out.getvalue())
    assert [p.ip_id for p in packets] == list(range(len(packets)))
    flow_a = [p for p in packets if CLIENT in (p.src, p.dst)]
    flow_b = [p for p in packets if other in (p.src, p.dst)]
    assert len(flow_a) + len(flow_b) == len(packets)
    check_tcp(flow_a)
    check_tcp(flow_b)
    assert flow_a[0].seq != flow_b[0].seq  # distinct initial sequence numbers
    assert (data_of(flow_a, CLIENT), data_of(flow_a, SERVER)) == (b"a1", b"A1")
    assert data_of(flow_b, other) == b"b1"


def test_sequence_numbers_wrap() -> None:
    out, writer = capture()
    flow = writer.flow(CLIENT, SERVER, T0)
    flow._server.seq = 0xFFFFFFF0  # as after some 3.7 GB
    flow.server_sent(bytes(40), T0)
    flow.close(T0)
    _, packets = read_pcap(out.getvalue())
    data, client_fin, server_fin, last = packets[3:]
    assert (data.seq, len(data.payload)) == (0xFFFFFFF0, 40)
    assert client_fin.ack == server_fin.seq == 0x18  # after the wrap
    assert last.ack == 0x19


@pytest.mark.parametrize(
    ("now", "stamp"),
    [(0.0, (0, 0)), (1.5, (1, 500000)), (2.9999996, (3, 0)), (T0, (1_700_000_000, 250000))],
)
def test_timestamps_are_seconds_and_rounded_microseconds(
    now: float, stamp: tuple[int, int]
) -> None:
    out, writer = capture()
    writer.flow(CLIENT, SERVER, now)
    _, packets = read_pcap(out.getvalue())
    assert (packets[0].seconds, packets[0].micros) == stamp


def test_a_negative_time_is_refused() -> None:
    _, writer = capture()
    with pytest.raises(ValueError, match="timestamp"):
        writer.flow(CLIENT, SERVER, -1.0)


def test_ipv6_flows_go_in_a_raw_link_type_file() -> None:
    out, writer = capture(ipv6=True)
    v6 = writer.flow(("::1", 50000, 0, 0), ("::1", 11210, 0, 0), T0)
    v4 = writer.flow(("::ffff:10.0.0.1", 50001), ("10.0.0.2", 11210), T0)
    v6.client_sent(b"hello", T0)
    v6.server_sent(bytes(range(256)) * 300, T0)
    v4.server_sent(b"four", T0)
    _, packets = read_pcap(out.getvalue())
    six = [p for p in packets if p.ip_version == 6]
    four = [p for p in packets if p.ip_version == 4]
    assert {p.src for p in six} == {("::1", 50000), ("::1", 11210)}
    assert {p.src for p in four} == {("10.0.0.1", 50001), ("10.0.0.2", 11210)}
    check_tcp(six)
    check_tcp(four)
    assert data_of(six, ("::1", 11210)) == bytes(range(256)) * 300
    assert data_of(four, ("10.0.0.2", 11210)) == b"four"


def test_ipv4_mapped_address_in_ipv4_file() -> None:
    out, writer = capture()
    writer.flow(("::ffff:127.0.0.1", 50000), ("127.0.0.1", 11210), T0)
    _, packets = read_pcap(out.getvalue())
    assert packets[0].src == ("127.0.0.1", 50000)


@pytest.mark.parametrize(
    ("client", "server", "message"),
    [
        (("::1", 50000), ("::1", 11210), "IPv4-only"),
        (("::1", 50000), ("127.0.0.1", 11210), "differ in family"),
        (("127.0.0.1", 65536), SERVER, "port"),
        (("localhost", 50000), SERVER, "localhost"),
    ],
)
def test_bad_addresses_are_refused(
    client: tuple[str, int], server: tuple[str, int], message: str
) -> None:
    out, writer = capture()
    with pytest.raises(ValueError, match=message):
        writer.flow(client, server, T0)
    assert len(out.getvalue()) == 24  # nothing but the global header


@pytest.mark.parametrize("length", [0, 1, 2, 3, 2047, 2048, 2049, 65000, 65001])
def test_sum16_matches_rfc1071(length: int) -> None:
    """Both routes (big int below 2 KB, numpy from 2 KB) against the reference sum."""
    rng = random.Random(length)
    for data in (rng.randbytes(length), b"\xff" * length):
        assert _pcap._sum16(data) == internet_sum(data) % 0xFFFF
        assert _pcap._sum16(memoryview(data)) == internet_sum(data) % 0xFFFF


# -- tshark -------------------------------------------------------------------------------

#: _ws.expert.severity values (epan/proto.h PI_WARN, PI_ERROR).
WARNING, ERROR = 0x00600000, 0x00800000


def tshark(path: Path, *args: str) -> str:
    tool = shutil.which("tshark")
    if tool is None:
        pytest.skip("tshark is not installed")
    result = subprocess.run(
        [
            tool,
            "-n",
            "-r",
            str(path),
            "-d",
            f"tcp.port=={SERVER[1]},couchbase",
            # Off by default: checked here to show the writer's checksums are right.
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return result.stdout


def tshark_json(path: Path) -> list[dict[str, Any]]:
    """Every packet's layers, fully dissected (``-T json`` formats every item, so expert
    info that only appears when labels are built is there too)."""
    packets = json.loads(tshark(path, "-T", "json", "--no-duplicate-keys"))
    return [p["_source"]["layers"] for p in packets]


def as_list(value: object) -> list[object]:
    """``--no-duplicate-keys`` turns repeated keys into lists; single ones stay as is."""
    return value if isinstance(value, list) else [value]


def walk(tree: object) -> Iterator[tuple[str, object]]:
    """Every (key, value) below ``tree``, depth first, in document order."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            for item in as_list(value):
                yield key, item
                yield from walk(item)
    elif isinstance(tree, list):
        for item in tree:
            yield from walk(item)


def severity(expert: object) -> int:
    """The ``_ws.expert.severity`` of an ``_ws.expert`` item (0 if it has none)."""
    return int(expert.get("_ws.expert.severity", 0)) if isinstance(expert, dict) else 0


def pdu_fields(pdu: object) -> dict[str, str]:
    """One couchbase PDU's fields, flattened (first occurrence of each name)."""
    fields: dict[str, str] = {}
    for key, value in walk(pdu):
        if key.startswith("couchbase.") and isinstance(value, str):
            fields.setdefault(key, value)
    return fields


def tshark_opaque(opaque: int) -> str:
    """The dissector reads the opaque little-endian ("the client shouldn't apply any
    conversions", packet-couchbase.c); mockdcp writes it big-endian. Same 4 bytes."""
    return f"0x{int.from_bytes(opaque.to_bytes(4, 'big'), 'little'):08x}"


def expect(
    message: Message | Response, fields: Mapping[str, object] | None = None
) -> dict[str, str]:
    """What tshark should show for ``message``: magic, opcode, opaque, plus ``fields``
    (names without the ``couchbase.`` prefix)."""
    if isinstance(message, Response):
        magic, opcode = message.magic, message.opcode
    else:
        magic = Magic.ALT_REQUEST if message.frame_stream_id() is not None else message.MAGIC
        opcode = message.OPCODE
    shown = {
        "couchbase.magic": f"0x{magic:02x}",
        "couchbase.opcode": f"0x{opcode:02x}",
        "couchbase.opaque": tshark_opaque(message.opaque),
    }
    shown.update({f"couchbase.{k}": str(v) for k, v in (fields or {}).items()})
    return shown


def mutation(seqno: int, cid: int, value: bytes = b'{"n":1}') -> Mutation:
    return Mutation(
        opaque=0xAB000003,
        vbucket=3,
        cas=0x1000 + seqno,
        by_seqno=seqno,
        rev_seqno=seqno + 100,
        key=b"doc-%d" % seqno,
        collection_id=cid,
        value=value,
        datatype=1,
        flags=0,
        expiration=0,
        stream_id=None,
    )


def doc_fields(m: Mutation | Deletion) -> dict[str, object]:
    assert m.collection_id is not None
    return {
        "vbucket": m.vbucket,
        "cas": f"0x{m.cas:016x}",
        "extras.by_seqno": m.by_seqno,
        "extras.rev_seqno": m.rev_seqno,
        "key.collection_id": f"0x{m.collection_id:08x}",
        "key.logical_key": m.key.decode(),
    }


def dcp_session() -> list[tuple[str, Sequence[Message | Response], list[dict[str, str]]]]:
    """(who, messages, what tshark should show for them) per send call, in order. The
    server's calls hold one frame split across two calls and a 200 KB batch."""
    open_ = DcpOpen(opaque=1, name=b"pcap-test", flags=DcpOpenFlag.PRODUCER)
    opened = Response(opcode=Opcode.DCP_OPEN, status=Status.SUCCESS, opaque=1)
    request = DcpStreamRequest(
        opaque=0xAB000003,
        vbucket=3,
        flags=0,
        start_seqno=0,
        end_seqno=0xFFFFFFFFFFFFFFFF,
        vbucket_uuid=0,
        snap_start_seqno=0,
        snap_end_seqno=0,
    )
    accepted = Response(
        opcode=Opcode.DCP_STREAM_REQ,
        status=Status.SUCCESS,
        opaque=0xAB000003,
        value=encode_failover_log([(0x1234567890ABCDEF, 0)]),
    )
    marker = SnapshotMarker(
        opaque=0xAB000003,
        vbucket=3,
        start_seqno=0,
        end_seqno=500,
        flags=SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT,
        version=SnapshotMarkerVersion.V2_0,
        max_visible_seqno=500,
        high_completed_seqno=0,
    )
    first = mutation(1, 0)
    # Collection ids of one and two LEB128 bytes: 8 = 08, 300 = ac 02.
    batch: list[Mutation | Deletion] = [
        mutation(n, 8 if n % 2 else 300, b"v" * 700) for n in range(2, 300)
    ]
    gone = Deletion(
        opaque=0xAB000003,
        vbucket=3,
        cas=0x9999,
        by_seqno=300,
        rev_seqno=7,
        key=b"doc-2",
        collection_id=300,
        delete_time=1_700_000_000,
    )
    batch.append(gone)
    noop = DcpNoop(opaque=0x77)
    noop_reply = Response(opcode=Opcode.DCP_NOOP, status=Status.SUCCESS, opaque=0x77)
    ack = DcpBufferAck(opaque=0x78, nbytes=123456)
    end = StreamEnd(opaque=0xAB000003, vbucket=3, reason=StreamEndReason.OK)
    failover = {
        "dcp.failover_log.vbucket_uuid": "0x1234567890abcdef",
        "dcp.failover_log.seqno": 0,
    }
    marker_fields = {
        "vbucket": 3,
        "extras.marker_version": 0,
        "extras.start_seqno": 0,
        "extras.end_seqno": 500,
        "extras.flags": "0x00000006",
        "extras.max_visible_seqno": 500,
        "extras.high_completed_seqno": 0,
    }
    return [
        ("c", [open_], [expect(open_, {"key": "pcap-test"})]),
        ("s", [opened], [expect(opened, {"status": "0x0000"})]),
        ("c", [request], [expect(request, {"vbucket": 3, "extras.start_seqno": 0})]),
        ("s", [accepted], [expect(accepted, {"status": "0x0000", **failover})]),
        ("s", [marker], [expect(marker, marker_fields)]),
        ("s", [first], [expect(first, doc_fields(first))]),
        ("s", batch, [expect(m, doc_fields(m)) for m in batch]),
        ("s", [noop], [expect(noop)]),
        ("c", [noop_reply], [expect(noop_reply, {"status": "0x0000"})]),
        ("c", [ack], [expect(ack, {"extras.bytes_to_ack": 123456})]),
        ("s", [end], [expect(end, {"vbucket": 3})]),
    ]


def write_session(path: Path, ipv6: bool) -> list[tuple[int, dict[str, str]]]:
    """Write ``dcp_session()`` to ``path``; the (source port, expected fields) per frame."""
    client, server = (("::1", CLIENT[1]), ("::1", SERVER[1])) if ipv6 else (CLIENT, SERVER)
    expected: list[tuple[int, dict[str, str]]] = []
    with path.open("wb") as out:
        writer = PcapWriter(out, ipv6=ipv6)
        flow = writer.flow(client, server, T0)
        for i, (who, messages, shown) in enumerate(dcp_session()):
            data = b"".join(m.encode() for m in messages)
            send = flow.client_sent if who == "c" else flow.server_sent
            if len(messages) == 1 and isinstance(messages[0], Mutation):
                send(data[:30], T0 + i)  # header and part of the extras ...
                send(data[30:], T0 + i + 0.5)  # ... then the rest
            else:
                assert len(data) > 65535 or len(messages) == 1
                send(data, T0 + i)
            port = CLIENT[1] if who == "c" else SERVER[1]
            expected += [(port, fields) for fields in shown]
        flow.close(T0 + 100)
    return expected


@pytest.mark.parametrize("ipv6", [False, True], ids=["ipv4", "ipv6"])
def test_tshark_decodes_mockdcp_frames(tmp_path: Path, ipv6: bool) -> None:
    path = tmp_path / "session.pcap"
    expected = write_session(path, ipv6)
    layers = tshark_json(path)

    seen: list[tuple[int, dict[str, str]]] = []
    problems: list[str] = []
    for frame in layers:
        port = int(frame["tcp"]["tcp.srcport"])
        seen += [(port, pdu_fields(pdu)) for pdu in as_list(frame.get("couchbase", []))]
        for key, value in walk(frame):
            if key in ("_ws.malformed", "tcp.analysis.flags"):
                problems.append(f"frame {frame['frame']['frame.number']}: {key}")
            elif key == "_ws.expert" and severity(value) >= WARNING:
                problems.append(f"frame {frame['frame']['frame.number']}: {value}")
        if "ip" in frame:
            assert frame["ip"]["ip.checksum.status"] == "1"  # good
        assert frame["tcp"]["tcp.checksum.status"] == "1"

    # Every frame, in order, from the right side, with the fields that were encoded.
    assert [port for port, _ in seen] == [port for port, _ in expected]
    for (_, got), (_, want) in zip(seen, expected, strict=True):
        assert {k: got.get(k) for k in want} == want

    # tshark decodes collection-prefixed keys as a string field too; a key whose LEB128
    # collection id is 0x00 starts with NUL, and the string field is flagged "Trailing
    # stray characters" (a Warning; tshark 4.0.17 does so for the one mutation in
    # collection 0). Nothing else may be above Note.
    stray = [p for p in problems if "Trailing stray characters" in p]
    assert len(stray) <= 1
    assert [p for p in problems if p not in stray] == []


def test_tshark_sees_no_tcp_problems_in_a_long_flow(tmp_path: Path) -> None:
    """12 MB one way, then both ways: no retransmission, window-full or lost-segment
    analysis, and no bad checksum."""
    path = tmp_path / "long.pcap"
    with path.open("wb") as out:
        flow = PcapWriter(out).flow(CLIENT, SERVER, T0)
        for i in range(12):
            flow.server_sent(bytes(1_000_003), T0 + i)
        for i in range(40):
            flow.client_sent(b"c" * 1001, T0 + 20 + i)
            flow.server_sent(b"s" * 300_001, T0 + 20 + i)
        flow.close(T0 + 100)
    flagged = tshark(
        path,
        "-Y",
        'tcp.analysis.flags or _ws.malformed or _ws.expert.severity >= "Warning"',
    )
    assert flagged == ""
    assert tshark(path, "-T", "fields", "-e", "tcp.checksum.status").split() == ["1"] * (
        len(read_pcap(path.read_bytes())[1])
    )


def test_tshark_reads_the_v2_2_marker_fields_it_knows(tmp_path: Path) -> None:
    """mockdcp's V2.2 marker (extras: version byte 2; value 52 bytes: start, end, flags,
    max visible, high completed, purge seqno, high prepared seqno). tshark 4.0 expects a
    44-byte V2.2 value ("Illegal Value length, should be 44") and flags the frame
    malformed; the fields up to high completed seqno it reads as encoded."""
    marker = SnapshotMarker(
        opaque=5,
        vbucket=9,
        start_seqno=10,
        end_seqno=20,
        flags=SnapshotFlag.MEMORY,
        version=SnapshotMarkerVersion.V2_2,
        max_visible_seqno=19,
        high_completed_seqno=15,
        purge_seqno=3,
        high_prepared_seqno=18,
    )
    path = tmp_path / "marker.pcap"
    with path.open("wb") as out:
        flow = PcapWriter(out).flow(CLIENT, SERVER, T0)
        flow.server_sent(marker.encode(), T0)
        flow.close(T0)
    pdus = [pdu_fields(p) for f in tshark_json(path) for p in as_list(f.get("couchbase", []))]
    assert len(pdus) == 1
    want = expect(
        marker,
        {
            "vbucket": 9,
            "extras.marker_version": 2,
            "extras.start_seqno": 10,
            "extras.end_seqno": 20,
            "extras.flags": "0x00000001",
            "extras.max_visible_seqno": 19,
            "extras.high_completed_seqno": 15,
        },
    )
    assert {k: pdus[0].get(k) for k in want} == want
