"""A stream's ready queue: the encoded chunks the connection drains, the frames read
and not yet queued, and the snapshot markers with their running state.

Sources: kv_engine ``dcp/active_stream.cc`` (``ActiveStream::readyQ``: the responses a
stream has ready, pushed as the stream reads; ``snapshot``, ``markDiskSnapshot``: the
markers pushed before the items), ``dcp/response.h``. The marker rules are
``_markers``; the frames' picking ``_stream_frames``.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import TYPE_CHECKING

from mockdcp.producer._markers import marker_fields, memory_marker
from mockdcp.producer._stream_frames import PIECE_BYTES, Chunk, PendingFrames, extra_frames
from mockdcp.protocol import (
    SnapshotMarker,
    SnapshotMarkerVersion,
    encode_seqno_advanced_frame,
    encode_snapshot_marker_v1_frame,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.model import DiskSnapshot, MemoryBatch
    from mockdcp.producer._encoder import Frames, ItemEncoder
    from mockdcp.producer._markers import MarkerKind
    from mockdcp.protocol import StreamEndReason

    #: told of each snapshot the stream queues: (vbucket, stream id, start, end, OSO)
    SnapshotObserver = Callable[[int, int | None, int, int, bool], None]


class ReadyQueue:
    """The ready queue of stream ``stream_id`` of ``vbucket`` (see the module
    docstring). ``visible_upto``: the vbucket's max visible seqno up to a seqno (a v2.0
    marker's when the snapshot does not give its own); ``observer`` is told of each
    snapshot marker (and OSO snapshot) queued: the protocol checker's view."""

    def __init__(
        self,
        *,
        encoder: ItemEncoder,
        opaque: int,
        vbucket: int,
        stream_id: int | None,
        kind: MarkerKind,
        visible_upto: Callable[[int], int],
        observer: SnapshotObserver | None,
    ) -> None:
        self.chunks: deque[Chunk] = deque()
        self._encoder = encoder
        self._opaque = opaque
        self.vbucket = vbucket
        self._stream_id = stream_id
        self._kind = kind
        self._visible_upto = visible_upto
        self.observer = observer
        #: frames queued piece by piece, and the index of the next one
        self.pending: PendingFrames | None = None
        self._pending_pos = 0
        self.first_marker_sent = False
        #: the next memory marker is flagged CHECKPOINT (the memory phase begins)
        self.next_marker_checkpoint = True
        self.last_marker_end = 0
        self.items_sent = 0
        self.markers_sent = 0

    def clear(self) -> None:
        """Forget everything queued and pending."""
        self.chunks.clear()
        self.pending = None

    def control(self, frame: bytes) -> None:
        """Queue a message of the stream's own (STREAM_END)."""
        self.chunks.append(Chunk(bytearray(frame), [len(frame)]))

    def seqno_advanced(self, seqno: int) -> bytes:
        return encode_seqno_advanced_frame(vbucket=self.vbucket, by_seqno=seqno)

    def oso_snapshot(self, start: int, end: int) -> None:
        """An OSO snapshot [``start``, ``end``] is queued: the next marker starts after it."""
        self.first_marker_sent, self.last_marker_end = True, end
        if self.observer is not None:
            self.observer(self.vbucket, self._stream_id, start, end, True)

    def marker(
        self,
        start: int,
        end: int,
        flags: int,
        disk: DiskSnapshot | None = None,
        *,
        overlap: bool = False,
        visible: int | None = None,
    ) -> None:
        """Queue a marker (``marker_fields``); ``visible``: a v2.0 marker's max visible
        seqno when not the vbucket's up to ``end`` (a filtered memory snapshot's)."""
        if visible is None and self._kind.sync_replication:
            visible = self._visible_upto(end)
        fields = marker_fields(
            self._kind,
            start,
            end,
            first=not self.first_marker_sent,
            last_end=self.last_marker_end,
            visible=visible or 0,
            disk=disk,
            overlap=overlap,
        )
        self.first_marker_sent = True
        if fields.version is SnapshotMarkerVersion.V1 and self._stream_id is None:
            frame = encode_snapshot_marker_v1_frame(  # (the message's bytes, in one pack)
                opaque=self._opaque,
                vbucket=self.vbucket,
                start_seqno=fields.start,
                end_seqno=end,
                flags=int(flags),
            )
        else:
            frame = SnapshotMarker(
                opaque=self._opaque,
                vbucket=self.vbucket,
                start_seqno=fields.start,
                end_seqno=end,
                flags=int(flags),
                version=fields.version,
                stream_id=self._stream_id,
                **fields.extra,
            ).encode()
        self.control(frame)
        self.last_marker_end = end
        self.markers_sent += 1
        if self.observer is not None:
            self.observer(self.vbucket, self._stream_id, fields.start, end, False)

    def memory_marker(
        self,
        batch: MemoryBatch,
        first: int,
        last: int,
        *,
        visible: int | None,
        change_streams: bool,
    ) -> None:
        """Queue a memory snapshot's marker (``memory_marker``)."""
        start, flags = memory_marker(
            self._kind,
            batch,
            first,
            new_checkpoint=self.next_marker_checkpoint,
            last_end=self.last_marker_end,
            change_streams=change_streams,
        )
        self.marker(start, last, flags, visible=visible)
        self.next_marker_checkpoint = False

    def frames(self, frames: Frames, last_seqno: int, then_end: StreamEndReason | None) -> None:
        """``frames`` are pending: queued piece by piece (``take``)."""
        self.pending = PendingFrames(frames, last_seqno, then_end=then_end)
        self._pending_pos = 0

    def extras(self, extra: list[bytes], last_seqno: int) -> PendingFrames | None:
        """Queue stream messages made by the stream (opaque and stream-id patched like
        the rest) at once; what ``take`` returns."""
        self.frames(extra_frames(*extra), last_seqno, None)
        return self.take(float("inf"))

    def take(self, budget: float = PIECE_BYTES) -> PendingFrames | None:
        """Queue pending frames from the next one on, about ``budget`` bytes of them (at
        least one frame); the pending frames when that was the last of them."""
        pending = self.pending
        assert pending is not None
        frames = pending.frames
        ends, pos = frames.ends, self._pending_pos
        base = ends[pos - 1] if pos else frames.base
        stop = min(bisect.bisect_left(ends, base + budget, pos) + 1, len(ends))
        buf, chunk_ends, chunk_base = self._encoder.encode(
            frames, pos, stop, self._opaque, self._stream_id
        )
        self.chunks.append(Chunk(buf, chunk_ends, chunk_base))
        self.items_sent += stop - pos
        self._pending_pos = stop
        if stop < len(ends):
            return None
        self.pending = None
        return pending
