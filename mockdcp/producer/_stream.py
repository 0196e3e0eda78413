"""One DCP stream: a vbucket (and stream-id) read through a cursor or from disk.

The stream owns a queue of encoded chunks ("ready queue"). ``refill()`` pulls the next
piece of work from the model (a disk snapshot or a memory batch), selects what its
filter lets through (``StreamFilter``: legacy, pass-through, collections, scope) and
queues those frames piece by piece, encoded for its connection (``ItemEncoder``); the
connection drains chunks under flow control. Rules, each with its source:

* First marker start = min(requested snap start, computed start) (kv_engine
  ``ActiveStream::adjustStartIfFirstSnapshot``,
  ``docs/dcp/documentation/commands/snapshot-marker.md`` "first snapshot-marker").
* Memory markers: MEMORY, plus CHECKPOINT on the first marker after entering the memory
  phase and on a batch that starts a new checkpoint, whose start is then the
  checkpoint's start when that is above the last marker's end (kv_engine
  ``ActiveStream::snapshot``, ``getMarkerFlags``).
* Disk markers: DISK|CHECKPOINT, [backfill start, disk high seqno] (kv_engine
  ``ActiveStream::markDiskSnapshot``).
* A backfill waits for its turn in the connection's backfill queue (``BackfillQueue``:
  one in progress at a time, kv_engine ``dcp_backfill_in_progress_per_connection_limit``)
  and reads the disk when it starts; its place goes to the next once its frames are all
  queued, or the stream leaves the backfill.
* A dropped cursor: finish the queue, then backfill from last read + 1 (kv_engine
  ``ActiveStream::handleSlowStream``); a backfill start at or below the purge seqno ends
  the stream with STATE_CHANGED (internal reason Rollback, kv_engine
  ``DCPBackfillBySeqnoDisk::create``).
* End seqno reached → STREAM_END(OK) after the items (kv_engine
  ``ActiveStream::processItemsInner``); vbucket reset or state change →
  STREAM_END(STATE_CHANGED) (``ActiveStream::setDead``).
* Collections (kv_engine ``ActiveStream``; docs/dcp/documentation/collections.md,
  commands/seqno-advanced.md): a filtered snapshot ends where the batch or disk snapshot
  does, with DCP_SEQNO_ADVANCED to that seqno when its last frame is not the stream's;
  a batch with nothing for the filter sends nothing, unless the consumer resumes inside
  a snapshot it must complete; a legacy disk snapshot ends on the default collection's
  last item; the filter's last drop ends the stream with FILTER_EMPTY (OK for legacy).
  A collection's modification event reaches only connections with FlatBuffers system
  events; others skip it as they skip a prepare (kv_engine
  ``ActiveStream::shouldProcessItem``): a memory snapshot it ends is extended to it
  with a SEQNO_ADVANCED, and none is sent for it in the middle of a snapshot.
* OSO (docs/dcp/documentation/commands/oso_snapshot.md): the first backfill from 0 of a
  stream filtered to one collection goes in key order between OSO_SNAPSHOT start and end.
* Change streams (kv_engine ``docs/dcp/documentation/commands/snapshot-marker.md``,
  ``active_stream.cc`` ``getMarkerFlags``, ``backfill_disk_to_stream.cc``), only on a
  connection that enabled ``change_streams``: a memory marker of a historical
  checkpoint is flagged History; a backfill from at or above the history start seqno
  is one snapshot of every revision flagged Disk|Checkpoint|History|MayDuplicateKeys;
  from below it, a de-duplicated snapshot up to the history start - 1 (its marker only
  when it has data) then the history snapshot, both markers with the same end.
* Durable writes (kv_engine ``active_stream.cc`` ``processItemsInner``, ``snapshot``,
  ``markDiskSnapshot``; docs/dcp/documentation/commands/seqno-advanced.md): a
  connection without ``enable_sync_writes`` is never sent a prepare or an abort
  (``StreamFilter``); commits reach it as mutations. A legacy snapshot ends on its last
  item sent (a disk one at most at the max visible seqno, none when nothing visible);
  a collection-aware memory snapshot whose tail is a prepare or abort it does not send
  is extended to that seqno with a SEQNO_ADVANCED, and a batch of nothing else is a
  marker and a SEQNO_ADVANCED at its last such seqno (MB-48368).
  A connection with ``enable_sync_writes`` gets DCP_PREPARE and DCP_ABORT, and commits
  as DCP_COMMIT from memory, mutations from disk (``ItemEncoder.prepare``, ``sync``);
  its snapshots end where they would without durable writes (a legacy disk one too,
  while the bucket has only the default collection, else BACKFILL_FAILED: kv_engine
  ``DCPBackfillBySeqnoDisk::markLegacyDiskSnapshot``). With a ``consumer_name`` too
  (kv_engine ``SyncReplication``) markers are v2.0 (v2.2 on disk if negotiated) with the
  max visible seqno, disk ones with the high completed seqno (``ActiveStream::snapshot``,
  ``markDiskSnapshot``; docs/dcp/documentation/commands/snapshot-marker.md); a filtered
  memory snapshot's max visible seqno is that of the last visible item it sends
  (``processItemsInner``). A scope filter, or a legacy client's default collection,
  streams sync writes; a collection filter does not (NOT_SUPPORTED, as kv_engine's
  ``DcpProducer::streamRequest`` refuses ``FilterType::Collection`` with sync writes).
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections import deque
from itertools import accumulate, compress
from operator import attrgetter
from typing import TYPE_CHECKING

import attrs

from mockdcp.model import TAG_COLLECTION, TAG_DURABLE, TAG_EMPTY, TAG_SYSTEM
from mockdcp.producer._encoder import SYNC_DISK, SYNC_MEMORY, Frames, ItemEncoder
from mockdcp.producer._filter import Selection, StreamFilter
from mockdcp.producer._numpy import numpy_module
from mockdcp.producer._state import StreamEvent, StreamState, transition_stream
from mockdcp.protocol import (
    OsoSnapshot,
    OsoSnapshotFlag,
    SnapshotFlag,
    SnapshotMarker,
    SnapshotMarkerVersion,
    StreamEnd,
    StreamEndReason,
    SystemEventType,
    encode_seqno_advanced_frame,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy
    from numpy.typing import NDArray

    from mockdcp.model import Cursor, Item, MemoryBatch, VBucket
    from mockdcp.producer._backfills import BackfillQueue
    from mockdcp.producer._stream_request import StreamRequestDecision

    #: frame sizes (int64), one per frame of a run
    Sizes = NDArray[numpy.int64]
    #: told of each snapshot the stream queues: (vbucket, stream id, start, end, OSO)
    SnapshotObserver = Callable[[int, int | None, int, int, bool], None]

_SEQNO = attrgetter("seqno")
#: ``TAG_DURABLE`` alone, for ``bytes.translate`` to delete
_DURABLE = bytes([TAG_DURABLE])

#: the tag of a stream message made by the stream (SEQNO_ADVANCED, OSO markers): no
#: collection prefix, no value form (``ItemEncoder``)
_EXTRA_TAG = TAG_COLLECTION | TAG_EMPTY | TAG_SYSTEM


def _extra(*frames: bytes) -> Frames:
    """Stream messages made here (opaque 0, no stream-id) as frames to queue."""
    heads = list(frames)
    ends = list(accumulate(map(len, heads)))
    return Frames(heads, [b""] * len(heads), bytes([_EXTRA_TAG]) * len(heads), ends, 0)


def _take(pieces: Sequence[bytes], positions: Sequence[int]) -> Sequence[bytes]:
    """The pieces at ``positions``: lazy pieces of the cold tier (``take``) stay lazy."""
    take = getattr(pieces, "take", None)
    if take is not None:
        out: Sequence[bytes] = take(positions)
        return out
    return list(map(pieces.__getitem__, positions))  # C loops, no Python per frame


def _ends(sizes: Sizes) -> Sequence[int]:
    """End offsets (an ``array("q")``) of frames of these sizes, one after the other."""
    np = numpy_module()
    return array("q", np.cumsum(sizes).tobytes())


def _joined(*parts: Frames) -> Frames:
    """Frames one after the other (their end offsets shifted, not counted again)."""
    np = numpy_module()
    heads: list[bytes] = []
    tails: list[bytes] = []
    ends = []
    total = 0
    for part in parts:
        heads += part.heads
        tails += part.tails
        if part.ends:
            shifted = np.asarray(part.ends, np.int64) + (total - part.base)
            ends.append(shifted)
            total = int(shifted[-1])
    joined = np.concatenate(ends) if ends else np.empty(0, np.int64)
    tags = b"".join(p.tags for p in parts)
    return Frames(heads, tails, tags, array("q", joined.tobytes()), 0)


#: Bytes of canonical frames encoded per chunk (memory batch or backfill). Encoding a
#: whole checkpoint (thousands of frames) for every stream at once made the server
#: fault in hundreds of megabytes of fresh pages for a million-item stream (``mockdcp
#: bench``); a queue of one piece per stream keeps the encoded-ahead memory small.
PIECE_BYTES = 256 * 1024


def wire_end_reason(reason: StreamEndReason) -> StreamEndReason:
    """The STREAM_END reason a node writes for ``reason``: ROLLBACK (6) becomes
    STATE_CHANGED (2), every other reason is itself.

    kv_engine ``engines/ep/src/dcp/response.h``, ``StreamEndResponse::statusToFlags``
    (MB-21682, the change that added Rollback): a stream a node ends because its
    vbucket rolls back (``DcpProducer::closeStreamDueToRollback``, from
    ``KVBucket``'s rollback of a replica or pending vbucket) or because its backfill's
    range was purged meanwhile (``backfill_by_seqno_disk.cc``; ``backfill_memory.cc``
    on an ephemeral bucket) is set dead with Rollback, and the response it queues says
    StateChanged; ``DcpProducer::mapEndStreamStatus`` only ever sees that. The
    consumer re-opens the stream and is then answered ROLLBACK (0x23) where it must
    roll back."""
    if reason is StreamEndReason.ROLLBACK:
        return StreamEndReason.STATE_CHANGED
    return reason


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
    #: the end the stream sends once they are queued (its end seqno read, its filter
    #: emptied)
    then_end: StreamEndReason | None = None


@attrs.frozen(kw_only=True)
class StreamStatistics:
    """A snapshot of one stream's counters (attrs, frozen)."""

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
        request: StreamRequestDecision,
        encoder: ItemEncoder,
        cursor_name: str,
        oso: str = "",
        change_streams: bool = False,
        sync_writes: bool = False,
        sync_replication: bool = False,
        observer: SnapshotObserver | None = None,
        backfills: BackfillQueue[Stream] | None = None,
    ) -> None:
        """A stream of ``vb`` as the accepted stream request ``request`` (the decision
        record of ``decide_stream_request``) says: its id, range, snapshot, filter,
        marker version and backfill options. ``observer`` is told of each snapshot
        marker (and OSO snapshot) queued: the protocol checker's view of the stream.
        ``backfills``: its connection's backfill queue (a backfill waits there for its
        turn); ``None``: backfills start at once."""
        self.vb = vb
        self.vbucket = vb.vbid
        self.opaque = opaque
        self.stream_id = request.stream_id
        self.end_seqno = request.end_seqno
        start_seqno = request.start_seqno
        collections = request.collections
        self.state = StreamState.PENDING
        self.chunks: deque[Chunk] = deque()
        self._encoder = encoder
        self.cursor_name = cursor_name
        self._cursor: Cursor | None = None
        aware = encoder.form.collections
        self._filter = StreamFilter(
            None if collections is None else set(collections) if aware else {0},
            scope=request.scope,
            aware=aware,
            sync_writes=sync_writes,
            modifications=encoder.form.flatbuffers,
        )
        self._oso_mode = oso
        self._change_streams = change_streams
        self._sync_writes = sync_writes
        self._sync_replication = sync_replication
        #: a split backfill's history part is next, with the end both markers share
        self._history_end: int | None = None
        self._start_seqno = start_seqno
        self._requested_snap_end = request.snap_end_seqno
        self._marker_version = request.marker_version
        self._disk_only = request.disk_only
        self._ignore_purged = request.ignore_purged_tombstones
        self._client_purge = request.client_purge_seqno
        self._generation = vb.generation
        self._requested_snap_start = request.snap_start_seqno
        self._first_marker_sent = False
        self._next_marker_checkpoint = True
        self.last_marker_end = 0
        self.last_read_seqno = start_seqno
        self.last_sent_seqno = start_seqno
        self._backfill_end = 0
        self._backfills = backfills
        #: a backfill waits for its turn in the connection's backfill queue
        self._backfill_due = False
        #: a backfill started and has not finished reading
        self._reading = False
        #: frames queued piece by piece, and the index of the next one
        self._pending: PendingFrames | None = None
        self._pending_pos = 0
        self.items_sent = 0
        self.markers_sent = 0
        self.backfills = 0
        self.observer = observer
        #: the reason of the STREAM_END queued, once one is
        self.end_reason: StreamEndReason | None = None

    # -- state -----------------------------------------------------------------------

    @property
    def generation_changed(self) -> bool:
        """The vbucket's history was cut or its state changed since the stream opened
        (failover, restart, state change): it must end (STATE_CHANGED)."""
        return self.vb.generation != self._generation

    def _to(self, event: StreamEvent) -> None:
        self.state = transition_stream(self.state, event)
        if self.state is not StreamState.BACKFILLING:
            self._backfill_done()

    def _backfill_done(self) -> None:
        """The backfill read all it will (or the stream left it): the vbucket's mapped
        disk pages go back (``VBucket.backfill_read``), and its place in the
        connection's backfill queue to the next stream."""
        if self._reading:
            self._reading = False
            self.vb.backfill_read()
        if self._backfills is not None:
            self._backfills.finish(self)

    @property
    def alive(self) -> bool:
        return self.state not in (StreamState.ENDING, StreamState.DEAD)

    @property
    def finished(self) -> bool:
        """Dead, or ending with nothing left to send: the connection may forget it."""
        return self.state is StreamState.DEAD or (
            self.state is StreamState.ENDING and not self.chunks
        )

    @property
    def stream_filter(self) -> StreamFilter:
        """What the stream selects (its privileges are checked on it)."""
        return self._filter

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
        """Queue STREAM_END(reason) after what is queued (or instead of it); ROLLBACK is
        sent as STATE_CHANGED (``wire_end_reason``)."""
        if not self.alive:
            return
        reason = wire_end_reason(reason)
        if discard_queue:
            self.chunks.clear()
            self._pending = None
        elif self._pending is not None:
            self._flush_pending()
        self._release_cursor()
        self._to(StreamEvent.END)
        self.end_reason = reason
        frame = StreamEnd(
            opaque=self.opaque, vbucket=self.vbucket, reason=reason, stream_id=self.stream_id
        ).encode()
        self.chunks.append(Chunk(bytearray(frame), [len(frame)]))

    def close(self) -> None:
        """CLOSE_STREAM without STREAM_END: forget everything at once (kv_engine
        ``DcpProducer::closeStream``)."""
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
            # The vbucket was reset (failover, restart, state change): kv_engine
            # ``ActiveStream::setDead``.
            self.end(StreamEndReason.STATE_CHANGED, discard_queue=True)
            return True
        # Each pass queues something, changes state or reads on; stop when none of that
        # happened (nothing new in the model) or when something is queued.
        for _ in range(64):
            before = (self.state, self.last_read_seqno, self.backfills)
            if self._pending is not None:
                self._queue_piece()
                break
            if self.state is StreamState.PENDING:
                self._start()
            elif self.state is StreamState.BACKFILLING:
                self._backfill_step()
            elif self.state is StreamState.IN_MEMORY:
                self._memory_step()
            if self.chunks or not self.alive:
                break
            if (self.state, self.last_read_seqno, self.backfills) == before:
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
        """Read the disk snapshot after ``last_read_seqno`` (kv_engine
        ``ActiveStream::markDiskSnapshot``, ``DCPBackfillBySeqnoDisk::create``): the frames
        the stream's filter selects, queued in pieces after a DISK marker, or in key order
        between OSO markers (``_oso_order``). It waits for its turn in the connection's
        backfill queue (``_backfills``) first, and reads the disk when it starts."""
        if self._backfills is not None and not self._backfills.start(self):
            self._backfill_due = True
            return
        self._backfill_due = False
        self._reading = True
        self.backfills += 1
        start = self.last_read_seqno + 1
        purge = 0 if self._ignore_purged else self.vb.purge_seqno
        if start != 1 and start <= purge and self._client_purge != purge:
            # kv_engine ``DCPBackfillBySeqnoDisk::create``: tombstones were purged past
            # the start while the backfill waited; the stream dies with Rollback
            self.end(StreamEndReason.ROLLBACK)
            return
        history_start = self.vb.history_start_seqno if self._change_streams else 0
        history = bool(history_start) and start >= history_start
        if history:
            snap = self.vb.history_snapshot(self.last_read_seqno)
        else:
            snap = self.vb.disk_snapshot(self.last_read_seqno, frames=True)
        end = min(snap.end_seqno, self.end_seqno)
        if self._history_end is not None:  # the split's second part: the first's end
            end, self._history_end = min(end, self._history_end), None
        split = bool(history_start) and start < history_start <= end
        limit = history_start - 1 if split else end
        count = bisect.bisect_right(snap.seqnos, limit)
        self._backfill_end = limit
        if split:
            self._history_end = end
        if not count:
            return
        heads, tails, tags, cids = snap.heads, snap.tails, snap.tags, snap.cids
        if count < len(heads):
            heads, tails, tags, cids = heads[:count], tails[:count], tags[:count], cids[:count]
        # the frames' canonical sizes, kept beside them: their end offsets without
        # reading each frame's pieces
        np = numpy_module()
        sizes = np.frombuffer(snap.sizes, np.uint32, count).astype(np.int64)
        by_seqno = self.vb.disk_by_seqno

        def items_at(at: Sequence[int]) -> list[Item]:
            return snap.items_at(by_seqno, at)

        oso = self._oso_applies(start) and not history and not split
        selection = self._filter.select(tags, cids, items_at, skip=self._dropped_collections())
        if self._sync_writes and not self._filter.aware and self.vb.manifest_uid:
            # kv_engine ``markLegacyDiskSnapshot``: sync writes on a legacy stream only
            # while the bucket has nothing but the default collection
            self.end(StreamEndReason.BACKFILL_FAILED)
            return
        picked = self._pick(
            heads, tails, tags, selection, items_at, snap.seqnos, sizes, self._sync(False)
        )
        if picked is None:  # nothing for this stream
            if self._filter.aware and not oso and not split:
                self._queue_marker(
                    start, end, SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT, disk=snap
                )
                self._queue_extras([self._seqno_advanced(end)], end)
            if selection.ended:  # a legacy stream's _default was dropped
                self.end(self._ending_reason())
            return
        frames, _, last = picked
        if oso:
            frames = self._oso_order(frames, selection, items_at, count, end)
            # the OSO snapshot covers [1, end]: the next marker starts after it
            self._first_marker_sent, self.last_marker_end = True, end
            if self.observer is not None:
                self.observer(self.vbucket, self.stream_id, start, end, True)
        else:
            # a legacy disk snapshot ends on the default collection's last item (kv_engine
            # backfill_by_seqno_disk.cc ``markLegacyDiskSnapshot``); the stream has read
            # the rest, which is not for it, and goes on after the whole snapshot
            marker_end = end if self._filter.aware or self._sync_writes else last
            flags = SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT
            if history:
                flags |= SnapshotFlag.HISTORY | SnapshotFlag.MAY_CONTAIN_DUPLICATE_KEYS
                # a split's history marker repeats the end of the one before it
                marker_end = max(marker_end, self.last_marker_end)
            self._queue_marker(start, marker_end, flags, disk=snap, overlap=history)
            if last < end and self._filter.aware and not selection.ended and not split:
                frames = _joined(frames, _extra(self._seqno_advanced(end)))
        reason = self._ending_reason() if selection.ended else None
        if selection.ended:
            self._backfill_end = last
        self._pending = PendingFrames(frames, last if not oso else end, then_end=reason)
        self._pending_pos = 0

    def _pick(
        self,
        heads: Sequence[bytes],
        tails: Sequence[bytes],
        tags: bytes,
        selection: Selection,
        items_at: Callable[[Sequence[int]], Sequence[Item]],
        seqnos: Sequence[int],
        sizes: Sizes,
        sync: int = 0,
    ) -> tuple[Frames, int, int] | None:
        """The selected frames of a backfill in this connection's value form, with the
        seqnos of the first and last of them; ``None`` if none is selected."""
        if selection.positions is None:
            frames = self._encoder.prepare(heads, tails, tags, _ends(sizes), 0, items_at, sync=sync)
            return frames, seqnos[0], seqnos[len(heads) - 1]
        return self._chosen(heads, tails, tags, selection, items_at, sizes, sync)

    def _chosen(
        self,
        heads: Sequence[bytes],
        tails: Sequence[bytes],
        tags: bytes,
        selection: Selection,
        items_at: Callable[[Sequence[int]], Sequence[Item]],
        sizes: Sizes | None,
        sync: int = 0,
        visible: tuple[list[bytes], list[bytes], Sequence[int], int] | None = None,
    ) -> tuple[Frames, int, int] | None:
        """The frames at the selection's positions (``None`` if there is none) in this
        connection's value form, with the seqnos of the first and last of them; the
        chosen frames' end offsets come from the run's frame ``sizes``. ``visible``: a
        memory batch's frames without prepares and aborts, as the checkpoint keeps them
        (``MemoryBatch.visible``), for a selection of all of those (``mask``)."""
        positions = selection.positions
        assert positions is not None
        if not positions:
            return None
        np = numpy_module()
        mask = selection.mask
        base = 0
        if mask is not None and visible is not None:
            heads, tails, ends, base = visible
            tags = tags.translate(None, _DURABLE)
        elif mask is not None and isinstance(heads, list) and isinstance(tails, list):
            assert sizes is not None
            # every frame but the prepares and aborts: C loops, no take per frame
            heads, tails = list(compress(heads, mask)), list(compress(tails, mask))
            tags = tags.translate(None, _DURABLE)
            ends = _ends(sizes[np.frombuffer(mask, np.bool_)])
        else:
            assert sizes is not None
            at = np.asarray(positions, np.int64)
            heads, tails = _take(heads, positions), _take(tails, positions)
            tags = np.frombuffer(tags, np.uint8)[at].tobytes()
            ends = _ends(sizes[at])

        def chosen_at(indices: Sequence[int]) -> Sequence[Item]:
            return items_at([positions[i] for i in indices])

        frames = self._encoder.prepare(heads, tails, tags, ends, base, chosen_at, sync=sync)
        first, last = items_at([positions[0], positions[-1]])
        return frames, first.seqno, last.seqno

    def _sync(self, memory: bool) -> int:
        """``ItemEncoder.prepare``'s ``sync`` for a read of the vbucket now: 0 unless the
        connection enabled sync writes and the vbucket has had durable writes."""
        if not self._sync_writes or not self.vb.durable_writes:
            return 0
        return SYNC_MEMORY if memory else SYNC_DISK

    def _visible_upto(self, seqno: int) -> int:
        """The highest seqno at or below ``seqno`` of a visible item (neither a prepare
        nor an abort) in the vbucket's log; 0 if none."""
        log = self.vb.log
        i = bisect.bisect_right(log, seqno, key=_SEQNO)
        while i and log[i - 1].tag == TAG_DURABLE:
            i -= 1
        return log[i - 1].seqno if i else 0

    def _dropped_collections(self) -> frozenset[int]:
        """Collections dropped in this vbucket: a disk backfill skips their documents."""
        return frozenset(
            e.event_collection_id
            for e in self.vb.system_events
            if e.event is SystemEventType.END_COLLECTION and e.event_collection_id is not None
        )

    def _ending_reason(self) -> StreamEndReason:
        """The end of a stream whose filter emptied: FILTER_EMPTY, or OK for a legacy
        consumer (kv_engine ``DcpProducer::mapEndStreamStatus``)."""
        return StreamEndReason.FILTER_EMPTY if self._filter.aware else StreamEndReason.OK

    def _seqno_advanced(self, seqno: int) -> bytes:
        return encode_seqno_advanced_frame(vbucket=self.vbucket, by_seqno=seqno)

    def _queue_extras(self, extra: list[bytes], last_seqno: int) -> None:
        """Queue stream messages made here (opaque and stream-id patched like the rest)."""
        frames = _extra(*extra)
        self._pending = PendingFrames(frames, last_seqno)
        self._pending_pos = 0
        self._take_pending(math.inf)

    def _oso_applies(self, start: int) -> bool:
        """An OSO backfill (kv_engine ``ActiveStream::tryAndScheduleOSOBackfill``): the
        connection enabled it, the stream filters one collection, and this is its first
        backfill, from seqno 0 (docs/dcp/documentation/commands/oso_snapshot.md)."""
        cols = self._filter.collections
        return (
            self._oso_mode in ("true", "true_with_seqno_advanced")
            and self._filter.aware
            and cols is not None
            and len(cols) == 1
            and start == 1
            and self.backfills == 1
        )

    def _oso_order(
        self,
        frames: Frames,
        selection: Selection,
        items_at: Callable[[Sequence[int]], Sequence[Item]],
        count: int,
        end: int,
    ) -> Frames:
        """The selected frames in key order between OSO_SNAPSHOT start and end; system
        events first (the collection's creation); SEQNO_ADVANCED to the snapshot end
        before the end marker in ``true_with_seqno_advanced`` mode when the last item
        sent is not at that seqno."""
        positions = selection.positions
        chosen = items_at(positions if positions is not None else range(count))
        order = sorted(range(len(chosen)), key=lambda i: (not chosen[i].system, chosen[i].key))
        heads = [frames.heads[i] for i in order]
        tails = [frames.tails[i] for i in order]
        tags = bytes(frames.tags[i] for i in order)
        ordered = Frames(heads, tails, tags, ItemEncoder.ends_of(heads, tails, tags), 0)
        start = OsoSnapshot(opaque=0, vbucket=self.vbucket, flags=OsoSnapshotFlag.START)
        after: list[bytes] = []
        if self._oso_mode == "true_with_seqno_advanced" and (
            not order or chosen[order[-1]].seqno != end
        ):
            after.append(self._seqno_advanced(end))
        after.append(
            OsoSnapshot(opaque=0, vbucket=self.vbucket, flags=OsoSnapshotFlag.END).encode()
        )
        return _joined(_extra(start.encode()), ordered, _extra(*after))

    def _backfill_step(self) -> None:
        """The backfill's frames are queued: go on from its end (memory, or a new
        backfill if the checkpoints moved on meanwhile), or end; or start the backfill
        that waited for its turn."""
        if self._backfill_due:
            self._open_backfill()
            return
        self.last_read_seqno = max(self.last_read_seqno, self._backfill_end)
        if self._history_end is not None:  # the history part of a split backfill
            self._open_backfill()
            return
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
        upto = self.end_seqno if batch.last_seqno > self.end_seqno else None
        selection = self._filter.select(batch.tags, batch.cids, batch.items_at, upto=upto)
        sync = self._sync(True)
        if selection.positions is None:  # every frame of the batch, as the checkpoint has it
            frames = self._encoder.prepare(
                batch.heads,
                batch.tails,
                batch.tags,
                batch.ends,
                batch.base,
                batch.items_at,
                sync=sync,
            )
            picked: tuple[Frames, int, int] | None = (
                frames,
                batch.first_seqno,
                batch.last_seqno,
            )
        else:
            shown = batch.visible() if selection.mask is not None else None
            sizes = None
            if shown is None:
                np = numpy_module()
                sizes = np.diff(np.asarray(batch.ends, np.int64), prepend=batch.base)
            picked = self._chosen(
                batch.heads if shown is None else (),  # ``visible`` replaces them
                batch.tails if shown is None else (),
                batch.tags,
                selection,
                batch.items_at,
                sizes,
                sync,
                shown,
            )
        # the snapshot this batch is: to the end seqno, or to the event that emptied the
        # filter (the stream ends there)
        snap_end = min(batch.last_seqno, self.end_seqno)
        if selection.ended:
            assert picked is not None or not self._filter.aware
            snap_end = picked[2] if picked is not None else snap_end
        self.last_read_seqno = snap_end
        reason: StreamEndReason | None = None
        if selection.ended:
            reason = self._ending_reason()
        elif snap_end >= self.end_seqno:
            reason = StreamEndReason.OK
        hidden = selection.hidden >= 0 and self._filter.aware
        if picked is None:
            if hidden:
                # only prepares or aborts the stream does not send: a marker and a
                # SEQNO_ADVANCED at the last of them (kv_engine
                # ``sendSnapshotAndSeqnoAdvanced``, MB-48368)
                (held,) = batch.items_at([selection.hidden])
                seqno = min(held.seqno, snap_end)
                self._queue_memory_marker(batch, seqno, seqno)
                self._queue_extras([self._seqno_advanced(seqno)], seqno)
            elif (
                self._filter.aware
                and not self._first_marker_sent
                and (self._requested_snap_end > self._start_seqno)
            ):
                # the consumer resumes inside a snapshot: complete it (kv_engine
                # ``ActiveStream::sendSnapshotAndSeqnoAdvanced``)
                self._queue_memory_marker(batch, batch.first_seqno, snap_end)
                self._queue_extras([self._seqno_advanced(snap_end)], snap_end)
            if reason is not None:
                self.end(reason)
            return
        frames, first, last = picked
        visible = self._visible_chosen(batch, selection)
        if self._filter.aware and (not self._filter.passthrough or hidden):
            # a filtered snapshot ends where the batch does (SEQNO_ADVANCED to it)
            self._queue_memory_marker(batch, batch.first_seqno, snap_end, visible)
            if last < snap_end:
                frames = _joined(frames, _extra(self._seqno_advanced(snap_end)))
        else:
            self._queue_memory_marker(batch, first, last, visible)
        self._pending = PendingFrames(frames, last, then_end=reason)
        self._pending_pos = 0
        self._queue_piece()

    def _visible_chosen(self, batch: MemoryBatch, selection: Selection) -> int | None:
        """The max visible seqno of a filtered memory snapshot: the seqno of the last
        visible item (neither a prepare nor an abort) the filter lets through, as
        kv_engine's ``ActiveStream::processItemsInner`` counts only what the stream
        sends; None for a batch sent whole, or with no visible item chosen (the
        vbucket's max visible seqno then, ``_visible_upto``). Only v2.0 markers carry it."""
        positions = selection.positions
        if positions is None or not self._sync_replication:
            return None
        tags = batch.tags
        for i in range(len(positions) - 1, -1, -1):
            if tags[positions[i]] != TAG_DURABLE:
                (item,) = batch.items_at([positions[i]])
                return int(item.seqno)
        return None

    def _queue_memory_marker(
        self, batch: MemoryBatch, first: int, last: int, visible: int | None = None
    ) -> None:
        new_checkpoint = batch.starts_checkpoint or self._next_marker_checkpoint
        start = first
        if batch.starts_checkpoint and batch.checkpoint_start_seqno > self.last_marker_end:
            start = max(batch.checkpoint_start_seqno, self._requested_snap_start)
        flags = SnapshotFlag.MEMORY | (SnapshotFlag.CHECKPOINT if new_checkpoint else 0)
        if self._change_streams and batch.checkpoint.historical:
            flags |= SnapshotFlag.HISTORY  # memory snapshots never repeat a key
        self._queue_marker(start, last, flags, visible=visible)
        self._next_marker_checkpoint = False

    def _queue_marker(
        self,
        start: int,
        end: int,
        flags: int,
        *,
        disk: object | None = None,
        overlap: bool = False,
        visible: int | None = None,
    ) -> None:
        """Queue a marker; its start never at or below the last marker's end, but for
        the history marker of a split backfill (``overlap``), which repeats the end of
        the de-duplicated one before it (kv_engine ``ActiveStream::markDiskSnapshot``
        with ``HistoryFollowingNoHistory``). ``visible``: a v2.0 marker's max visible
        seqno when not the vbucket's up to ``end`` (a filtered memory snapshot's)."""
        if not self._first_marker_sent:
            start = min(start, self._requested_snap_start)
            self._first_marker_sent = True
        elif start <= self.last_marker_end and not overlap:
            start = (
                self.last_marker_end + 1
            )  # markers never overlap (kv_engine asserts it on active vbuckets)
        version = SnapshotMarkerVersion.V1
        extra: dict[str, int] = {}
        if self._sync_replication:
            version = SnapshotMarkerVersion.V2_0
            if visible is None:
                visible = self._visible_upto(end)
            extra = {"max_visible_seqno": visible}
            if disk is not None:
                extra["max_visible_seqno"] = min(visible, getattr(disk, "max_visible_seqno", 0))
                extra["high_completed_seqno"] = getattr(disk, "high_completed_seqno", 0)
                if self._marker_version is SnapshotMarkerVersion.V2_2:
                    version = SnapshotMarkerVersion.V2_2
                    extra["purge_seqno"] = getattr(disk, "purge_seqno", 0)
        elif disk is not None and self._marker_version is SnapshotMarkerVersion.V2_2:
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
        if self.observer is not None:
            self.observer(self.vbucket, self.stream_id, start, end, False)

    def _queue_piece(self) -> None:
        """Queue the next pending frames, about ``PIECE_BYTES`` of them."""
        self._take_pending(PIECE_BYTES)

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
        self.last_sent_seqno = max(self.last_sent_seqno, pending.last_seqno)
        if self.state is StreamState.BACKFILLING and self._history_end is None:
            self._backfill_done()  # read and queued: the next stream's backfill may start
        if pending.then_end is not None:
            self.end(pending.then_end)
        return True

    def _queue_frames(self, frames: Frames, start: int, stop: int) -> None:
        """Queue prepared frames ``start:stop``."""
        buf, ends, base = self._encoder.encode(frames, start, stop, self.opaque, self.stream_id)
        self.chunks.append(Chunk(buf, ends, base))
        self.items_sent += stop - start
