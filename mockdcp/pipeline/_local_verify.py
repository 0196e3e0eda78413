"""Verification in-process: a small consumer output against an oracle, without Spark.

``verify`` (``_verify.py``) is the Spark job for outputs of any size; ``mockdcp check``
verifies one output per scenario, of a few hundred documents, where starting Spark would
take longer than the scenario. ``verify_rows`` applies the same rules in plain Python
and returns the same ``VerifyReport``: the output is JSON lines or Parquet of final
documents or of received events, its columns named by ``Columns``; events are reduced
to a final state per (scope, collection, key) (the highest seqno wins, then the highest
rev, then the later row; a deletion or expiry removes the key); the categories are
missing, phantom, stale and wrong_value, JSON values compared as JSON.

One difference, on purpose: a line that is not a JSON object, or a row without a key,
is an error naming the file and line (``PipelineError``), not a count: a consumer under
``mockdcp check`` writes a few hundred lines, and the first bad one is what its author
needs to see.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp.data import PipelineError
from mockdcp.pipeline._verify import CATEGORIES, EXAMPLES, REMOVALS, Columns, VerifyReport

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

#: (scope, collection, key)
Key = tuple[str, str, str]


@attrs.frozen
class _Row:
    """One row of the output, canonical: its key, value as text, version, removal."""

    key: Key
    value: str | None
    seqno: int | None
    rev: int | None
    cas: int | None
    removed: bool
    is_event: bool
    line: int


def _files(path: Path) -> tuple[str, list[Path]]:
    """The format (jsonl or parquet) and the files of the output at ``path``."""
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
    fmt = "parquet" if all(_is_parquet(p) for p in files) else "jsonl"
    return fmt, files


def _is_parquet(path: Path) -> bool:
    """A Parquet file by its suffix or its magic (``PAR1``: a consumer may write one to
    ``$MOCKDCP_OUTPUT``, a name without a suffix)."""
    if path.suffix == ".parquet":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PAR1"
    except OSError:
        return False


def _text(value: object) -> str | None:
    """A value as the text Spark's JSON reader gives a string column: a string as is,
    anything else (an object written inline) as its JSON."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return json.dumps(value, separators=(",", ":"))


def _int(record: Mapping[str, Any], name: str, where: str) -> int | None:
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise PipelineError(f"{where}: {name!r} is {value!r}, not an integer")
    return value


def _canonical(record: Mapping[str, Any], cols: Columns, where: str, line: int) -> _Row:
    """One record (a JSON object or a Parquet row) in canonical form; ``PipelineError``
    naming ``where`` when it has no key or a mistyped field."""
    key = record.get(cols.key)
    if not isinstance(key, str) or not key:
        raise PipelineError(f"{where}: no key (a string field {cols.key!r})")
    scope = _text(record.get(cols.scope)) or "_default"
    collection = _text(record.get(cols.collection))
    if collection in (None, "0", "0x0"):
        collection = "_default"
    op, deleted = record.get(cols.op), record.get(cols.deleted)
    removed = bool(deleted) or (isinstance(op, str) and op.lower() in REMOVALS)
    return _Row(
        (scope, str(collection), key),
        _text(record.get(cols.value)),
        _int(record, cols.seqno, where),
        _int(record, cols.rev, where),
        _int(record, cols.cas, where),
        removed,
        op is not None or deleted is not None,
        line,
    )


def _json_lines(path: Path, cols: Columns, first: int) -> Iterator[_Row]:
    try:
        with open(path, encoding="utf-8") as f:
            for number, text in enumerate(f, 1):
                if not text.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    record = json.loads(text)
                except ValueError as exc:
                    raise PipelineError(f"{where}: not JSON ({exc})") from None
                if not isinstance(record, dict):
                    raise PipelineError(f"{where}: not a JSON object")
                yield _canonical(record, cols, where, first + number)
    except UnicodeDecodeError as exc:
        raise PipelineError(f"{path}: not UTF-8 text ({exc})") from None
    except OSError as exc:
        raise PipelineError(f"{path}: cannot read: {exc}") from None


def _parquet(path: Path, cols: Columns, first: int) -> Iterator[_Row]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow's ArrowInvalid and OSError
        raise PipelineError(f"{path}: not a Parquet file ({exc})") from None
    if cols.key not in table.column_names:
        raise PipelineError(
            f"{path}: no column {cols.key!r} for the key (columns: {', '.join(table.column_names)})"
        )
    for number, record in enumerate(table.to_pylist(), 1):
        yield _canonical(record, cols, f"{path}: row {number}", first + number)


