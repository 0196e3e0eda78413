"""History retention of one vbucket: every revision of the history collections kept on
disk from the history start on.

Sources: kv_engine ``magma-kvstore/magma-kvstore.cc`` (``getHistoryStartSeqno``, the
retention by bytes and seconds), ``dcp/backfill_disk_to_stream.cc`` (a history scan,
``SnapshotSource::HeadAllVersions``), ``checkpoint.cc`` (``CanDeduplicate::No``).
"""

from __future__ import annotations

import bisect
from array import array
from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING

import attrs

from mockdcp.model._disk_store import DiskSnapshot
from mockdcp.model._frame_columns import FrameColumns

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model._disk_store import DiskStore
    from mockdcp.model._item import Item

_SEQNO = attrgetter("seqno")

#: the persisted part of a history-retaining vbucket's write log, in columns (the name
#: the history's columns had before ``FrameColumns`` served the disk too)
HistoryColumns = FrameColumns


@attrs.frozen
class _SeqnoIndex:
    """seqno → item of a history snapshot: its seqnos (ascending) beside its items, looked
    up by bisection (a dictionary of a million revisions cost about 0.1 s a backfill)."""

    seqnos: Sequence[int]
    items: Sequence[Item]

    def __getitem__(self, seqno: int, /) -> Item:
        k = bisect.bisect_left(self.seqnos, seqno)
        if k == len(self.seqnos) or self.seqnos[k] != seqno:
            raise KeyError(seqno)
        return self.items[k]


def _outside(cids: array[int], collections: frozenset[int]) -> list[int]:
    """The positions of ``cids`` (an ``array("I")``) not in ``collections``, found with
    numpy: a history backfill of a million revisions compared them one by one in
    Python (0.75 s of a 300,000-revision ``mockdcp bench history --from-disk``)."""
    import numpy as np

    column = np.frombuffer(cids, np.uint32)
    if len(collections) == 1:
        (only,) = collections
        outside = column != only
    else:
        outside = ~np.isin(column, np.fromiter(collections, np.uint32, len(collections)))
    out: list[int] = np.flatnonzero(outside).tolist()
    return out


def _without(count: int, drop: list[int]) -> list[bool]:
    """``count`` flags, False at the positions ``drop`` (for ``itertools.compress``)."""
    import numpy as np

    keep = np.ones(count, np.bool_)
    keep[drop] = False
    out: list[bool] = keep.tolist()
    return out


