"""The backfill readers: what a stream reads of a vbucket's disk, behind one interface.

Sources: kv_engine ``dcp/backfill_by_seqno_disk.cc`` (a scan by seqno: the newest
version of each key), ``dcp/backfill_disk_to_stream.cc`` (a history scan of every
revision, ``SnapshotSource::HeadAllVersions``), ``dcp/backfill_by_id_disk.cc`` (OSO: a
scan of one collection by key, docs/dcp/documentation/commands/oso_snapshot.md),
``ActiveStream::markDiskSnapshot`` (a backfill from below the history start is split
in two snapshots with the same end), ``dcp/backfill_memory.cc`` (an ephemeral vbucket's
backfill reads its in-memory sequence list).
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Protocol

import attrs

from mockdcp.producer._encoder import Frames, ItemEncoder
from mockdcp.producer._numpy import numpy_module
from mockdcp.producer._stream_frames import extra_frames, joined, pick
from mockdcp.protocol import (
    OsoSnapshot,
    OsoSnapshotFlag,
    SnapshotFlag,
    StreamEndReason,
    encode_seqno_advanced_frame,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model import DiskSnapshot, Item, VBucket
    from mockdcp.producer._filter import StreamFilter
    from mockdcp.producer._ready_queue import ReadyQueue
    from mockdcp.producer._stream_frames import PendingFrames, Sizes


class BackfillReader(Protocol):
    """A disk scan: the snapshot it reads after a seqno, and its marker's flags."""

    @property
    def flags(self) -> SnapshotFlag: ...

    def read(self, vb: VBucket, after_seqno: int) -> DiskSnapshot: ...


@attrs.frozen
class BySeqno:
    """kv_engine ``DCPBackfillBySeqnoDisk``: the newest version of each key, frames only."""

    flags: SnapshotFlag = SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT

    def read(self, vb: VBucket, after_seqno: int) -> DiskSnapshot:
        return vb.disk_snapshot(after_seqno, frames=True)


@attrs.frozen
class SequenceList:
    """kv_engine ``DCPBackfillMemoryBuffered`` (``dcp/backfill_memory.cc``): an
    ephemeral vbucket's backfill, a range of its sequence list (the newest version of
    each key in seqno order, ``mockdcp.model._ephemeral``) marked by
    ``ActiveStream::markDiskSnapshot`` as a disk one is: DISK|CHECKPOINT up to the
    list's high seqno. Unlike the disk's it has no legacy marker rule
    (``markLegacyDiskSnapshot`` is ``backfill_by_seqno_disk.cc``'s): a legacy stream
    without sync writes gets its marker ending at the max visible seqno
    (``markDiskSnapshot``), and sync writes on a legacy stream are never refused with
    BACKFILL_FAILED. No history (no Magma) and no OSO (no by-id scan)."""

    flags: SnapshotFlag = SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT

    def read(self, vb: VBucket, after_seqno: int) -> DiskSnapshot:
        return vb.disk_snapshot(after_seqno, frames=True)


@attrs.frozen
class History:
    """kv_engine's history scan: every revision of the history collections, in one
    snapshot flagged History and MayContainDuplicateKeys."""

    flags: SnapshotFlag = (
        SnapshotFlag.DISK
        | SnapshotFlag.CHECKPOINT
        | SnapshotFlag.HISTORY
        | SnapshotFlag.MAY_CONTAIN_DUPLICATE_KEYS
    )

    def read(self, vb: VBucket, after_seqno: int) -> DiskSnapshot:
        return vb.history_snapshot(after_seqno)


