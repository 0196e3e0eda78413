"""Verification: a consumer's output against the oracle, as a Spark job.

The output is read as JSON lines or Parquet, its columns renamed by ``Columns`` (every
consumer writes its own shape). It holds either final documents or the events the
consumer received; events (rows with an op or deleted column) are reduced to a final
state per (scope, collection, key): the highest seqno wins (then the highest rev, then
the later row), and
a deletion or expiry removes the key. The result is joined with the oracle on (scope,
collection, key), first by a 64-bit hash of the value (so the shuffle carries no values),
then, for the keys whose bytes differ, by value (JSON documents compare as JSON, so key
order and spacing do not matter). Categories:

* missing: in the oracle, not in the output;
* phantom: in the output, not in the oracle (a dropped deletion lands here);
* stale: the values differ and the output's version (rev, else seqno, else CAS) is
  below the oracle's;
* wrong_value: the values differ otherwise.

Findings of the input itself are counted too: ``unparseable`` lines (or lines without
a key), and ``duplicates`` (a key twice in an output of final documents).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp.data import (
    ORACLE_COLUMNS,
    ORACLE_FORMAT,
    ORACLE_VERSION,
    PipelineError,
    open_dataset,
    parquet_files,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row, SparkSession

CATEGORIES = ("missing", "phantom", "stale", "wrong_value")
#: Values of an op column that mean the key is gone (compared in lower case).
REMOVALS = ("delete", "deletion", "deleted", "expire", "expiration", "expired", "remove")
EXAMPLES = 5


@attrs.frozen(kw_only=True)
class Columns:
    """Where the consumer's output keeps each field (its column or JSON field names)."""

    key: str = "key"
    value: str = "value"
    scope: str = "scope"
    collection: str = "collection"
    seqno: str = "seqno"
    rev: str = "rev"
    cas: str = "cas"
    op: str = "op"
    deleted: str = "deleted"


@attrs.frozen(kw_only=True)
class VerifyReport:
    """Counts per category, examples of each, and what was read."""

    missing: int
    phantom: int
    stale: int
    wrong_value: int
    duplicates: int
    unparseable: int
    expected: int
    actual_rows: int
    actual_documents: int
    matched: int
    mode: str
    examples: dict[str, list[dict[str, Any]]]
    seconds: float

    @property
    def differences(self) -> int:
        """Everything that makes the verdict fail (exit status 1)."""
        return (
            self.missing
            + self.phantom
            + self.stale
            + self.wrong_value
            + self.duplicates
            + self.unparseable
        )

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _actual_format(path: Path, fmt: str) -> tuple[str, list[str]]:
    if fmt not in ("auto", "jsonl", "parquet"):
        raise PipelineError(f"unknown format {fmt!r} (auto, jsonl or parquet)")
    if not path.exists():
        raise PipelineError(f"{path}: no such file or directory")
    if path.is_file():
        files = [path]
    else:
        files = sorted(
            p for p in path.rglob("*") if p.is_file() and not p.name.startswith(("_", "."))
        )
    if not files:
        raise PipelineError(f"{path}: an empty directory")
    if fmt == "auto":
        fmt = "parquet" if all(p.suffix == ".parquet" for p in files) else "jsonl"
    if fmt == "parquet":
        files = parquet_files(path)
    return fmt, [str(p) for p in files]


def _read_actual(
    session: SparkSession, path: Path, fmt: str, cols: Columns
) -> tuple[DataFrame, str]:
    """The output with canonical columns (scope, collection, key, value, seqno, rev, cas,
    removed, _bad); the format read."""
    from pyspark.sql import functions as F

    fmt, files = _actual_format(path, fmt)
    wanted = {
        "key": "string",
        "value": "string",
        "scope": "string",
        "collection": "string",
        "seqno": "bigint",
        "rev": "bigint",
        "cas": "bigint",
        "op": "string",
        "deleted": "boolean",
    }
    if fmt == "jsonl":
        fields = {getattr(cols, role): kind for role, kind in wanted.items()}
        ddl = ", ".join(f"`{name}` {kind}" for name, kind in fields.items())
        raw = (
            session.read.schema(ddl + ", `_corrupt_record` string")
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", "_corrupt_record")
            .json(files)
        )
        bad = F.col("_corrupt_record").isNotNull() | F.col(cols.key).isNull()
        present = set(fields)
    else:
        raw = session.read.parquet(*files)
        present = set(raw.columns)
        if cols.key not in present:
            raise PipelineError(
                f"{path}: no column {cols.key!r} for the key (columns: "
                f"{', '.join(raw.columns)}; map one with --key-col)"
            )
        bad = F.col(cols.key).isNull()

    def pick(role: str) -> Column:
        name = getattr(cols, role)
        if name in present:
            return F.col(name).cast(wanted[role])
        return F.lit(None).cast(wanted[role])

    coll = pick("collection")
    coll = F.when(coll.isin("0", "0x0"), F.lit("_default")).otherwise(coll)
    removed = F.coalesce(pick("deleted"), F.lit(False)) | F.coalesce(
        F.lower(pick("op")).isin(*REMOVALS), F.lit(False)
    )
    frame = raw.select(
        F.coalesce(pick("scope"), F.lit("_default")).alias("scope"),
        F.coalesce(coll, F.lit("_default")).alias("collection"),
        pick("key").alias("key"),
        pick("value").alias("value"),
        pick("seqno").alias("seqno"),
        pick("rev").alias("rev"),
        pick("cas").alias("cas"),
        removed.alias("removed"),
        (pick("op").isNotNull() | pick("deleted").isNotNull()).alias("is_event"),
        bad.alias("_bad"),
        F.monotonically_increasing_id().alias("_line"),
    )
    return frame, fmt


