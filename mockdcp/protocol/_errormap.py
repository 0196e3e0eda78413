"""The GET_ERROR_MAP reply (kv_engine ``docs/ErrorMap.md``).

Layout, as kv_engine serves it from ``etc/couchbase/kv/error_maps/error_map_v2.json``:

    {"version": 2, "revision": N,
     "errors": {"<status in lower-case hex, no 0x, no padding>":
                {"name": ..., "desc": ..., "attrs": [...]}}}

Version 1 is version 2 with the attributes version 1 did not define removed and the
revision raised by 4 (``daemon/error_map_manager.cc``). mockdcp's map covers every
``Status`` a DCP client can meet here, with kv_engine's names and attributes and
descriptions of our own.
"""

from __future__ import annotations

import json

from mockdcp.protocol._enums import Status

#: Revision of mockdcp's version-2 map.
REVISION = 1

#: Attributes version 1 knows; others are dropped from the version-1 map.
V1_ATTRIBUTES = frozenset(
    {
        "item-deleted",
        "item-locked",
        "item-only",
        "invalid-input",
        "fetch-config",
        "conn-state-invalidated",
        "auth",
        "special-handling",
        "support",
        "temp",
        "internal",
        "retry-now",
        "retry-later",
        "subdoc",
        "dcp",
        "success",
    }
)

#: status → (name as kv_engine spells it, description, attributes).
ERRORS: dict[Status, tuple[str, str, tuple[str, ...]]] = {
    Status.SUCCESS: ("SUCCESS", "The command succeeded", ("success",)),
    Status.KEY_ENOENT: ("KEY_ENOENT", "No such key, stream or bucket", ("item-only",)),
    Status.KEY_EEXISTS: ("KEY_EEXISTS", "Already exists (or CAS mismatch)", ("item-only",)),
    Status.E2BIG: ("E2BIG", "The value is too large", ("item-only", "invalid-input")),
    Status.EINVAL: ("EINVAL", "The request is malformed or invalid", ("internal", "invalid-input")),
    Status.NOT_MY_VBUCKET: (
        "NOT_MY_VBUCKET",
        "This node does not own the vbucket",
        ("fetch-config", "invalid-input"),
    ),
    Status.NO_BUCKET: ("NO_BUCKET", "No bucket is selected", ("conn-state-invalidated",)),
    Status.DCP_STREAM_NOT_FOUND: (
        "STREAM_NOT_FOUND",
        "The DCP stream does not exist",
        ("conn-state-invalidated",),
    ),
    Status.OPAQUE_NO_MATCH: (
        "OPAQUE_NO_MATCH",
        "The opaque matches no DCP stream",
        ("conn-state-invalidated",),
    ),
    Status.AUTH_ERROR: ("AUTH_ERROR", "Authentication failed", ("conn-state-invalidated", "auth")),
    Status.AUTH_CONTINUE: (
        "AUTH_CONTINUE",
        "Authentication needs another step",
        ("special-handling",),
    ),
    Status.ERANGE: ("ERANGE", "The requested range is invalid", ("invalid-input",)),
    Status.ROLLBACK: ("ROLLBACK", "The DCP consumer must roll back", ("dcp", "special-handling")),
    Status.EACCESS: ("EACCESS", "No access to this command or resource", ("support",)),
    Status.UNKNOWN_COMMAND: ("UNKNOWN_COMMAND", "The command is not known", ("support",)),
    Status.ENOMEM: ("ENOMEM", "Out of memory; retry later", ("temp", "retry-later")),
    Status.NOT_SUPPORTED: ("NOT_SUPPORTED", "Not supported in this configuration", ("support",)),
    Status.EINTERNAL: ("EINTERNAL", "Internal error", ("internal", "conn-state-invalidated")),
    Status.EBUSY: ("EBUSY", "The server is busy; retry", ("temp", "retry-now")),
    Status.ETMPFAIL: ("ETMPFAIL", "Temporary failure; retry", ("temp", "retry-now")),
    Status.UNKNOWN_COLLECTION: ("UNKNOWN_COLLECTION", "No such collection", ("invalid-input",)),
    Status.UNKNOWN_SCOPE: ("UNKNOWN_SCOPE", "No such scope", ("invalid-input",)),
    Status.DCP_STREAMID_INVALID: (
        "DCP stream-ID invalid",
        "The stream-id is missing, unexpected or unknown",
        ("invalid-input",),
    ),
}


def error_map_json(version: int) -> dict[str, object]:
    """The error map as a JSON-ready dict; ``version`` is clamped to 1..2."""
    version = 1 if version <= 1 else 2
    errors = {}
    for status, (name, desc, attrs) in ERRORS.items():
        kept = [a for a in attrs if version == 2 or a in V1_ATTRIBUTES]
        errors[f"{int(status):x}"] = {"name": name, "desc": desc, "attrs": kept}
    revision = REVISION if version == 2 else REVISION + 4
    return {"version": version, "revision": revision, "errors": errors}


def error_map(version: int) -> bytes:
    """The GET_ERROR_MAP reply value for a client that reads up to ``version``.

    Like kv_engine, a client asking for a version above 2 gets version 2.
    """
    return json.dumps(error_map_json(version), separators=(",", ":")).encode()
