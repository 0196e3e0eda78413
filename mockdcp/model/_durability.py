"""Durable writes of one vbucket: the prepares waiting, the max visible seqno, the high
completed seqno.

Sources: kv_engine ``durability/active_durability_monitor.h`` and ``vbucket.cc``
(``VBucket::commit``, ``abort``), docs/dcp/documentation/commands/prepare.md, commit.md,
abort.md. A prepare (``DurableItem``) takes a seqno and waits in ``pending`` (one per
key); its commit (``CommittedItem``) and its abort take their own seqnos.
``visible_seqno`` is the highest seqno of a committed (visible) item,
``high_completed_seqno`` the seqno of the last prepare committed or aborted.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from mockdcp.model._item import TAG_DURABLE, CommittedItem, DurableItem, Item, ItemKind

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.model._cold import ColdView


class DurabilityMonitor:
    """See the module docstring."""

    def __init__(self, vbid: int) -> None:
        self.vbid = vbid
        self.reset(0)

    def reset(self, seqno: int) -> None:
        """No prepare, everything up to ``seqno`` visible."""
        #: (collection, key) -> its prepare waiting for a commit or an abort
        self.pending: dict[tuple[int, bytes], DurableItem] = {}
        #: prepares and aborts written since the last reset
        self.durable_writes = 0
        self.visible_seqno = seqno
        self.high_completed_seqno = 0

    def prepared(self, item: DurableItem) -> None:
        """A prepare or an abort is written (it is not visible)."""
        self.durable_writes += 1
        self.replay(item)

    def replay(self, item: Item) -> None:
        """What ``item`` (written now, or of a kept log) does to the pending prepares,
        the max visible and the high completed seqno."""
        if isinstance(item, DurableItem):
            if item.kind is ItemKind.PREPARE:
                self.pending[(item.collection_id, item.key)] = item
            else:
                self.pending.pop((item.collection_id, item.key), None)
                self.high_completed_seqno = item.prepared_seqno
            return
        self.visible_seqno = item.seqno
        if isinstance(item, CommittedItem):
            self.pending.pop((item.collection_id, item.key), None)
            self.high_completed_seqno = item.prepared_seqno

    def prepare(
        self,
        seqno: int,
        old: Item | None,
        cas: int,
        level: int,
        deleted: bool,
        fields: dict[str, object],
    ) -> DurableItem:
        """A prepare of ``fields`` at ``seqno``, its rev seqno one above the committed
        document's ``old`` (the bucket has checked that the key has no prepare pending)."""
        return DurableItem(
            kind=ItemKind.PREPARE,
            vbucket=self.vbid,
            seqno=seqno,
            rev_seqno=(old.rev_seqno + 1) if old is not None else 1,
            cas=cas,
            level=level,
            deleted=deleted,
            **fields,  # type: ignore[arg-type]
        )

    def commit(self, key: bytes, collection_id: int, seqno: int) -> CommittedItem:
        """The commit at ``seqno`` of the key's pending prepare: its document, a mutation
        or a tombstone for a prepared deletion, with the prepare's CAS and rev seqno
        (kv_engine ``VBucket::commit``)."""
        prepare = self.pending[(collection_id, key)]
        kind = ItemKind.DELETION if prepare.prepared_deleted else ItemKind.MUTATION
        return CommittedItem(
            prepared_seqno=prepare.seqno,
            key=key,
            collection_id=collection_id,
            vbucket=self.vbid,
            seqno=seqno,
            rev_seqno=prepare.rev_seqno,
            cas=prepare.cas,
            flags=prepare.flags,
            expiry=prepare.expiry,
            datatype=prepare.datatype,
            value=prepare.body,
            kind=kind,
        )

    def abort(self, key: bytes, collection_id: int, seqno: int, cas: int) -> DurableItem:
        """The abort at ``seqno`` that discards the key's pending prepare."""
        prepare = self.pending[(collection_id, key)]
        return DurableItem(
            kind=ItemKind.ABORT,
            key=key,
            collection_id=collection_id,
            vbucket=self.vbid,
            seqno=seqno,
            rev_seqno=prepare.rev_seqno,
            cas=cas,
            prepared_seqno=prepare.seqno,
        )


def visible_upto(log: Sequence[Item], seqno: int, cold: ColdView | None) -> int:
    """The highest seqno at or below ``seqno`` of a visible item (neither a prepare nor
    an abort) of the write ``log`` and the cold tier (whose slots are all visible); 0
    if none (kv_engine ``ActiveStream::snapshot``'s max visible seqno)."""
    i = bisect.bisect_right(log, seqno, key=_seqno)
    while i and log[i - 1].tag == TAG_DURABLE:
        i -= 1
    found = log[i - 1].seqno if i else 0
    if cold is not None and found < cold.segment.first_seqno <= seqno:
        return min(seqno, cold.upto)
    return found


def _seqno(item: Item) -> int:
    return item.seqno
