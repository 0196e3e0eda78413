"""The two Parquet schemas of the pipeline, their manifests, and their validation.

A corpus is a change history (one row per write, in order); an oracle is a final state
(one row per live document). Both are documented in ``mockdcp/pipeline/__init__.py``.
A directory written by ``mockdcp corpus`` or ``mockdcp oracle`` also holds a small JSON
manifest naming its format and version, so a corpus of another version is refused by
name rather than misread.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mockdcp.data._errors import PipelineError

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.dataset as ds

CORPUS_FORMAT = "mockdcp-corpus"
ORACLE_FORMAT = "mockdcp-oracle"
#: Bumped whenever a column is added, removed or changes meaning.
CORPUS_VERSION = 1
ORACLE_VERSION = 1
MANIFEST = "_mockdcp.json"

#: Corpus row operations, in the ``op`` column.
OP_INSERT, OP_UPDATE, OP_DELETE, OP_EXPIRE = "insert", "update", "delete", "expire"
WRITE_OPS = frozenset({OP_INSERT, OP_UPDATE})
REMOVE_OPS = frozenset({OP_DELETE, OP_EXPIRE})

#: (name, arrow type name, nullable) of a corpus row.
CORPUS_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("partition", "int32", False),
    ("offset", "int64", False),
    ("scope", "string", False),
    ("collection", "string", False),
    ("key", "string", False),
    ("op", "string", False),
    ("value", "binary", True),
    ("datatype", "int32", False),
    ("flags", "int64", False),
    ("expiry", "int64", False),
    ("rev", "int64", False),
)

#: (name, arrow type name, nullable) of an oracle row.
ORACLE_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("scope", "string", False),
    ("collection", "string", False),
    ("key", "string", False),
    ("value", "binary", False),
    ("datatype", "int32", False),
    ("flags", "int64", False),
    ("expiry", "int64", False),
    ("rev", "int64", False),
    ("seqno", "int64", True),
    ("vbucket", "int32", True),
    ("cas", "int64", True),
)


def arrow_schema(columns: tuple[tuple[str, str, bool], ...]) -> pa.Schema:
    """The pyarrow schema of ``CORPUS_COLUMNS`` or ``ORACLE_COLUMNS``."""
    import pyarrow as pa

    return pa.schema(
        [pa.field(name, getattr(pa, kind)(), nullable=null) for name, kind, null in columns]
    )


def spark_ddl(columns: tuple[tuple[str, str, bool], ...]) -> str:
    """The same schema as a Spark DDL string (``name TYPE, ...``)."""
    names = {"int32": "INT", "int64": "BIGINT", "string": "STRING", "binary": "BINARY"}
    return ", ".join(f"`{name}` {names[kind]}" for name, kind, _ in columns)


def write_manifest(directory: Path, fmt: str, version: int, **info: object) -> None:
    """Write the directory's manifest (format, version, and what made it)."""
    body = {"format": fmt, "version": version, **info}
    (directory / MANIFEST).write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")


def read_manifest(directory: Path, fmt: str, version: int) -> dict[str, Any] | None:
    """The manifest of ``directory`` (None when it has none: a foreign Parquet directory is
    still read, its columns checked). ``PipelineError`` for another format or version."""
    path = directory / MANIFEST
    if not path.is_file():
        return None
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PipelineError(f"{path}: not a readable manifest ({exc})") from None
    if not isinstance(body, dict) or body.get("format") != fmt:
        got = body.get("format") if isinstance(body, dict) else body
        raise PipelineError(f"{directory} is a {got!r} directory, not a {fmt}")
    if body.get("version") != version:
        raise PipelineError(
            f"{directory} is a {fmt} of version {body.get('version')!r}; this mockdcp reads "
            f"version {version}: make it again with this mockdcp"
        )
    return body


def parquet_files(path: Path) -> list[Path]:
    """The Parquet files of a directory (or the file itself), sorted by name.

    ``PipelineError`` when there is nothing to read: a missing path, an empty directory.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise PipelineError(f"{path}: no such file or directory")
    files = sorted(
        p
        for p in path.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)
    )
    if not files:
        raise PipelineError(f"{path}: no Parquet files in it")
    return files


def check_columns(
    schema: pa.Schema, columns: tuple[tuple[str, str, bool], ...], where: str
) -> None:
    """``PipelineError`` naming every missing or mistyped column of ``schema``.

    Integer columns may be any integer type (a widening cast is made on read); strings
    may be large strings; binary columns may hold strings (UTF-8 bytes are bytes).
    """
    import pyarrow as pa

    problems = []
    for name, kind, _ in columns:
        idx = schema.get_field_index(name)
        if idx < 0:
            problems.append(f"missing column {name!r} ({kind})")
            continue
        got = schema.field(idx).type
        if pa.types.is_dictionary(got):
            got = got.value_type
        ok = {
            "int32": pa.types.is_integer,
            "int64": pa.types.is_integer,
            "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
            "binary": lambda t: (
                pa.types.is_binary(t)
                or pa.types.is_large_binary(t)
                or pa.types.is_string(t)
                or pa.types.is_large_string(t)
            ),
        }[kind](got)
        if not ok:
            problems.append(f"column {name!r} is {got}, not {kind}")
    if problems:
        raise PipelineError(f"{where}: " + "; ".join(problems))


def open_dataset(
    path: Path, columns: tuple[tuple[str, str, bool], ...], fmt: str, version: int
) -> ds.Dataset:
    """A pyarrow dataset over the Parquet files of ``path``, its manifest and columns
    checked (``PipelineError`` otherwise)."""
    import pyarrow.dataset as ds

    if path.is_dir():
        read_manifest(path, fmt, version)
    files = parquet_files(path)
    try:
        dataset = ds.dataset([str(f) for f in files], format="parquet")
    except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError
        raise PipelineError(f"{path}: not readable as Parquet ({exc})") from None
    check_columns(dataset.schema, columns, str(path))
    return dataset
