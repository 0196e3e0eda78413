"""A corpus larger than memory served as the bucket's disk (``serve --corpus DIR --on-disk``).

A corpus's files are in history order (a logical partition per file), while a backfill
reads one vbucket in seqno order; a data node keeps one data file per vbucket (kv_engine
``docs/BackfillManager.md``, couchstore's ``<vbid>.couch.<rev>``). So the first start
imports the corpus once into per-vbucket files in a cache directory, and later starts
with an unchanged corpus map them again:

* ``vbNNNN.frames``: the canonical frames of the vbucket's documents one after the other,
  exactly as ``ColdSegment.buf`` holds them (``mockdcp.model.HEAD_DTYPE``: header and
  DCP_MUTATION extras, the LEB128 collection prefix, key, value), seqno order;
* ``vbNNNN.starts.npy`` (offsets), ``.cids.npy``, ``.tags.npy``, and the key index
  ``.hashes.npy`` (sorted ``stable_key_hash``) and ``.order.npy`` (the slot of each);
* ``segments.json``: each vbucket's first seqno, count and last slot a collection, the
  highest CAS given, the import's counts; written last, so a directory without it is an
  import that did not finish.

The files hold the corpus's final state as a compacted disk holds it: one version a live
key (its last write, with the corpus's ``rev``), consecutive seqnos in the order of the
keys' last writes, the keys whose last row is a delete or an expiry gone with their
tombstones (purged, as compaction purges them after the metadata purge interval).
Every key's rows are in one file (``mockdcp corpus`` writes a logical partition a file),
so each file is reduced to its keys' last rows on its own; a key found live in two files,
or live in one and deleted or expired in another, is refused by name. The cache
directory (``$MOCKDCP_CACHE`` or ``~/.cache/mockdcp``, then ``ondisk/<digest>``) is named
by a digest of the corpus's manifest, file names, sizes and modification times, and of
the bucket's vbucket count, collections and first seqnos; the corpus itself is only read.

``check_corpus`` reads every file's footer before anything is served: a truncated file, a
file of another schema, or files that do not add up to the manifest's rows are named.
``corpus_fingerprint`` is the cheap part (names, sizes, times) a server compares every
few seconds to report a corpus changed under it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp.data._cache import cache_root
from mockdcp.data._errors import PipelineError
from mockdcp.data._schema import (
    CORPUS_COLUMNS,
    CORPUS_FORMAT,
    CORPUS_VERSION,
    MANIFEST,
    OP_DELETE,
    OP_EXPIRE,
    OP_INSERT,
    OP_UPDATE,
    check_columns,
    parquet_files,
    read_manifest,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import pyarrow as pa
    from numpy.typing import NDArray

    from mockdcp.model import Bucket, DiskSegment

#: bumped whenever the cache's files change layout or meaning
CACHE_VERSION = 1
SEGMENTS = "segments.json"
#: rows framed at once (the gather's index is 8 bytes a frame byte)
FRAME_ROWS = 8192
#: bytes a vbucket's pending frames reach before they are appended to its file
FLUSH_BYTES = 1 << 18
_MAX_VALUE = 20 * 1024 * 1024
_OPS = (OP_INSERT, OP_UPDATE, OP_DELETE, OP_EXPIRE)
#: a slot's row in the import's temporary column file
_META = [("size", "<u4"), ("cid", "<u4"), ("tag", "u1"), ("hash", "<i8")]
#: a key whose last row in a file deletes or expires it: where that row is
_GONE = [("vb", "<i4"), ("hash", "<i8"), ("file", "<i4"), ("row", "<i8")]


# -- the corpus's files -------------------------------------------------------------------


def corpus_fingerprint(path: str | Path) -> list[tuple[str, int, int]]:
    """(name, size, modification time in ns) of the corpus's Parquet files and manifest,
    sorted: what a changed corpus changes. ``PipelineError`` when there are no files."""
    root = Path(path)
    files = parquet_files(root)
    if root.is_dir() and (root / MANIFEST).is_file():
        files = [*files, root / MANIFEST]
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError as exc:
            raise PipelineError(f"{f}: {exc.strerror}") from None
        name = str(f.relative_to(root)) if root.is_dir() else f.name
        out.append((name, st.st_size, st.st_mtime_ns))
    return sorted(out)


def fingerprint_changes(
    before: list[tuple[str, int, int]], after: list[tuple[str, int, int]]
) -> list[str]:
    """What changed between two fingerprints, one phrase a file."""
    old = {name: (size, mtime) for name, size, mtime in before}
    new = {name: (size, mtime) for name, size, mtime in after}
    changes = [f"{name} removed" for name in sorted(old.keys() - new.keys())]
    changes += [f"{name} added" for name in sorted(new.keys() - old.keys())]
    for name in sorted(old.keys() & new.keys()):
        if old[name][0] != new[name][0]:
            changes.append(f"{name} size {old[name][0]} -> {new[name][0]}")
        elif old[name][1] != new[name][1]:
            changes.append(f"{name} modified")
    return changes


def check_corpus(path: str | Path) -> int:
    """Read every file's footer and check its columns; returns the corpus's rows.

    ``PipelineError`` naming the file (and column) at fault: a file that is not
    Parquet or is cut short, a missing or mistyped column in any file (not only the
    first), or files whose rows do not add up to the manifest's ``rows`` (a file missing
    or added since ``mockdcp corpus`` wrote it)."""
    import pyarrow.parquet as pq

    root = Path(path)
    manifest = read_manifest(root, CORPUS_FORMAT, CORPUS_VERSION) if root.is_dir() else None
    rows = 0
    for f in parquet_files(root):
        try:
            meta = pq.read_metadata(f)
            schema = meta.schema.to_arrow_schema()
        except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
            raise PipelineError(f"{f}: not a readable Parquet file ({exc})") from None
        check_columns(schema, CORPUS_COLUMNS, str(f))
        rows += meta.num_rows
    expected = manifest.get("rows") if manifest else None
    if isinstance(expected, int) and expected != rows:
        raise PipelineError(
            f"{root}: its manifest says {expected} rows, its Parquet files hold {rows}: "
            "a file is missing or was added"
        )
    return rows


# -- the import ------------------------------------------------------------------------------


@attrs.frozen
class Plan:
    """What the files depend on besides the corpus: the bucket's vbucket count, each
    vbucket's first seqno (after its system events), the collection ids by name, and
    the first CAS to give."""

    vbuckets: int
    first_seqnos: tuple[int, ...]
    collections: tuple[tuple[str, str, int], ...]
    first_cas: int

    @classmethod
    def of(cls, bucket: Bucket) -> Plan:
        manifest = bucket.manifest
        names = [(*manifest.name_of(cid), cid) for cid in manifest.collections]
        return cls(
            bucket.num_vbuckets,
            tuple(vb.high_seqno + 1 for vb in bucket.vbuckets),
            tuple(sorted(names)),
            bucket.reserve_cas(0),
        )

    def key(self) -> dict[str, Any]:
        """The part of the plan the files depend on (the CAS does not name them)."""
        return {
            "vbuckets": self.vbuckets,
            "first_seqnos": list(self.first_seqnos),
            "collections": [list(c) for c in self.collections],
        }


@attrs.frozen
class OnDiskReport:
    """What opening an on-disk corpus did: rows read and documents kept (zero rows when
    the cache was reused), the cache directory, and the seconds it took."""

    rows: int
    documents: int
    removed: int
    imported: bool
    directory: Path
    seconds: float


def cache_dir(path: str | Path, plan: Plan, root: Path | None = None) -> Path:
    """The cache directory of the corpus at ``path`` for ``plan``."""
    body = json.dumps(
        {
            "cache": CACHE_VERSION,
            "corpus": str(Path(path).resolve()),
            "files": corpus_fingerprint(path),
            **plan.key(),
        },
        sort_keys=True,
    )
    digest = hashlib.blake2b(body.encode(), digest_size=12).hexdigest()
    return (root or cache_root()) / "ondisk" / digest


def import_corpus(
    path: str | Path,
    plan: Plan,
    out: Path,
    *,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Import the corpus into ``out`` (made here, through a temporary sibling renamed at
    the end); returns the ``segments.json`` body. ``PipelineError`` naming the file,
    column and key of a bad row (nothing left behind)."""
    import pyarrow.parquet as pq

    files = parquet_files(Path(path))
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    writer = _Writer(tmp, plan)
    ids = {(s, c): cid for s, c, cid in plan.collections}
    names = [name for name, _, _ in CORPUS_COLUMNS]
    started = time.perf_counter()
    try:
        for n, f in enumerate(files, 1):
            try:
                table = pq.read_table(f, columns=names)
            except (OSError, ValueError) as exc:
                raise PipelineError(f"{f}: not readable as Parquet ({exc})") from None
            writer.add_file(str(f), table, ids)
            if progress is not None:
                rate = writer.rows / max(time.perf_counter() - started, 1e-9)
                progress(
                    f"mockdcp --on-disk: imported {n}/{len(files)} files, {writer.rows:,} rows "
                    f"({rate:,.0f} rows/s)"
                )
        body = writer.finish(source=str(Path(path).resolve()))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(out)
    os.replace(tmp, out)
    _remove_stale(out, body)
    return body


