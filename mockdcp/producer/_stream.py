"""One DCP stream: a vbucket (and stream-id) read through a cursor or from disk.

The stream owns a queue of encoded chunks ("ready queue"). ``refill()`` pulls the next
piece of work from the model (a disk snapshot slice or a memory batch) and encodes it;
the connection drains chunks under flow control. Rules, each with its source:

* First marker start = min(requested snap start, computed start) (producer.md §4.2,
  seed 000 "first snapshot-marker").
* Memory markers: MEMORY, plus CHECKPOINT on the first marker after entering the memory
  phase and on a batch that starts a new checkpoint, whose start is then the
  checkpoint's start when that is above the last marker's end (producer.md §4.2).
* Disk markers: DISK|CHECKPOINT, [backfill start, disk high seqno] (producer.md §4.1).
* A dropped cursor: finish the queue, then backfill from last read + 1 (producer.md §5);
  a backfill start at or below the purge seqno ends the stream with STATE_CHANGED
  (internal reason Rollback, producer.md §12).
* End seqno reached → STREAM_END(OK) after the items (§4.4); vbucket reset or state
  change → STREAM_END(STATE_CHANGED) (§9).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from typing import TYPE_CHECKING

import attrs

from mockdcp.producer._encoder import ItemEncoder
from mockdcp.producer._state import StreamEvent, StreamState, transition_stream
from mockdcp.producer._stream_request import AllButSystemEvents
from mockdcp.protocol import (
    SnapshotFlag,
    SnapshotMarker,
    SnapshotMarkerVersion,
    StreamEnd,
    StreamEndReason,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model import Cursor, Item, MemoryBatch, VBucket
    from mockdcp.producer._encoder import Frames

_DEFAULT_ONLY = frozenset({0})

#: Items encoded per chunk while backfilling through the message classes (streams whose
#: frames are not the canonical ones): bounds the memory a big backfill takes.
BACKFILL_SLICE = 1024

#: Bytes of canonical frames encoded per chunk (memory batch or backfill). Encoding a
#: whole checkpoint (thousands of frames) for every stream at once made the server
#: fault in hundreds of megabytes of fresh pages for a million-item stream (``mockdcp
#: bench``); a queue of one piece per stream keeps the encoded-ahead memory small.
PIECE_BYTES = 256 * 1024


@attrs.define(slots=True)
class Chunk:
    """Encoded stream messages: ``buf`` holds frames ending at ``ends`` (less ``base``);
    ``pos`` is the index of the next frame to send and ``offset`` its byte offset."""

    buf: bytearray
    #: each frame's end offset in ``buf``, plus ``base``
    ends: Sequence[int]
    base: int = 0
    pos: int = 0
    offset: int = 0

    @property
    def done(self) -> bool:
        return self.pos >= len(self.ends)


@attrs.frozen
class PendingFrames:
    """Frames read (a memory batch or a backfill) and not yet all queued, each in its
    connection's value form (``ItemEncoder.prepare``)."""

    frames: Frames
    last_seqno: int
    #: a memory batch: once queued, the stream ends if it has read its end seqno
    memory: bool


@attrs.frozen(kw_only=True)
class StreamStatistics:
    """A snapshot of one stream's counters (style.md §15)."""

    vbucket: int
    stream_id: int | None
    state: str
    items_sent: int
    markers_sent: int
    backfills: int
    last_sent_seqno: int
    last_read_seqno: int


