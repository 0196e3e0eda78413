"""The generated parts of the documentation, filled in when mkdocs builds it.

A page holds a marker comment (``<!-- generated: NAME -->``) where a generated part goes;
``on_page_markdown`` replaces it with ``GENERATED[NAME]()``: the step reference from the
step classes (as the JSON Schema is made from them), the HTTP API from the OpenAPI
document the server serves, and the published matrix from ``tests/interop/matrix.json``.
Nothing generated is checked in, so nothing can fall behind the code.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")


def _describe(schema: dict[str, Any]) -> str:
    """A JSON Schema fragment in a few words, for a table cell."""
    if "description" in schema and ("oneOf" in schema or "anyOf" in schema):
        return str(schema["description"])
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(_describe(part) for part in schema[key])
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_describe(schema.get('items', {}))}"
    if kind == "object" and "properties" in schema:
        return "mapping (" + ", ".join(f"`{p}`" for p in schema["properties"]) + ")"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"mapping to {_describe(schema['additionalProperties'])}"
    return str(kind)


def _doc(cls: type) -> str:
    text = textwrap.dedent("\n".join((cls.__doc__ or "").splitlines()[1:]))
    first = (cls.__doc__ or "").splitlines()[0] if cls.__doc__ else ""
    return " ".join((first + "\n" + text).split())


def _default(field: Any) -> str:  # noqa: ANN401 (an attrs Attribute)
    import attrs

    if field.default is attrs.NOTHING:
        return "required"
    if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        return "empty"
    if field.default is None:
        return "none"
    try:
        return f"`{json.dumps(field.default)}`"
    except TypeError:
        return f"`{field.default!r}`"


def _fields_table(cls: type) -> list[str]:
    import attrs

    from mockdcp.scenario._schema import _type_schema

    hints = typing.get_type_hints(cls)
    fields = attrs.fields(cls)
    if not fields:
        return ["No fields (`{}` or nothing)."]
    lines = ["| field | value | default |", "| --- | --- | --- |"]
    lines += [
        f"| `{f.name}` | {_describe(_type_schema(hints[f.name]))} | {_default(f)} |" for f in fields
    ]
    return lines


def steps_reference() -> str:
    """Every step of ``mockdcp.scenario.steps.STEP_TYPES``: its name, its docstring and its
    fields (the value they take, their default), and the scenario file's bucket block."""
    from mockdcp.scenario import steps as st
    from mockdcp.scenario._convert import BucketSpec

    lines = ["## The bucket block", "", _doc(BucketSpec), "", *_fields_table(BucketSpec)]
    lines += ["", "## Steps", ""]
    lines += [", ".join(f"[`{c.NAME}`](#{c.NAME})" for c in st.STEP_TYPES)]
    for cls in st.STEP_TYPES:
        lines += ["", f"### `{cls.NAME}`", ""]
        lines += [_doc(cls), "", f"Python: `mockdcp.scenario.{cls.__name__}`.", ""]
        lines += _fields_table(cls)
    return "\n".join(lines) + "\n"


def http_reference() -> str:
    """Every operation of the control API's OpenAPI document: its summary, who may call
    it, what it takes and what it answers."""
    from mockdcp.server._control_openapi import openapi_document

    document = openapi_document()
    responses = document["components"]["responses"]
    lines: list[str] = []
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            lines += [f"### `{method.upper()} {path}`", "", op["summary"] + ".", ""]
            if op.get("security") == []:
                lines += ["Open: no credentials.", ""]
            body = op.get("requestBody", {}).get("content", {})
            if body:
                lines += ["Body: " + ", ".join(f"`{t}`" for t in body) + ".", ""]
            lines += ["| status | answer |", "| --- | --- |"]
            for status, answer in op["responses"].items():
                if "$ref" in answer:
                    answer = responses[answer["$ref"].rsplit("/", 1)[1]]
                kinds = ", ".join(f"`{t}`" for t in answer.get("content", {}))
                lines.append(
                    f"| {status} | {answer['description']}{' (' + kinds + ')' if kinds else ''} |"
                )
            lines.append("")
    return "\n".join(lines)


def matrix_table() -> str:
    """The published matrix, rendered from ``tests/interop/matrix.json``."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.interop import matrix

    return matrix.table(matrix.load()) + "\n"


def versions_table() -> str:
    """What differs between the server version profiles, from
    ``mockdcp.protocol.PROFILES``: a row per thing a consumer can tell apart, a column
    per release (only what is not the same in all of them)."""
    from mockdcp.protocol import PROFILES, StreamFlag

    profiles = list(PROFILES.values())

    def has(items: list[set[str]]) -> list[tuple[str, list[bool]]]:
        every = sorted(set[str]().union(*items))
        return [
            (x, [x in got for got in items]) for x in every if not all(x in got for got in items)
        ]

    rows: list[tuple[str, list[str]]] = [
        ("version reported (VERSION, `/pools`)", [f"`{p.version}`" for p in profiles]),
        ("`clusterCompatibility`", [str(p.cluster_compatibility) for p in profiles]),
    ]
    yes = {True: "yes", False: ""}
    for name, cells in has([{f.name for f in p.features} for p in profiles]):
        rows.append((f"HELLO `{name}`", [yes[c] for c in cells]))
    for name, cells in has([set(p.controls) for p in profiles]):
        rows.append((f"DCP_CONTROL `{name}`", [yes[c] for c in cells]))
    rows.append(
        (
            "`enable_out_of_order_snapshots=true_with_seqno_advanced`",
            [yes[p.oso_seqno_advanced] for p in profiles],
        )
    )
    flags = [{str(f.name) for f in StreamFlag if f & p.stream_flags} for p in profiles]
    for name, cells in has(flags):
        rows.append((f"stream flag `{name}`", [yes[c] for c in cells]))
    rows.append(
        (
            "unknown stream flags",
            ["EINVAL" if p.checks_stream_flags else "ignored" for p in profiles],
        )
    )
    rows.append(
        (
            "idle backfill (`dcp_backfill_idle_limit_seconds`)",
            ["ends SLOW" if p.ends_idle_backfills else "waits" for p in profiles],
        )
    )
    caps = [set(p.bucket_capabilities(history=True)) for p in profiles]
    for name, cells in has(caps):
        rows.append((f"bucket capability `{name}`", [yes[c] for c in cells]))
    lines = [
        "| | " + " | ".join(p.name for p in profiles) + " |",
        "| --- |" + " --- |" * len(profiles),
    ]
    lines += [f"| {what} | " + " | ".join(cells) + " |" for what, cells in rows]
    return "\n".join(lines) + "\n"


GENERATED: dict[str, Callable[[], str]] = {
    "steps": steps_reference,
    "http-api": http_reference,
    "matrix": matrix_table,
    "versions": versions_table,
}


def fill(markdown: str) -> str:
    """The page with each marker replaced by its generated part (an unknown one is an
    error, so a misspelled marker fails the build)."""

    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATED:
            raise ValueError(f"no generated part {name!r}: one of {sorted(GENERATED)}")
        return GENERATED[name]()

    return MARKER.sub(part, markdown)


def on_page_markdown(markdown: str, **_: object) -> str:
    """mkdocs' hook: each page's Markdown before it is rendered."""
    return fill(markdown)