def _remove_stale(out: Path, body: dict[str, Any]) -> None:
    """Remove the imports beside ``out`` of the same corpus directory and bucket layout:
    made from the corpus before it changed, they would never be read again."""
    for other in out.parent.iterdir():
        if other == out or not (other / SEGMENTS).is_file():
            continue
        try:
            seen = json.loads((other / SEGMENTS).read_text())
        except (OSError, ValueError):
            continue
        if (seen.get("source"), seen.get("plan")) == (body["source"], body["plan"]):
            shutil.rmtree(other, ignore_errors=True)


class _Writer:
    """The import's state: each vbucket's next seqno, pending frames and columns
    (appended to its files past ``FLUSH_BYTES``), and the counts."""

    def __init__(self, directory: Path, plan: Plan) -> None:
        self.directory = directory
        self.plan = plan
        self.next = list(plan.first_seqnos)
        self.cas = plan.first_cas
        self.frames: list[list[bytes]] = [[] for _ in range(plan.vbuckets)]
        self.metas: list[list[bytes]] = [[] for _ in range(plan.vbuckets)]
        self.pending = [0] * plan.vbuckets
        self.rows = self.documents = self.removed = 0
        #: the files added, and the keys each removed (``_GONE`` records)
        self.files: list[str] = []
        self.gone: list[NDArray[Any]] = []
        self.ids: dict[tuple[str, str], int] = {}

    def path(self, vbid: int, suffix: str) -> Path:
        return self.directory / f"vb{vbid:04d}.{suffix}"

    def add_file(self, where: str, table: pa.Table, ids: dict[tuple[str, str], int]) -> None:
        """One corpus file: its keys' last rows, the writes among them framed and
        appended to their vbuckets in the order of those rows."""
        import numpy as np
        import pyarrow as pa

        n = table.num_rows
        self.rows += n
        self.files.append(where)
        self.ids = ids
        if not n:
            return
        table = table.combine_chunks()
        cids = _collection_ids(where, table, ids)
        ops = _op_codes(where, table)
        keys = table.column("key").chunk(0).cast(pa.large_binary())
        last = np.sort(
            pa.table({"cid": cids, "key": keys, "row": np.arange(n, dtype=np.int64)})
            .group_by(["cid", "key"], use_threads=False)
            .aggregate([("row", "max")])
            .column("row_max")
            .to_numpy()
        )
        writes = last[ops[last] < 2]
        gone = last[ops[last] >= 2]
        self.removed += len(gone)
        if len(gone):
            self._note_gone(keys, cids, gone)
        if not len(writes):
            return
        rows = table.take(pa.array(writes))
        keys = rows.column("key").chunk(0).cast(pa.large_binary())
        values = rows.column("value").chunk(0)
        if values.null_count:
            bad = keys[int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])]
            raise PipelineError(
                f"{where}: column 'value': key {bad.as_py()!r}: an insert or update without a value"
            )
        values = values.cast(pa.large_binary())
        columns = {
            name: rows.column(name).chunk(0).to_numpy()
            for name in ("datatype", "flags", "expiry", "rev")
        }
        kdata, kstarts, klens = _binary(keys)
        vdata, vstarts, vlens = _binary(values)
        row_cids = cids.take(pa.array(writes)).to_numpy().astype(np.uint32)
        _check_rows(where, keys, klens, vlens, columns)
        _check_values(where, keys, values, columns["datatype"])
        vbids, hashes = self._place(kdata, kstarts, klens, row_cids)
        by_vb = np.argsort(vbids, kind="stable")
        for lo in range(0, len(by_vb), FRAME_ROWS):
            pick = by_vb[lo : lo + FRAME_ROWS]
            self._frame(
                vbids[pick].astype(np.int64),
                row_cids[pick],
                hashes[pick],
                (kdata, kstarts[pick], klens[pick]),
                (vdata, vstarts[pick], vlens[pick]),
                {name: col[pick] for name, col in columns.items()},
            )
        pa.default_memory_pool().release_unused()

    def _place(
        self,
        kdata: NDArray[np.uint8],
        kstarts: NDArray[np.int64],
        klens: NDArray[np.int64],
        cids: NDArray[np.uint32],
    ) -> tuple[NDArray[np.integer[Any]], NDArray[np.int64]]:
        """Each key's vbucket (libcouchbase ``vbucket_map``: crc32 >> 16 & 0x7FFF,
        modulo the vbuckets) and its ``stable_key_hash`` in its collection."""
        from mockdcp.model import crc32_keys, stable_key_hashes

        vbids = ((crc32_keys(kdata, kstarts, klens) >> 16) & 0x7FFF) % self.plan.vbuckets
        return vbids, stable_key_hashes(kdata, kstarts, klens, cids)

    def _note_gone(self, keys: pa.Array, cids: pa.Array, gone: NDArray[np.int64]) -> None:
        """Keys whose last row in this file deletes or expires them (``keys``: the
        file's key column, large binary): each file is reduced on its own, so such a
        key live in another file is refused at the end (``_check_unique``)."""
        import numpy as np
        import pyarrow as pa

        at = pa.array(gone)
        kdata, kstarts, klens = _binary(keys.take(at))
        record = np.empty(len(gone), _GONE)
        record["vb"], record["hash"] = self._place(
            kdata, kstarts, klens, cids.take(at).to_numpy().astype(np.uint32)
        )
        record["file"], record["row"] = len(self.files) - 1, gone
        self.gone.append(record)

    def _frame(
        self,
        vbids: NDArray[np.int64],
        cids: NDArray[np.uint32],
        hashes: NDArray[np.int64],
        key: tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64]],
        value: tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64]],
        columns: dict[str, NDArray[Any]],
    ) -> None:
        """Frame rows (sorted by vbucket) and stage each vbucket's run."""
        import numpy as np

        from mockdcp.model import HEAD, HEAD_DTYPE, build_tags
        from mockdcp.protocol import collection_prefix

        m = len(vbids)
        found, at, counts = np.unique(vbids, return_index=True, return_counts=True)
        rank = np.arange(m, dtype=np.int64) - np.repeat(at, counts)
        nexts = np.asarray(self.next, np.int64)
        seqnos = nexts[vbids] + rank
        for vbid, count in zip(found.tolist(), counts.tolist(), strict=True):
            self.next[vbid] += count
        unique_cids = np.unique(cids)
        table = b"".join(collection_prefix(int(c)) for c in unique_cids.tolist())
        plen_of = np.array([len(collection_prefix(int(c))) for c in unique_cids.tolist()])
        poff_of = np.concatenate([[0], np.cumsum(plen_of)[:-1]]).astype(np.int64)
        which = np.searchsorted(unique_cids, cids)
        plens, poffs = plen_of[which].astype(np.int64), poff_of[which]
        kdata, kstarts, klens = key
        vdata, vstarts, vlens = value
        dts = columns["datatype"].astype(np.uint8)
        head = np.zeros(m, HEAD_DTYPE)
        head["magic"], head["opcode"], head["extlen"] = 0x80, 0x57, 31
        head["keylen"], head["datatype"], head["vbucket"] = plens + klens, dts, vbids
        head["bodylen"] = 31 + plens + klens + vlens
        head["cas"] = self.cas + np.arange(m, dtype=np.uint64)
        self.cas += m
        head["seqno"], head["rev"] = seqnos, columns["rev"]
        head["flags"] = columns["flags"].astype(np.uint32)
        head["expiry"] = columns["expiry"].astype(np.uint32)
        # one gather: every frame's four pieces (head, prefix, key, value) from one source
        heads = head.view(np.uint8)
        source = np.concatenate([heads, np.frombuffer(table, np.uint8), kdata, vdata])
        base_p, base_k = len(heads), len(heads) + len(table)
        base_v = base_k + len(kdata)
        seg_from = np.empty((m, 4), np.int64)
        seg_from[:, 0] = np.arange(m, dtype=np.int64) * HEAD
        seg_from[:, 1] = base_p + poffs
        seg_from[:, 2] = base_k + kstarts
        seg_from[:, 3] = base_v + vstarts
        seg_len = np.empty((m, 4), np.int64)
        seg_len[:, 0], seg_len[:, 1], seg_len[:, 2], seg_len[:, 3] = HEAD, plens, klens, vlens
        flat_len = seg_len.ravel()
        ends = np.cumsum(flat_len)
        total = int(ends[-1])
        index = np.repeat(seg_from.ravel() - (ends - flat_len), flat_len)
        index += np.arange(total, dtype=np.int64)
        frames = source[index]
        del index, source
        sizes = seg_len.sum(axis=1)
        meta = np.empty(m, _META)
        meta["size"], meta["cid"], meta["hash"] = sizes, cids, hashes
        meta["tag"] = build_tags(dts, cids, vlens)
        frame_at = np.concatenate([[0], np.cumsum(sizes)])
        for vbid, lo, count in zip(found.tolist(), at.tolist(), counts.tolist(), strict=True):
            hi = lo + count
            self.frames[vbid].append(frames[frame_at[lo] : frame_at[hi]].tobytes())
            self.metas[vbid].append(meta[lo:hi].tobytes())
            self.pending[vbid] += int(frame_at[hi] - frame_at[lo])
            if self.pending[vbid] >= FLUSH_BYTES:
                self._flush(vbid)
        self.documents += m

    def _flush(self, vbid: int) -> None:
        if not self.frames[vbid]:
            return
        with self.path(vbid, "frames").open("ab") as f:
            f.write(b"".join(self.frames[vbid]))
        with self.path(vbid, "meta").open("ab") as f:
            f.write(b"".join(self.metas[vbid]))
        self.frames[vbid], self.metas[vbid], self.pending[vbid] = [], [], 0

    def finish(self, source: str) -> dict[str, Any]:
        """Each vbucket's columns and key index, then ``segments.json``."""
        import numpy as np

        segments: dict[str, Any] = {}
        gone = np.concatenate(self.gone) if self.gone else np.empty(0, _GONE)
        gone = gone[np.argsort(gone["vb"], kind="stable")]
        gone_at = np.searchsorted(gone["vb"], np.arange(self.plan.vbuckets + 1))
        for vbid in range(self.plan.vbuckets):
            self._flush(vbid)
            meta_path = self.path(vbid, "meta")
            if not meta_path.exists():
                continue
            meta = np.fromfile(meta_path, _META)
            meta_path.unlink()
            starts = np.zeros(len(meta) + 1, np.int64)
            np.cumsum(meta["size"], out=starts[1:])
            cids = np.ascontiguousarray(meta["cid"])
            hashes = np.ascontiguousarray(meta["hash"])
            order = np.argsort(hashes, kind="stable").astype(np.int32)
            hashes = hashes[order]
            np.save(self.path(vbid, "starts.npy"), starts)
            np.save(self.path(vbid, "cids.npy"), cids)
            np.save(self.path(vbid, "tags.npy"), np.ascontiguousarray(meta["tag"]))
            np.save(self.path(vbid, "hashes.npy"), hashes)
            np.save(self.path(vbid, "order.npy"), order)
            found, back = np.unique(cids[::-1], return_index=True)
            pairs = zip(found.tolist(), back.tolist(), strict=True)
            last = {str(c): len(cids) - 1 - b for c, b in pairs}
            segments[str(vbid)] = {
                "first_seqno": self.plan.first_seqnos[vbid],
                "count": len(meta),
                "collection_last": last,
            }
            self._check_unique(vbid, gone[gone_at[vbid] : gone_at[vbid + 1]])
        body = {
            "cache": CACHE_VERSION,
            "source": source,
            "plan": self.plan.key(),
            "rows": self.rows,
            "documents": self.documents,
            "removed": self.removed,
            "last_cas": self.cas - 1,
            "segments": segments,
        }
        (self.directory / SEGMENTS).write_text(json.dumps(body, indent=1, sort_keys=True))
        return body

    def _check_unique(self, vbid: int, gone: NDArray[Any]) -> None:
        """``PipelineError`` when a key is live in two files, or live in one and deleted
        (or expired) in another (each file was reduced to its own keys' last rows):
        equal hashes are found, their keys compared."""
        import numpy as np

        hashes = np.load(self.path(vbid, "hashes.npy"), mmap_mode="r")
        same = np.flatnonzero(hashes[1:] == hashes[:-1])
        at = np.searchsorted(hashes, gone["hash"])
        removed = np.flatnonzero(hashes[np.minimum(at, len(hashes) - 1)] == gone["hash"])
        if not len(same) and not len(removed):
            return
        segment = _open_segment(self.directory, vbid, self.plan.first_seqnos[vbid], None)
        try:
            for i in same.tolist():
                a, b = int(segment.order[i]), int(segment.order[i + 1])
                ka = (int(segment.cids[a]), segment.key_at(a))
                if ka == (int(segment.cids[b]), segment.key_at(b)):
                    raise _in_two_files(ka, "written in two corpus files")
            for g in removed.tolist():
                slot = int(segment.order[int(at[g])])
                live = (int(segment.cids[slot]), segment.key_at(slot))
                if live == self._gone_key(gone[g]):
                    raise _in_two_files(live, "written in one corpus file and removed in another")
        finally:
            _close(segment)

    def _gone_key(self, record: Any) -> tuple[int, bytes]:  # noqa: ANN401 - a numpy record
        """The collection id and key of a removed key's last row, read from its file."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        where = self.files[int(record["file"])]
        table = pq.read_table(where, columns=["scope", "collection", "key"])
        row = table.slice(int(record["row"]), 1).combine_chunks()
        cid = int(_collection_ids(where, row, self.ids)[0].as_py())
        return cid, row.column("key").chunk(0).cast(pa.large_binary())[0].as_py()


def _in_two_files(key: tuple[int, bytes], how: str) -> PipelineError:
    cid, name = key
    return PipelineError(
        f"key {name.decode(errors='replace')!r} (collection {cid:#x}) is {how}: --on-disk "
        "needs each key's rows in one file, as mockdcp corpus writes them"
    )


def _collection_ids(where: str, table: pa.Table, ids: dict[tuple[str, str], int]) -> pa.Array:
    """Each row's collection id (uint32), or ``PipelineError`` naming a collection the
    bucket lacks."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    pairs = pc.binary_join_element_wise(
        table.column("scope").chunk(0).cast(pa.string()),
        table.column("collection").chunk(0).cast(pa.string()),
        "\x00",
    ).dictionary_encode()
    lookup = []
    for name in pairs.dictionary.to_pylist():
        scope, _, coll = name.partition("\x00")
        cid = ids.get((scope, coll))
        if cid is None:
            raise PipelineError(
                f"{where}: columns 'scope', 'collection': the corpus names collection "
                f"{scope}.{coll}, which the bucket does not have (serve --collections)"
            )
        lookup.append(cid)
    codes = pairs.indices.to_numpy(zero_copy_only=False)
    return pa.array(np.asarray(lookup, np.uint32)[codes])


