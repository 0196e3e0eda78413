"""What a client sent, read back from the packet capture ``serve(pcap=...)`` writes.

The capture holds bare IPv4 datagrams (``LINKTYPE_IPV4``, the format ``mockdcp.server._pcap``
documents: 24-byte libpcap header, 16-byte record headers, no link layer), in the order
the server saw the bytes, so each connection's client-to-server payloads concatenate into
its request stream, which ``FrameReader`` splits into frames.
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp.protocol import FrameReader, Magic, Opcode, iter_frame_infos

if TYPE_CHECKING:
    from pathlib import Path

    from mockdcp.protocol._frame import Frame

#: a client's requests: classic, and with flexible framing extras
_REQUESTS = (Magic.REQUEST, Magic.ALT_REQUEST)
#: flexible framing extras id of a request's DCP stream id (kv_engine docs/BinaryProtocol.md)
_FRAME_INFO_STREAM_ID = 2


@attrs.define
class ClientConnection:
    """The requests one KV connection sent, in order."""

    port: int
    frames: list[Frame] = attrs.Factory(list)

    def requests(self, opcode: Opcode) -> list[Frame]:
        return [f for f in self.frames if f.magic in _REQUESTS and f.opcode == opcode]

    @property
    def hello_features(self) -> list[int]:
        """The feature codes of the connection's HELLO (empty if it sent none)."""
        hellos = self.requests(Opcode.HELLO)
        if not hellos:
            return []
        value = hellos[0].value
        return list(struct.unpack(f">{len(value) // 2}H", value))

    @property
    def dcp_name(self) -> str | None:
        opens = self.requests(Opcode.DCP_OPEN)
        return opens[0].key.decode() if opens else None

    @property
    def controls(self) -> dict[str, str]:
        return {f.key.decode(): f.value.decode() for f in self.requests(Opcode.DCP_CONTROL)}

    def stream_requests(self) -> list[StreamRequestSent]:
        out = []
        for f in self.requests(Opcode.DCP_STREAM_REQ):
            frame_sid = None
            for fid, data in iter_frame_infos(f.framing_extras):
                if fid == _FRAME_INFO_STREAM_ID:
                    frame_sid = int.from_bytes(data, "big")
            value = json.loads(f.value) if f.value else None
            out.append(
                StreamRequestSent(f.vbucket, int.from_bytes(f.extras[:4], "big"), value, frame_sid)
            )
        return out


@attrs.frozen
class StreamRequestSent:
    vbucket: int
    flags: int
    #: the JSON value, None when the request had none
    value: dict[str, Any] | None
    #: a stream id in the request's frame info (kv_engine takes it there too)
    frame_sid: int | None


def read_capture(path: Path, kv_port: int) -> list[ClientConnection]:
    """Every KV connection of the capture (client port order of appearance)."""
    data = path.read_bytes()
    magic, _, _, _, _, _, linktype = struct.unpack_from("<IHHiIII", data, 0)
    assert magic == 0xA1B2C3D4, "a libpcap file"
    assert linktype == 228, "bare IPv4 packets, as mockdcp writes them"
    readers: dict[int, FrameReader] = {}
    conns: dict[int, ClientConnection] = {}
    pos = 24
    while pos + 16 <= len(data):
        _, _, caplen, _ = struct.unpack_from("<IIII", data, pos)
        packet = data[pos + 16 : pos + 16 + caplen]
        pos += 16 + caplen
        ihl = (packet[0] & 0x0F) * 4
        src, dst = struct.unpack_from(">HH", packet, ihl)
        tcp_len = (packet[ihl + 12] >> 4) * 4
        payload = packet[ihl + tcp_len :]
        if dst != kv_port or not payload:
            continue
        conn = conns.setdefault(src, ClientConnection(src))
        reader = readers.setdefault(src, FrameReader())
        reader.feed(payload)
        while (frame := reader.next_frame()) is not None:
            conn.frames.append(frame)
    return list(conns.values())


def dcp_connections(path: Path, kv_port: int) -> list[ClientConnection]:
    """The connections that opened a DCP producer."""
    return [c for c in read_capture(path, kv_port) if c.dcp_name is not None]
