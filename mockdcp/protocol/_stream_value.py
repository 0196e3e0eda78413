"""The optional JSON value of DCP_STREAM_REQ (kv_engine
``docs/dcp/documentation/commands/stream-request-value.md``).

A collection-aware consumer may send a JSON object with the stream request:

    {"uid": "b4", "sid": 71, "collections": ["0", "8a"], "purge_seqno": "1000"}

Ids are lower-case base-16 strings without ``0x`` (as that page says); ``sid`` is a JSON integer;
``purge_seqno`` is a base-10 string. ``parse`` applies every rule of its "Validation" section
plus the ones kv_engine's ``Collections::VB::Filter::constructFromJson`` adds (noted where
they apply). Every error is a ``RemoteProtocolError`` with status EINVAL whose ``field`` is
the offending JSON key (``value`` when the whole document is wrong), except ``"sid": 0``,
which kv_engine answers with DCP_STREAMID_INVALID (0x8d).
"""

from __future__ import annotations

import json
import re
from typing import Any, Self

import attrs

from mockdcp.protocol._enums import Status
from mockdcp.protocol._errors import RemoteProtocolError

#: Keys kv_engine looks at. A document must hold at least one of them ("cts" is the 8.x
#: cache-transfer customisation, accepted and ignored here).
KNOWN_KEYS = frozenset({"uid", "sid", "collections", "scope", "purge_seqno", "cts"})

_HEX_ID = re.compile(r"[0-9a-fA-F]{1,16}")
#: What ``std::strtoull(s, nullptr, 10)`` accepts: blanks, a sign, then digits (the rest
#: of the string is ignored).
_STRTOULL = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)")
_U64 = 1 << 64

#: Largest stream-request value parsed. A filter of a thousand collections is about
#: 12 KiB of JSON; anything much larger is refused before it is parsed.
MAX_VALUE_SIZE = 64 * 1024
#: Deepest nesting of arrays and objects parsed. A valid value nests two levels (the
#: object, then "collections" or "cts"); Python's parser recurses once per level and
#: raises ``RecursionError`` near a thousand, so depth is checked before it runs.
MAX_DEPTH = 16
#: Bytes that open or close a JSON container, and a JSON string (whose brackets don't).
#: An unterminated string runs to the end, so every match consumes: linear time.
_BRACKETS = re.compile(rb'"(?:[^"\\]|\\.)*"?|[\[\]{}]')


def _fail(message: str, field: str, status: Status = Status.EINVAL) -> RemoteProtocolError:
    return RemoteProtocolError(f"stream-request value: {message}", status=status, field=field)


def _hex_id(text: object, field: str, limit: int) -> int:
    """A manifest/collection/scope id written as base-16 (``stream-request-value.md``)."""
    if not isinstance(text, str):
        raise _fail(f"{field} must be a JSON string", field)
    if _HEX_ID.fullmatch(text) is None or int(text, 16) > limit:
        raise _fail(f"{field} {text!r} is not a base-16 id", field)
    return int(text, 16)


def _parse_uid(raw: object) -> int:
    """``stream-request-value.md``: "fail if uid is not a JSON string" (kv_engine only logs it)."""
    return _hex_id(raw, "uid", _U64 - 1)


def _parse_sid(raw: object) -> int:
    """``stream-request-value.md``: sid must be a JSON integer, and not 0 (status 0x8d for 0)."""
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise _fail("sid must be a JSON integer", "sid")
    if raw == 0:
        raise _fail("sid 0 is not a valid stream-id", "sid", Status.DCP_STREAMID_INVALID)
    if not 0 < raw <= 0xFFFF:
        raise _fail(f"sid {raw} does not fit a u16", "sid")
    return raw


def _parse_collections(raw: object) -> tuple[int, ...]:
    """``stream-request-value.md``: collections must be a JSON array (kv_engine: of JSON
    strings)."""
    if not isinstance(raw, list):
        raise _fail("collections must be a JSON array", "collections")
    return tuple(_hex_id(entry, "collections", 0xFFFFFFFF) for entry in raw)