def _op_codes(where: str, table: pa.Table) -> NDArray[np.int8]:
    """Each row's op: 0 insert, 1 update, 2 delete, 3 expire; ``PipelineError`` naming
    another."""
    import numpy as np
    import pyarrow as pa

    ops = table.column("op").chunk(0).cast(pa.string()).dictionary_encode()
    lookup = []
    for op in ops.dictionary.to_pylist():
        if op not in _OPS:
            raise PipelineError(f"{where}: column 'op': unknown op {op!r}")
        lookup.append(_OPS.index(op))
    out: NDArray[np.int8] = np.asarray(lookup, np.int8)[ops.indices.to_numpy(zero_copy_only=False)]
    return out


def _binary(
    array: pa.Array,
) -> tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64]]:
    """A large-binary array's bytes, each element's start and length (numpy views)."""
    import numpy as np

    _, offsets_buf, data_buf = array.buffers()
    offsets = np.frombuffer(offsets_buf, np.int64)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data, offsets[:-1], np.diff(offsets)


def _check_rows(
    where: str,
    keys: pa.Array,
    klens: NDArray[np.int64],
    vlens: NDArray[np.int64],
    columns: dict[str, NDArray[Any]],
) -> None:
    """``PipelineError`` naming the file, column and key of the first value the model
    would refuse (``mockdcp.model``'s ``set`` rules: a datatype of the JSON, SNAPPY and
    XATTR bits, kv_engine ``docs/Document.md``)."""
    import numpy as np

    checks = (
        ("key", (klens < 1) | (klens > 250), "a key has 1..250 bytes"),
        ("value", vlens > _MAX_VALUE, f"a value has at most {_MAX_VALUE} bytes"),
        (
            "datatype",
            (columns["datatype"] < 0) | (columns["datatype"] > 0x07),
            "a datatype has unknown bits (JSON 0x01, SNAPPY 0x02, XATTR 0x04)",
        ),
        ("flags", (columns["flags"] < 0) | (columns["flags"] > 0xFFFFFFFF), "flags are 32-bit"),
        (
            "expiry",
            (columns["expiry"] < 0) | (columns["expiry"] > 0xFFFFFFFF),
            "an expiry is 32-bit",
        ),
        ("rev", columns["rev"] < 1, "a rev is at least 1"),
    )
    for column, bad, rule in checks:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise PipelineError(f"{where}: column {column!r}: key {keys[i].as_py()!r}: {rule}")


