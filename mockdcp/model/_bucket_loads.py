"""The bucket's bulk loads: ``set_many`` in one go or in steps, and the cold tier's load
(``_loader``: whole vbuckets at a time, no Python step per item where it can).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model._bucket_core import BucketCore
from mockdcp.model._ephemeral import check_room, estimate
from mockdcp.model._validate import check_columns
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from contextlib import AbstractContextManager

    from mockdcp.model._loader import ColdLoad


class BulkLoads(BucketCore):
    """Writes of many documents at once (a part of ``Bucket``)."""

    pause_collector: Callable[[], AbstractContextManager[object]]

    def set_many(
        self,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        *,
        collection_ids: Sequence[int] | None = None,
        flags: Sequence[int] | int = 0,
        expiry: Sequence[int] | int = 0,
        datatypes: Sequence[int | None] | int | None = None,
    ) -> int:
        """Write many documents at once, as ``set`` would one after the other (the same
        items, seqnos, rev seqnos, de-duplication and frames; CAS from one reading of
        the clock for the whole batch, so equal to ``set``'s with a clock that does not
        move meanwhile). Returns how many were written.

        The whole batch is validated first: ``ModelError`` names the row and the field,
        and nothing is written. Streams are told once per vbucket, after the batch.
        """
        steps = self.set_many_steps(
            keys,
            values,
            collection_ids=collection_ids,
            flags=flags,
            expiry=expiry,
            datatypes=datatypes,
            rows_per_step=None,
        )
        # the collector off for the whole batch, its rows included (``_write_vbuckets``)
        with self.pause_collector():
            return sum(steps)

    def set_many_steps(
        self,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        *,
        collection_ids: Sequence[int] | None = None,
        flags: Sequence[int] | int = 0,
        expiry: Sequence[int] | int = 0,
        datatypes: Sequence[int | None] | int | None = None,
        rows_per_step: int | None = 1024,
    ) -> Iterator[int]:
        """``set_many`` in steps, for a caller that must not stop for long (an event
        loop loading a large bucket runs other work between two steps).

        The columns are checked now (``ModelError`` for a bad length or flag, as
        ``set_many``). The steps of the iterator returned then validate the rows,
        ``rows_per_step`` at a time (all of them when None), yielding 0 after each but
        the last (``ModelError`` naming the row and field: nothing is written), then
        write the rows of whole vbuckets, about ``rows_per_step`` rows a step (each
        vbucket's rows in batch order), tell their streams, and yield how many rows
        they wrote. The CAS values are reserved at the first step. A vbucket that
        stopped being active, or a collection dropped, meanwhile raises ``ModelError``
        at the step that would write it (the steps before stay written). Validating
        costs about 0.5 µs a row, writing 1.5 to 2 (fewer rows a vbucket, more: give
        large batches, tens of thousands of rows, for speed).
        """
        columns = check_columns(
            keys,
            values,
            collection_ids=collection_ids,
            flags=flags,
            expiry=expiry,
            datatypes=datatypes,
            check_collection=self.manifest.check_collection,
        )
        step = len(columns) if rows_per_step is None else rows_per_step
        settings = self.ephemeral
        if settings is not None and settings.memory_quota is not None:
            # the rows' sizes as given (a row of the wrong type is refused by name later)
            rows = zip(keys, values, strict=True)  # the columns' lengths were checked
            needed = sum(estimate(b"", b"") + _size(k) + _size(v) for k, v in rows)
            check_room(settings, self.memory_used(), needed)
        from mockdcp.model._loader import BulkLoad  # the loaders load on first use

        return BulkLoad(self, columns, step).steps()

    def cold_load(self) -> ColdLoad:
        """A bulk load into the cold tier (``mockdcp.model._cold``): batches given to
        ``ColdLoad.add`` (validated as ``set_many`` validates, framed, nothing visible
        yet), then ``ColdLoad.finish`` makes them every vbucket's persisted documents at
        once, as a node leaves a bulk load after warm-up: on disk, no checkpoint holding
        them, about 80 bytes of memory an item beside its key and value and no Python
        object per item. The documents get the seqnos, rev seqnos (a key loaded twice:
        one more the second time; the first version is replaced), CAS and frames
        ``set_many`` gives them; streams read them from disk.

        ``ModelError`` if a vbucket already holds a document (the cold tier is a bulk
        load into an empty bucket), and, at ``finish``, if one was written meanwhile;
        also on an ephemeral bucket with a memory quota, whose writes the quota counts
        one batch at a time (``set_many``: a full noEviction bucket refuses them)."""
        if self.ephemeral is not None and self.ephemeral.memory_quota is not None:
            raise ModelError(
                "an ephemeral bucket with a memory quota loads through set_many (its quota"
                " counts every write)"
            )
        from mockdcp.model._loader import ColdLoad

        return ColdLoad(self)

    def load_cold(
        self,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        *,
        collection_ids: Sequence[int] | None = None,
        flags: Sequence[int] | int = 0,
        expiry: Sequence[int] | int = 0,
        datatypes: Sequence[int | None] | int | None = None,
    ) -> int:
        """One batch through ``cold_load``; returns how many documents."""
        load = self.cold_load()
        load.add(
            keys,
            values,
            collection_ids=collection_ids,
            flags=flags,
            expiry=expiry,
            datatypes=datatypes,
        )
        return load.finish()


def _size(value: object) -> int:
    """``len(value)`` of a row's key or value, 0 for what has none (refused later)."""
    return len(value) if isinstance(value, (bytes, bytearray, memoryview, str)) else 0
