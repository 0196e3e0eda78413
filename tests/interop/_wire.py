"""What a client sent, and what the mock sent it, read back from the packet capture
``serve(pcap=...)`` writes.

The capture holds bare IPv4 datagrams (``LINKTYPE_IPV4``, the format ``mockdcp.server._pcap``
documents: 24-byte libpcap header, 16-byte record headers, no link layer), in the order
the server saw the bytes, so each connection's client-to-server payloads concatenate into
its request stream, and its server-to-client payloads into what the mock sent it, which
``FrameReader`` splits into frames.
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp.protocol import (
    FrameReader,
    HelloFeature,
    Magic,
    Opcode,
    decode_server_message,
    iter_frame_infos,
)

if TYPE_CHECKING:
    from pathlib import Path

    from mockdcp.protocol import Message
    from mockdcp.protocol._frame import Frame

#: a client's requests: classic, and with flexible framing extras
_REQUESTS = (Magic.REQUEST, Magic.ALT_REQUEST)
#: a server's responses, classic and with flexible framing extras
_RESPONSES = (Magic.RESPONSE, Magic.ALT_RESPONSE)
#: flexible framing extras id of a request's DCP stream id (kv_engine docs/BinaryProtocol.md)
_FRAME_INFO_STREAM_ID = 2
#: the stream messages of a DCP producer (kv_engine docs/dcp/documentation/commands/)
STREAM_OPCODES = frozenset(
    {
        Opcode.DCP_SNAPSHOT_MARKER,
        Opcode.DCP_MUTATION,
        Opcode.DCP_DELETION,
        Opcode.DCP_EXPIRATION,
        Opcode.DCP_STREAM_END,
        Opcode.DCP_SYSTEM_EVENT,
        Opcode.DCP_SEQNO_ADVANCED,
        Opcode.DCP_OSO_SNAPSHOT,
        Opcode.DCP_PREPARE,
        Opcode.DCP_COMMIT,
        Opcode.DCP_ABORT,
    }
)


@attrs.define
class ClientConnection:
    """The requests one KV connection sent, in order."""

    port: int
    frames: list[Frame] = attrs.Factory(list)
    #: what the server sent on the connection, in order
    received: list[Frame] = attrs.Factory(list)

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
    def granted_features(self) -> list[int]:
        """The features the server's HELLO response granted (empty without HELLO)."""
        for f in self.received:
            if f.magic in _RESPONSES and f.opcode == Opcode.HELLO:
                return list(struct.unpack(f">{len(f.value) // 2}H", f.value))
        return []

    def control_statuses(self) -> dict[str, int]:
        """Each DCP_CONTROL's key and the status the server answered it with (a node
        answers a connection's requests in order; java-dcp-client sends opaque 0 for
        all of them)."""
        keys = [f.key.decode() for f in self.requests(Opcode.DCP_CONTROL)]
        answers = [
            f.status
            for f in self.received
            if f.magic in _RESPONSES and f.opcode == Opcode.DCP_CONTROL
        ]
        return dict(zip(keys, answers, strict=False))

    def stream_messages(self) -> list[Message]:
        """The DCP stream messages the server sent (markers, items, ends, ...), decoded
        as the connection's HELLO made them (collection prefixes)."""
        collections = HelloFeature.COLLECTIONS in self.granted_features
        return [
            decode_server_message(f, collections=collections)  # type: ignore[misc]
            for f in self.received
            if f.magic in _REQUESTS and f.opcode in STREAM_OPCODES
        ]

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
    readers: dict[tuple[int, bool], FrameReader] = {}
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
        if kv_port not in (src, dst) or not payload:
            continue
        client = src if dst == kv_port else dst
        conn = conns.setdefault(client, ClientConnection(client))
        # a reader per direction: requests from the client, what the server sent back
        reader = readers.setdefault((client, dst == kv_port), FrameReader())
        reader.feed(payload)
        into = conn.frames if dst == kv_port else conn.received
        while (frame := reader.next_frame()) is not None:
            into.append(frame)
    return list(conns.values())


def dcp_connections(path: Path, kv_port: int) -> list[ClientConnection]:
    """The connections that opened a DCP producer."""
    return [c for c in read_capture(path, kv_port) if c.dcp_name is not None]
