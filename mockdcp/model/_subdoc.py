"""Sub-document paths and operations on a parsed JSON document (pure).

Sources: kv_engine ``docs/SubDocument.md`` (path syntax, per-operation semantics and
statuses) and the subjson rules it describes:

* a path is components separated by ``.``; a component is a name, or a name quoted in
  backticks (``\u0060a.b\u0060``; a doubled backtick is a literal one), followed by any
  number of array indexes ``[n]`` (``[-1]`` is the last element); the empty path is the
  whole document;
* a missing component is SUBDOC_PATH_ENOENT, a component of the wrong kind (a name on an
  array, an index on an object, descending into a scalar) SUBDOC_PATH_MISMATCH, a path
  that does not parse SUBDOC_PATH_EINVAL; with MKDIR_P missing objects on the way are
  created;
* a value that is not JSON is SUBDOC_VALUE_CANTINSERT; a COUNTER delta that is not a
  non-zero integer is SUBDOC_DELTA_EINVAL, a result outside int64 SUBDOC_NUM_ERANGE.

Each operation raises ``SubdocError`` with the status of the spec, and changes nothing
then (callers work on a copy and keep it only when every spec succeeded).
"""

from __future__ import annotations

import json
from typing import Any

from mockdcp.protocol import Status, SubdocOpcode

#: docs/SubDocument.md limits: path length and nesting depth.
MAX_PATH_LENGTH = 1024
MAX_DEPTH = 32

Component = str | int

_INT64 = (-(2**63), 2**63 - 1)


class SubdocError(Exception):
    """One spec failed with ``status`` (a SUBDOC_* or a document-level status)."""

    def __init__(self, status: Status, message: str = "") -> None:
        super().__init__(message or status.name)
        self.status = status


def parse_path(path: str) -> list[Component]:
    """The components of ``path``; ``SubdocError`` (PATH_EINVAL / PATH_E2BIG) if bad."""
    if len(path) > MAX_PATH_LENGTH:
        raise SubdocError(Status.SUBDOC_PATH_E2BIG, "path too long")
    out: list[Component] = []
    i, n = 0, len(path)
    expect_name = bool(path) and path[0] != "["
    while i < n:
        if expect_name:
            name, i = _read_name(path, i)
            out.append(name)
        while i < n and path[i] == "[":
            close = path.find("]", i)
            if close < 0:
                raise SubdocError(Status.SUBDOC_PATH_EINVAL, "unclosed [")
            out.append(_index(path[i + 1 : close]))
            i = close + 1
        if i < n:
            if path[i] != "." or i + 1 == n:
                raise SubdocError(Status.SUBDOC_PATH_EINVAL, f"unexpected {path[i]!r}")
            i += 1
            expect_name = True
    if len(out) > MAX_DEPTH:
        raise SubdocError(Status.SUBDOC_PATH_E2BIG, "path too deep")
    return out


def _read_name(path: str, i: int) -> tuple[str, int]:
    """A (possibly backtick-quoted) name starting at ``i``; the name and the next index."""
    if path[i] != "`":
        j = i
        while j < len(path) and path[j] not in ".[":
            if path[j] in "]`":
                raise SubdocError(Status.SUBDOC_PATH_EINVAL, f"unexpected {path[j]!r}")
            j += 1
        if j == i:
            raise SubdocError(Status.SUBDOC_PATH_EINVAL, "empty path component")
        return path[i:j], j
    chars, j = [], i + 1
    while True:
        if j >= len(path):
            raise SubdocError(Status.SUBDOC_PATH_EINVAL, "unclosed backtick")
        if path[j] == "`":
            if j + 1 < len(path) and path[j + 1] == "`":
                chars.append("`")
                j += 2
                continue
            return "".join(chars), j + 1
        chars.append(path[j])
        j += 1


