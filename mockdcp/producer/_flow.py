"""Flow control of one DCP connection: the ``connection_buffer_size`` window.

kv_engine ``docs/dcp/documentation/flow-control.md``: the consumer names a buffer size
with DCP_CONTROL; the producer counts the bytes of every stream message it sends and the
consumer returns them with DCP_BUFFER_ACKNOWLEDGEMENT. A message may be sent while the
outstanding count is below the buffer size, checked before each message, so the producer
overshoots by at most one message (kv_engine ``DcpProducer::BufferLog``). A size of 0
turns flow control off; turning it on or off resets the count.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol import stream_item_seqno

if TYPE_CHECKING:
    from collections import deque

    from mockdcp.producer._stream import Chunk


@attrs.define
class FlowWindow:
    """The bytes sent and not yet acknowledged, against the consumer's buffer size."""

    size: int = 0
    unacked: int = 0
    acked: int = 0
    #: buffer acknowledgements received, and stream messages sent (for /metrics)
    acks: int = 0
    messages: int = 0
    #: the buffer and offset of the last item (a message at a seqno) the last ``take``
    #: moved, None if it moved none (what was written last)
    last: tuple[bytearray, int] | None = None

    @property
    def open(self) -> bool:
        """A message may be sent now."""
        return self.size == 0 or self.unacked < self.size

    def resize(self, size: int) -> None:
        """A new ``connection_buffer_size``: turning flow control on or off resets the
        count (a consumer that turns it on starts from an empty buffer)."""
        if size == 0 or self.size == 0:
            self.unacked = 0
        self.size = size

    def ack(self, nbytes: int) -> int:
        """The consumer freed ``nbytes``; returns how many of them were never
        outstanding (a consumer acking more than it got: counted, not fatal)."""
        excess = max(0, nbytes - self.unacked)
        self.unacked = max(0, self.unacked - nbytes)
        self.acked += nbytes
        self.acks += 1
        return excess

    def take(
        self,
        chunks: deque[Chunk],
        parts: list[bytes | memoryview],
        quantum: int,
        *,
        stop: int | None = None,
    ) -> int:
        """Move whole messages from the front of ``chunks`` into ``parts`` (views, no
        copies) while the window is open, up to about ``quantum`` bytes; the bytes moved.
        With ``stop``, only messages of the first chunk below index ``stop`` go (a
        trigger holds the stream there).

        Each chunk's ``ends`` locate its messages, so the messages that may go are found
        with one bisection per chunk rather than one check per message.
        """
        taken = 0
        self.last = None
        while chunks and taken < quantum:
            chunk = chunks[0]
            if stop is not None and chunk.pos >= stop:
                break
            ends = chunk.ends
            start = chunk.offset
            threshold = start + quantum - taken
            if self.size:
                if self.unacked >= self.size:
                    break
                threshold = min(threshold, start + self.size - self.unacked)
            # the messages that start below the threshold may go
            n = bisect.bisect_left(ends, threshold + chunk.base, chunk.pos) - chunk.pos + 1
            last = min(chunk.pos + n, len(ends) if stop is None else stop) - 1
            end = ends[last] - chunk.base
            # chunks are never written after they are queued: send views, not copies
            parts.append(memoryview(chunk.buf)[start:end])
            self._note_last_item(chunk, last)
            nbytes = end - start
            taken += nbytes
            if self.size:
                self.unacked += nbytes
            self.messages += last + 1 - chunk.pos
            chunk.pos = last + 1
            chunk.offset = end
            if chunk.done:
                chunks.popleft()
            if stop is not None:
                break
        return taken

    def _note_last_item(self, chunk: Chunk, last: int) -> None:
        """``last`` the index of the last message moved from ``chunk`` (from its
        ``pos``): note the last item among them, looking back past the messages at no
        seqno that end a stream's queue (a STREAM_END, an OSO end marker, taken with the
        items before them: the items were written all the same)."""
        index = last
        while index >= chunk.pos:
            offset = chunk.ends[index - 1] - chunk.base if index else 0
            if stream_item_seqno(chunk.buf, offset) is not None:
                self.last = (chunk.buf, offset)
                return
            index -= 1