@attrs.frozen
class ById:
    """kv_engine ``DCPBackfillByIdDisk`` (OSO): the by-seqno scan's frames in key order
    between OSO_SNAPSHOT start and end, no snapshot marker. ``mode``: the connection's
    ``enable_out_of_order_snapshots`` (``true_with_seqno_advanced`` sends a
    SEQNO_ADVANCED to the snapshot end)."""

    mode: str
    flags: SnapshotFlag = SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT

    def read(self, vb: VBucket, after_seqno: int) -> DiskSnapshot:
        return vb.disk_snapshot(after_seqno, frames=True)

    def order(
        self,
        frames: Frames,
        chosen: Sequence[Item],
        vbucket: int,
        end: int,
    ) -> Frames:
        """The ``chosen`` items' frames in key order between OSO_SNAPSHOT start and end;
        system events first (the collection's creation); SEQNO_ADVANCED to the snapshot
        end before the end marker in ``true_with_seqno_advanced`` mode when the last
        item sent is not at that seqno."""
        order = sorted(range(len(chosen)), key=lambda i: (not chosen[i].system, chosen[i].key))
        heads = [frames.heads[i] for i in order]
        tails = [frames.tails[i] for i in order]
        tags = bytes(frames.tags[i] for i in order)
        ordered = Frames(heads, tails, tags, ItemEncoder.ends_of(heads, tails, tags), 0)
        start = OsoSnapshot(opaque=0, vbucket=vbucket, flags=OsoSnapshotFlag.START)
        after: list[bytes] = []
        if self.mode == "true_with_seqno_advanced" and (
            not order or chosen[order[-1]].seqno != end
        ):
            after.append(encode_seqno_advanced_frame(vbucket=vbucket, by_seqno=end))
        after.append(OsoSnapshot(opaque=0, vbucket=vbucket, flags=OsoSnapshotFlag.END).encode())
        return joined(extra_frames(start.encode()), ordered, extra_frames(*after))


def oso_applies(mode: str, stream_filter: StreamFilter, start: int, backfills: int) -> bool:
    """An OSO backfill (kv_engine ``ActiveStream::tryAndScheduleOSOBackfill``): the
    connection enabled it, the stream filters one collection, and this is its first
    backfill, from seqno 0 (docs/dcp/documentation/commands/oso_snapshot.md)."""
    cols = stream_filter.collections
    return (
        mode in ("true", "true_with_seqno_advanced")
        and stream_filter.aware
        and cols is not None
        and len(cols) == 1
        and start == 1
        and backfills == 1
    )


@attrs.frozen
class BackfillRead:
    """One backfill's read: the snapshot, the range it covers (``start``..``end``, its
    frames up to ``limit``: ``count`` of them), whether it is the de-duplicated part of
    a split (``split``: the history part follows with the same end)."""

    reader: BackfillReader
    snap: DiskSnapshot
    start: int
    end: int
    limit: int
    count: int
    split: bool
    heads: Sequence[bytes]
    tails: Sequence[bytes]
    tags: bytes
    cids: Sequence[int]
    #: the vbucket read (its by-seqno view for ``items_at``)
    vb: VBucket

    @property
    def sizes(self) -> Sizes:
        """The frames' canonical sizes: their end offsets without reading their pieces."""
        np = numpy_module()
        sizes = self.snap.sizes
        if isinstance(sizes, np.ndarray):  # the cold tier's (int64)
            cold: Sizes = sizes[: self.count]
            return cold
        out: Sizes = np.frombuffer(sizes, np.uint32, self.count).astype(np.int64)
        return out

    @property
    def history(self) -> bool:
        return isinstance(self.reader, History)

    def items_at(self, at: Sequence[int]) -> list[Item]:
        """The items of frames ``at`` (read at once: a later persist may replace them)."""
        return self.snap.items_at(self.vb.store, at)


#: the readers without options (frozen: one of each serves every read)
_BY_SEQNO, _HISTORY, _SEQUENCE_LIST = BySeqno(), History(), SequenceList()


