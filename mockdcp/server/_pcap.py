"""A sans-IO writer of classic libpcap files that record KV connections as TCP flows.

``mockdcp serve --pcap FILE`` records the bytes of every KV connection, both directions,
so that Wireshark or tshark can decode them (``-d tcp.port==PORT,couchbase``). This module
knows nothing of sockets or clocks: callers pass the bytes they sent or received and the
time (seconds since the Unix epoch, e.g. ``time.time()``).

File format: the classic libpcap format (https://wiki.wireshark.org/Development/LibpcapFileFormat,
https://www.tcpdump.org/manpages/pcap-savefile.5.html, IETF draft-ietf-opsawg-pcap): a
24-byte global header (magic 0xa1b2c3d4 written little-endian, so timestamps are in
microseconds; version 2.4; snaplen 262144) and, per packet, a 16-byte record header
(seconds, microseconds, captured length, original length) followed by the packet. The link
type (https://www.tcpdump.org/linktypes.html) is ``LINKTYPE_IPV4`` (228): each packet is
a bare IPv4 datagram, no Ethernet header. ``PcapWriter(out, ipv6=True)`` writes
``LINKTYPE_RAW`` (101) instead, whose packets are IPv4 or IPv6 datagrams (the version
nibble tells which), so flows of both families can share the file.

What is synthesized, since the real packets are never seen: the IPv4 header (DF set, TTL 64,
identification counting up per packet) or the IPv6 header (hop limit 64, flow label 0);
the TCP three-way handshake (MSS 65495 and window scale 7 options in the SYN and SYN-ACK,
no options elsewhere), initial sequence numbers (deterministic, one pair per flow), segment
boundaries (a call's bytes are cut into segments of at most ``MAX_SEGMENT`` bytes, so an
IPv4 datagram never exceeds 65535 bytes), acknowledgements (every data segment acks all
the peer has sent; a pure ACK from the peer is written only when one direction has more
than half the advertised window unacknowledged, so Wireshark's TCP analysis never sees a
full window), and the FIN exchange on ``close``. Both the IPv4 header checksum and the TCP
checksum are computed and correct (Wireshark does not check TCP checksums by default, but
``-o tcp.check_checksum:TRUE`` finds nothing to flag). No per-byte Python loop:
a segment's TCP checksum is one numpy sum of its 16-bit words (numpy, a dependency of
mockdcp already, is imported on the first payload of 2 KB or more), or for small payloads
one ``int.from_bytes`` and a modulo.

The writer only calls ``out.write``; it neither flushes nor closes ``out``. Packets appear
in the order of the calls, with the timestamps the caller gives.
"""

from __future__ import annotations

import ipaddress
import itertools
import struct
from typing import TYPE_CHECKING, Final

from mockdcp.util import load_numpy

if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = [
    "LINKTYPE_IPV4",
    "LINKTYPE_RAW",
    "MAX_SEGMENT",
    "SNAPLEN",
    "PcapFlow",
    "PcapWriter",
]

#: Raw IPv4 packets, no link-layer header (tcpdump.org/linktypes.html).
LINKTYPE_IPV4: Final = 228
#: Raw IPv4 or IPv6 packets, no link-layer header (tcpdump.org/linktypes.html).
LINKTYPE_RAW: Final = 101
#: The largest packet the file declares it may hold.
SNAPLEN: Final = 262144
#: TCP payload bytes per segment: 20 (IPv4) + 20 (TCP) + 65000 stays below 65535.
MAX_SEGMENT: Final = 65000

#: magic, version major, minor, thiszone, sigfigs, snaplen, linktype.
_GLOBAL_HEADER: Final = struct.Struct("<IHHiIII")
#: seconds, microseconds, captured length, original length.
_RECORD_HEADER: Final = struct.Struct("<IIII")
#: version/IHL, TOS, total length, id, flags/fragment, TTL, protocol, checksum, src, dst.
_IPV4_HEADER: Final = struct.Struct(">BBHHHBBH4s4s")
#: version/class/flow label, payload length, next header, hop limit, src, dst.
_IPV6_HEADER: Final = struct.Struct(">IHBB16s16s")
#: source port, destination port, seq, ack, data offset, flags, window, checksum, urgent.
_TCP_HEADER: Final = struct.Struct(">HHIIBBHHH")

_IPPROTO_TCP: Final = 6
_FIN: Final = 0x01
_SYN: Final = 0x02
_PSH: Final = 0x08
_ACK: Final = 0x10

#: MSS (kind 2, length 4: 65495, as loopback advertises), NOP, window scale (kind 3,
#: length 3, shift): the SYN's 8 bytes of options.
_WINDOW_SHIFT: Final = 7
_SYN_OPTIONS: Final = struct.pack(">BBHBBBB", 2, 4, 65495, 1, 3, 3, _WINDOW_SHIFT)
#: Every segment after the SYNs advertises 0xffff << 7 bytes (about 8 MiB).
_WINDOW: Final = 0xFFFF << _WINDOW_SHIFT
#: Unacknowledged bytes past which the receiver acks before more data is written.
_ACK_THRESHOLD: Final = _WINDOW // 2

