from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mockdcp.data import PipelineError
from mockdcp.pipeline import verify_rows

if TYPE_CHECKING:
    from pathlib import Path


def oracle(*docs: tuple[str, str, int]) -> list[dict[str, object]]:
    return [
        {"scope": "_default", "collection": "_default", "key": k, "value": v.encode(), "rev": r,
         "seqno": r, "cas": 1}
        for k, v, r in docs
    ]  # fmt: skip


def lines(path: Path, *rows: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


EXPECTED = oracle(("a", '{"n": 1}', 2), ("b", '{"n": 2}', 3), ("c", '"x"', 1))


def test_final_documents_that_match_pass_with_json_compared_as_json(tmp_path: Path) -> None:
    out = lines(
        tmp_path / "out",
        {"key": "a", "value": '{ "n":1 }', "rev": 2},
        {"key": "b", "value": {"n": 2}, "collection": "0"},
        {"key": "c", "value": '"x"', "scope": "_default"},
    )
    report = verify_rows(EXPECTED, out)
    assert report.differences == 0
    assert (report.matched, report.mode) == (3, "documents")


def test_each_category_is_counted_with_an_example(tmp_path: Path) -> None:
    out = lines(
        tmp_path / "out",
        {"key": "a", "value": '{"n": 0}', "rev": 1},  # older: stale
        {"key": "b", "value": '{"n": 9}', "rev": 3},  # same rev, other value: wrong value
        {"key": "z", "value": "{}"},  # phantom; c is missing
    )
    report = verify_rows(EXPECTED, out)
    assert (report.missing, report.phantom, report.stale, report.wrong_value) == (1, 1, 1, 1)
    assert report.examples["missing"][0]["key"] == "c"
    assert report.examples["stale"][0]["expected"]["value"] == '{"n": 1}'


def test_events_reduce_to_the_last_version_and_deletions_remove(tmp_path: Path) -> None:
    out = lines(
        tmp_path / "out",
        {"key": "a", "value": '{"n": 1}', "op": "mutation", "seqno": 2},
        {"key": "b", "value": '{"n": 1}', "op": "mutation", "seqno": 1},
        {"key": "b", "value": '{"n": 2}', "op": "mutation", "seqno": 3},
        {"key": "c", "value": '"x"', "op": "mutation", "seqno": 1},
        {"key": "d", "value": "{}", "op": "mutation", "seqno": 4},
        {"key": "d", "op": "deletion", "seqno": 5},
    )
    report = verify_rows(EXPECTED, out)
    assert report.mode == "events"
    assert report.differences == 0


def test_a_dropped_deletion_is_a_phantom(tmp_path: Path) -> None:
    out = lines(
        tmp_path / "out",
        {"key": "a", "value": '{"n": 1}'},
        {"key": "b", "value": '{"n": 2}'},
        {"key": "c", "value": '"x"'},
        {"key": "gone", "value": "{}"},
    )
    assert verify_rows(EXPECTED, out).phantom == 1


def test_parquet_is_read_by_its_magic_without_a_suffix(tmp_path: Path) -> None:
    table = pa.table({"key": ["a", "b", "c"], "value": ['{"n": 1}', '{"n": 2}', '"x"']})
    pq.write_table(table, tmp_path / "out")
    assert verify_rows(EXPECTED, tmp_path / "out").matched == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"key": "a"}\n{not json\n', ":2: not JSON ("),
        ('{"key": "a"}\n[1, 2]\n', ":2: not a JSON object"),
        ('{"value": "x"}\n', ":1: no key (a string field 'key')"),
        ('{"key": "a", "seqno": "7"}\n', ":1: 'seqno' is '7', not an integer"),
    ],
)
def test_a_malformed_output_names_the_file_and_line(
    tmp_path: Path, text: str, message: str
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(text)
    with pytest.raises(PipelineError) as info:
        verify_rows(EXPECTED, out)
    assert str(info.value).startswith(f"{out}{message}")


def test_a_missing_output_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="no such file or directory"):
        verify_rows(EXPECTED, tmp_path / "nothing")
