"""The streams of one connection: by (vbucket, stream id), by vbucket, and which of
them may have something to send.

A connection has at most one stream per (vbucket, stream id) (kv_engine
``engines/ep/src/dcp/producer.cc`` ``streamRequest``: a second request for a live
stream gets KEY_EEXISTS). ``ready`` is the round-robin set the connection drains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mockdcp.producer._stream import Stream

StreamKey = tuple[int, int | None]


@attrs.define
class StreamRegistry:
    """See the module docstring."""

    streams: dict[StreamKey, Stream] = attrs.field(factory=dict)
    by_vbucket: dict[int, list[Stream]] = attrs.field(factory=dict)
    ready: dict[StreamKey, Stream] = attrs.field(factory=dict)
    #: the seqno of the last item of each stream handed to a write
    written: dict[StreamKey, int] = attrs.field(factory=dict)
    #: how many times a stream was marked ready (a drain that made no progress goes
    #: round again if a stream was marked meanwhile: one given its backfill's turn)
    marks: int = 0

    def __len__(self) -> int:
        return len(self.streams)

    def __iter__(self) -> Iterator[Stream]:
        return iter(list(self.streams.values()))

    def get(self, vbucket: int, stream_id: int | None) -> Stream | None:
        return self.streams.get((vbucket, stream_id))

    def of_vbucket(self, vbucket: int) -> list[Stream]:
        return list(self.by_vbucket.get(vbucket, ()))

    def add(self, stream: Stream) -> None:
        """Register a new stream (replacing a finished one of the same key) as ready."""
        key = (stream.vbucket, stream.stream_id)
        old = self.streams.get(key)
        if old is not None:
            self.forget(old)
        self.streams[key] = stream
        self.by_vbucket.setdefault(stream.vbucket, []).append(stream)
        self.ready[key] = stream

    def mark_ready(self, stream: Stream) -> None:
        self.ready[(stream.vbucket, stream.stream_id)] = stream
        self.marks += 1

    def mark_vbucket_ready(self, vbucket: int) -> bool:
        """The model changed ``vbucket``: its streams may have work. True if any."""
        streams = self.by_vbucket.get(vbucket)
        if not streams:
            return False
        for stream in streams:
            self.mark_ready(stream)
        return True

    def forget(self, stream: Stream) -> None:
        """Drop a stream (finished, closed, or replaced)."""
        key = (stream.vbucket, stream.stream_id)
        if self.streams.get(key) is stream:
            del self.streams[key]
        same_vb = self.by_vbucket.get(stream.vbucket)
        if same_vb and stream in same_vb:
            same_vb.remove(stream)
        if self.ready.get(key) is stream:
            del self.ready[key]

    def close_all(self) -> None:
        """Close every stream without STREAM_END (the connection is going away)."""
        for stream in self.streams.values():
            stream.close()
        self.streams.clear()
        self.by_vbucket.clear()
        self.ready.clear()
