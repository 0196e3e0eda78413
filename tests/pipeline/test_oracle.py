from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING

import pytest

from mockdcp.data._schema import ORACLE_COLUMNS, arrow_schema
from mockdcp.pipeline import (
    PipelineError,
    load_corpus_sync,
    oracle_from_corpus,
    oracle_from_json,
    oracle_from_url,
    oracle_json,
    oracle_rows,
    read_oracle,
    write_oracle,
)

from .conftest import new_bucket

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pyspark.sql import SparkSession

    from mockdcp.model import Bucket


def _bucket_with_history() -> Bucket:
    bucket = new_bucket(8)
    bucket.set("a", b'{"v":1}')
    bucket.set("a", b'{"v":2}', flags=3)
    bucket.set("gone", b"{}")
    bucket.delete("gone")
    bucket.set("bin", b"\xff\x00", datatype=0)
    return bucket


def test_rows_follow_bucket_oracle_with_names_not_ids() -> None:
    bucket = _bucket_with_history()
    table = oracle_rows(bucket)
    assert table.schema.equals(arrow_schema(ORACLE_COLUMNS))
    rows = {r["key"]: r for r in table.to_pylist()}
    assert set(rows) == {"a", "bin"}
    a = rows["a"]
    item = bucket.oracle()[(0, b"a")]
    assert (a["scope"], a["collection"]) == ("_default", "_default")
    assert (a["value"], a["flags"], a["rev"], a["seqno"], a["vbucket"]) == (
        b'{"v":2}',
        3,
        2,
        item.seqno,
        item.vbucket,
    )


def test_json_body_round_trips_including_binary_values() -> None:
    bucket = _bucket_with_history()
    body = json.loads(json.dumps(oracle_json(bucket)))
    rows = {r["key"]: r for r in body["rows"]}
    assert rows["a"]["value"] == '{"v":2}'
    assert "value" not in rows["bin"]
    assert rows["bin"]["value_base64"] == "/wA="
    assert oracle_from_json(body).equals(oracle_rows(bucket))
    tombstone = {**body["rows"][0], "key": "dead", "deleted": True}
    with_extras = {"rows": [{**r, "deleted": False} for r in body["rows"]] + [tombstone]}
    assert oracle_from_json(with_extras).equals(oracle_rows(bucket))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "a list 'rows'"),
        ({"rows": [{"scope": "_default"}]}, "row 0: missing field 'collection'"),
        (
            {"rows": [{"scope": "s", "collection": "c", "key": 1}]},
            "field 'key' is int, not string",
        ),
    ],
)
def test_bad_json_body_names_row_and_field(body: object, message: str) -> None:
    with pytest.raises(PipelineError, match=message):
        oracle_from_json(body)


@pytest.fixture
def http_oracle() -> Iterator[str]:
    body = json.dumps(oracle_json(_bucket_with_history())).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/mock/oracle"
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(body if ok else b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_url_oracle_reads_get_mock_oracle(http_oracle: str, tmp_path: Path) -> None:
    table = oracle_from_url(http_oracle)
    assert sorted(table.column("key").to_pylist()) == ["a", "bin"]
    write_oracle(table, tmp_path / "o")
    assert read_oracle(tmp_path / "o").equals(table)
    with pytest.raises(PipelineError, match="not an empty directory"):
        write_oracle(table, tmp_path / "o")


def test_unreachable_url_is_one_clear_error() -> None:
    with pytest.raises(PipelineError, match=r"GET http://127\.0\.0\.1:9/mock/oracle"):
        oracle_from_url("http://127.0.0.1:9", timeout=2)


def test_corpus_oracle_equals_oracle_of_the_loaded_bucket(
    spark: SparkSession, corpus: Path, tmp_path: Path
) -> None:
    count = oracle_from_corpus(corpus, tmp_path / "o")
    bucket = new_bucket()
    load_corpus_sync(bucket, corpus)
    live = oracle_rows(bucket)
    assert count == live.num_rows
    names = ["scope", "collection", "key", "value", "datatype", "flags", "expiry", "rev"]
    from_corpus = read_oracle(tmp_path / "o")
    assert from_corpus.select(names).to_pylist() == live.select(names).to_pylist()
    assert from_corpus.column("seqno").null_count == count
