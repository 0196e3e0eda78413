"""Which of a vbucket's documents and system events one stream sends.

The rules of kv_engine's ``Collections::VB::Filter``
(``engines/ep/src/collections/vbucket_filter.cc``, ``checkAndUpdate``) and of
``ActiveStream`` (``engines/ep/src/dcp/active_stream.cc``, ``shouldProcessItem``;
kv_engine docs/dcp/documentation/collections.md):

* **legacy** (no HELLO collections): the default collection's documents, no system
  event; when ``_default`` is dropped the stream ends (the FILTER_EMPTY end a legacy
  consumer receives as OK);
* **pass-through** (collection-aware, no ``collections``/``scope`` in the request): every
  document and every system event;
* **collections**: their documents and their own create, modify and drop events, no scope
  event; a collection leaves the filter with its drop event, and the stream ends with
  FILTER_EMPTY after the last one's;
* **scope**: the documents of its collections, those created later included; the
  collection events of the scope and its own scope events; the stream ends with
  FILTER_EMPTY after the scope's drop event.

Durable writes (kv_engine ``Item::shouldReplicate``, ``ActiveStream::processItems``):
a stream of a connection without ``enable_sync_writes`` never sends a prepare or an
abort (``TAG_DURABLE``). Nor does a connection without ``flatbuffers_system_events`` get
a collection's modification event (kv_engine ``ActiveStream::shouldProcessItem``: "Modify
cannot be transmitted unless opted-in"): it is skipped where it stands, like a prepare
(MB-54516 "Replace ModifyCollection with SeqnoAdvance" makes it a non-visible seqno of
the snapshot, not a message of its own). ``Selection.hidden`` names the last of those
the stream would otherwise have sent, whose seqno a collection-aware stream must still
reach (SEQNO_ADVANCED at the end of its snapshot).

A disk backfill leaves out every document of a collection dropped by the time it reads
(kv_engine's scans skip logically deleted collections); memory streams still send what
was written before the drop, then the drop. Sans-IO: items in, positions out.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, overload

import attrs

from mockdcp.model import (
    SYSTEM_COLLECTION_ID,
    TAG_DURABLE,
    SystemEventItem,
    any_durable,
    any_outside_default,
    any_system,
)
from mockdcp.producer._numpy import numpy_module
from mockdcp.protocol import SystemEventType

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Set as AbstractSet
    from types import ModuleType

    import numpy
    from numpy.typing import NDArray

    from mockdcp.model import Item

_SCOPE_EVENTS = frozenset({SystemEventType.CREATE_SCOPE, SystemEventType.DROP_SCOPE})
#: ``TAG_DURABLE`` alone, for ``bytes.translate`` to delete
_DURABLE = bytes([TAG_DURABLE])
_SEQNO = attrgetter("seqno")


def _member(
    np: ModuleType, ids: NDArray[numpy.int64], wanted: AbstractSet[int]
) -> NDArray[numpy.bool_]:
    """``ids`` in ``wanted``, as a boolean array: a comparison per id for a few ids
    (``numpy.isin`` sorts, several times slower for the usual one or two)."""
    if len(wanted) > 4:
        found: NDArray[numpy.bool_] = np.isin(ids, np.fromiter(wanted, np.int64, len(wanted)))
        return found
    keep: NDArray[numpy.bool_] = np.zeros(len(ids), bool)
    for cid in wanted:
        keep |= ids == cid
    return keep


@attrs.frozen
class Selection:
    """What a stream sends of a run of frames: ``positions`` (``None``: all of them);
    ``ended``: the filter emptied at the last selected frame (the stream ends after it)."""

    positions: Sequence[int] | None
    ended: bool = False
    #: the position of the last prepare or abort the filter let through but a stream
    #: without sync writes does not send, or of a modification event a stream without
    #: FlatBuffers does not send (-1: none)
    hidden: int = -1
    #: ``positions`` as a byte a frame (1: sent), when the selection is a whole run less
    #: its prepares and aborts (``without_durable``): a stream takes its frames with
    #: ``itertools.compress``, not one by one
    mask: bytes | None = None


ALL = Selection(None)
NONE = Selection(())


@attrs.define
class StreamFilter:
    """One stream's filter (see the module docstring); ``collections`` is ``None`` for
    pass-through, and changes as the stream reads creations and drops."""

    collections: set[int] | None
    scope: int | None = None
    #: the connection is collection-aware (sees system events)
    aware: bool = True
    #: the filter has lost its last collection (or its scope): the stream ends
    empty: bool = False
    #: the connection enabled sync writes: prepares and aborts are sent
    sync_writes: bool = False
    #: the connection enabled FlatBuffers system events: modifications are sent
    modifications: bool = True

    @classmethod
    def legacy(cls) -> StreamFilter:
        return cls({0}, aware=False)

    @property
    def passthrough(self) -> bool:
        return self.collections is None

    def wants_event(self, event: SystemEventItem) -> bool:
        """True if the stream sends ``event``; the filter takes in a creation in its
        scope and lets a dropped collection go (``empty`` when nothing is left)."""
        cols = self.collections
        if cols is None:
            return self.aware
        kind = event.event
        if self.scope is not None:
            if event.scope_id != self.scope:
                return False
            if kind is SystemEventType.DROP_SCOPE:
                self.empty = True
            elif kind is SystemEventType.BEGIN_COLLECTION:
                assert event.event_collection_id is not None
                cols.add(event.event_collection_id)
            elif kind is SystemEventType.END_COLLECTION:
                cols.discard(event.event_collection_id or 0)
            return self.aware
        if kind in _SCOPE_EVENTS or event.event_collection_id not in cols:
            return False
        if kind is SystemEventType.END_COLLECTION:
            cols.discard(event.event_collection_id)
            self.empty = not cols
        return self.aware

    def select(
        self,
        tags: bytes,
        cids: Sequence[int],
        items_at: Callable[[Sequence[int]], Sequence[Item]],
        *,
        upto: int | None = None,
        skip: frozenset[int] = frozenset(),
    ) -> Selection:
        """The frames (their tags and collection ids given: ``cids`` is an
        ``array("I")``) this stream sends, in order: none after the one that empties the
        filter, none above seqno ``upto``, no document of a collection in ``skip``.
        ``items_at`` gives the items of frames by position: only system events are read
        (and every item when ``upto`` cuts the run)."""
        if self.empty:
            return NONE
        cols = self.collections
        durable = not self.sync_writes and any_durable(tags)
        if upto is None and not skip:
            rest = tags.translate(None, _DURABLE) if durable else tags
            whole = None
            if cols is None and self.aware and (self.modifications or not any_system(rest)):
                whole = ALL
            elif not any_outside_default(rest):  # default-collection documents
                whole = ALL if cols is None or 0 in cols else NONE
            if whole is ALL and durable and (cols is None or not self.aware):
                # (a collection-aware filter reads the prepares' collections below: one
                # outside it is not its news)
                return without_durable(tags, None if cols is None else cids)
            if whole is not None and not durable:
                return whole
        np = numpy_module()
        count = len(tags)
        ids = np.frombuffer(cids, np.uint32, count).astype(np.int64)
        events = np.flatnonzero(ids == SYSTEM_COLLECTION_ID).tolist()
        if upto is not None:
            every = items_at(range(count))
            seqnos = np.fromiter(map(_SEQNO, every), np.uint64, count)
            count = int(np.searchsorted(seqnos, upto, side="right"))
            events = [i for i in events if i < count]
        chosen: list[int] = []
        skipped = -1  # the last modification the stream would send but for FlatBuffers
        ended = False
        # every collection the filter holds during the run: a creation comes before its
        # documents, a drop after them
        held = set() if cols is None else set(cols)
        for i, event in zip(events, items_at(events), strict=True):
            assert isinstance(event, SystemEventItem)
            if self.wants_event(event):
                if self.modifications or event.event is not SystemEventType.MODIFY_COLLECTION:
                    chosen.append(i)
                else:
                    skipped = i
            if cols is not None:
                held |= cols
            if self.empty:
                ended, count = True, i + 1
                break
        ids = ids[:count]
        if cols is None:
            keep = ids != SYSTEM_COLLECTION_ID
            if skip:
                keep &= ~_member(np, ids, skip)
        else:
            held -= skip
            keep = _member(np, ids, held)
        if not self.aware:
            chosen = []
        if chosen:
            keep[chosen] = True
        hidden = skipped if self.aware else -1
        if durable:
            marked = np.frombuffer(tags, np.uint8, count) == TAG_DURABLE
            held_back = np.flatnonzero(keep & marked)
            if len(held_back):
                hidden = max(hidden, int(held_back[-1]))
            keep &= ~marked
        return Selection(np.flatnonzero(keep).tolist(), ended, hidden)


def without_durable(tags: bytes, default_only: Sequence[int] | None = None) -> Selection:
    """Every frame of a run but its prepares and aborts (``TAG_DURABLE``): the selection
    of a stream that would send the whole run, on a connection without sync writes.
    The positions come as a mask (``Selection.mask``, ``MaskPositions``: one
    ``bytes.translate``, no Python per frame), and ``hidden`` is the last prepare or
    abort, whose seqno a collection-aware stream still reaches (kv_engine
    ``ActiveStream::processItems``: a prepare is not replicated to such a stream, but
    its seqno ends the snapshot). With ``default_only`` (the run's collection ids: a
    legacy stream), ``hidden`` is the last prepare or abort of the default collection."""
    mask = tags.translate(_KEEP_NOT_DURABLE)
    hidden = tags.rfind(_DURABLE)
    if default_only is not None:
        while hidden >= 0 and default_only[hidden] != 0:
            hidden = tags.rfind(_DURABLE, 0, hidden)
    return Selection(MaskPositions(mask), hidden=hidden, mask=mask)


#: ``bytes.translate`` table: 0 for ``TAG_DURABLE``, 1 for every other tag
_KEEP_NOT_DURABLE = bytes(int(t != TAG_DURABLE) for t in range(256))


class MaskPositions(Sequence[int]):
    """The positions where ``mask`` (a byte a frame) is 1, as a sequence: its length,
    first and last come from ``bytes`` methods; any other position from an index built
    on first use (a stream reads the first and last, and a few more at most)."""

    __slots__ = ("_at", "_len", "mask")

    def __init__(self, mask: bytes) -> None:
        self.mask = mask
        self._len = mask.count(1)
        self._at: list[int] | None = None

    def __len__(self) -> int:
        return self._len

    def _positions(self) -> list[int]:
        if self._at is None:
            np = numpy_module()
            self._at = np.flatnonzero(np.frombuffer(self.mask, np.uint8)).tolist()
        return self._at

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return self._positions()[index]
        if self._len and index in (0, -1, self._len - 1):
            return self.mask.find(1) if index == 0 else self.mask.rfind(1)
        return self._positions()[index]

    def __iter__(self) -> Iterator[int]:
        return iter(self._positions())
