from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import trio
import trio.lowlevel

from mockdcp import ModelError
from mockdcp.data._schema import CORPUS_COLUMNS, MANIFEST, arrow_schema
from mockdcp.model import Bucket, ItemKind
from mockdcp.pipeline import (
    CorpusSpec,
    PipelineError,
    generate_partition,
    load_corpus,
    load_corpus_sync,
    oracle_rows,
)

from .conftest import new_bucket

if TYPE_CHECKING:
    from pathlib import Path

SPEC = CorpusSpec(docs=600, seed=9, partitions=2, hot_share=0.05, hot_updates=4)


def _write(directory: Path, spec: CorpusSpec = SPEC) -> Path:
    directory.mkdir(exist_ok=True)
    for p in range(spec.num_partitions):
        pq.write_table(generate_partition(spec, p), directory / f"part-{p:05d}.parquet")
    return directory


def _final_state(spec: CorpusSpec) -> dict[str, tuple[bytes, int]]:
    """What the corpus leaves, computed plainly: key → (value, rev)."""
    state: dict[str, tuple[bytes, int]] = {}
    for p in range(spec.num_partitions):
        for row in generate_partition(spec, p).to_pylist():
            if row["op"] in ("delete", "expire"):
                del state[row["key"]]
            else:
                state[row["key"]] = (row["value"], row["rev"])
    return state


def test_load_gives_the_corpus_final_state(tmp_path: Path) -> None:
    bucket = new_bucket()
    report = load_corpus_sync(bucket, _write(tmp_path / "c"), batch_rows=97)
    got = {r["key"]: (r["value"], r["rev"]) for r in oracle_rows(bucket).to_pylist()}
    assert got == _final_state(SPEC)
    assert report.files == 2
    assert report.rows == report.written + report.deleted + report.expired
    assert report.deleted > 0
    assert report.expired > 0
    hashed = {r["key"]: r["vbucket"] for r in oracle_rows(bucket).to_pylist()}
    assert all(bucket.vbucket_of(k) == vb for k, vb in hashed.items())  # CRC32


