"""Loading a corpus into a bucket: pyarrow reads the Parquet in record batches (no Spark),
and each batch goes through the bucket's batch-loading path (``Bucket.set_many``).

The rows are applied in file order (file names sorted, rows in order), which is history
order: every key's rows are in one file, in order (``mockdcp corpus`` writes a logical
partition per file). Runs of inserts and updates go to ``set_many``; deletes and expiries
to ``Bucket.delete`` and ``Bucket.expire``. Into an empty bucket, the whole corpus goes
to the cold tier instead (``Bucket.cold_load``: persisted, in columns, tombstones
included, as a warmed-up data node holds a bulk-loaded corpus): runs of writes to
``ColdLoad.add``, runs of deletes or expiries to ``ColdLoad.remove``. Keys hash to
vbuckets inside the model, with CRC32 as Couchbase clients do (libcouchbase
``vbucket_map``).

``load_corpus`` (trio) yields to the event loop after every ``batch_rows`` rows, so a large
load never holds the server's loop for more than a few milliseconds; ``load_corpus_sync``
is the same without trio.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp.data._errors import PipelineError
from mockdcp.data._schema import (
    CORPUS_COLUMNS,
    CORPUS_FORMAT,
    CORPUS_VERSION,
    OP_DELETE,
    OP_EXPIRE,
    WRITE_OPS,
    open_dataset,
)
from mockdcp.util import ModelError, release_freed_memory

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pyarrow as pa
    import pyarrow.dataset as ds

    from mockdcp.model import Bucket, ColdLoad

#: Rows applied between two yields to the event loop.
BATCH_ROWS = 1000
#: Rows pyarrow reads at once (then applied ``batch_rows`` at a time).
READ_ROWS = 65536
DEFAULT_SCOPE = DEFAULT_COLLECTION = "_default"


@attrs.frozen
class LoadReport:
    """What a load did: rows read, documents written, deleted and expired, files read,
    and how long it took (seconds)."""

    rows: int
    written: int
    deleted: int
    expired: int
    files: int
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")


def collection_id(bucket: Bucket, scope: str, collection: str) -> int:
    """The id of collection ``scope.collection`` in ``bucket``; ``PipelineError`` naming it
    when the bucket has no such collection.

    The one place the loader turns names into ids, through the bucket's manifest.
    """
    try:
        return bucket.resolve_collection(f"{scope}.{collection}")
    except ModelError as exc:
        raise PipelineError(
            f"the corpus names collection {scope}.{collection}, which bucket "
            f"{bucket.name!r} does not have ({exc})"
        ) from None


def open_corpus(path: str | Path) -> ds.Dataset:
    """The corpus at ``path`` as a pyarrow dataset, its manifest and columns checked;
    ``PipelineError`` naming the problem otherwise."""
    return open_dataset(Path(path), CORPUS_COLUMNS, CORPUS_FORMAT, CORPUS_VERSION)


def _apply(
    bucket: Bucket,
    batch: pa.RecordBatch,
    ids: dict[tuple[str, str], int],
    cold: ColdLoad | None = None,
    removals: dict[int, tuple[str, str]] | None = None,
) -> list[int]:
    """Apply one slice of rows in order; returns [written, deleted, expired]. With
    ``cold``, every row is staged in it (a run of deletes or expiries through
    ``ColdLoad.remove``, each noted in ``removals`` by its row in the load, to name the
    one ``ColdLoad.finish`` may refuse)."""
    cols = {name: batch.column(name).to_pylist() for name, _, _ in CORPUS_COLUMNS}
    n = batch.num_rows
    counts = [0, 0, 0]
    i = 0
    while i < n:
        op = cols["op"][i]
        if op in WRITE_OPS:
            j = i
            while j < n and cols["op"][j] in WRITE_OPS:
                j += 1
            counts[0] += _write_run(bucket, cols, i, j, ids, cold)
            i = j
            continue
        if cold is not None and op in (OP_DELETE, OP_EXPIRE):
            j = i
            while j < n and cols["op"][j] == op:
                j += 1
            counts[1 if op == OP_DELETE else 2] += _remove_run(
                bucket, cols, i, j, ids, cold, removals
            )
            i = j
            continue
        key = cols["key"][i].encode()
        cid = _cid(bucket, ids, cols["scope"][i], cols["collection"][i])
        try:
            if op == OP_DELETE:
                bucket.delete(key, collection_id=cid)
                counts[1] += 1
            elif op == OP_EXPIRE:
                bucket.expire(key, collection_id=cid)
                counts[2] += 1
            else:
                raise PipelineError(f"row {cols['key'][i]!r}: unknown op {op!r}")
        except ModelError as exc:
            raise PipelineError(f"row {cols['key'][i]!r} ({op}): {exc}") from None
        i += 1
    return counts


def _remove_run(
    bucket: Bucket,
    cols: dict[str, list[Any]],
    i: int,
    j: int,
    ids: dict[tuple[str, str], int],
    cold: ColdLoad,
    removals: dict[int, tuple[str, str]] | None,
) -> int:
    """Rows ``i..j`` (all deletes, or all expiries) staged in the cold load."""
    op, keys = cols["op"][i], cols["key"][i:j]
    if removals is not None:
        noted = [(key, op) for key in keys]
        removals.update(zip(range(cold.count, cold.count + j - i), noted, strict=True))
    try:
        return cold.remove(
            [k.encode() for k in keys],
            collection_ids=[
                _cid(bucket, ids, s, c)
                for s, c in zip(cols["scope"][i:j], cols["collection"][i:j], strict=True)
            ],
            expiration=op == OP_EXPIRE,
        )
    except ModelError as exc:
        raise PipelineError(f"rows {keys[0]!r}..{keys[-1]!r}: {exc}") from None


def _finish(cold: ColdLoad, removals: dict[int, tuple[str, str]]) -> Iterator[int]:
    """``cold.finish_steps()``; a removal it refuses (a key not live there) as the
    ``PipelineError`` applying that row to memory raises, the rows before it loaded."""
    try:
        yield from cold.finish_steps()
    except ModelError as exc:
        if cold.refused is None:
            raise
        key, op = removals[cold.refused[0]]
        raise PipelineError(f"row {key!r} ({op}): {cold.refused[1]}") from exc


def _cid(bucket: Bucket, ids: dict[tuple[str, str], int], scope: str, coll: str) -> int:
    cid = ids.get((scope, coll))
    if cid is None:
        cid = ids[(scope, coll)] = collection_id(bucket, scope, coll)
    return cid


def _write_run(
    bucket: Bucket,
    cols: dict[str, list[Any]],
    i: int,
    j: int,
    ids: dict[tuple[str, str], int],
    cold: ColdLoad | None = None,
) -> int:
    values = cols["value"][i:j]
    if None in values:
        bad = cols["key"][i + values.index(None)]
        raise PipelineError(f"row {bad!r}: an insert or update without a value")
    try:
        write = bucket.set_many if cold is None else cold.add
        return write(
            [k.encode() for k in cols["key"][i:j]],
            [v if isinstance(v, bytes) else v.encode() for v in values],
            collection_ids=[
                _cid(bucket, ids, s, c)
                for s, c in zip(cols["scope"][i:j], cols["collection"][i:j], strict=True)
            ],
            flags=cols["flags"][i:j],
            expiry=cols["expiry"][i:j],
            datatypes=cols["datatype"][i:j],
        )
    except ModelError as exc:
        raise PipelineError(f"rows {cols['key'][i]!r}..{cols['key'][j - 1]!r}: {exc}") from None


def _steps(bucket: Bucket, path: str | Path, batch_rows: int) -> Iterator[tuple[int, list[int]]]:
    """Apply the corpus ``batch_rows`` rows at a time; yields (rows so far, counts).

    Into an empty bucket, the rows go to its cold tier (``Bucket.cold_load``: the
    corpus is the bucket's persisted disk, tombstones included, as a warmed-up node
    holds it); the cold load is installed at the end (in steps, each a yield), or
    before a bad row's error (the rows before it loaded, as into memory)."""
    if batch_rows < 1:
        raise PipelineError(f"batch_rows must be positive, not {batch_rows}")
    dataset = open_corpus(path)
    names = [name for name, _, _ in CORPUS_COLUMNS]
    ids: dict[tuple[str, str], int] = {}
    rows, counts = 0, [0, 0, 0]
    cold = _cold_load(bucket)
    removals: dict[int, tuple[str, str]] = {}
    try:
        for fragment in dataset.get_fragments():
            for batch in fragment.to_batches(columns=names, batch_size=READ_ROWS):
                for start in range(0, batch.num_rows, batch_rows):
                    piece = batch.slice(start, batch_rows)
                    done = _apply(bucket, piece, ids, cold, removals)
                    counts = [a + b for a, b in zip(counts, done, strict=True)]
                    rows += piece.num_rows
                    yield rows, counts
        if cold is not None:
            finishing, cold = cold, None  # (an error in it: not again)
            for _ in _finish(finishing, removals):
                yield rows, counts
    finally:
        if cold is not None:  # a bad row: the rows before it (or before an earlier
            for _ in _finish(cold, removals):  # refused removal) stay loaded
                pass
    if counts[0]:
        release_freed_memory()


