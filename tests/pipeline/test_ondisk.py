"""``--corpus DIR --on-disk`` (``mockdcp.data._ondisk``): the import's final state against
the in-memory load of the same corpus, the cache's reuse, bad input named before anything
is served, and a corpus changed under a running server reported."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mockdcp.data import PipelineError, check_corpus, load_on_disk
from mockdcp.data._schema import MANIFEST
from mockdcp.model import Bucket
from mockdcp.pipeline import CorpusSpec, generate_partition, load_corpus_sync
from mockdcp.producer._encoder import Form
from tests.producer.test_forms import FORMS, expected, stream_items

from .conftest import new_bucket

if TYPE_CHECKING:
    from pathlib import Path

    from mockdcp.model import Item
    from mockdcp.producer._controls import DcpSettings

SPEC = CorpusSpec(docs=900, seed=4, partitions=3, hot_share=0.05, hot_updates=4)
SERVE = [sys.executable, "-m", "mockdcp", "serve", "--port", "0", "--http-port", "0"]


def _write(directory: Path, spec: CorpusSpec = SPEC) -> Path:
    directory.mkdir(exist_ok=True)
    rows = 0
    for p in range(spec.num_partitions):
        table = generate_partition(spec, p)
        rows += table.num_rows
        pq.write_table(table, directory / f"part-{p:05d}.parquet", row_group_size=200)
    body = {"format": "mockdcp-corpus", "version": 1, "rows": rows}
    (directory / MANIFEST).write_text(json.dumps(body))
    return directory


def _doc(item: Item) -> tuple[Any, ...]:
    return (item.vbucket, item.rev_seqno, item.flags, item.expiry, item.datatype, item.value)


def _live_keys(bucket: Bucket) -> list[list[bytes]]:
    return [[it.key for it in vb.all_items() if not it.deleted] for vb in bucket.vbuckets]


def test_on_disk_holds_the_final_state_the_in_memory_load_holds(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    memory, disk = new_bucket(), new_bucket()
    load_corpus_sync(memory, corpus)
    report = load_on_disk(disk, corpus, cache=tmp_path / "cache")
    assert report.imported
    assert report.removed > 0  # the corpus has deletes and expiries
    want = {k: _doc(v) for k, v in memory.oracle().items()}
    assert {k: _doc(v) for k, v in disk.oracle().items()} == want
    assert report.documents == len(want)
    # the same keys in each vbucket, in the order of their last writes
    assert _live_keys(disk) == _live_keys(memory)
    # seqnos consecutive from 1: a compacted disk
    for vb in disk.vbuckets:
        seqnos = [it.seqno for it in vb.all_items()]
        assert seqnos == list(range(1, len(seqnos) + 1))


def test_a_second_start_reuses_the_import(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    first = load_on_disk(new_bucket(), corpus, cache=tmp_path / "cache")
    again = new_bucket()
    second = load_on_disk(again, corpus, cache=tmp_path / "cache")
    assert first.imported
    assert not second.imported
    assert second.directory == first.directory
    assert len(again.oracle()) == first.documents


def test_a_changed_corpus_or_another_vbucket_count_is_imported_again(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    first = load_on_disk(new_bucket(), corpus, cache=tmp_path / "cache")
    other = load_on_disk(new_bucket(16), corpus, cache=tmp_path / "cache")
    assert other.imported
    assert other.directory != first.directory
    stamp = time.time_ns() + 10**9
    os.utime(corpus / "part-00001.parquet", ns=(stamp, stamp))
    changed = load_on_disk(new_bucket(), corpus, cache=tmp_path / "cache")
    assert changed.imported
    assert changed.directory not in (first.directory, other.directory)
    assert not first.directory.exists()  # the stale import of the same layout is removed
    assert other.directory.exists()


def test_writes_deletes_and_backfills_over_an_on_disk_corpus(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    memory, disk = new_bucket(), new_bucket()
    for b, load in ((memory, load_corpus_sync), (disk, None)):
        if load is None:
            load_on_disk(b, corpus, cache=tmp_path / "cache")
        else:
            load(b, corpus)
    some = sorted(k for _, k in memory.oracle())[:20]
    for b in (memory, disk):
        for key in some[:10]:
            b.set(key, b'{"new":true}')
        for key in some[10:]:
            b.delete(key)
        b.persist()
    want = {k: _doc(v) for k, v in memory.oracle().items()}
    assert {k: _doc(v) for k, v in disk.oracle().items()} == want
    for vbm, vbd in zip(memory.vbuckets, disk.vbuckets, strict=True):
        snap = vbd.disk_snapshot(0, frames=True)
        assert len(snap.seqnos) == len(vbd.disk_snapshot(0).items)
        got = [(it.key, it.deleted, it.value) for it in vbd.disk_snapshot(0).items]
        # the in-memory load keeps the corpus's own tombstones; the disk purged them
        exp = [
            (it.key, it.deleted, it.value)
            for it in vbm.disk_snapshot(0).items
            if not it.deleted or it.key in some
        ]
        assert got == exp


def _break(corpus: Path, how: str) -> str:
    """Spoil the corpus; returns what the error must name."""
    part = corpus / "part-00001.parquet"
    if how == "truncated":
        data = part.read_bytes()
        part.write_bytes(data[: len(data) // 2])
        return "part-00001.parquet: not a readable Parquet file"
    if how == "missing":
        part.unlink()
        return "manifest says"
    if how == "schema":
        table = pq.read_table(part)
        i = table.schema.get_field_index("flags")
        table = table.set_column(i, "flags", pa.array(["x"] * table.num_rows))
        pq.write_table(table, part)
        return "part-00001.parquet: column 'flags' is string, not int64"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated", "missing", "schema"])
def test_a_bad_corpus_file_is_named_before_anything_is_imported(tmp_path: Path, how: str) -> None:
    corpus = _write(tmp_path / "c")
    named = _break(corpus, how)
    with pytest.raises(PipelineError, match=named):
        check_corpus(corpus)
    with pytest.raises(PipelineError, match=named):
        load_on_disk(new_bucket(), corpus, cache=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_a_bad_row_is_named_with_its_file_and_column_and_leaves_no_cache(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    part = corpus / "part-00002.parquet"
    table = pq.read_table(part)
    flags = [1 << 40] * table.num_rows
    table = table.set_column(table.schema.get_field_index("flags"), "flags", pa.array(flags))
    pq.write_table(table, part)
    with pytest.raises(PipelineError, match=r"part-00002.parquet: column 'flags': key .*32-bit"):
        load_on_disk(new_bucket(), corpus, cache=tmp_path / "cache")
    assert not any((tmp_path / "cache" / "ondisk").iterdir())


def test_a_key_written_in_two_files_is_refused(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    table = generate_partition(SPEC, 0).slice(0, 5)
    pq.write_table(table, corpus / "part-00009.parquet")
    (corpus / MANIFEST).unlink()  # a foreign corpus: no manifest
    with pytest.raises(PipelineError, match="written in two corpus files"):
        load_on_disk(new_bucket(), corpus, cache=tmp_path / "cache")


@pytest.mark.parametrize("removed", ["delete", "expire"])
def test_a_key_live_in_one_file_and_removed_in_another_is_refused(
    tmp_path: Path, removed: str
) -> None:
    """Each file is reduced to its own keys' last rows: without this check the key would
    be served live although the corpus's last word on it removes it."""
    corpus = _write(tmp_path / "c")
    table = pq.read_table(corpus / "part-00000.parquet")
    ops, keys = table.column("op").to_pylist(), table.column("key").to_pylist()
    live = next(i for i in range(len(keys) - 1, -1, -1) if ops[i] in ("insert", "update"))
    row = table.slice(live, 1)
    row = row.set_column(row.schema.get_field_index("op"), "op", pa.array([removed]))
    pq.write_table(row, corpus / "part-00009.parquet")
    (corpus / MANIFEST).unlink()  # a foreign corpus: no manifest
    with pytest.raises(PipelineError, match="written in one corpus file and removed in another"):
        load_on_disk(new_bucket(), corpus, cache=tmp_path / "cache")
    assert not any((tmp_path / "cache" / "ondisk").iterdir())