def _check_values(where: str, keys: pa.Array, values: pa.Array, datatypes: NDArray[Any]) -> None:
    """``PipelineError`` naming the file and key of the first value that is not what its
    datatype says: SNAPPY must decompress, XATTR must open with a well-formed xattr
    section (``mockdcp.model``'s ``check_value``; kv_engine ``docs/Document.md``). The
    frame is stored as it is, and each stream makes the form its connection negotiated
    (xattrs stripped, decompressed...) from it, as from memory."""
    import numpy as np

    from mockdcp.model import check_value
    from mockdcp.util import ModelError

    for i in np.flatnonzero((datatypes & 0x06) != 0).tolist():
        try:
            check_value(values[i].as_py(), int(datatypes[i]))
        except ModelError as exc:
            raise PipelineError(
                f"{where}: column 'value': key {keys[i].as_py()!r}: {exc}"
            ) from None


# -- serving ------------------------------------------------------------------------------------


def _open_segment(
    directory: Path, vbid: int, first_seqno: int, collection_last: dict[int, int] | None
) -> DiskSegment:
    import numpy as np

    from mockdcp.model import DiskSegment

    def arr(suffix: str) -> NDArray[Any]:
        out: NDArray[Any] = np.load(directory / f"vb{vbid:04d}.{suffix}.npy", mmap_mode="r")
        return out

    with (directory / f"vb{vbid:04d}.frames").open("rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return DiskSegment(
        vbid,
        first_seqno,
        buf,
        arr("starts"),
        arr("cids"),
        arr("tags"),
        arr("hashes"),
        arr("order"),
        collection_last,
    )


