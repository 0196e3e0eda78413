"""Snapshot marker rules: a pure function of the stream's kind (its marker version and
sync replication), the snapshot's range and flags, and the max visible seqno.

Sources: kv_engine ``dcp/active_stream.cc`` (``ActiveStream::snapshot``,
``markDiskSnapshot``, ``adjustStartIfFirstSnapshot``, ``getMarkerFlags``),
``docs/dcp/documentation/commands/snapshot-marker.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol import SnapshotFlag, SnapshotMarkerVersion

if TYPE_CHECKING:
    from mockdcp.model import DiskSnapshot, MemoryBatch


@attrs.frozen
class MarkerKind:
    """What a stream's markers are, fixed by its request: the snapshot start it asked
    for, v2.0 markers (``sync_replication``: a consumer name with sync writes), and the
    marker version it negotiated (v2.2 on disk)."""

    requested_snap_start: int
    sync_replication: bool
    version: SnapshotMarkerVersion


@attrs.frozen
class MarkerFields:
    """A marker's start, version and the fields its version carries."""

    start: int
    version: SnapshotMarkerVersion
    extra: dict[str, int]


def marker_fields(
    kind: MarkerKind,
    start: int,
    end: int,
    *,
    first: bool,
    last_end: int,
    visible: int,
    disk: DiskSnapshot | None = None,
    overlap: bool = False,
) -> MarkerFields:
    """The marker of snapshot [``start``, ``end``]: the stream's ``first`` starts at
    most at the requested snapshot start (kv_engine ``adjustStartIfFirstSnapshot``);
    a later one never at or below the last marker's end (kv_engine asserts it on
    active vbuckets), but for the history marker of a split backfill (``overlap``),
    which repeats the end of the de-duplicated one before it (``markDiskSnapshot``
    with ``HistoryFollowingNoHistory``). v2.0 markers carry ``visible``, the max
    visible seqno (a ``disk`` snapshot's at most), and disk ones its high completed
    seqno; v2.2 disk markers its purge seqno too."""
    if first:
        start = min(start, kind.requested_snap_start)
    elif start <= last_end and not overlap:
        start = last_end + 1
    version = SnapshotMarkerVersion.V1
    extra: dict[str, int] = {}
    if kind.sync_replication:
        version = SnapshotMarkerVersion.V2_0
        extra = {"max_visible_seqno": visible}
        if disk is not None:
            extra["max_visible_seqno"] = min(visible, disk.max_visible_seqno)
            extra["high_completed_seqno"] = disk.high_completed_seqno
            if kind.version is SnapshotMarkerVersion.V2_2:
                version = SnapshotMarkerVersion.V2_2
                extra["purge_seqno"] = disk.purge_seqno
    elif disk is not None and kind.version is SnapshotMarkerVersion.V2_2:
        version = SnapshotMarkerVersion.V2_2
        extra = {
            "max_visible_seqno": end,
            "high_completed_seqno": disk.high_completed_seqno,
            "purge_seqno": disk.purge_seqno,
        }
    return MarkerFields(start, version, extra)


def memory_marker(
    kind: MarkerKind,
    batch: MemoryBatch,
    first: int,
    *,
    new_checkpoint: bool,
    last_end: int,
    change_streams: bool,
) -> tuple[int, SnapshotFlag]:
    """The start and flags of a memory snapshot from ``first``: MEMORY, plus CHECKPOINT
    on the first marker after entering the memory phase (``new_checkpoint``) and on a
    batch that starts a new checkpoint, whose start is then the checkpoint's when that
    is above the last marker's end (kv_engine ``ActiveStream::snapshot``,
    ``getMarkerFlags``); HISTORY for a historical checkpoint on a change-streams
    connection (memory snapshots never repeat a key)."""
    start = first
    if batch.starts_checkpoint and batch.checkpoint_start_seqno > last_end:
        start = max(batch.checkpoint_start_seqno, kind.requested_snap_start)
    flags = SnapshotFlag.MEMORY
    if batch.starts_checkpoint or new_checkpoint:
        flags |= SnapshotFlag.CHECKPOINT
    if change_streams and batch.checkpoint.historical:
        flags |= SnapshotFlag.HISTORY
    return start, flags
