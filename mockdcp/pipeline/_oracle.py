"""The oracle: the final state per (scope, collection, key) a correct consumer must hold,
in one schema (``ORACLE_COLUMNS``) whatever it is made from.

* ``oracle_rows(bucket)``: from a live model: the rows of ``Bucket.oracle()``
  (``mockdcp.model.Oracle``, which makes them for the HTTP API too).
* ``oracle_from_corpus``: a Spark job over a corpus; the last row of every key wins, keys
  whose last row is a delete or an expiry are gone. ``rev`` is the row's revision, which
  is the rev seqno the model gives that version when the corpus is loaded into an empty
  bucket; ``seqno``, ``vbucket`` and ``cas`` depend on the bucket and are null.
* ``oracle_from_json``: the rows of ``GET /mock/oracle`` (``oracle_json`` makes them).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mockdcp.data import (
    CORPUS_COLUMNS,
    ORACLE_COLUMNS,
    ORACLE_FORMAT,
    ORACLE_VERSION,
    PipelineError,
    arrow_schema,
    write_manifest,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from mockdcp.model import Bucket


def oracle_records(bucket: Bucket) -> list[dict[str, Any]]:
    """The rows of ``Bucket.oracle()`` (``Oracle.rows``): ``ORACLE_COLUMNS``, value as
    bytes, sorted by (scope, collection, key)."""
    return bucket.oracle().rows()


def oracle_rows(bucket: Bucket) -> pa.Table:
    """The oracle of a live bucket as a pyarrow table of ``ORACLE_COLUMNS``."""
    import pyarrow as pa

    return pa.Table.from_pylist(oracle_records(bucket), schema=arrow_schema(ORACLE_COLUMNS))


def oracle_from_scenario(path: str | Path) -> pa.Table:
    """The oracle of a scenario: its steps applied to its bucket, with its seed and clock.

    ``wait`` and ``expect`` are skipped: they need a consumer, and no consumer changes
    the data; faults act on connections, of which there are none. ``PipelineError``
    naming the problems of a bad scenario.
    """
    from mockdcp.producer import Node
    from mockdcp.scenario import (
        ScenarioProblems,
        StepFailed,
        StepRunner,
        load_scenario,
        scenario_bucket,
    )

    try:
        scenario = load_scenario(str(path))
        bucket = scenario_bucket(scenario)
        spec = scenario.bucket
        node = Node.cluster(bucket, {}, nodes=spec.nodes, replicas=spec.replicas)
        runner = StepRunner(node, seed=scenario.seed)
        runner.apply_now([s for s in scenario.steps if s.GROUP != "control"], scenario.source)
    except (ScenarioProblems, StepFailed) as exc:
        raise PipelineError(f"scenario {path}: {exc}") from None
    return oracle_rows(bucket)


def oracle_json(bucket: Bucket) -> dict[str, Any]:
    """The body of ``GET /mock/oracle`` (``Oracle.to_json``)."""
    return bucket.oracle().to_json()


def oracle_from_json(body: object, where: str = "the oracle") -> pa.Table:
    """Rows of ``GET /mock/oracle`` (``{"rows": [...]}``) as a table; ``PipelineError``
    naming the first row and field that is missing or of the wrong type. Fields beyond
    ``ORACLE_COLUMNS`` are ignored; a row with ``"deleted": true`` is skipped."""
    import pyarrow as pa

    if not isinstance(body, dict) or not isinstance(body.get("rows"), list):
        raise PipelineError(f"{where}: expected a JSON object with a list 'rows'")
    records = []
    for i, row in enumerate(body["rows"]):
        if not isinstance(row, dict):
            raise PipelineError(f"{where}: row {i} is not an object")
        if row.get("deleted") is True:
            continue  # a tombstone is not part of the final state (tolerated, skipped)
        record = dict(row)
        if "value_base64" in record:
            record["value"] = base64.b64decode(record.pop("value_base64"))
        elif isinstance(record.get("value"), str):
            record["value"] = record["value"].encode()
        for name, kind, nullable in ORACLE_COLUMNS:
            _check_field(record, name, kind, nullable, f"{where}: row {i}")
        records.append({name: record[name] for name, _, _ in ORACLE_COLUMNS})
    return pa.Table.from_pylist(records, schema=arrow_schema(ORACLE_COLUMNS))


def _check_field(record: dict[str, Any], name: str, kind: str, nullable: bool, where: str) -> None:
    if name not in record or record[name] is None:
        if nullable:
            record[name] = None
            return
        raise PipelineError(f"{where}: missing field {name!r}")
    value = record[name]
    ok = {
        "string": isinstance(value, str),
        "binary": isinstance(value, bytes),
        "int32": isinstance(value, int) and not isinstance(value, bool),
        "int64": isinstance(value, int) and not isinstance(value, bool),
    }[kind]
    if not ok:
        raise PipelineError(f"{where}: field {name!r} is {type(value).__name__}, not {kind}")


def oracle_from_url(url: str, timeout: float = 60.0) -> pa.Table:
    """``GET {url}/mock/oracle`` as a table; ``PipelineError`` when it cannot be read."""
    return oracle_from_json(oracle_body(url, timeout), url)


def oracle_body(url: str, timeout: float = 60.0) -> dict[str, Any]:
    """The JSON body of ``GET {url}/mock/oracle``: ``{"rows": [...]}``, or for a bucket
    over an on-disk corpus also ``corpus``, ``gone`` and ``collections`` (to merge with
    the corpus's oracle: ``oracle_from_corpus``'s ``changes``)."""
    import urllib.error
    import urllib.request

    endpoint = url.rstrip("/") + "/mock/oracle"
    try:
        with urllib.request.urlopen(endpoint, timeout=timeout) as reply:
            body = json.loads(reply.read())
    except (OSError, ValueError) as exc:  # URLError and HTTPError are OSErrors
        raise PipelineError(f"GET {endpoint}: {exc}") from None
    if not isinstance(body, dict):
        raise PipelineError(f"GET {endpoint}: expected a JSON object")
    return body


def write_oracle(table: pa.Table, out: str | Path, **info: object) -> Path:
    """Write an oracle table as ``out/part-00000.parquet`` plus the manifest."""
    import pyarrow.parquet as pq

    target = _fresh_dir(out)
    pq.write_table(table, target / "part-00000.parquet", compression="snappy")
    write_manifest(target, ORACLE_FORMAT, ORACLE_VERSION, rows=table.num_rows, **info)
    return target


def _fresh_dir(out: str | Path) -> Path:
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise PipelineError(f"{out} exists and is not an empty directory")
    target.mkdir(parents=True, exist_ok=True)
    return target


def oracle_from_corpus(
    corpus: str | Path,
    out: str | Path,
    *,
    master: str | None = None,
    changes: dict[str, Any] | None = None,
) -> int:
    """Spark job: the oracle of the corpus at ``corpus`` into ``out``; returns its rows.

    With ``changes`` (the body of ``GET /mock/oracle`` of a bucket serving the corpus
    on disk): only the corpus's documents in ``changes["collections"]`` and not in
    ``changes["gone"]``, with the live documents ``changes["rows"]`` over them.

    ``PipelineError`` for a bad corpus (checked with pyarrow first, so a missing column is
    named plainly) or a failed job.
    """
    from mockdcp.data import open_corpus, parquet_files
    from mockdcp.pipeline._spark import spark_errors, spark_session

    open_corpus(corpus)
    files = [str(f) for f in parquet_files(Path(corpus))]
    target = _fresh_dir(out)
    session = spark_session(master, "mockdcp oracle")
    from pyspark.sql import functions as F

    with spark_errors("the oracle job failed"):
        rows = session.read.parquet(*files).select(*[n for n, _, _ in CORPUS_COLUMNS])
        last = (
            rows.groupBy("scope", "collection", "key")
            .agg(F.max_by(F.struct(*[F.col(c) for c in _LAST]), F.col("rev")).alias("last"))
            .select("scope", "collection", "key", "last.*")
            .where(F.col("op").isin("insert", "update"))
        )
        oracle = last.select(
            "scope",
            "collection",
            "key",
            F.col("value").cast("binary"),
            F.col("datatype").cast("int"),
            F.col("flags").cast("bigint"),
            F.col("expiry").cast("bigint"),
            F.col("rev").cast("bigint"),
            F.lit(None).cast("bigint").alias("seqno"),
            F.lit(None).cast("int").alias("vbucket"),
            F.lit(None).cast("bigint").alias("cas"),
        )
        if changes is not None:
            oracle = _merged(session, oracle, changes)
        oracle = oracle.orderBy("scope", "collection", "key")
        oracle.write.mode("overwrite").parquet(str(target))
    count = sum(_rows(p) for p in target.glob("*.parquet"))
    write_manifest(target, ORACLE_FORMAT, ORACLE_VERSION, rows=count, source=str(corpus))
    return count


_LAST = ("op", "value", "datatype", "flags", "expiry", "rev")
_NAMES = ("scope", "collection", "key")


def _merged(session: Any, oracle: Any, changes: dict[str, Any]) -> Any:  # noqa: ANN401
    """The corpus's oracle (a Spark DataFrame) with a served bucket's ``changes``."""
    from pyspark.sql import functions as F

    from mockdcp.data import spark_ddl

    live = oracle_from_json(changes, "the live documents")
    kept = session.createDataFrame(
        [(c["scope"], c["collection"]) for c in changes.get("collections", [])],
        "scope STRING, collection STRING",
    )
    gone = [(g["scope"], g["collection"], g["key"]) for g in changes.get("gone", [])]
    gone += [(r["scope"], r["collection"], r["key"]) for r in live.to_pylist()]
    drop = session.createDataFrame(gone, "scope STRING, collection STRING, key STRING")
    kept_rows = oracle.join(F.broadcast(kept), ["scope", "collection"], "left_semi")
    survivors = kept_rows.join(F.broadcast(drop), list(_NAMES), "left_anti")
    fresh = session.createDataFrame(live.to_pylist(), spark_ddl(ORACLE_COLUMNS))
    return survivors.unionByName(fresh)


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


def read_oracle(path: str | Path) -> pa.Table:
    """An oracle directory (or file) as a table; ``PipelineError`` for a bad one."""
    from mockdcp.data import open_dataset

    dataset = open_dataset(Path(path), ORACLE_COLUMNS, ORACLE_FORMAT, ORACLE_VERSION)
    return dataset.to_table(columns=[n for n, _, _ in ORACLE_COLUMNS])