class HistoryLog:
    """``start_seqno`` (0: none), the ``bytes`` of frames from it to the persisted seqno,
    and ``columns``: the persisted log from the start in columns, extended as the
    vbucket persists, so a history backfill slices them instead of reading a million
    item objects. ``retains``: the bucket retains history (Magma with a retention);
    ``collections``: those with ``history: true`` (the bucket keeps this current)."""

    def __init__(self, *, retains: bool) -> None:
        self.retains = retains
        self.collections: frozenset[int] = frozenset()
        self.reset(0)

    def reset(self, seqno: int) -> None:
        """History starts after ``seqno`` (when retained), nothing of it held."""
        self.start_seqno = seqno + 1 if self.retains else 0
        self.bytes = 0
        self.columns = FrameColumns()

    def keeps(self, collection_id: int) -> bool:
        """Items of this collection are never de-duplicated (kv_engine
        ``CanDeduplicate::No``)."""
        return self.retains and collection_id in self.collections

    def persisted(self, written: Sequence[Item]) -> None:
        """``written`` (the next part of the log) is persisted."""
        if self.start_seqno:
            self.columns.extend(written)
            if written:
                self.bytes += sum(self.columns.sizes[-len(written) :])

    def kept(self, log: Sequence[Item], start: int, seqno: int) -> None:
        """The log cut at ``seqno`` (all of it on disk now) keeps what was history from
        ``start`` on (none of it cold)."""
        if start:
            self.columns.extend(log)
            self.start_seqno = min(start, seqno + 1)
            self.bytes = sum(it.size for it in log if it.seqno >= start)

    def purge(self, upto: int, log: Sequence[Item]) -> None:
        """History at or below ``upto`` is gone (magma's retention compacted it): the
        start moves above it and older revisions leave the disk."""
        start = self.start_seqno
        if upto < start:
            return
        i = bisect.bisect_left(log, start, key=_SEQNO)
        j = bisect.bisect_right(log, upto, key=_SEQNO)
        self.bytes -= sum(it.size for it in log[i:j])
        self.start_seqno = upto + 1

    def retention_cut(
        self, log: Sequence[Item], persisted: int, now: float, max_bytes: int, max_seconds: int
    ) -> int:
        """The seqno history must be purged up to for the retention (bytes of this
        vbucket's share, seconds on the bucket's clock; 0 = no limit) to hold; the
        history start - 1 when nothing needs to go. Revisions written before ``now -
        max_seconds`` (their CAS is their write time) and the oldest revisions while the
        history holds more than ``max_bytes`` go."""
        i = bisect.bisect_left(log, self.start_seqno, key=_SEQNO)
        j = bisect.bisect_right(log, persisted, key=_SEQNO)
        held, oldest = self.bytes, (now - max_seconds) * 1e9
        cut = self.start_seqno - 1
        while i < j and ((max_bytes and held > max_bytes) or (max_seconds and log[i].cas < oldest)):
            held -= log[i].size
            cut = log[i].seqno
            i += 1
        return cut

    def snapshot(self, after_seqno: int, log: Sequence[Item], disk: DiskStore) -> DiskSnapshot:
        """The persisted history after ``after_seqno`` (from the history start at the
        earliest), frames only: every revision of the history collections' keys, the
        newest version of every other key (kv_engine ``backfill_disk_to_stream.cc``,
        a scan with ``SnapshotSource::HeadAllVersions``)."""
        first = max(after_seqno + 1, self.start_seqno)
        end = disk.persisted_seqno
        by_seqno, hist = disk.by_seqno, self.collections
        i = bisect.bisect_left(log, first, key=_SEQNO)
        j = bisect.bisect_right(log, end, key=_SEQNO)
        cols = self.columns
        if len(cols.seqnos) == j:
            # the persisted log as its columns hold it: every revision of the history
            # collections, the newest on disk of anything else (a system event, a key
            # of a collection without history); no item object is read
            seqnos, cids, items = cols.seqnos[i:j], cols.cids[i:j], log[i:j]
            heads, tails = cols.heads[i:j], cols.tails[i:j]
            tags, sizes = cols.tags[i:j], cols.sizes[i:j]
            others = _outside(cids, hist)
            if others:
                # a few entries outside the history collections (system events, keys of
                # collections without history): only the newest on disk of each stays
                drop = [k for k in others if by_seqno.get(seqnos[k]) is not items[k]]
                if drop:
                    keep = _without(len(cids), drop)
                    seqnos = array("q", compress(seqnos, keep))
                    cids = array("I", compress(cids, keep))
                    heads, tails = list(compress(heads, keep)), list(compress(tails, keep))
                    tags, sizes = bytearray(compress(tags, keep)), array("I", compress(sizes, keep))
                    items = list(compress(items, keep))
        else:  # columns not kept as far (not expected): read the items
            items = [
                it for it in log[i:j] if it.collection_id in hist or by_seqno.get(it.seqno) is it
            ]
            read = FrameColumns()
            read.extend(items)
            seqnos, heads, tails, tags = read.seqnos, read.heads, read.tails, read.tags
            cids, sizes = read.cids, read.sizes
        return DiskSnapshot(
            first,
            end,
            (),
            disk.persisted_completed_seqno,
            disk.persisted_visible_seqno,
            disk.purge_seqno,
            seqnos,
            heads,
            tails,
            bytes(tags),
            cids,
            sizes,
            _SeqnoIndex(seqnos, items),
        )