def read_backfill(
    vb: VBucket,
    after_seqno: int,
    end_seqno: int,
    *,
    history_start: int,
    history_end: int | None,
    oso: ById | None,
    memory: bool = False,
) -> BackfillRead:
    """Read the disk after ``after_seqno`` for a stream ending at ``end_seqno``: by
    history from the history start on (``history_start``: 0 unless the connection
    enabled change streams), by id for an OSO backfill, else by seqno; a backfill from
    below the history start stops before it (``split``), and the history part after it
    ends where the first did (``history_end``). ``memory``: an ephemeral vbucket's
    backfill (``SequenceList``), neither history nor by id."""
    start = after_seqno + 1
    history = bool(history_start) and start >= history_start
    reader: BackfillReader
    if memory:
        reader, history_start = _SEQUENCE_LIST, 0
    else:
        reader = _HISTORY if history else oso if oso is not None else _BY_SEQNO
    snap = reader.read(vb, after_seqno)
    end = min(snap.end_seqno, end_seqno)
    if history_end is not None:  # the split's second part: the first's end
        end = min(end, history_end)
    split = bool(history_start) and start < history_start <= end
    if split and isinstance(reader, ById):
        reader = _BY_SEQNO
    limit = history_start - 1 if split else end
    count = bisect.bisect_right(snap.seqnos, limit)
    heads, tails, tags, cids = snap.heads, snap.tails, snap.tags, snap.cids
    if count < len(heads):
        heads, tails, tags, cids = heads[:count], tails[:count], tags[:count], cids[:count]
    return BackfillRead(reader, snap, start, end, limit, count, split, heads, tails, tags, cids, vb)


@attrs.frozen
class BackfillQueued:
    """What queueing a backfill left the stream to do: take note of stream messages
    queued at once (``done``, as ``ReadyQueue.extras``), end (``end``), and go on after
    ``backfill_end`` (its filter emptied there) instead of after the whole read."""

    done: PendingFrames | None = None
    end: StreamEndReason | None = None
    backfill_end: int | None = None


#: a backfill queued whole, nothing left to do (frozen: one serves every such backfill)
_QUEUED = BackfillQueued()


def queue_backfill(
    read: BackfillRead,
    queue: ReadyQueue,
    stream_filter: StreamFilter,
    encoder: ItemEncoder,
    *,
    sync: int,
    skip: frozenset[int],
    sync_writes: bool,
) -> BackfillQueued:
    """Queue what a stream sends of a backfill's ``read`` (its filter skipping the
    dropped collections ``skip``): its marker (or OSO markers), its frames, a
    SEQNO_ADVANCED to its end when its last frame is not the stream's; a
    collection-aware stream with nothing in it gets the marker and the SEQNO_ADVANCED.
    The stream ends after the frames when its filter emptied (kv_engine
    ``DcpProducer::mapEndStreamStatus``: FILTER_EMPTY, OK for a legacy consumer)."""
    start, end, snap = read.start, read.end, read.snap
    aware = stream_filter.aware
    selection = stream_filter.select(read.tags, read.cids, read.items_at, skip=skip)
    run = (read.heads, read.tails, read.tags)
    picked = pick(encoder, run, selection, read.items_at, snap.seqnos, read.sizes, sync)
    oso = read.reader if isinstance(read.reader, ById) else None
    reason = None
    if selection.ended:
        reason = StreamEndReason.FILTER_EMPTY if aware else StreamEndReason.OK
    if picked is None:  # nothing for this stream
        done = None
        if aware and oso is None and not read.split:
            queue.marker(start, end, SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT, snap)
            done = queue.extras([queue.seqno_advanced(end)], end)
        return BackfillQueued(done, reason)  # a legacy stream's _default was dropped
    frames, _, last = picked
    if oso is not None:
        positions = selection.positions
        chosen = read.items_at(positions if positions is not None else range(read.count))
        frames = oso.order(frames, chosen, queue.vbucket, end)
        queue.oso_snapshot(start, end)  # the next marker starts after it
    else:
        # a legacy disk snapshot ends on the default collection's last item (kv_engine
        # backfill_by_seqno_disk.cc ``markLegacyDiskSnapshot``); the stream has read
        # the rest, which is not for it, and goes on after the whole snapshot
        marker_end = end if aware or sync_writes else last
        if isinstance(read.reader, SequenceList) and not (aware or sync_writes):
            marker_end = max(last, min(snap.max_visible_seqno, end))
        if read.history:  # a split's history marker repeats the end of the one before
            marker_end = max(marker_end, queue.last_marker_end)
        queue.marker(start, marker_end, read.reader.flags, snap, overlap=read.history)
        if last < end and aware and not selection.ended and not read.split:
            frames = joined(frames, extra_frames(queue.seqno_advanced(end)))
    queue.frames(frames, last if oso is None else end, reason)
    return BackfillQueued(backfill_end=last) if selection.ended else _QUEUED