class Stream:
    """The state machine of one stream; see the module docstring for its rules."""

    def __init__(
        self,
        *,
        vb: VBucket,
        opaque: int,
        stream_id: int | None,
        start_seqno: int,
        end_seqno: int,
        snap_start_seqno: int,
        encoder: ItemEncoder,
        cursor_name: str,
        collections: frozenset[int] | None,
        marker_version: SnapshotMarkerVersion = SnapshotMarkerVersion.V1,
        disk_only: bool = False,
        ignore_purged_tombstones: bool = False,
        client_purge_seqno: int = 0,
    ) -> None:
        self.vb = vb
        self.vbucket = vb.vbid
        self.opaque = opaque
        self.stream_id = stream_id
        self.end_seqno = end_seqno
        self.state = StreamState.PENDING
        self.chunks: deque[Chunk] = deque()
        self._encoder = encoder
        self.cursor_name = cursor_name
        self._cursor: Cursor | None = None
        self._collections = collections
        self._marker_version = marker_version
        self._disk_only = disk_only
        self._ignore_purged = ignore_purged_tombstones
        self._client_purge = client_purge_seqno
        self._generation = vb.generation
        self._requested_snap_start = snap_start_seqno
        self._first_marker_sent = False
        self._next_marker_checkpoint = True
        self.last_marker_end = 0
        self.last_read_seqno = start_seqno
        self.last_sent_seqno = start_seqno
        self._backfill: Sequence[Item] = ()
        self._backfill_pos = 0
        self._backfill_end = 0
        #: frames queued piece by piece, and the index of the next one
        self._pending: PendingFrames | None = None
        self._pending_pos = 0
        self.items_sent = 0
        self.markers_sent = 0
        self.backfills = 0

    # -- state -----------------------------------------------------------------------

    def _to(self, event: StreamEvent) -> None:
        self.state = transition_stream(self.state, event)

    @property
    def alive(self) -> bool:
        return self.state not in (StreamState.ENDING, StreamState.DEAD)

    @property
    def finished(self) -> bool:
        """Dead, or ending with nothing left to send: the connection may forget it."""
        return self.state is StreamState.DEAD or (
            self.state is StreamState.ENDING and not self.chunks
        )

    def statistics(self) -> StreamStatistics:
        return StreamStatistics(
            vbucket=self.vbucket,
            stream_id=self.stream_id,
            state=self.state.value,
            items_sent=self.items_sent,
            markers_sent=self.markers_sent,
            backfills=self.backfills,
            last_sent_seqno=self.last_sent_seqno,
            last_read_seqno=self.last_read_seqno,
        )

    # -- ending ----------------------------------------------------------------------

    def end(self, reason: StreamEndReason, *, discard_queue: bool = False) -> None:
        """Queue STREAM_END(reason) after what is queued (or instead of it)."""
        if not self.alive:
            return
        if discard_queue:
            self.chunks.clear()
            self._pending = None
        elif self._pending is not None:
            self._flush_pending()
        self._release_cursor()
        self._to(StreamEvent.END)
        frame = StreamEnd(
            opaque=self.opaque, vbucket=self.vbucket, reason=reason, stream_id=self.stream_id
        ).encode()
        self.chunks.append(Chunk(bytearray(frame), [len(frame)]))

    def close(self) -> None:
        """CLOSE_STREAM without STREAM_END: forget everything at once (producer.md §8)."""
        self.chunks.clear()
        self._pending = None
        self._release_cursor()
        self._to(StreamEvent.CLOSE)

    def _release_cursor(self) -> None:
        if self._cursor is not None:
            self.vb.remove_cursor(self.cursor_name)
            self._cursor = None

    def mark_drained(self) -> None:
        if self.state is StreamState.ENDING and not self.chunks:
            self._to(StreamEvent.DRAINED)

    # -- producing -------------------------------------------------------------------

    def refill(self) -> bool:
        """Queue the next piece of work when the queue is empty; True if anything queued.

        Called by the connection whenever it may send; cheap when there is nothing new.
        """
        if self.chunks or not self.alive:
            return bool(self.chunks)
        if self._pending is not None and self.vb.generation == self._generation:
            self._queue_piece()
            return True
        if self.vb.generation != self._generation:
            # The vbucket was reset (failover, restart, state change): producer.md §9.
            self.end(StreamEndReason.STATE_CHANGED, discard_queue=True)
            return True
        # Each pass queues something, changes state or reads on; stop when none of that
        # happened (nothing new in the model) or when something is queued.
        for _ in range(64):
            before = (self.state, self.last_read_seqno, self._backfill_pos)
            if self.state is StreamState.PENDING:
                self._start()
            elif self.state is StreamState.BACKFILLING:
                self._backfill_step()
            elif self.state is StreamState.IN_MEMORY:
                self._memory_step()
            if self.chunks or not self.alive:
                break
            if (self.state, self.last_read_seqno, self._backfill_pos) == before:
                break
        return bool(self.chunks)

    def _start(self) -> None:
        if self.last_read_seqno >= self.end_seqno:
            self.end(StreamEndReason.OK)
            return
        if not self._disk_only and self._register_cursor():
            self._to(StreamEvent.MEMORY)
            return
        self._to(StreamEvent.BACKFILL)
        self._open_backfill()

    def _register_cursor(self) -> bool:
        cursor = self.vb.register_cursor(self.cursor_name, self.last_read_seqno)
        self._cursor = cursor
        return cursor is not None

    def _open_backfill(self) -> None:
        """Read the disk snapshot after ``last_read_seqno`` (producer.md §4.1, §12)."""
        self.backfills += 1
        start = self.last_read_seqno + 1
        purge = 0 if self._ignore_purged else self.vb.purge_seqno
        if start != 1 and start <= purge and self._client_purge != purge:
            self.end(StreamEndReason.STATE_CHANGED)  # internal Rollback on the wire
            return
        if self._shares_frames and self._open_frame_backfill(start):
            return
        snap = self.vb.disk_snapshot(self.last_read_seqno)
        end = min(snap.end_seqno, self.end_seqno)
        self._backfill = self._visible(snap.items, end)
        self._backfill_pos = 0
        self._backfill_end = end
        if self._backfill:
            self._queue_marker(start, end, SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT, disk=snap)

    @property
    def _shares_frames(self) -> bool:
        """Every item this stream sends goes from the model's frames: no collection
        filter (a legacy connection's default-collection filter is applied on the
        frames' tags)."""
        cols = self._collections
        if cols is None or isinstance(cols, AllButSystemEvents):
            return True
        return cols == _DEFAULT_ONLY and not self._encoder.form.collections

    @property
    def _default_only(self) -> bool:
        """Batches with other collections' items or system events go item by item."""
        return self._collections is not None

    def _open_frame_backfill(self, start: int) -> bool:
        """A backfill sent from the frames the disk holds, queued in pieces, touching
        only the items that need a variant. False if it must go item by item."""
        snap = self.vb.disk_snapshot(self.last_read_seqno, frames=True)
        end = min(snap.end_seqno, self.end_seqno)
        count = bisect.bisect_right(snap.seqnos, end)
        self._backfill = ()
        self._backfill_pos = 0
        self._backfill_end = end
        if not count:
            return True
        heads, tails, tags = snap.heads, snap.tails, snap.tags
        if count < len(heads):
            heads, tails, tags = heads[:count], tails[:count], tags[:count]
        by_seqno = self.vb.disk_by_seqno
        frames = self._encoder.prepare(
            heads,
            tails,
            tags,
            ItemEncoder.ends_of(heads, tails, tags),
            0,
            lambda at: snap.items_at(by_seqno, at),
            default_only=self._default_only,
        )
        if frames is None:
            return False
        self._queue_marker(start, end, SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT, disk=snap)
        self._pending = PendingFrames(frames, snap.seqnos[count - 1], memory=False)
        self._pending_pos = 0
        return True

    def _backfill_step(self) -> None:
        items = self._backfill[self._backfill_pos : self._backfill_pos + BACKFILL_SLICE]
        self._backfill_pos += len(items)
        if items:
            self._queue_items(items)
        if self._backfill_pos < len(self._backfill):
            return
        self.last_read_seqno = max(self.last_read_seqno, self._backfill_end)
        self._backfill = ()
        if self.last_read_seqno >= self.end_seqno or self._disk_only:
            self.end(StreamEndReason.OK)
            return
        if not self._register_cursor():
            # Checkpoints moved on while we read: read disk again from here.
            self._open_backfill()
            return
        self._next_marker_checkpoint = True
        self._to(StreamEvent.MEMORY)

    def _memory_step(self) -> None:
        cursor = self._cursor
        assert cursor is not None
        if cursor.dropped:
            self._cursor = None
            self.vb.remove_cursor(self.cursor_name)
            self._to(StreamEvent.DROP_CURSOR)
            self._open_backfill()
            return
        batch = cursor.next_batch()
        if batch is None:
            return
        frames = None
        if self._shares_frames and batch.last_seqno <= self.end_seqno:
            frames = self._encoder.prepare(
                batch.heads,
                batch.tails,
                batch.tags,
                batch.ends,
                batch.base,
                batch.items_at,
                default_only=self._default_only,
            )
        if frames is not None:
            # every item of the batch goes, from the frames the checkpoint holds
            self._queue_memory_marker(batch, batch.first_seqno, batch.last_seqno)
            pending = PendingFrames(frames, batch.last_seqno, memory=True)
            self._pending, self._pending_pos = pending, 0
            self.last_read_seqno = batch.last_seqno
            self._queue_piece()  # ends the stream after the last piece if it read its end
        else:
            items = self._visible(batch.items, self.end_seqno)
            if items:
                self._queue_memory_marker(batch, items[0].seqno, items[-1].seqno)
                self._queue_items(items)
                self.last_read_seqno = min(batch.last_seqno, self.end_seqno)
            else:
                self.last_read_seqno = batch.last_seqno
        if self.last_read_seqno >= self.end_seqno and self._pending is None:
            self.end(StreamEndReason.OK)

    def _queue_memory_marker(self, batch: MemoryBatch, first: int, last: int) -> None:
        new_checkpoint = batch.starts_checkpoint or self._next_marker_checkpoint
        start = first
        if batch.starts_checkpoint and batch.checkpoint_start_seqno > self.last_marker_end:
            start = max(batch.checkpoint_start_seqno, self._requested_snap_start)
        flags = SnapshotFlag.MEMORY | (SnapshotFlag.CHECKPOINT if new_checkpoint else 0)
        self._queue_marker(start, last, flags)
        self._next_marker_checkpoint = False

    def _visible(self, items: Sequence[Item], end: int) -> Sequence[Item]:
        """The items this stream sends: in its collections, at or below ``end``."""
        cols = self._collections
        if cols is not None:
            items = [it for it in items if it.collection_id in cols]
        if items and items[-1].seqno > end:
            items = [it for it in items if it.seqno <= end]
        return items

    def _queue_marker(
        self, start: int, end: int, flags: int, *, disk: object | None = None
    ) -> None:
        if not self._first_marker_sent:
            start = min(start, self._requested_snap_start)
            self._first_marker_sent = True
        elif start <= self.last_marker_end:
            start = self.last_marker_end + 1  # markers never overlap (producer.md §13.2)
        version = SnapshotMarkerVersion.V1
        extra: dict[str, int] = {}
        if disk is not None and self._marker_version is SnapshotMarkerVersion.V2_2:
            version = SnapshotMarkerVersion.V2_2
            extra = {
                "max_visible_seqno": end,
                "high_completed_seqno": getattr(disk, "high_completed_seqno", 0),
                "purge_seqno": getattr(disk, "purge_seqno", 0),
            }
        frame = SnapshotMarker(
            opaque=self.opaque,
            vbucket=self.vbucket,
            start_seqno=start,
            end_seqno=end,
            flags=int(flags),
            version=version,
            stream_id=self.stream_id,
            **extra,
        ).encode()
        self.chunks.append(Chunk(bytearray(frame), [len(frame)]))
        self.last_marker_end = end
        self.markers_sent += 1

    def _queue_items(self, items: Sequence[Item]) -> None:
        buf, ends = self._encoder.batch(items, self.opaque, self.stream_id)
        self.chunks.append(Chunk(buf, ends))
        self.items_sent += len(items)
        self.last_sent_seqno = items[-1].seqno

    def _queue_piece(self) -> None:
        """Queue the next pending frames, about ``PIECE_BYTES`` of them; after the last
        piece of a memory batch, end the stream if its end seqno has been read."""
        pending = self._pending
        assert pending is not None
        last = self._take_pending(PIECE_BYTES)
        if last and pending.memory and self.last_read_seqno >= self.end_seqno:
            self.end(StreamEndReason.OK)

    def _flush_pending(self) -> None:
        """Queue the rest of the pending frames at once (the stream is ending)."""
        self._take_pending(math.inf)

    def _take_pending(self, budget: float) -> bool:
        """Queue pending frames from the next one on, about ``budget`` bytes of them (at
        least one frame); True when that was the last of them."""
        pending = self._pending
        assert pending is not None
        ends, pos = pending.frames.ends, self._pending_pos
        base = ends[pos - 1] if pos else pending.frames.base
        stop = min(bisect.bisect_left(ends, base + budget, pos) + 1, len(ends))
        self._queue_frames(pending.frames, pos, stop)
        self._pending_pos = stop
        if stop < len(ends):
            return False
        self._pending = None
        self.last_sent_seqno = pending.last_seqno
        return True

    def _queue_frames(self, frames: Frames, start: int, stop: int) -> None:
        """Queue prepared frames ``start:stop``."""
        buf, ends, base = self._encoder.encode(frames, start, stop, self.opaque, self.stream_id)
        self.chunks.append(Chunk(buf, ends, base))
        self.items_sent += stop - start
