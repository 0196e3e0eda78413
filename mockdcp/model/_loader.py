"""The bulk loader: a batch of documents written as ``Bucket.set`` would one by one.

A batch is validated whole before anything is written (``check_columns`` now, the rows a
step at a time), then written whole vbuckets at a time, each vbucket's rows through
``VBucket.write_rows`` (the items, seqnos, rev seqnos, de-duplication and frames that
``set`` makes, without a call per row). Steps let an event loop run other work while a
large bucket loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model._validate import Columns, Row, check_rows

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mockdcp.model._bucket import Bucket


class BulkLoad:
    """One batch of ``bucket``: ``steps()`` validates, then writes it (see
    ``Bucket.set_many_steps``)."""

    def __init__(self, bucket: Bucket, columns: Columns, rows_per_step: int) -> None:
        self.bucket = bucket
        self.columns = columns
        self.rows_per_step = max(1, rows_per_step)

    def steps(self) -> Iterator[int]:
        """Validate and group ``rows_per_step`` rows at a time (yielding 0 after each
        step but the last), then write them (``_write_steps``). The batch's CAS values
        are reserved at the first step: a ``set`` between two steps takes the CAS after
        them."""
        c, step = self.columns, self.rows_per_step
        count = len(c)
        first = self.bucket.reserve_cas(count)
        vbuckets = self.bucket.vbuckets
        lists: list[list[Row]] = [[] for _ in vbuckets]
        for a in range(0, count, step):
            b = min(a + step, count)
            dts = (
                c.datatypes
                if c.datatypes is None or isinstance(c.datatypes, int)
                else c.datatypes[a:b]
            )
            ks, vs, dt_col, vbids = check_rows(c.keys[a:b], c.values[a:b], dts, vbuckets, a)
            rows = zip(
                ks, c.collection_ids[a:b], vs, dt_col, c.flags[a:b], c.expiry[a:b],
                range(first + a, first + b),
                strict=True,
            )  # fmt: skip
            for vbid, row in zip(vbids, rows, strict=True):
                lists[vbid].append(row)
            if b < count:
                yield 0
        per_vb = {vbid: rows_of for vbid, rows_of in enumerate(lists) if rows_of}
        del lists  # each step frees the rows it wrote: no one long free at the end
        yield from self._write_steps(per_vb)

    def _write_steps(self, per_vb: dict[int, list[Row]]) -> Iterator[int]:
        """Write the grouped rows, whole vbuckets at a time."""
        step: list[int] = []
        size = 0
        for vbid in sorted(per_vb):  # ids only: the rows go as they are written
            step.append(vbid)
            size += len(per_vb[vbid])
            if size >= self.rows_per_step:
                yield self._write_vbuckets(per_vb, step)
                step, size = [], 0
        if step:
            yield self._write_vbuckets(per_vb, step)

    def _write_vbuckets(self, per_vb: dict[int, list[Row]], vbids: list[int]) -> int:
        """One step: the rows of ``vbids``, checked again (the model may have changed
        since the batch was validated), then written; returns how many."""
        bucket = self.bucket
        for cid in self.columns.collections:
            bucket.manifest.check_collection(cid)
        for vbid in vbids:
            bucket.vbuckets[vbid].check_writable()
        # Millions of new objects: the cyclic collector would walk the whole heap again
        # and again while they are made (about a third of a large load's time).
        with bucket.pause_collector():
            written = 0
            for vbid in vbids:
                rows = per_vb.pop(vbid)
                bucket.vbuckets[vbid].write_rows(rows)
                written += len(rows)
        bucket.notify(vbids)
        return written