_SEQ_MASK: Final = 0xFFFFFFFF
#: Payloads from this size on are checksummed with numpy.
_NUMPY_MIN: Final = 2048


def _sum16(data: bytes | memoryview) -> int:
    """The one's-complement sum of ``data``'s big-endian 16-bit words, modulo 0xffff.

    An odd length is padded with a zero byte, so ``data`` must start on an even offset
    of the checksummed region. Large inputs are summed with numpy (about 10 us for 64 KB,
    a tenth of the big-int route), small ones as one big int: 2**16 == 1 modulo 0xffff, so
    the int's remainder modulo 0xffff is the sum of its 16-bit words modulo 0xffff.
    """
    if len(data) < _NUMPY_MIN:
        n = int.from_bytes(data, "big")
        if len(data) % 2:
            n <<= 8
        return n % 0xFFFF
    np = load_numpy()
    even = len(data) & ~1
    total = int(np.frombuffer(data, ">u2", even // 2).sum(dtype=np.uint64))
    if even != len(data):
        total += data[-1] << 8
    return total % 0xFFFF


def _checksum(total: int) -> int:
    """The Internet checksum (RFC 1071) from the sum of ``_sum16`` values of the parts.

    None of the regions checksummed here are all zero bytes, so a sum of 0 modulo 0xffff
    is the one's-complement value 0xffff, whose complement is 0.
    """
    total %= 0xFFFF
    return 0xFFFF - total if total else 0


def _parse_address(address: tuple[str, int] | tuple[str, int, int, int]) -> tuple[bytes, int]:
    """(packed IP address, port) of a socket address; IPv4-mapped IPv6 becomes IPv4."""
    host, port = address[0], address[1]
    ip = ipaddress.ip_address(host)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if not 0 <= port <= 0xFFFF:
        raise ValueError(f"port {port} of {host!r} is not in 0..65535")
    return ip.packed, port


def _timestamp(now: float) -> tuple[int, int]:
    """(seconds, microseconds) of a Unix time."""
    seconds, micros = divmod(round(now * 1_000_000), 1_000_000)
    if not 0 <= seconds <= 0xFFFFFFFF:
        raise ValueError(f"time {now!r} does not fit a pcap timestamp")
    return seconds, micros


class PcapWriter:
    """Writes a pcap file to ``out``: the global header now, then the packets of its flows.

    ``ipv6=False`` (the default) writes ``LINKTYPE_IPV4``; ``flow`` then accepts IPv4
    addresses (and IPv4-mapped IPv6 ones, ``::ffff:a.b.c.d``) and raises ``ValueError`` for
    any other IPv6 address. ``ipv6=True`` writes ``LINKTYPE_RAW``, which takes both.
    """

    __slots__ = ("_flows", "_ip_id", "_out", "linktype")

    def __init__(self, out: BinaryIO, *, ipv6: bool = False) -> None:
        self._out = out
        self.linktype: Final = LINKTYPE_RAW if ipv6 else LINKTYPE_IPV4
        self._ip_id = 0
        self._flows = itertools.count()
        out.write(_GLOBAL_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, self.linktype))

    def flow(
        self,
        client: tuple[str, int] | tuple[str, int, int, int],
        server: tuple[str, int] | tuple[str, int, int, int],
        now: float,
    ) -> PcapFlow:
        """Start a TCP flow from ``client`` to ``server`` (``(host, port)`` as ``getpeername``
        and ``getsockname`` give them) and write its SYN, SYN-ACK, ACK at time ``now``.

        Raises ``ValueError`` for a malformed address, a bad port, mixed address families,
        or an IPv6 address in an ``LINKTYPE_IPV4`` file.
        """
        client_ip, client_port = _parse_address(client)
        server_ip, server_port = _parse_address(server)
        if len(client_ip) != len(server_ip):
            raise ValueError(f"client {client[0]!r} and server {server[0]!r} differ in family")
        if len(client_ip) == 16 and self.linktype == LINKTYPE_IPV4:
            raise ValueError(
                f"IPv6 flow {client[0]!r} -> {server[0]!r} in an IPv4-only pcap"
                " (use PcapWriter(..., ipv6=True))"
            )
        index = next(self._flows)
        # Deterministic and distinct per flow; they wrap modulo 2**32 as TCP's do.
        client_isn = (0x10000000 + index * 0x01000193) & _SEQ_MASK
        server_isn = (0x20000000 + index * 0x01000193) & _SEQ_MASK
        flow = PcapFlow(
            self,
            _Side(client_ip, client_port, client_isn),
            _Side(server_ip, server_port, server_isn),
        )
        flow._handshake(now)
        return flow

    def _packet(
        self,
        src: _Side,
        dst: _Side,
        flags: int,
        payload: bytes | memoryview,
        now: float,
        options: bytes = b"",
    ) -> None:
        """Write one TCP segment from ``src`` to ``dst`` (seq ``src.seq``, ack ``dst.seq``)."""
        ack = dst.seq if flags & _ACK else 0
        tcp_length = _TCP_HEADER.size + len(options) + len(payload)
        offset = (_TCP_HEADER.size + len(options)) // 4 << 4
        # Window 0xffff: unscaled in the SYNs, 0xffff << _WINDOW_SHIFT after them.
        tcp = _TCP_HEADER.pack(src.port, dst.port, src.seq, ack, offset, flags, 0xFFFF, 0, 0)
        tcp += options
        if len(src.ip) == 4:
            pseudo = src.ip + dst.ip + struct.pack(">HH", _IPPROTO_TCP, tcp_length)
        else:
            # RFC 8200 §8.1: a 32-bit upper-layer length, then 3 zero bytes and next header.
            pseudo = src.ip + dst.ip + struct.pack(">II", tcp_length, _IPPROTO_TCP)
        checksum = _checksum(_sum16(pseudo) + _sum16(tcp) + _sum16(payload))
        tcp = tcp[:16] + checksum.to_bytes(2, "big") + tcp[18:]
        if len(src.ip) == 4:
            total = _IPV4_HEADER.size + tcp_length
            ip_id = self._ip_id
            self._ip_id = (ip_id + 1) & 0xFFFF
            fields = (0x45, 0, total, ip_id, 0x4000, 64, _IPPROTO_TCP)
            ip_sum = _checksum(_sum16(_IPV4_HEADER.pack(*fields, 0, src.ip, dst.ip)))
            ip = _IPV4_HEADER.pack(*fields, ip_sum, src.ip, dst.ip)
        else:
            total = _IPV6_HEADER.size + tcp_length
            ip = _IPV6_HEADER.pack(0x60000000, tcp_length, _IPPROTO_TCP, 64, src.ip, dst.ip)
        seconds, micros = _timestamp(now)
        record = _RECORD_HEADER.pack(seconds, micros, total, total)
        self._out.write(b"".join((record, ip, tcp, payload)))


class _Side:
    """One endpoint of a flow: its address and the next sequence number it sends."""

    __slots__ = ("ip", "port", "seq", "unacked")

    def __init__(self, ip: bytes, port: int, seq: int) -> None:
        self.ip = ip
        self.port = port
        #: The sequence number of the next byte (or SYN/FIN) this side sends.
        self.seq = seq
        #: Bytes this side has sent that the peer has not acknowledged yet.
        self.unacked = 0

    def advance(self, n: int) -> None:
        self.seq = (self.seq + n) & _SEQ_MASK
        self.unacked += n


class PcapFlow:
    """One TCP connection of a ``PcapWriter``; made by ``PcapWriter.flow``.

    ``client_sent`` and ``server_sent`` record bytes each way; ``close`` ends the flow.
    After ``close``, ``close`` again does nothing and ``client_sent``/``server_sent``
    raise ``RuntimeError`` (bytes after a FIN would be a caller bug, not traffic).
    """

    __slots__ = ("_client", "_closed", "_server", "_writer")

    def __init__(self, writer: PcapWriter, client: _Side, server: _Side) -> None:
        self._writer = writer
        self._client = client
        self._server = server
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether ``close`` has been called."""
        return self._closed

    def _handshake(self, now: float) -> None:
        client, server, packet = self._client, self._server, self._writer._packet
        packet(client, server, _SYN, b"", now, _SYN_OPTIONS)
        client.seq = (client.seq + 1) & _SEQ_MASK
        packet(server, client, _SYN | _ACK, b"", now, _SYN_OPTIONS)
        server.seq = (server.seq + 1) & _SEQ_MASK
        packet(client, server, _ACK, b"", now)

    def client_sent(self, data: bytes | bytearray | memoryview, now: float) -> None:
        """Record ``data`` sent by the client at ``now``; nothing for empty data."""
        self._send(self._client, self._server, data, now)

    def server_sent(self, data: bytes | bytearray | memoryview, now: float) -> None:
        """Record ``data`` sent by the server at ``now``; nothing for empty data."""
        self._send(self._server, self._client, data, now)

    def _send(
        self, src: _Side, dst: _Side, data: bytes | bytearray | memoryview, now: float
    ) -> None:
        if self._closed:
            raise RuntimeError("PcapFlow is closed")
        view = memoryview(data).cast("B")
        packet = self._writer._packet
        for start in range(0, len(view), MAX_SEGMENT):
            segment = view[start : start + MAX_SEGMENT]
            if src.unacked + len(segment) > _ACK_THRESHOLD:
                packet(dst, src, _ACK, b"", now)
                src.unacked = 0
            packet(src, dst, _PSH | _ACK, segment, now)
            src.advance(len(segment))
            dst.unacked = 0

    def close(self, now: float, *, by_server: bool = False) -> None:
        """Write the FIN exchange at ``now``: the closer's FIN-ACK (the client's unless
        ``by_server``), the peer's FIN-ACK, the closer's ACK. Idempotent."""
        if self._closed:
            return
        self._closed = True
        closer, peer = (self._server, self._client) if by_server else (self._client, self._server)
        packet = self._writer._packet
        packet(closer, peer, _FIN | _ACK, b"", now)
        closer.advance(1)
        packet(peer, closer, _FIN | _ACK, b"", now)
        peer.advance(1)
        packet(closer, peer, _ACK, b"", now)