def _reduce(frame: DataFrame, mode: str) -> tuple[DataFrame, int, int, int, str]:
    """Final documents of the output; (documents, rows, unparseable, duplicates, mode)."""
    from pyspark.sql import functions as F

    stats = frame.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.col("_bad").cast("int")).alias("bad"),
        F.sum(F.col("is_event").cast("int")).alias("events"),
    ).first()
    assert stats is not None
    rows, bad, events = stats["rows"], stats["bad"] or 0, stats["events"] or 0
    if rows and bad == rows:
        raise PipelineError(
            "no row of the output could be read with a key: check the format and "
            "--key-col (every row is unparseable or has no key)"
        )
    if mode == "auto":
        mode = "events" if events else "documents"
    good = frame.where(~F.col("_bad"))
    order = F.struct(
        F.coalesce(F.col("seqno"), F.lit(-1)), F.coalesce(F.col("rev"), F.lit(-1)), F.col("_line")
    )
    fields = F.struct("value", "seqno", "rev", "cas", "removed")
    last = (
        good.groupBy("scope", "collection", "key")
        .agg(F.max_by(fields, order).alias("last"), F.count(F.lit(1)).alias("n"))
        .select("scope", "collection", "key", "last.*", "n")
    )
    duplicates = 0
    if mode == "documents":
        duplicates = last.where(F.col("n") > 1).count()
    docs = last.where(~F.col("removed")).drop("removed", "n")
    return docs, rows, bad, duplicates, mode


def _categorise() -> Column:
    from pyspark.sql import functions as F

    return (
        F.when(F.col("a_h").isNull(), F.lit("missing"))
        .when(F.col("e_h").isNull(), F.lit("phantom"))
        .when(F.col("a_h") == F.col("e_h"), F.lit("ok"))
        .otherwise(F.lit("differs"))
    )


def _same_json(a: str | None, b: str | None) -> bool:
    try:
        return a is not None and b is not None and json.loads(a) == json.loads(b)
    except ValueError:
        return False


def _version_below(row: Row) -> bool:
    for a, e in ((row.a_rev, row.e_rev), (row.a_seqno, row.e_seqno), (row.a_cas, row.e_cas)):
        if a is not None and e is not None:
            return bool(a < e)
    return False


def classify(row: Row) -> tuple[str, dict[str, Any]]:
    """The category of a key whose value bytes differ: ok (the same JSON), stale or
    wrong_value; and an example row."""
    if _same_json(row.a_value, row.e_value):
        return "ok", {}
    category = "stale" if _version_below(row) else "wrong_value"
    return category, {
        "scope": row.scope,
        "collection": row.collection,
        "key": row.key,
        "expected": {"rev": row.e_rev, "seqno": row.e_seqno, "value": _clip(row.e_value)},
        "actual": {"rev": row.a_rev, "seqno": row.a_seqno, "value": _clip(row.a_value)},
    }


def _clip(text: str | None, limit: int = 200) -> str | None:
    return text if text is None or len(text) <= limit else text[:limit] + "…"