def read_output(path: str | Path, columns: Columns | None = None) -> list[_Row]:
    """Every row of the output at ``path`` (a file or a directory of them)."""
    cols = columns or Columns()
    fmt, files = _files(Path(path))
    rows: list[_Row] = []
    for file in files:
        reader = _parquet if fmt == "parquet" else _json_lines
        rows.extend(reader(file, cols, len(rows) << 20))
    return rows


def _reduce(rows: Iterable[_Row], mode: str) -> tuple[dict[Key, _Row], int, str]:
    """Final documents by key, duplicate keys (documents mode), and the mode."""
    rows = list(rows)
    if mode == "auto":
        mode = "events" if any(r.is_event for r in rows) else "documents"
    last: dict[Key, _Row] = {}
    seen: dict[Key, int] = {}
    for row in rows:
        seen[row.key] = seen.get(row.key, 0) + 1
        held = last.get(row.key)
        if held is None or _order(row) >= _order(held):
            last[row.key] = row
    duplicates = sum(1 for n in seen.values() if n > 1) if mode == "documents" else 0
    return {k: r for k, r in last.items() if not r.removed}, duplicates, mode


def _order(row: _Row) -> tuple[int, int, int]:
    return (
        -1 if row.seqno is None else row.seqno,
        -1 if row.rev is None else row.rev,
        row.line,
    )


def _same(expected: bytes, actual: str | None) -> bool:
    if actual is None:
        return False
    if expected == actual.encode("utf-8"):
        return True
    try:
        return bool(json.loads(expected) == json.loads(actual))
    except ValueError:
        return False


def _below(actual: _Row, expected: Mapping[str, Any]) -> bool:
    """The output's version is older: rev, else seqno, else CAS (the first both have)."""
    for a, e in ((actual.rev, "rev"), (actual.seqno, "seqno"), (actual.cas, "cas")):
        if a is not None and expected.get(e) is not None:
            return bool(a < expected[e])
    return False


def _clip(text: str | None, limit: int = 200) -> str | None:
    return text if text is None or len(text) <= limit else text[:limit] + "…"


def verify_rows(
    expected: Iterable[Mapping[str, Any]],
    actual: str | Path,
    *,
    columns: Columns | None = None,
    mode: str = "auto",
    examples: int = EXAMPLES,
) -> VerifyReport:
    """Check the consumer output at ``actual`` against oracle rows (``Oracle.rows()``:
    scope, collection, key, value as bytes, rev, seqno, cas).

    Raises ``PipelineError`` for output that cannot be read, naming the file and line.
    """
    if mode not in ("auto", "documents", "events"):
        raise PipelineError(f"unknown mode {mode!r} (auto, documents or events)")
    started = time.perf_counter()
    rows = read_output(actual, columns)
    docs, duplicates, mode = _reduce(rows, mode)
    oracle = {(r["scope"], r["collection"], r["key"]): r for r in expected}
    found: dict[str, list[dict[str, Any]]] = {c: [] for c in CATEGORIES}
    matched = 0
    for key in sorted(oracle.keys() | docs.keys()):
        category, example = _compare(key, oracle.get(key), docs.get(key))
        if category == "ok":
            matched += 1
        else:
            found[category].append(example)
    return VerifyReport(
        missing=len(found["missing"]),
        phantom=len(found["phantom"]),
        stale=len(found["stale"]),
        wrong_value=len(found["wrong_value"]),
        duplicates=duplicates,
        unparseable=0,
        expected=len(oracle),
        actual_rows=len(rows),
        actual_documents=len(docs),
        matched=matched,
        mode=mode,
        examples={c: found[c][:examples] for c in CATEGORIES},
        seconds=time.perf_counter() - started,
    )


def _compare(
    key: Key, expected: Mapping[str, Any] | None, actual: _Row | None
) -> tuple[str, dict[str, Any]]:
    """A key's category and its example (as the Spark job shows them)."""
    where = {"scope": key[0], "collection": key[1], "key": key[2]}
    if actual is None:
        assert expected is not None
        return "missing", {**where, "rev": expected.get("rev"), "seqno": expected.get("seqno")}
    if expected is None:
        return "phantom", {**where, "rev": actual.rev, "seqno": actual.seqno}
    value = bytes(expected["value"] or b"")
    if _same(value, actual.value):
        return "ok", {}
    category = "stale" if _below(actual, expected) else "wrong_value"
    return category, {
        **where,
        "expected": {
            "rev": expected.get("rev"),
            "seqno": expected.get("seqno"),
            "value": _clip(value.decode("utf-8", "replace")),
        },
        "actual": {"rev": actual.rev, "seqno": actual.seqno, "value": _clip(actual.value)},
    }
