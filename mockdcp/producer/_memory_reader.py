"""The memory reader: what a stream sends of one batch its cursor read.

Sources: kv_engine ``dcp/active_stream.cc`` (``ActiveStream::processItemsInner``: the
items a stream sends of a checkpoint run, its end seqno, the filter's last drop;
``shouldProcessItem``), docs/dcp/documentation/collections.md. The stream queues the
markers and frames (``Stream``); this reads and picks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from mockdcp.model import TAG_DURABLE
from mockdcp.producer._numpy import numpy_module
from mockdcp.producer._stream_frames import chosen, extra_frames, joined
from mockdcp.protocol import StreamEndReason

if TYPE_CHECKING:
    from mockdcp.model import MemoryBatch
    from mockdcp.producer._encoder import ItemEncoder
    from mockdcp.producer._filter import Selection, StreamFilter
    from mockdcp.producer._ready_queue import ReadyQueue
    from mockdcp.producer._stream_frames import PendingFrames, Picked


@attrs.frozen
class MemoryRead:
    """A batch read: the filter's ``selection``, the frames ``picked`` (None: none),
    the snapshot's end, the stream's end after it (``reason``), whether the filter let
    through a prepare, abort or modification event the stream does not send at its
    tail (``hidden``), and the max visible seqno of a filtered v2.0 snapshot."""

    batch: MemoryBatch
    selection: Selection
    picked: Picked | None
    snap_end: int
    reason: StreamEndReason | None
    hidden: bool
    visible: int | None


def read_memory(
    batch: MemoryBatch,
    stream_filter: StreamFilter,
    encoder: ItemEncoder,
    *,
    end_seqno: int,
    sync: int,
    sync_replication: bool,
) -> MemoryRead:
    """What a stream ending at ``end_seqno`` sends of ``batch``: the snapshot is to the
    end seqno, or to the event that emptied the filter (the stream ends there)."""
    upto = end_seqno if batch.last_seqno > end_seqno else None
    selection = stream_filter.select(batch.tags, batch.cids, batch.items_at, upto=upto)
    picked: Picked | None
    if selection.positions is None:  # every frame of the batch, as the checkpoint has it
        frames = encoder.prepare(
            batch.heads, batch.tails, batch.tags, batch.ends, batch.base, batch.items_at, sync=sync
        )
        picked = (frames, batch.first_seqno, batch.last_seqno)
    else:
        shown = batch.visible() if selection.mask is not None else None
        sizes = None
        if shown is None:
            np = numpy_module()
            sizes = np.diff(np.asarray(batch.ends, np.int64), prepend=batch.base)
        run = (batch.heads, batch.tails, batch.tags) if shown is None else ((), (), batch.tags)
        picked = chosen(encoder, run, selection, batch.items_at, sizes, sync, shown)
    snap_end = min(batch.last_seqno, end_seqno)
    if selection.ended:
        assert picked is not None or not stream_filter.aware
        snap_end = picked[2] if picked is not None else snap_end
    reason: StreamEndReason | None = None
    if selection.ended:
        reason = StreamEndReason.FILTER_EMPTY if stream_filter.aware else StreamEndReason.OK
    elif snap_end >= end_seqno:
        reason = StreamEndReason.OK
    hidden = selection.hidden >= 0 and stream_filter.aware
    visible = visible_chosen(batch, selection) if sync_replication and picked else None
    return MemoryRead(batch, selection, picked, snap_end, reason, hidden, visible)


def visible_chosen(batch: MemoryBatch, selection: Selection) -> int | None:
    """The max visible seqno of a filtered memory snapshot: the seqno of the last
    visible item (neither a prepare nor an abort) the filter lets through, as
    kv_engine's ``ActiveStream::processItemsInner`` counts only what the stream sends;
    None for a batch sent whole, or with no visible item chosen (the vbucket's max
    visible seqno then). Only v2.0 markers carry it."""
    positions = selection.positions
    if positions is None:
        return None
    tags = batch.tags
    for i in range(len(positions) - 1, -1, -1):
        if tags[positions[i]] != TAG_DURABLE:
            (item,) = batch.items_at([positions[i]])
            return int(item.seqno)
    return None


def queue_memory_read(
    read: MemoryRead,
    queue: ReadyQueue,
    stream_filter: StreamFilter,
    *,
    change_streams: bool,
    resumes_inside: bool,
) -> PendingFrames | None:
    """Queue what the stream sends of ``read``: its frames pending after the batch's
    marker, a filtered snapshot ending where the batch does (SEQNO_ADVANCED to it).
    A batch with nothing for the stream is a marker and a SEQNO_ADVANCED at the last
    prepare or abort it does not send (kv_engine ``sendSnapshotAndSeqnoAdvanced``,
    MB-48368), or to the snapshot's end when the consumer resumes inside a snapshot it
    must complete (``resumes_inside``: its snapshot end is above its start), queued at
    once (returned, as ``ReadyQueue.extras``); or nothing."""
    batch, snap_end, visible = read.batch, read.snap_end, read.visible
    if read.picked is None:
        if read.hidden:
            (held,) = batch.items_at([read.selection.hidden])
            first = last = min(held.seqno, snap_end)
        elif stream_filter.aware and not queue.first_marker_sent and resumes_inside:
            first, last = batch.first_seqno, snap_end
        else:
            return None
        queue.memory_marker(batch, first, last, visible=visible, change_streams=change_streams)
        return queue.extras([queue.seqno_advanced(last)], last)
    frames, first, last = read.picked
    if stream_filter.aware and (not stream_filter.passthrough or read.hidden):
        queue.memory_marker(
            batch, batch.first_seqno, snap_end, visible=visible, change_streams=change_streams
        )
        if last < snap_end:
            frames = joined(frames, extra_frames(queue.seqno_advanced(snap_end)))
    else:
        queue.memory_marker(batch, first, last, visible=visible, change_streams=change_streams)
    queue.frames(frames, last, read.reason)
    return None
