"""Which stream a frame from the producer belongs to: by the opaque of the stream
request that opened it, as the clients route (java-dcp-client and gocbcore keep a map
from a stream request's opaque to its vbucket and stream), and by the stream-id frame
info (kv_engine ``docs/dcp/documentation/stream-id.md``) or the vbucket when the opaque
is not one of the consumer's.

A stream's opaque is ``STREAM_OPAQUE_BASE + vbucket + OPAQUE_SLOT * i`` for the i-th of
the consumer's filters (vbuckets are below 1024): the request for a stream again, after
a reconnect or a pause, takes the same opaque.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.protocol import Magic, Opcode

if TYPE_CHECKING:
    from mockdcp.client._streams import StreamKey
    from mockdcp.protocol import Frame

STREAM_OPAQUE_BASE = 0x1000
OPAQUE_SLOT = 0x10000


class StreamRoutes:
    """Stream-request opaques -> the streams they opened (module docstring)."""

    def __init__(self) -> None:
        self._vbuckets: dict[int, int] = {}
        self._sids: dict[int, int | None] = {}

    def opaque(self, vb: int, sid: int | None, slot: int) -> int:
        """The opaque of the request for stream ``(vb, sid)``, the ``slot``-th filter's;
        the frames that carry it route to that stream from now on."""
        opaque = STREAM_OPAQUE_BASE + vb + OPAQUE_SLOT * slot
        self._vbuckets[opaque] = vb
        self._sids[opaque] = sid
        return opaque

    def is_stream_response(self, frame: Frame) -> bool:
        """True for the answer to one of the consumer's stream requests."""
        return (
            frame.magic is Magic.RESPONSE
            and frame.opcode == Opcode.DCP_STREAM_REQ
            and frame.opaque in self._vbuckets
        )

    def stream_of(self, frame: Frame) -> StreamKey:
        """The stream ``frame`` belongs to (module docstring)."""
        vb = self._vbuckets.get(frame.opaque)
        if vb is None:
            return frame.vbucket, frame.stream_id()
        return vb, self._sids.get(frame.opaque)
