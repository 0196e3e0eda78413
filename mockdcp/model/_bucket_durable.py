"""The bucket's durable writes: prepares, commits and aborts (kv_engine
``durability/active_durability_monitor.cc``; ``VBucket::set`` with a durability
requirement).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model._bucket_core import BucketCore, check_no_prepare
from mockdcp.model._item import DURABILITY_LEVELS, CommittedItem, DurableItem, Item, vbucket_of
from mockdcp.model._validate import as_bytes, check_datatype, check_u32, check_value, guess_datatype
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from mockdcp.model._vbucket import VBucket


class DurableWrites(BucketCore):
    """Prepares and their completion (a part of ``Bucket``)."""

    def sync_write(
        self,
        key: bytes | str,
        value: bytes | str = b"",
        *,
        collection_id: int = 0,
        level: str | int = "majority",
        outcome: str = "commit",
        deleted: bool = False,
        flags: int = 0,
        expiry: int = 0,
        datatype: int | None = None,
        vbucket: int | None = None,
    ) -> Item:
        """A durable write (kv_engine ``VBucket::set`` with a durability requirement):
        a prepare at the next seqno of the document's vbucket, then (``outcome``) its
        commit or abort at the seqno after, or (``pending``) nothing yet: ``commit``
        or ``abort`` completes it later. ``deleted`` prepares a deletion (of a live
        document). Returns the last item written. ``ModelError`` (nothing written) for
        a bad argument or a key whose prepare is still pending (a node answers
        SYNC_WRITE_IN_PROGRESS)."""
        levels = DURABILITY_LEVELS
        code = levels.get(level) if isinstance(level, str) else level
        if code is None or code not in levels.values():
            raise ModelError(f"durability level {level!r} is not one of {', '.join(levels)}")
        if outcome not in ("commit", "abort", "pending"):
            raise ModelError(f"outcome {outcome!r} is not commit, abort or pending")
        k, vb = self._locate(key, vbucket, collection_id)
        check_no_prepare(vb, k, collection_id)
        if deleted:
            vb.live(k, collection_id)
        v = as_bytes(value, "value")
        check_u32(flags=flags, expiry=expiry)
        if datatype is not None:
            check_datatype(datatype)
            check_value(v, datatype)
        dt = guess_datatype(v) if datatype is None else datatype
        self._check_room(k, v)
        item: Item = vb.prepare(
            self._next_cas(),
            level=code,
            deleted=deleted,
            key=k,
            collection_id=collection_id,
            value=v,
            flags=flags,
            expiry=expiry,
            datatype=dt,
        )
        if outcome == "commit":
            item = vb.commit(k, collection_id)
        elif outcome == "abort":
            item = vb.abort(k, collection_id, self._next_cas())
        self.wrote(vb.vbid)
        return item

    def pending_prepare(
        self, key: bytes | str, *, collection_id: int = 0, vbucket: int | None = None
    ) -> DurableItem | None:
        """The document's prepare waiting for a commit or an abort, if any."""
        k = as_bytes(key, "key")
        vb = self.vbucket(vbucket_of(k, self.num_vbuckets) if vbucket is None else vbucket)
        return vb.pending.get((collection_id, k))

    def _pending(
        self, key: bytes | str, collection_id: int, vbucket: int | None, what: str
    ) -> tuple[bytes, VBucket]:
        k, vb = self._locate(key, vbucket, collection_id)
        if (collection_id, k) not in vb.pending:
            raise ModelError(f"no pending durable write of {k!r} to {what}")
        return k, vb

    def commit(
        self, key: bytes | str, *, collection_id: int = 0, vbucket: int | None = None
    ) -> CommittedItem:
        """Commit the document's pending prepare: its value becomes visible at the next
        seqno. ``ModelError`` if it has none."""
        k, vb = self._pending(key, collection_id, vbucket, "commit")
        item = vb.commit(k, collection_id)
        self.wrote(vb.vbid)
        return item

    def abort(
        self, key: bytes | str, *, collection_id: int = 0, vbucket: int | None = None
    ) -> DurableItem:
        """Abort the document's pending prepare (an abort at the next seqno; the
        committed document, if any, stays as it was). ``ModelError`` if it has none."""
        k, vb = self._pending(key, collection_id, vbucket, "abort")
        item = vb.abort(k, collection_id, self._next_cas())
        self.wrote(vb.vbid)
        return item