def _serve(corpus: Path, cache: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "MOCKDCP_CACHE": str(cache)}
    return subprocess.Popen(
        [*SERVE, "--vbuckets", "16", "--json", "--corpus", str(corpus), "--on-disk"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_serve_on_disk_serves_the_corpus_and_reports_it_changed(tmp_path: Path) -> None:
    import urllib.request

    corpus = _write(tmp_path / "c")
    with _serve(corpus, tmp_path / "cache") as proc:
        try:
            assert proc.stdout is not None
            assert proc.stderr is not None
            ready = json.loads(proc.stdout.readline())
            assert ready["event"] == "ready"
            lines = [proc.stderr.readline() for _ in range(SPEC.num_partitions + 1)]
            assert "imported 3/3 files" in lines[-2]
            assert "mockdcp on disk:" in lines[-1]
            stamp = time.time_ns() + 10**9
            os.utime(corpus / "part-00000.parquet", ns=(stamp, stamp))
            changed = proc.stderr.readline()
            assert "part-00000.parquet modified" in changed
            with urllib.request.urlopen(ready["http"] + "/mock/state", timeout=10) as reply:
                state = json.loads(reply.read())
            assert state["corpus"]["on_disk"] is True
            assert state["corpus"]["changed"] == ["part-00000.parquet modified"]
        finally:
            proc.terminate()
            proc.communicate(timeout=10)


def test_serve_on_disk_refuses_a_truncated_file_before_ready(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    named = _break(corpus, "truncated")
    with _serve(corpus, tmp_path / "cache") as proc:
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert out == ""
    assert named in err


def _change(b: Bucket, keys: list[bytes]) -> None:
    """Writes, deletes (one tombstone purged), a write over a deleted key."""
    for key in keys[:5]:
        b.set(key, b'{"new":1}')
    for key in keys[5:10]:
        b.delete(key)
    b.set(keys[6], b'{"back":1}')
    b.set(b"brand-new", b"{}")
    b.persist()
    b.purge()


def _merge(
    start: dict[tuple[str, str, str], tuple[Any, ...]], body: dict[str, Any]
) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    """The corpus's final state merged with ``GET /mock/oracle``'s changes, plainly."""
    kept = {(c["scope"], c["collection"]) for c in body["collections"]}
    gone = {(g["scope"], g["collection"], g["key"]) for g in body["gone"]}
    out = {k: v for k, v in start.items() if k[:2] in kept and k not in gone}
    for r in body["rows"]:
        out[(r["scope"], r["collection"], r["key"])] = (r["value"].encode(), r["rev"])
    return out


def _rows(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    return {
        (r["scope"], r["collection"], r["key"]): (
            r["value"] if isinstance(r["value"], bytes) else r["value"].encode(),
            r["rev"],
        )
        for r in rows
    }


def test_the_on_disk_oracle_body_merged_with_the_corpus_is_the_bucket_oracle(
    tmp_path: Path,
) -> None:
    from mockdcp.server._control import on_disk_oracle

    corpus = _write(tmp_path / "c")
    disk = new_bucket()
    load_on_disk(disk, corpus, cache=tmp_path / "cache")
    start = _rows(disk.oracle().rows())
    keys = sorted(k for _, k in disk.oracle())[:10]
    _change(disk, keys)
    body = on_disk_oracle(disk, str(corpus))
    assert len(body["rows"]) == 7  # only what changed, not the corpus
    assert _merge(start, body) == _rows(disk.oracle().rows())


def test_oracle_from_corpus_with_a_served_bucket_changes_is_its_oracle(
    tmp_path: Path, spark: object
) -> None:
    from mockdcp.pipeline import oracle_from_corpus, read_oracle
    from mockdcp.server._control import on_disk_oracle

    corpus = _write(tmp_path / "c")
    disk = new_bucket()
    load_on_disk(disk, corpus, cache=tmp_path / "cache")
    _change(disk, sorted(k for _, k in disk.oracle())[:10])
    body = json.loads(json.dumps(on_disk_oracle(disk, str(corpus))))
    oracle_from_corpus(corpus, tmp_path / "o", changes=body)
    assert _rows(read_oracle(tmp_path / "o").to_pylist()) == _rows(disk.oracle().rows())


def _with_xattrs_and_snappy(corpus: Path) -> int:
    """Rewrite the corpus's first file: every third stored value gets an xattr section
    (``_sync``, as Sync Gateway writes it), every fifth is stored snappy-compressed;
    how many rows changed."""
    import cramjam

    from mockdcp.protocol import Datatype, encode_xattrs

    part = corpus / "part-00000.parquet"
    table = pq.read_table(part)
    values, dts = table.column("value").to_pylist(), table.column("datatype").to_pylist()
    changed = 0
    for i, value in enumerate(values):
        if not value:
            continue
        dt = dts[i]
        if i % 3 == 0:
            value = encode_xattrs([("_sync", '{"rev":"1-a"}'), ("meta", f'{{"n":{i}}}')], value)
            dt |= Datatype.XATTR
        if i % 5 == 0:
            value = bytes(cramjam.snappy.compress_raw(value))
            dt |= Datatype.SNAPPY
        changed += dt != dts[i]
        values[i], dts[i] = value, dt
    for name, column in (("value", values), ("datatype", dts)):
        at = table.schema.get_field_index(name)
        table = table.set_column(at, name, pa.array(column, table.schema.field(name).type))
    pq.write_table(table, part, row_group_size=200)
    return changed


@pytest.mark.parametrize("dcp", FORMS[::5], ids=lambda s: repr(Form.of(s)))
def test_an_on_disk_corpus_with_xattrs_and_snappy_serves_each_connection_its_form(
    tmp_path: Path, dcp: DcpSettings
) -> None:
    """kv_engine ``docs/dcp/documentation/commands/mutation.md`` ("The meaning of
    datatype") and ``ActiveStream::makeResponseFromItem``: xattrs go only to a DCP_OPEN
    with INCLUDE_XATTRS, compressed values only to a HELLO with SNAPPY. The import keeps
    each value as stored and every stream gets the form its connection negotiated, the
    frames the codec encodes item by item, as the in-memory load of the corpus serves."""
    corpus = _write(tmp_path / "c", CorpusSpec(docs=300, seed=4, partitions=1))
    assert _with_xattrs_and_snappy(corpus) > 50
    memory = Bucket("default", 1, seed=5, clock=time.time)
    disk = Bucket("default", 1, seed=5, clock=time.time)
    load_corpus_sync(memory, corpus)
    load_on_disk(disk, corpus, cache=tmp_path / "cache")
    assert {k: _doc(v) for k, v in disk.oracle().items()} == {
        k: _doc(v) for k, v in memory.oracle().items()
    }
    datatypes = {it.datatype for it in disk.vbucket(0).all_items()}
    assert datatypes == {1, 3, 5, 7}  # JSON, and with SNAPPY, XATTR or both
    items = sorted(disk.vbucket(0).all_items(), key=lambda it: it.seqno)
    assert stream_items(disk, dcp, None) == expected(items, Form.of(dcp), 77, None)


def test_an_on_disk_value_that_contradicts_its_datatype_is_named(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c", CorpusSpec(docs=60, seed=4, partitions=1))
    part = corpus / "part-00000.parquet"
    table = pq.read_table(part)
    dts = table.column("datatype").to_pylist()
    dts[7] |= 4  # XATTR, over a value with no xattr section
    at = table.schema.get_field_index("datatype")
    table = table.set_column(at, "datatype", pa.array(dts, table.schema.field("datatype").type))
    pq.write_table(table, part)
    key = table.column("key")[7].as_py().encode()
    named = re.escape(f"part-00000.parquet: column 'value': key {key!r}: datatype has XATTR")
    with pytest.raises(PipelineError, match=named):
        load_on_disk(new_bucket(), corpus, cache=tmp_path / "cache")
    dts[7] = 9  # an unknown bit
    table = table.set_column(at, "datatype", pa.array(dts, table.schema.field("datatype").type))
    pq.write_table(table, part)
    with pytest.raises(PipelineError, match=r"column 'datatype': .*unknown bits"):
        load_on_disk(new_bucket(), corpus, cache=tmp_path / "cache")
