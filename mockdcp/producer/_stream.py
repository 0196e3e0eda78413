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
  ``ActiveStream::markDiskSnapshot``). An ephemeral vbucket's backfill reads its
  sequence list with the same marker and no legacy rule of the disk's
  (``_backfill_readers.SequenceList``, kv_engine ``backfill_memory.cc``).
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

import math
from typing import TYPE_CHECKING

import attrs

from mockdcp.producer._backfill_readers import ById, oso_applies, queue_backfill, read_backfill
from mockdcp.producer._encoder import SYNC_DISK, SYNC_MEMORY, ItemEncoder
from mockdcp.producer._filter import StreamFilter
from mockdcp.producer._markers import MarkerKind
from mockdcp.producer._memory_reader import queue_memory_read, read_memory
from mockdcp.producer._ready_queue import ReadyQueue
from mockdcp.producer._state import StreamEvent, StreamState, transition_stream
from mockdcp.producer._stream_frames import (
    PIECE_BYTES,
    Chunk,
    PendingFrames,
)
from mockdcp.protocol import (
    StreamEnd,
    StreamEndReason,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.model import Cursor, VBucket
    from mockdcp.producer._backfill_readers import BackfillRead
    from mockdcp.producer._backfills import BackfillQueue
    from mockdcp.producer._stream_request import StreamRequestDecision

    #: told of each snapshot the stream queues: (vbucket, stream id, start, end, OSO)
    SnapshotObserver = Callable[[int, int | None, int, int, bool], None]

#: the states of a stream that is no longer ``alive``
_ENDED = frozenset({StreamState.ENDING, StreamState.DEAD})

__all__ = [
    "PIECE_BYTES",
    "Chunk",
    "PendingFrames",
    "Stream",
    "StreamStatistics",
    "wire_end_reason",
]


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

    @classmethod
    def of(cls, stream: Stream) -> StreamStatistics:
        return cls(
            vbucket=stream.vbucket,
            stream_id=stream.stream_id,
            state=stream.state.value,
            items_sent=stream.queue.items_sent,
            markers_sent=stream.queue.markers_sent,
            backfills=stream.backfills,
            last_sent_seqno=stream.last_sent_seqno,
            last_read_seqno=stream.last_read_seqno,
        )


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
        memory_backfills: bool = False,
    ) -> None:
        """A stream of ``vb`` as the accepted stream request ``request`` (the decision
        record of ``decide_stream_request``) says: its id, range, snapshot, filter,
        marker version and backfill options. ``observer`` is told of each snapshot
        marker (and OSO snapshot) queued: the protocol checker's view of the stream.
        ``backfills``: its connection's backfill queue (a backfill waits there for its
        turn); ``None``: backfills start at once. ``memory_backfills``: the vbucket is
        ephemeral, its backfills read the sequence list (``_backfill_readers.
        SequenceList``)."""
        self.vb = vb
        self.vbucket = vb.vbid
        self.opaque = opaque
        self.stream_id = request.stream_id
        self.end_seqno = request.end_seqno
        start_seqno = request.start_seqno
        collections = request.collections
        self.state = StreamState.PENDING
        self._encoder = encoder
        self.cursor_name = cursor_name
        self._cursor: Cursor | None = None
        aware = encoder.form.collections
        #: what the stream selects (the user's privileges are checked on it)
        self.filter = StreamFilter(
            None if collections is None else set(collections) if aware else {0},
            scope=request.scope,
            aware=aware,
            sync_writes=sync_writes,
            modifications=encoder.form.flatbuffers,
        )
        self._oso_mode = oso
        self._memory_backfills = memory_backfills
        self._change_streams = change_streams
        self._sync_writes = sync_writes
        self._sync_replication = sync_replication
        #: a split backfill's history part is next, with the end both markers share
        self._history_end: int | None = None
        self._request = request
        self.queue = ReadyQueue(
            encoder=encoder,
            opaque=opaque,
            vbucket=vb.vbid,
            stream_id=request.stream_id,
            kind=MarkerKind(request.snap_start_seqno, sync_replication, request.marker_version),
            visible_upto=vb.visible_upto,
            observer=observer,
        )
        #: the encoded chunks the connection drains (the ready queue's)
        self.chunks = self.queue.chunks
        self.last_read_seqno = start_seqno
        self.last_sent_seqno = start_seqno
        self._backfill_end = 0
        self._backfills = backfills
        #: a backfill waits for its turn in the connection's backfill queue
        self._backfill_due = False
        #: a backfill started and has not finished reading
        self._reading = False
        self.backfills = 0
        #: the reason of the STREAM_END queued, once one is
        self.end_reason: StreamEndReason | None = None

    # -- state -----------------------------------------------------------------------

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
    def backfill_running(self) -> bool:
        """Its backfill has started reading and is not over."""
        return self._reading and self.state is StreamState.BACKFILLING

    @property
    def alive(self) -> bool:
        return self.state not in _ENDED

    @property
    def finished(self) -> bool:
        """Dead, or ending with nothing left to send: the connection may forget it."""
        return self.state is StreamState.DEAD or (
            self.state is StreamState.ENDING and not self.chunks
        )

    @property
    def holds_output(self) -> bool:
        """It has something it will write: frames queued (behind a full flow-control
        window, a stall), frames read and not yet queued, or, while alive, seqnos of its
        vbucket up to its end seqno that it has not read yet."""
        if self.chunks or self.queue.pending is not None:
            return True
        return self.alive and self.last_read_seqno < min(self.vb.high_seqno, self.end_seqno)

    def statistics(self) -> StreamStatistics:
        return StreamStatistics.of(self)

    # -- ending ----------------------------------------------------------------------

    def end(self, reason: StreamEndReason, *, discard_queue: bool = False) -> None:
        """Queue STREAM_END(reason) after what is queued (or instead of it); ROLLBACK is
        sent as STATE_CHANGED (``wire_end_reason``)."""
        if not self.alive:
            return
        reason = wire_end_reason(reason)
        if discard_queue:
            self.queue.clear()
        elif self.queue.pending is not None:
            self._take_pending(math.inf)
        self._release_cursor()
        self._to(StreamEvent.END)
        self.end_reason = reason
        self.queue.control(
            StreamEnd(
                opaque=self.opaque, vbucket=self.vbucket, reason=reason, stream_id=self.stream_id
            ).encode()
        )

    def close(self) -> None:
        """CLOSE_STREAM without STREAM_END: forget everything at once (kv_engine
        ``DcpProducer::closeStream``)."""
        self.queue.clear()
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
        chunks, queue = self.chunks, self.queue
        if chunks or self.state in _ENDED:  # (``alive``, without the property's call)
            return bool(chunks)
        if queue.pending is not None:
            self._take_pending(PIECE_BYTES)
            return True
        # Each pass queues something, changes state or reads on; stop when none of that
        # happened (nothing new in the model) or when something is queued.
        for _ in range(64):
            state, read, backfills = self.state, self.last_read_seqno, self.backfills
            if queue.pending is not None:
                self._take_pending(PIECE_BYTES)
                break
            if state is StreamState.PENDING:
                self._start()
            elif state is StreamState.BACKFILLING:
                self._backfill_step()
            elif state is StreamState.IN_MEMORY:
                self._memory_step()
            if chunks or self.state in _ENDED or self._backfill_due:
                break  # (a backfill due waits for its turn: ``BackfillQueue.on_free``)
            if self.state is state and self.last_read_seqno == read and self.backfills == backfills:
                break
        return bool(chunks)

    def _start(self) -> None:
        if self.last_read_seqno >= self.end_seqno:
            self.end(StreamEndReason.OK)
            return
        if not self._request.disk_only and self._register_cursor():
            self._to(StreamEvent.MEMORY)
            return
        self._to(StreamEvent.BACKFILL)
        self._open_backfill()

    def _register_cursor(self) -> bool:
        cursor = self.vb.register_cursor(self.cursor_name, self.last_read_seqno)
        self._cursor = cursor
        return cursor is not None

    def _open_backfill(self) -> None:
        """Read the disk after ``last_read_seqno`` (kv_engine
        ``ActiveStream::markDiskSnapshot``, ``DCPBackfillBySeqnoDisk::create``) with its
        reader (``_backfill_readers``): the frames the stream's filter selects, queued
        in pieces after a DISK marker, or in key order between OSO markers. It waits for
        its turn in the connection's backfill queue (``_backfills``) first, and reads
        the disk when it starts."""
        if self._backfills is not None and not self._backfills.start(self):
            self._backfill_due = True
            return
        self._backfill_due = False
        self._reading = True
        self.backfills += 1
        start = self.last_read_seqno + 1
        request = self._request
        purge = 0 if request.ignore_purged_tombstones else self.vb.purge_seqno
        if start != 1 and start <= purge and request.client_purge_seqno != purge:
            # kv_engine ``DCPBackfillBySeqnoDisk::create``: tombstones were purged past
            # the start while the backfill waited; the stream dies with Rollback
            self.end(StreamEndReason.ROLLBACK)
            return
        oso = oso_applies(self._oso_mode, self.filter, start, self.backfills)
        read = read_backfill(
            self.vb,
            self.last_read_seqno,
            self.end_seqno,
            history_start=self.vb.history_start_seqno if self._change_streams else 0,
            history_end=self._history_end,
            oso=ById(self._oso_mode) if oso else None,
            memory=self._memory_backfills,
        )
        self._backfill_end, self._history_end = read.limit, read.end if read.split else None
        if read.count:
            self._queue_backfill(read)

    def _queue_backfill(self, read: BackfillRead) -> None:
        """Queue what the stream sends of a backfill's ``read`` (``queue_backfill``)."""
        legacy_rule = not self._memory_backfills  # the disk's (``SequenceList``)
        if legacy_rule and self._sync_writes and not self.filter.aware and self.vb.manifest_uid:
            # kv_engine ``markLegacyDiskSnapshot``: sync writes on a legacy stream only
            # while the bucket has nothing but the default collection
            self.end(StreamEndReason.BACKFILL_FAILED)
            return
        queued = queue_backfill(
            read,
            self.queue,
            self.filter,
            self._encoder,
            sync=self._sync(memory=False),
            skip=self.vb.dropped_collections(),
            sync_writes=self._sync_writes,
        )
        if queued.backfill_end is not None:
            self._backfill_end = queued.backfill_end
        self._pending_done(queued.done)
        if queued.end is not None:
            self.end(queued.end)

    def _sync(self, *, memory: bool) -> int:
        """``ItemEncoder.prepare``'s ``sync`` for a read of the vbucket now: 0 unless the
        connection enabled sync writes and the vbucket has had durable writes."""
        if not self._sync_writes or not self.vb.durable_writes:
            return 0
        return SYNC_MEMORY if memory else SYNC_DISK

    def _extras(self, extra: list[bytes], last_seqno: int) -> None:
        """Queue stream messages made here at once (``ReadyQueue.extras``)."""
        self._pending_done(self.queue.extras(extra, last_seqno))

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
        if self.last_read_seqno >= self.end_seqno or self._request.disk_only:
            self.end(StreamEndReason.OK)
            return
        if not self._register_cursor():
            # Checkpoints moved on while we read: read disk again from here.
            self._open_backfill()
            return
        self.queue.next_marker_checkpoint = True
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
        read = read_memory(
            batch,
            self.filter,
            self._encoder,
            end_seqno=self.end_seqno,
            sync=self._sync(memory=True),
            sync_replication=self._sync_replication,
        )
        self.last_read_seqno = read.snap_end
        resumes_inside = self._request.snap_end_seqno > self._request.start_seqno
        done = queue_memory_read(
            read,
            self.queue,
            self.filter,
            change_streams=self._change_streams,
            resumes_inside=resumes_inside,
        )
        if read.picked is not None:
            self._take_pending(PIECE_BYTES)
            return
        self._pending_done(done)
        if read.reason is not None:
            self.end(read.reason)

    def _take_pending(self, budget: float) -> None:
        """Queue about ``budget`` bytes of the pending frames (``ReadyQueue.take``)."""
        self._pending_done(self.queue.take(budget))

    def _pending_done(self, done: PendingFrames | None) -> None:
        """Pending frames are all queued (``done``; None: not yet): the stream has sent
        up to their last seqno, a backfill's place goes to the next stream, and the end
        they carry is queued."""
        if done is None:
            return
        self.last_sent_seqno = max(self.last_sent_seqno, done.last_seqno)
        if self.state is StreamState.BACKFILLING and self._history_end is None:
            self._backfill_done()  # read and queued: the next stream's backfill may start
        if done.then_end is not None:
            self.end(done.then_end)