def verify(
    expected: str | Path,
    actual: str | Path,
    *,
    columns: Columns | None = None,
    fmt: str = "auto",
    mode: str = "auto",
    master: str | None = None,
    examples: int = EXAMPLES,
) -> VerifyReport:
    """Check the consumer output at ``actual`` against the oracle at ``expected``.

    ``mode``: ``documents``, ``events`` or ``auto`` (events when the output has an op or
    deleted column). Raises ``PipelineError`` for input that cannot be read at all (a
    missing or mistyped oracle column, an empty directory, no key column); findings in
    readable input are counted in the report.
    """
    from pyspark.sql import functions as F

    from mockdcp.pipeline._spark import spark_errors, spark_session

    if mode not in ("auto", "documents", "events"):
        raise PipelineError(f"unknown mode {mode!r} (auto, documents or events)")
    open_dataset(Path(expected), ORACLE_COLUMNS, ORACLE_FORMAT, ORACLE_VERSION)
    session = spark_session(master, "mockdcp verify")
    started = time.perf_counter()
    keys = ["scope", "collection", "key"]
    with spark_errors("the verify job failed"):
        exp = session.read.parquet(*[str(f) for f in parquet_files(Path(expected))])
        frame, _ = _read_actual(session, Path(actual), fmt, columns or Columns())
        docs, rows, bad, duplicates, mode = _reduce(frame, mode)
        e = exp.select(
            *keys,
            F.xxhash64(F.col("value").cast("binary")).alias("e_h"),
            F.col("rev").alias("e_rev"),
            F.col("seqno").alias("e_seqno"),
            F.col("cas").alias("e_cas"),
        )
        a = docs.select(
            *keys,
            F.xxhash64(F.col("value").cast("binary")).alias("a_h"),
            F.col("rev").alias("a_rev"),
            F.col("seqno").alias("a_seqno"),
            F.col("cas").alias("a_cas"),
        )
        a = a.withColumn("a_h", F.coalesce("a_h", F.lit(0)))  # a null value is still there
        joined = e.join(a, keys, "full_outer").withColumn("category", _categorise())
        joined = joined.persist()
        counts = {r["category"]: r["count"] for r in joined.groupBy("category").count().collect()}
        found = {c: counts.get(c, 0) for c in ("missing", "phantom")}
        shown = _gone_or_extra(joined, examples)
        stale, wrong, same, more = _differing(exp, docs, joined, counts, examples)
        shown.update(more)
        joined.unpersist()
    return VerifyReport(
        missing=found["missing"],
        phantom=found["phantom"],
        stale=stale,
        wrong_value=wrong,
        duplicates=duplicates,
        unparseable=bad,
        expected=counts.get("missing", 0) + counts.get("ok", 0) + counts.get("differs", 0),
        actual_rows=rows,
        actual_documents=counts.get("phantom", 0) + counts.get("ok", 0) + counts.get("differs", 0),
        matched=counts.get("ok", 0) + same,
        mode=mode,
        examples={c: shown.get(c, []) for c in CATEGORIES},
        seconds=time.perf_counter() - started,
    )


def _example(row: Row, category: str) -> dict[str, Any]:
    side = "e" if category == "missing" else "a"
    return {
        "scope": row.scope,
        "collection": row.collection,
        "key": row.key,
        "rev": row[f"{side}_rev"],
        "seqno": row[f"{side}_seqno"],
    }


def _gone_or_extra(joined: DataFrame, examples: int) -> dict[str, list[dict[str, Any]]]:
    """Up to ``examples`` missing and phantom keys each (one Spark job)."""
    from pyspark.sql import Window, functions as F

    rank = F.row_number().over(Window.partitionBy("category").orderBy(*_KEYS))
    picked = (
        joined.where(F.col("category").isin("missing", "phantom"))
        .withColumn("_rank", rank)
        .where(F.col("_rank") <= examples)
        .collect()
    )
    shown: dict[str, list[dict[str, Any]]] = {"missing": [], "phantom": []}
    for row in picked:
        shown[row.category].append(_example(row, row.category))
    return shown


_KEYS = ("scope", "collection", "key")


def _differing(
    exp: DataFrame, docs: DataFrame, joined: DataFrame, counts: dict[str, int], examples: int
) -> tuple[int, int, int, dict[str, list[dict[str, Any]]]]:
    """Classify the keys whose value bytes differ: (stale, wrong_value, same JSON,
    examples)."""
    from pyspark.sql import functions as F

    if not counts.get("differs"):
        return 0, 0, 0, {"stale": [], "wrong_value": []}
    keys = ["scope", "collection", "key"]
    differs = joined.where(F.col("category") == "differs").select(
        *keys, "e_rev", "e_seqno", "e_cas", "a_rev", "a_seqno", "a_cas"
    )
    rows = (
        differs.join(exp.select(*keys, F.col("value").cast("string").alias("e_value")), keys)
        .join(docs.select(*keys, F.col("value").cast("string").alias("a_value")), keys)
        .rdd.map(classify)
        .filter(lambda pair: pair[0] != "ok")
        .map(lambda pair: (pair[0], (1, [pair[1]])))
        .reduceByKey(lambda a, b: (a[0] + b[0], (a[1] + b[1])[:examples]))
        .collect()
    )
    tally = dict(rows)
    stale, wrong = tally.get("stale", (0, [])), tally.get("wrong_value", (0, []))
    shown = {"stale": stale[1], "wrong_value": wrong[1]}
    return stale[0], wrong[0], counts["differs"] - stale[0] - wrong[0], shown
