"""The JSON Schema of scenario files and step lists, generated from the step classes.

``scenario.schema.json`` beside this module is its output, shipped for editors and
other tools (``python -m mockdcp.scenario._schema > scenario.schema.json`` rebuilds it;
a test keeps it current). The HTTP API's OpenAPI document uses ``step_schema()``.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from typing import Literal, Union, get_args, get_origin

import attrs

from mockdcp.scenario import steps as st
from mockdcp.scenario._convert import BucketSpec, _Meta

SCHEMA_ID = "https://mockdcp.invalid/scenario.schema.json"

_VBUCKETS: dict[str, object] = {
    "description": "all, one vbucket, or a list of them",
    "oneOf": [
        {"const": "all"},
        {"type": "integer", "minimum": 0},
        {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1},
    ],
}
_DURATION: dict[str, object] = {
    "description": "seconds, or a number with a unit: 500ms, 10s, 2m",
    "oneOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s|m)?\s*$"},
    ],
}
_VALUE: dict[str, object] = {
    "description": "a JSON object or list (stored compactly) or a string (stored as is)",
    "oneOf": [{"type": "object"}, {"type": "array"}, {"type": "string"}],
}
_SPAN: dict[str, object] = {
    "description": "seconds, or a number with a unit: 90s, 10m, 2h, 30d",
    "oneOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s|m|h|d)?\s*$"},
        {"type": "null"},
    ],
}
_SEQNO: dict[str, object] = {
    "oneOf": [{"type": "integer", "minimum": 0}, {"const": "high"}, {"type": "null"}],
}


def _type_schema(tp: object) -> dict[str, object]:
    if tp == st.Vbuckets:
        return dict(_VBUCKETS)
    if tp == st.Value:
        return dict(_VALUE)
    if tp == st.SeqnoTarget:
        return dict(_SEQNO)
    if tp == st.Span:
        return dict(_SPAN)
    if tp is float:
        return dict(_DURATION)
    if tp is int:
        return {"type": "integer"}
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is type(None):
        return {"type": "null"}
    origin = get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if origin is Literal:
        return {"enum": list(get_args(tp))}
    if origin in (Union, types.UnionType):
        return {"anyOf": [_type_schema(a) for a in get_args(tp)]}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type_schema(get_args(tp)[1])}
    if origin is list or (origin is tuple and get_args(tp)[1:] == (Ellipsis,)):
        return {"type": "array", "items": _type_schema(get_args(tp)[0])}
    if isinstance(tp, type) and attrs.has(tp):
        return _class_schema(tp)
    raise TypeError(f"no JSON Schema for {tp!r}")


def _class_schema(cls: type) -> dict[str, object]:
    hints = typing.get_type_hints(cls)
    props: dict[str, object] = {}
    required = []
    for field in attrs.fields(cls):
        props[field.name] = _type_schema(hints[field.name])
        if field.default is attrs.NOTHING:
            required.append(field.name)
    schema: dict[str, object] = {
        "type": "object",
        "properties": props,
        "additionalProperties": False,
    }
    if cls.__doc__:
        schema["description"] = " ".join(cls.__doc__.split())
    if required:
        schema["required"] = required
    return schema


def step_schema() -> dict[str, object]:
    """One step: a mapping of one step name to its fields (``null`` for none)."""
    variants = []
    for cls in st.STEP_TYPES:
        fields = _class_schema(cls)
        if "required" not in fields:
            fields = {"anyOf": [fields, {"type": "null"}]}
        variants.append(
            {
                "type": "object",
                "properties": {cls.NAME: fields},
                "required": [cls.NAME],
                "additionalProperties": False,
            }
        )
    return {"oneOf": variants}


def scenario_schema() -> dict[str, object]:
    """The schema of a scenario file."""
    meta = _class_schema(_Meta)["properties"]
    assert isinstance(meta, dict)
    meta["tags"] = {"type": "array", "items": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "mockdcp scenario",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "seed": {"type": "integer"},
            "bucket": _class_schema(BucketSpec),
            "steps": {"type": "array", "items": step_schema()},
            **meta,
        },
        "required": ["name"],
        "additionalProperties": False,
    }


def render() -> str:
    return json.dumps(scenario_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
