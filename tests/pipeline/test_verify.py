from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mockdcp.cli import main
from mockdcp.pipeline import Columns, PipelineError, oracle_rows, verify, write_oracle

from .conftest import new_bucket

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from mockdcp.model import Bucket, Item


def _history() -> tuple[Bucket, list[Item]]:
    bucket = new_bucket(8)
    items = [
        bucket.set(key, json.dumps({"k": key, "v": 1, "tags": [1, 2]}))
        for key in ("a", "w", "m", "fmt", "gone")
    ]
    items.append(bucket.set("a", b'{"k":"a","v":2}'))
    items.append(bucket.delete("gone"))
    return bucket, items


def _events() -> list[dict[str, Any]]:
    """Every write, as a consumer logs the events it received (its own column names)."""
    return [
        {
            "id": item.key.decode(),
            "doc": item.value.decode(),
            "by_seqno": item.seqno,
            "rev_seqno": item.rev_seqno,
            "event": item.kind.value,
        }
        for item in _history()[1]
    ]


COLUMNS = ["--key-col", "id", "--value-col", "doc", "--seqno-col", "by_seqno"]
COLUMNS += ["--rev-col", "rev_seqno", "--op-col", "event"]


def _jsonl(path: Path, rows: list[dict[str, Any]], extra: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + extra)
    return path


@pytest.fixture
def expected(tmp_path: Path) -> Path:
    return write_oracle(oracle_rows(_history()[0]), tmp_path / "oracle")


def test_oracle_output_is_a_valid_actual_with_no_difference(
    spark: SparkSession, expected: Path
) -> None:
    report = verify(expected, expected)
    assert report.differences == 0
    assert report.mode == "documents"
    assert report.matched == report.expected == 4


def test_broken_event_logs_are_caught_in_their_categories(
    spark: SparkSession, expected: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _events()
    assert {e["event"] for e in events} == {"mutation", "deletion"}
    broken = []
    for e in events:
        if e["event"] == "deletion":
            continue  # a dropped deletion: "gone" is a phantom
        if e["id"] == "a" and e["rev_seqno"] == 2:
            continue  # the newest version of "a" never arrived: stale
        if e["id"] == "m":
            continue  # missing
        if e["id"] == "w":
            e = {**e, "doc": '{"k":"w","v":999}'}  # wrong value, same revision
        if e["id"] == "fmt":
            e = {**e, "doc": json.loads(e["doc"]), "by_seqno": e["by_seqno"]}  # an object: same
        broken.append(e)
    broken.append({"id": "ghost", "doc": "{}", "by_seqno": 1, "event": "mutation"})  # extra
    actual = _jsonl(tmp_path / "out.jsonl", broken)
    code = main(
        ["verify", "--expected", str(expected), "--actual", str(actual), "--json", *COLUMNS]
    )
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    counts = {c: report[c] for c in ("missing", "phantom", "stale", "wrong_value")}
    assert counts == {"missing": 1, "phantom": 2, "stale": 1, "wrong_value": 1}
    assert report["mode"] == "events"
    examples = report["examples"]
    assert [e["key"] for e in examples["missing"]] == ["m"]
    assert sorted(e["key"] for e in examples["phantom"]) == ["ghost", "gone"]
    assert [(e["key"], e["actual"]["rev"], e["expected"]["rev"]) for e in examples["stale"]] == [
        ("a", 1, 2)
    ]
    assert [e["key"] for e in examples["wrong_value"]] == ["w"]


def test_correct_event_log_verifies_clean(
    spark: SparkSession, expected: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    actual = _jsonl(tmp_path / "out.jsonl", _events())
    code = main(["verify", "--expected", str(expected), "--actual", str(actual), *COLUMNS])
    assert code == 0
    assert "0 differences" in capsys.readouterr().out


def test_unparseable_lines_and_duplicate_documents_are_counted(
    spark: SparkSession, expected: Path, tmp_path: Path
) -> None:
    rows = [{"key": r["key"], "value": r["value"].decode()} for r in read_rows(expected)]
    rows.append(rows[0])
    actual = _jsonl(tmp_path / "docs.jsonl", rows, extra='{"key": "x", "value": \nnot json\n')
    report = verify(expected, actual)
    assert report.mode == "documents"
    assert (report.duplicates, report.unparseable) == (1, 2)
    assert report.missing == report.phantom == report.stale == report.wrong_value == 0


def read_rows(path: Path) -> list[dict[str, Any]]:
    return list(pq.read_table(next(path.glob("*.parquet"))).to_pylist())


def test_parquet_output_without_the_key_column_is_a_clear_error(
    spark: SparkSession, expected: Path, tmp_path: Path
) -> None:
    pq.write_table(pa.table({"id": ["a"], "value": ["{}"]}), tmp_path / "out.parquet")
    with pytest.raises(PipelineError, match=r"no column 'key'.*--key-col"):
        verify(expected, tmp_path / "out.parquet")
    report = verify(expected, tmp_path / "out.parquet", columns=Columns(key="id"))
    assert (report.missing, report.wrong_value) == (3, 1)


def test_unreadable_inputs_are_errors_not_stack_traces(
    spark: SparkSession, expected: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["verify", "--expected", str(expected), "--actual", str(tmp_path / "empty")]) == 1
    assert "an empty directory" in capsys.readouterr().err
    _jsonl(tmp_path / "junk.jsonl", [], extra="junk\nmore junk\n")
    with pytest.raises(PipelineError, match="no row of the output could be read with a key"):
        verify(expected, tmp_path / "junk.jsonl")
    with pytest.raises(PipelineError, match="not readable as Parquet"):
        verify(tmp_path / "junk.jsonl", expected)  # the oracle must be an oracle
    pq.write_table(pa.table({"key": ["a"], "value": [b"{}"]}), tmp_path / "other.parquet")
    with pytest.raises(PipelineError, match="missing column 'scope'"):
        verify(tmp_path / "other.parquet", expected)


def test_cli_makes_a_corpus_and_its_oracle(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus, oracle = tmp_path / "c", tmp_path / "o"
    args = ["corpus", "--docs", "300", "--out", str(corpus), "--seed", "4", "--partitions", "2"]
    assert main(args) == 0
    assert "300 documents" in capsys.readouterr().out
    assert main(args) == 1
    assert "not an empty directory" in capsys.readouterr().err
    assert main(["oracle", "--corpus", str(corpus), "--out", str(oracle)]) == 0
    assert main(["oracle", "--scenario", "x.yaml", "--out", str(tmp_path / "s")]) == 1
    assert "scenario x.yaml: x.yaml: cannot read" in capsys.readouterr().err
    assert verify(oracle, oracle).differences == 0


def test_the_oracle_of_a_scenario_is_its_data_steps_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\nseed: 3\nbucket: {vbuckets: 4}\nsteps:\n  - generate: {docs: 30}\n"
        "  - persist: {}\n  - delete: {key: doc::000002}\n  - wait: {consumer: {seqno: high}}\n"
        "  - set: {key: extra, value: {a: 1}}\n  - restart: {}\n"
    )
    out = tmp_path / "o"
    assert main(["oracle", "--scenario", str(path), "--out", str(out)]) == 0
    keys = set(pq.read_table(out).column("key").to_pylist())
    assert len(keys) == 30  # the deletion and the write after it were not persisted
    assert "doc::000002" in keys
    assert "extra" not in keys