def _index(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise SubdocError(Status.SUBDOC_PATH_EINVAL, f"bad array index {text!r}") from None
    if n < -1:
        raise SubdocError(Status.SUBDOC_PATH_EINVAL, "only -1 may index from the end")
    return n


def _child(node: object, comp: Component) -> object:
    """The child ``comp`` of ``node``; ENOENT if absent, MISMATCH if the wrong kind."""
    if isinstance(comp, str):
        if not isinstance(node, dict):
            raise SubdocError(Status.SUBDOC_PATH_MISMATCH)
        if comp not in node:
            raise SubdocError(Status.SUBDOC_PATH_ENOENT)
        return node[comp]
    if not isinstance(node, list):
        raise SubdocError(Status.SUBDOC_PATH_MISMATCH)
    if not node or comp >= len(node):
        raise SubdocError(Status.SUBDOC_PATH_ENOENT)
    return node[comp]


def _container(node: object) -> Any:  # noqa: ANN401 - a dict or a list, indexed by a component
    """``node`` as the object or array a component indexes (``_child`` checked the kind)."""
    assert isinstance(node, dict | list)
    return node


def _walk(doc: object, comps: list[Component], *, mkdir: bool = False) -> object:
    """The node at ``comps``; with ``mkdir`` missing object members are created."""
    node = doc
    for comp in comps:
        if mkdir and isinstance(comp, str) and isinstance(node, dict) and comp not in node:
            node[comp] = {}
        node = _child(node, comp)
    return node


def _json_value(raw: bytes, *, many: bool = False) -> object:
    """A spec's value as JSON (``many``: a comma-separated list, for array pushes)."""
    try:
        text = raw.decode()
        return json.loads(f"[{text}]" if many else text)
    except (UnicodeDecodeError, ValueError):
        raise SubdocError(Status.SUBDOC_VALUE_CANTINSERT, "value is not JSON") from None


def dumps(value: object) -> bytes:
    """A JSON value as a node returns it (compact)."""
    return json.dumps(value, separators=(",", ":")).encode()


def lookup(doc: object, opcode: int, path: str) -> bytes:
    """The result of one lookup spec on ``doc``; ``SubdocError`` on failure."""
    node = _walk(doc, parse_path(path))
    if opcode == SubdocOpcode.EXISTS:
        return b""
    if opcode == SubdocOpcode.GET_COUNT:
        if not isinstance(node, dict | list):
            raise SubdocError(Status.SUBDOC_PATH_MISMATCH)
        return str(len(node)).encode()
    return dumps(node)


def mutate(doc: object, opcode: int, path: str, raw: bytes, *, mkdir: bool) -> tuple[object, bytes]:
    """Apply one mutation spec to ``doc`` (in place where it can); returns the new root
    (a spec on the empty path replaces it) and the spec's result (COUNTER only)."""
    comps = parse_path(path)
    op = SubdocOpcode(opcode)
    if op in (SubdocOpcode.ARRAY_PUSH_LAST, SubdocOpcode.ARRAY_PUSH_FIRST):
        values = _json_value(raw, many=True)
        assert isinstance(values, list)  # parsed from "[...]"
        return _push(doc, comps, values, op, mkdir), b""
    if op is SubdocOpcode.ARRAY_ADD_UNIQUE:
        return _add_unique(doc, comps, _json_value(raw), mkdir), b""
    if not comps:
        raise SubdocError(Status.SUBDOC_PATH_EINVAL, "this operation needs a path")
    parent = _walk(doc, comps[:-1], mkdir=mkdir)
    last = comps[-1]
    if op is SubdocOpcode.COUNTER:
        return doc, _counter(parent, last, raw)
    if op is SubdocOpcode.DELETE:
        _child(parent, last)
        _container(parent).__delitem__(last)
        return doc, b""
    if op is SubdocOpcode.ARRAY_INSERT:
        _insert(parent, last, _json_value(raw))
        return doc, b""
    value = _json_value(raw)
    if op is SubdocOpcode.REPLACE:
        _child(parent, last)
        _container(parent)[last] = value
        return doc, b""
    if op in (SubdocOpcode.DICT_ADD, SubdocOpcode.DICT_UPSERT):
        if not isinstance(parent, dict) or not isinstance(last, str):
            raise SubdocError(Status.SUBDOC_PATH_MISMATCH)
        if op is SubdocOpcode.DICT_ADD and last in parent:
            raise SubdocError(Status.SUBDOC_PATH_EEXISTS)
        parent[last] = value
        return doc, b""
    raise SubdocError(Status.SUBDOC_INVALID_COMBO, f"{op.name} is not a path mutation")


def _target_array(doc: object, comps: list[Component], mkdir: bool) -> list[object]:
    if mkdir and comps and isinstance(comps[-1], str):
        parent = _walk(doc, comps[:-1], mkdir=True)
        if isinstance(parent, dict) and comps[-1] not in parent:
            parent[comps[-1]] = []
    node = _walk(doc, comps)
    if not isinstance(node, list):
        raise SubdocError(Status.SUBDOC_PATH_MISMATCH)
    return node


def _push(
    doc: object, comps: list[Component], values: list[object], op: int, mkdir: bool
) -> object:
    array = _target_array(doc, comps, mkdir)
    if op == SubdocOpcode.ARRAY_PUSH_LAST:
        array.extend(values)
    else:
        array[:0] = values
    return doc


def _add_unique(doc: object, comps: list[Component], value: object, mkdir: bool) -> object:
    if isinstance(value, dict | list):
        raise SubdocError(Status.SUBDOC_VALUE_CANTINSERT, "only primitives are unique")
    array = _target_array(doc, comps, mkdir)
    if any(isinstance(v, dict | list) for v in array):
        raise SubdocError(Status.SUBDOC_PATH_MISMATCH)
    if any(type(v) is type(value) and v == value for v in array):
        raise SubdocError(Status.SUBDOC_PATH_EEXISTS)
    array.append(value)
    return doc


def _insert(parent: object, last: Component, value: object) -> None:
    if not isinstance(last, int):
        raise SubdocError(Status.SUBDOC_PATH_EINVAL, "ARRAY_INSERT needs an index")
    if not isinstance(parent, list):
        raise SubdocError(Status.SUBDOC_PATH_MISMATCH)
    if not 0 <= last <= len(parent):
        raise SubdocError(Status.SUBDOC_PATH_ENOENT)
    parent.insert(last, value)


def _counter(parent: object, last: Component, raw: bytes) -> bytes:
    try:
        delta = int(raw)
    except ValueError:
        raise SubdocError(Status.SUBDOC_DELTA_EINVAL) from None
    if delta == 0 or not _INT64[0] <= delta <= _INT64[1]:
        raise SubdocError(Status.SUBDOC_DELTA_EINVAL)
    if isinstance(parent, dict) and isinstance(last, str) and last not in parent:
        current = 0
    else:
        found = _child(parent, last)
        if isinstance(found, bool) or not isinstance(found, int):
            raise SubdocError(Status.SUBDOC_PATH_MISMATCH)
        current = found
    result = current + delta
    if not _INT64[0] <= result <= _INT64[1]:
        raise SubdocError(Status.SUBDOC_NUM_ERANGE)
    _container(parent)[last] = result
    return str(result).encode()
