"""A producer ``Connection`` driven in memory through bootstrap, for sans-IO tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.producer import Node
from mockdcp.protocol import (
    DcpControl,
    DcpOpen,
    DcpOpenFlag,
    DcpStreamRequest,
    FrameReader,
    Hello,
    HelloFeature,
    Response,
    SaslAuth,
    SelectBucket,
    decode_server_message,
)

if TYPE_CHECKING:
    from mockdcp.model import Bucket
    from mockdcp.producer import Stream
    from mockdcp.protocol import Message

FEATURES = (HelloFeature.XERROR, HelloFeature.JSON, HelloFeature.XATTR)


def from_zero(vbucket: int, opaque: int, flags: int = 0) -> DcpStreamRequest:
    """A stream request for everything ``vbucket`` has and will have (from seqno 0, no
    uuid, to the end)."""
    return DcpStreamRequest(
        opaque=opaque,
        vbucket=vbucket,
        flags=flags,
        start_seqno=0,
        end_seqno=2**64 - 1,
        vbucket_uuid=0,
        snap_start_seqno=0,
        snap_end_seqno=0,
    )


class Session:
    """One connection to a ``Node`` over ``bucket`` (a new node, or ``node``); ``call``
    returns what it wrote. Its clock is ``now`` (0 unless a test moves it)."""

    #: the time its verbs are given (a class default: a test may build one bare)
    now = 0.0

    def __init__(
        self,
        bucket: Bucket,
        *,
        features: tuple[int, ...] = FEATURES,
        node: Node | None = None,
        now: float = 0.0,
        user: str = "Administrator",
        password: str = "password",
    ) -> None:
        self.node = node or Node(bucket=bucket, users={"Administrator": "password"})
        self.now = now
        self.conn = self.node.open_connection(now)
        self.collections = HelloFeature.COLLECTIONS in features
        self._opaque = 0
        self.call(Hello(opaque=0, agent=b"test", features=features))
        creds = b"\0" + user.encode() + b"\0" + password.encode()
        self.auth_reply = self.call(SaslAuth(opaque=0, mechanism="PLAIN", payload=creds))
        self.select_reply = self.call(SelectBucket(opaque=0, bucket=bucket.name))

    def open_dcp(self, buffer_size: int = 0, name: bytes = b"session") -> None:
        flags = DcpOpenFlag.PRODUCER
        self.call(DcpOpen(opaque=0, name=name, flags=int(flags)))
        if buffer_size:
            self.call(DcpControl(opaque=0, key="connection_buffer_size", value=str(buffer_size)))

    def send(self, data: bytes) -> None:
        self.conn.receive_data(data, self.now)

    def call(self, msg: Message) -> list[Message | Response]:
        self.send(msg.encode())
        return self.read()

    def read(self) -> list[Message | Response]:
        return decode_all(self.conn.data_to_send(self.now), collections=self.collections)


def decode_all(data: bytes | memoryview, *, collections: bool = True) -> list[Message | Response]:
    """Every frame of ``data`` decoded as a consumer that negotiated ``collections``
    would decode it."""
    reader = FrameReader(max_frame_size=1 << 26)
    reader.feed(data)
    out: list[Message | Response] = []
    while (frame := reader.next_frame()) is not None:
        out.append(decode_server_message(frame, collections=collections))
    return out


def stream_bytes(stream: Stream) -> bytes:
    """Everything ``stream`` sends until it has nothing more, each chunk taken as the
    connection's writer takes it."""
    data = b""
    while stream.refill():
        while stream.chunks:
            data += bytes(stream.chunks.popleft().buf)
        stream.mark_drained()
    return data


def drain(stream: Stream, *, collections: bool = True) -> list[Message | Response]:
    """``stream_bytes`` decoded as a consumer that negotiated ``collections`` would."""
    return decode_all(stream_bytes(stream), collections=collections)