async def test_load_yields_to_the_event_loop_between_batches(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    ticks = 0
    seen: list[int] = []

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        report = await load_corpus(new_bucket(), corpus, batch_rows=50, progress=seen.append)
        nursery.cancel_scope.cancel()
    assert ticks >= report.rows // 50
    assert seen[-1] == report.rows
    assert seen == sorted(seen)


def _state(bucket: Bucket) -> list[list[tuple[object, ...]]]:
    """Every vbucket's documents as streams and rules see them, and its seqnos."""
    return [
        [
            (vb.high_seqno, vb.persisted_seqno),
            *sorted(
                (it.key, it.seqno, it.rev_seqno, it.cas, it.value, it.kind) for it in vb.all_items()
            ),
        ]
        for vb in bucket.vbuckets
    ]


@pytest.mark.parametrize(
    "spec",
    [SPEC, CorpusSpec(docs=500, seed=3, partitions=2, delete_share=0, expire_share=0)],
    ids=["deletes", "writes-only"],
)
def test_a_corpus_loads_into_the_cold_tier_as_it_loads_into_memory(
    tmp_path: Path, spec: CorpusSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into an empty bucket, the whole corpus, deletes and expiries included, is the
    bucket's persisted disk (the cold tier): the documents, tombstones, seqnos, revs and
    CAS are those of a load all to memory, persisted."""
    corpus = _write(tmp_path / "c", spec)

    def new_bucket() -> Bucket:  # one clock: the same CAS
        return Bucket("default", 64, seed=5, clock=lambda: 1_700_000_000.0)

    cold = new_bucket()
    load_corpus_sync(cold, corpus, batch_rows=97)
    assert any(vb.cold is not None for vb in cold.vbuckets)
    assert all(not vb.items for vb in cold.vbuckets)  # all of it on disk
    if spec.delete_share:
        assert any(it.deleted for vb in cold.vbuckets for it in vb.all_items())
    monkeypatch.setattr("mockdcp.data._load._cold_load", lambda bucket: None)
    memory = new_bucket()
    load_corpus_sync(memory, corpus, batch_rows=97)
    assert all(vb.cold is None for vb in memory.vbuckets)
    cold.persist()
    memory.persist()
    assert _state(cold) == _state(memory)


def _rows(*rows: tuple[str, str, bytes | None]) -> pa.Table:
    """A corpus of (key, op, value) rows in ``_default``."""
    return pa.Table.from_pylist(
        [
            {
                "partition": 0,
                "offset": i,
                "scope": "_default",
                "collection": "_default",
                "key": key,
                "op": op,
                "value": value,
                "datatype": 0,
                "flags": 0,
                "expiry": 5 if key == "b" else 0,
                "rev": 1,
            }
            for i, (key, op, value) in enumerate(rows)
        ],
        schema=arrow_schema(CORPUS_COLUMNS),
    )


def test_rows_before_a_delete_of_a_missing_key_stay_loaded_cold_as_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "c").mkdir()
    table = _rows(
        ("a", "insert", b"1"),
        ("b", "insert", b"2"),
        ("a", "delete", None),
        ("b", "expire", None),
        ("a", "insert", b"3"),
        ("b", "delete", None),  # expired already: not live
        ("c", "insert", b"4"),
    )
    pq.write_table(table, tmp_path / "c" / "part-0.parquet")
    loaded = []
    for cold in (True, False):
        if not cold:
            monkeypatch.setattr("mockdcp.data._load._cold_load", lambda bucket: None)
        bucket = Bucket("default", 4, seed=5, clock=lambda: 1_700_000_000.0)
        with pytest.raises(PipelineError, match=r"row 'b' \(delete\): no live document b'b'"):
            load_corpus_sync(bucket, tmp_path / "c", batch_rows=3)
        assert all((vb.cold is not None) == cold for vb in bucket.vbuckets if vb.high_seqno)
        docs = {it.key: it for vb in bucket.vbuckets for it in vb.all_items()}
        assert sorted(docs) == [b"a", b"b"]  # not c, after the refused row
        assert (docs[b"a"].value, docs[b"a"].rev_seqno) == (b"3", 3)
        assert (docs[b"b"].kind, docs[b"b"].delete_time) == (ItemKind.EXPIRATION, 5)
        bucket.set("d", "x")  # the CAS after the rows loaded: none taken by c
        bucket.persist()
        loaded.append(_state(bucket))
    assert loaded[0] == loaded[1]


def test_missing_and_mistyped_columns_are_named(tmp_path: Path) -> None:
    table = generate_partition(SPEC, 0).drop_columns(["rev"])
    table = table.set_column(
        table.schema.get_field_index("flags"), "flags", pa.array(["x"] * table.num_rows)
    )
    (tmp_path / "c").mkdir()
    pq.write_table(table, tmp_path / "c" / "part-0.parquet")
    with pytest.raises(
        PipelineError, match=r"column 'flags' is string, not int64; missing column 'rev'"
    ):
        load_corpus_sync(new_bucket(), tmp_path / "c")


def test_foreign_parquet_names_what_it_lacks(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": [1, 2], "name": ["a", "b"]}), tmp_path / "x.parquet")
    with pytest.raises(PipelineError, match="missing column 'key'"):
        load_corpus_sync(new_bucket(), tmp_path / "x.parquet")


def test_empty_directory_and_missing_path_are_errors(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="no Parquet files"):
        load_corpus_sync(new_bucket(), tmp_path)
    with pytest.raises(PipelineError, match="no such file"):
        load_corpus_sync(new_bucket(), tmp_path / "nothing")


def test_corpus_of_another_version_is_refused(tmp_path: Path) -> None:
    corpus = _write(tmp_path / "c")
    (corpus / MANIFEST).write_text(json.dumps({"format": "mockdcp-corpus", "version": 99}))
    with pytest.raises(PipelineError, match="version 99"):
        load_corpus_sync(new_bucket(), corpus)


def test_unparseable_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "part-0.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(PipelineError, match="not readable as Parquet"):
        load_corpus_sync(new_bucket(), tmp_path)


def test_collection_the_bucket_lacks_is_named(tmp_path: Path) -> None:
    spec = CorpusSpec(docs=50, collections=(("inventory", "hotel"),))
    with pytest.raises(PipelineError, match=r"inventory\.hotel.*unknown scope 'inventory'"):
        load_corpus_sync(new_bucket(), _write(tmp_path / "c", spec))


def test_a_corpus_loads_into_the_collections_it_names(tmp_path: Path) -> None:
    spec = CorpusSpec(docs=50, collections=(("inventory", "hotel"), ("inventory", "airline")))
    bucket = Bucket(
        "default",
        8,
        seed=1,
        clock=lambda: 1_700_000_000.0,
        collections={"inventory": ["hotel", "airline"]},
    )
    load_corpus_sync(bucket, _write(tmp_path / "c", spec))
    ids = {cid for cid, _ in bucket.oracle()}
    assert ids == {
        bucket.resolve_collection("inventory.hotel"),
        bucket.resolve_collection("inventory.airline"),
    }


def test_set_many_writes_in_order_like_set() -> None:
    a, b = new_bucket(4), new_bucket(4)
    keys = [b"k1", b"k2", b"k1"]
    values = [b'{"v":1}', b"raw", b'{"v":3}']
    assert a.set_many(keys, values, flags=[1, 2, 3], expiry=7) == 3
    for k, v, f in zip(keys, values, [1, 2, 3], strict=True):
        b.set(k, v, flags=f, expiry=7)
    seen = {k: (i.value, i.flags, i.rev_seqno, i.datatype) for k, i in a.oracle().items()}
    assert seen == {k: (i.value, i.flags, i.rev_seqno, i.datatype) for k, i in b.oracle().items()}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"values": [b"x"]}, "values has 1 entries"),
        ({"flags": [1]}, "flags has 1 entries"),
        ({"expiry": -1}, "expiry"),
        ({"datatypes": [0, 9]}, "unknown bits"),
        ({"keys": [b"ok", b""]}, "a key has"),
    ],
)
def test_set_many_validates_everything_before_writing(
    kwargs: dict[str, object], message: str
) -> None:
    bucket = new_bucket(4)
    args: dict[str, object] = {"keys": [b"a", b"b"], "values": [b"1", b"2"], **kwargs}
    with pytest.raises(ModelError, match=message):
        bucket.set_many(**args)  # type: ignore[arg-type]
    assert bucket.oracle() == {}
