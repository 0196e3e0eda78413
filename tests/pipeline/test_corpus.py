from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mockdcp.data._schema import CORPUS_COLUMNS, MANIFEST, arrow_schema
from mockdcp.pipeline import CorpusSpec, PipelineError, generate_partition
from mockdcp.pipeline._corpus import SHAPES, parse_collections

from .conftest import SPEC

if TYPE_CHECKING:
    from pathlib import Path


def test_partition_is_a_pure_function_of_seed_and_partition() -> None:
    spec = CorpusSpec(docs=2000, seed=3, partitions=2)
    assert generate_partition(spec, 1).equals(generate_partition(spec, 1))
    other_seed = CorpusSpec(docs=2000, seed=4, partitions=2)
    assert not generate_partition(spec, 1).equals(generate_partition(other_seed, 1))
    assert not generate_partition(spec, 0).equals(generate_partition(spec, 1))


def test_partition_has_the_documented_schema_and_valid_json() -> None:
    table = generate_partition(CorpusSpec(docs=1000, seed=1), 0)
    assert table.schema.equals(arrow_schema(CORPUS_COLUMNS))
    types = set()
    for row in table.to_pylist():
        if row["op"] in ("insert", "update"):
            types.add(json.loads(row["value"])["type"])
        else:
            assert row["value"] is None
    assert types == set(SHAPES)


def test_history_of_every_key_is_in_order() -> None:
    rows = generate_partition(CorpusSpec(docs=3000, seed=2, hot_share=0.05), 0).to_pylist()
    history: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        history.setdefault(str(row["key"]), []).append(row)
    assert len(history) == 3000
    ops = {r["op"] for r in rows}
    assert ops == {"insert", "update", "delete", "expire"}
    for events in history.values():
        assert [e["rev"] for e in events] == list(range(1, len(events) + 1))
        assert events[0]["op"] == "insert"
        assert all(e["op"] == "update" for e in events[1:-1])
    hot = max(len(e) for e in history.values())
    assert hot >= 21  # a hot key: insert + 20 updates (+ maybe a removal)
    expiring = [e for e in history.values() if e[-1]["op"] == "expire"]
    assert expiring
    assert all(e[-2]["expiry"] > 0 for e in expiring)
    # rows of different keys interleave: the first 100 rows are not one key's history
    assert len({r["key"] for r in rows[:100]}) > 50


def test_collections_spread_shapes_round_robin() -> None:
    spec = CorpusSpec(
        docs=400, seed=1, collections=parse_collections("inventory.hotel,inventory.airline")
    )
    table = generate_partition(spec, 0)
    seen = {(r["key"].split("::")[0], r["scope"], r["collection"]) for r in table.to_pylist()}
    assert seen == {
        ("user", "inventory", "hotel"),
        ("order", "inventory", "airline"),
        ("hotel", "inventory", "hotel"),
        ("airline", "inventory", "airline"),
    }


@pytest.mark.parametrize("text", ["inventory", "a.b.c", ",", ".x"])
def test_bad_collection_names_are_refused(text: str) -> None:
    with pytest.raises(PipelineError, match="collection"):
        parse_collections(text)


def test_spec_refuses_impossible_shares() -> None:
    with pytest.raises(PipelineError, match="shares"):
        CorpusSpec(docs=10, delete_share=0.7, expire_share=0.5)
    with pytest.raises(PipelineError, match="at least one document"):
        CorpusSpec(docs=0)


def test_spark_job_writes_the_same_rows_as_the_partitions(corpus: Path) -> None:
    files = sorted(corpus.glob("part-*.parquet"))
    assert len(files) == SPEC.num_partitions
    for p, path in enumerate(files):
        assert pq.read_table(path).equals(generate_partition(SPEC, p))
    manifest = json.loads((corpus / MANIFEST).read_text())
    assert manifest["format"] == "mockdcp-corpus"
    assert manifest["version"] == 1
    assert manifest["rows"] == sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    assert manifest["spec"]["docs"] == SPEC.docs


def test_documents_split_evenly_over_partitions() -> None:
    spec = CorpusSpec(docs=10, partitions=3)
    assert [spec.docs_in(p) for p in range(3)] == [4, 3, 3]
    keys = pa.concat_tables([generate_partition(spec, p) for p in range(3)]).column("key")
    assert len(set(keys.to_pylist())) == 10