def _close(segment: DiskSegment) -> None:
    if isinstance(segment.buf, mmap.mmap):
        segment.buf.close()


def open_segments(directory: Path) -> tuple[list[DiskSegment], dict[str, Any]]:
    """The segments of a finished import, and its ``segments.json``."""
    body = json.loads((directory / SEGMENTS).read_text())
    segments = []
    for vbid, seg in sorted(body["segments"].items(), key=lambda kv: int(kv[0])):
        last = {int(c): int(s) for c, s in seg["collection_last"].items()}
        segments.append(_open_segment(directory, int(vbid), seg["first_seqno"], last))
    return segments, body


def load_on_disk(
    bucket: Bucket,
    path: str | Path,
    *,
    cache: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> OnDiskReport:
    """Serve the corpus at ``path`` as ``bucket``'s disk: check it, import it into the
    cache unless an unchanged import is there, and install each vbucket's segment.
    ``PipelineError`` for a bad corpus or a bucket that holds documents."""
    prepared = prepare_on_disk(bucket, path, cache=cache)
    if not prepared.ready:
        prepared.run_import(progress)
    return prepared.install(bucket)


@attrs.define
class PreparedOnDisk:
    """An on-disk corpus checked and planned (``prepare_on_disk``): ``run_import`` (in a
    worker thread if need be: it touches no bucket) unless ``ready``, then ``install``."""

    path: Path
    plan: Plan
    directory: Path
    fingerprint: list[tuple[str, int, int]]
    started: float
    imported: bool = False

    @property
    def ready(self) -> bool:
        return (self.directory / SEGMENTS).is_file()

    def run_import(self, progress: Callable[[str], None] | None = None) -> None:
        import_corpus(self.path, self.plan, self.directory, progress=progress)
        self.imported = True

    def install(self, bucket: Bucket) -> OnDiskReport:
        """Every vbucket takes its segment as its persisted documents."""
        if corpus_fingerprint(self.path) != self.fingerprint:
            raise PipelineError(f"{self.path} changed while it was imported")
        segments, body = open_segments(self.directory)
        for vb in bucket.vbuckets:
            vb.check_writable()
            if vb.holds_documents() or vb.high_seqno + 1 != self.plan.first_seqnos[vb.vbid]:
                raise PipelineError(f"vbucket {vb.vbid} already holds documents")
        with bucket.pause_collector():
            for segment in segments:
                bucket.vbuckets[segment.vbid].load_cold(segment)
        bucket.advance_cas(int(body["last_cas"]))
        bucket.touched([s.vbid for s in segments])
        return OnDiskReport(
            int(body["rows"]) if self.imported else 0,
            int(body["documents"]),
            int(body["removed"]),
            self.imported,
            self.directory,
            time.perf_counter() - self.started,
        )


def prepare_on_disk(
    bucket: Bucket, path: str | Path, *, cache: Path | None = None
) -> PreparedOnDisk:
    """Check the corpus (``check_corpus``) and find its cache directory for ``bucket``."""
    started = time.perf_counter()
    check_corpus(path)
    plan = Plan.of(bucket)
    fingerprint = corpus_fingerprint(path)
    return PreparedOnDisk(Path(path), plan, cache_dir(path, plan, cache), fingerprint, started)