def _cold_load(bucket: Bucket) -> ColdLoad | None:
    """A cold load into ``bucket`` if it holds no document yet, else ``None``."""
    try:
        return bucket.cold_load()
    except ModelError:
        return None


async def load_corpus(
    bucket: Bucket,
    path: str | Path,
    *,
    batch_rows: int = BATCH_ROWS,
    progress: Callable[[int], None] | None = None,
) -> LoadReport:
    """Load the corpus at ``path`` into ``bucket`` inside trio, yielding to the event loop
    after every ``batch_rows`` rows; ``progress(rows so far)`` after each batch.

    Raises ``PipelineError`` for a bad corpus (naming the missing or mistyped column, the
    collection the bucket lacks, the row the model refused). Rows before a bad one stay
    loaded.
    """
    import trio

    started = time.perf_counter()
    rows, counts = 0, [0, 0, 0]
    for rows, counts in _steps(bucket, path, batch_rows):  # noqa: B007 - the last ones count
        if progress is not None:
            progress(rows)
        await trio.lowlevel.checkpoint()
    return _report(path, rows, counts, started)


def load_corpus_sync(
    bucket: Bucket,
    path: str | Path,
    *,
    batch_rows: int = BATCH_ROWS,
    progress: Callable[[int], None] | None = None,
) -> LoadReport:
    """``load_corpus`` without trio (for a bucket no server is streaming from yet)."""
    started = time.perf_counter()
    rows, counts = 0, [0, 0, 0]
    for rows, counts in _steps(bucket, path, batch_rows):  # noqa: B007
        if progress is not None:
            progress(rows)
    return _report(path, rows, counts, started)


def _report(path: str | Path, rows: int, counts: list[int], started: float) -> LoadReport:
    from mockdcp.data._schema import parquet_files

    files = len(parquet_files(Path(path)))
    written, deleted, expired = counts
    return LoadReport(rows, written, deleted, expired, files, time.perf_counter() - started)