def _parse_purge_seqno(raw: object) -> int:
    """``stream-request-value.md``: a JSON string that ``std::strtoull`` can convert (base
    10).

    Like strtoull, leading blanks and a sign are accepted, trailing text is ignored, a
    minus sign wraps modulo 2**64, and a value beyond a u64 is refused.
    """
    if not isinstance(raw, str):
        raise _fail("purge_seqno must be a JSON string", "purge_seqno")
    match = _STRTOULL.match(raw)
    if match is None:
        raise _fail(f"purge_seqno {raw!r} is not a number", "purge_seqno")
    digits = match.group(2).lstrip("0") or "0"
    if len(digits) > 20 or int(digits) >= _U64:  # the length check keeps int() cheap
        raise _fail(f"purge_seqno {raw!r} exceeds a u64", "purge_seqno")
    value = int(digits)
    return (-value) % _U64 if match.group(1) == "-" else value


def json_depth(value: bytes, limit: int) -> int:
    """How deep ``value`` nests arrays and objects, counted up to ``limit + 1`` (brackets
    inside strings don't count; unbalanced ones are left for the parser). O(len(value))."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(value):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


def load_json(value: bytes, *, max_size: int, max_depth: int, what: str) -> Any:  # noqa: ANN401
    """``json.loads`` that cannot be made to recurse or chew without bound (issue 18).

    Raises ``RemoteProtocolError`` (EINVAL, field "value") for a value over ``max_size``
    bytes, nested deeper than ``max_depth``, or not JSON; ``what`` starts the message.
    """
    if len(value) > max_size:
        raise _error(what, f"{len(value)} bytes exceed the {max_size}-byte limit")
    if json_depth(value, max_depth) > max_depth:
        raise _error(what, f"nested deeper than {max_depth} levels")
    try:
        return json.loads(value)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _error(what, f"not JSON ({exc})") from None


def _error(what: str, message: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"{what}: {message}", field="value")


def _load_object(value: bytes) -> dict[str, Any]:
    doc = load_json(
        value, max_size=MAX_VALUE_SIZE, max_depth=MAX_DEPTH, what="stream-request value"
    )
    if not isinstance(doc, dict):
        raise _fail("must be a JSON object", "value")
    return doc


@attrs.frozen(kw_only=True)
class StreamRequestValue:
    """The parsed stream-request JSON; ``None`` means "key absent".

    ``collections`` and ``scope`` are mutually exclusive filters; neither means "every
    collection" on a collection-aware connection.
    """

    uid: int | None = None
    sid: int | None = None
    collections: tuple[int, ...] | None = None
    scope: int | None = None
    purge_seqno: int | None = None

    @classmethod
    def parse(cls, value: bytes) -> Self:
        """Parse and validate the request value (``stream-request-value.md`` "Validation").

        Raises ``RemoteProtocolError`` (EINVAL, or DCP_STREAMID_INVALID for ``"sid":0``)
        naming the offending key. Unknown keys are ignored, but kv_engine refuses a
        document holding none of the known ones.
        """
        doc = _load_object(value)
        if not KNOWN_KEYS & doc.keys():
            raise _fail("no sid, uid, scope, collections or purge_seqno key", "value")
        if "collections" in doc and "scope" in doc:
            raise _fail("cannot give both scope and collections", "scope")
        if "cts" in doc and not isinstance(doc["cts"], dict):
            raise _fail("cts must be a JSON object", "cts")
        return cls(
            uid=None if "uid" not in doc else _parse_uid(doc["uid"]),
            sid=None if "sid" not in doc else _parse_sid(doc["sid"]),
            collections=None
            if "collections" not in doc
            else _parse_collections(doc["collections"]),
            scope=None if "scope" not in doc else _hex_id(doc["scope"], "scope", 0xFFFFFFFF),
            purge_seqno=None
            if "purge_seqno" not in doc
            else _parse_purge_seqno(doc["purge_seqno"]),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object a client sends, holding only the keys that are set."""
        doc: dict[str, Any] = {}
        if self.uid is not None:
            doc["uid"] = f"{self.uid:x}"
        if self.sid is not None:
            doc["sid"] = self.sid
        if self.collections is not None:
            doc["collections"] = [f"{cid:x}" for cid in self.collections]
        if self.scope is not None:
            doc["scope"] = f"{self.scope:x}"
        if self.purge_seqno is not None:
            doc["purge_seqno"] = str(self.purge_seqno)
        return doc

    def encode(self) -> bytes:
        """Compact JSON bytes (``b""`` when nothing is set: send no value at all)."""
        doc = self.to_json()
        return json.dumps(doc, separators=(",", ":")).encode() if doc else b""
