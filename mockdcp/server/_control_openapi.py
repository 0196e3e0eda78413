"""The OpenAPI 3.1 document of the control API, served at ``/mock/openapi.json``.

Written by hand beside the handlers of ``_control.py`` (the routes are few, and the
document is what clients and schemathesis read); tests/http checks that every control
route is described and that the server answers as described.
"""

from __future__ import annotations

from typing import Any

_PROBLEM = {"$ref": "#/components/responses/Problem"}
_UNAUTHORIZED = {"$ref": "#/components/responses/Unauthorized"}
_SECURITY: list[dict[str, list[str]]] = [{}, {"basic": []}]

_INT = {"type": "integer", "minimum": 0}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _get(summary: str, ok: dict[str, Any], *, open_: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": ok, "4XX": _PROBLEM},
    }
    if not open_:
        op["security"] = _SECURITY
        op["responses"]["401"] = _UNAUTHORIZED
    return {"get": op}


_STREAM = {
    "type": "object",
    "required": ["vbucket", "stream_id", "state", "items_sent", "last_sent_seqno"],
    "properties": {
        "vbucket": _INT,
        "stream_id": {"type": ["integer", "null"]},
        "state": {"type": "string"},
        "items_sent": _INT,
        "markers_sent": _INT,
        "backfills": _INT,
        "last_sent_seqno": _INT,
    },
}

_CONNECTION = {
    "type": "object",
    "required": ["id", "name", "state", "bytes_sent", "streams"],
    "properties": {
        "id": _INT,
        "name": {"type": "string", "description": "the DCP_OPEN name ('' before it)"},
        "state": {"type": "string"},
        "bytes_received": _INT,
        "bytes_sent": _INT,
        "messages_sent": _INT,
        "acked_bytes": _INT,
        "unacked_bytes": _INT,
        "buffer_size": _INT,
        "acks": _INT,
        "noops_sent": _INT,
        "noops_answered": _INT,
        "streams": {"type": "array", "items": _STREAM},
    },
}

_VBUCKET = {
    "type": "object",
    "required": ["vbucket", "state", "uuid", "high_seqno", "persisted_seqno", "sent_seqno"],
    "properties": {
        "vbucket": _INT,
        "state": {"type": "string", "enum": ["active", "replica", "pending", "dead"]},
        "uuid": _INT,
        "high_seqno": _INT,
        "persisted_seqno": _INT,
        "purge_seqno": _INT,
        "streams": _INT,
        "sent_seqno": {
            "type": ["integer", "null"],
            "description": "the highest seqno a live stream of the vbucket has sent",
        },
        "acked_seqno": {
            "type": ["integer", "null"],
            "description": (
                "the highest seqno known to be acknowledged (known when the connection "
                "uses flow control and every byte it was sent is acknowledged)"
            ),
        },
    },
}

_STATE = {
    "type": "object",
    "required": ["bucket", "connections", "streams", "vbuckets", "totals", "scenario"],
    "properties": {
        "bucket": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "vbuckets": _INT},
        },
        "ports": {"type": "object", "properties": {"kv": _INT, "http": _INT}},
        "connections": {"type": "array", "items": _CONNECTION},
        "streams": {
            "type": "object",
            "properties": {
                "total": _INT,
                "by_state": {"type": "object", "additionalProperties": _INT},
            },
        },
        "vbuckets": {"type": "array", "items": _VBUCKET},
        "totals": {"type": "object", "additionalProperties": _INT},
        "scenario": {"type": ["object", "null"]},
    },
}

_PATHS: dict[str, Any] = {
    "/mock/health": _get(
        "Liveness: always open, no credentials",
        _json(
            {
                "type": "object",
                "required": ["status"],
                "properties": {"status": {"const": "ok"}},
            },
            "the server is up",
        ),
        open_=True,
    ),
    "/mock/state": _get(
        "Connections, streams, per-vbucket seqnos and the scenario's progress",
        _json(_STATE, "a snapshot of the node"),
    ),
    "/mock/openapi.json": _get("This document", _json({"type": "object"}, "OpenAPI 3.1")),
    "/metrics": _get(
        "Counters in the Prometheus text format",
        {
            "description": "Prometheus text exposition format 0.0.4",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
    ),
}


def openapi_document() -> dict[str, Any]:
    """The document (its parts are shared: do not modify it)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mockdcp control API",
            "version": "1",
            "description": (
                "Drive a mock Couchbase DCP producer: apply steps, read its state, the "
                "oracle and the expectations. On a loopback address no credentials are "
                "needed; otherwise the bucket users' Basic credentials, unless the "
                "server runs with --control-open. /mock/health is always open."
            ),
        },
        "paths": _PATHS,
        "components": {
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
            "schemas": {
                "Problem": {
                    "type": "object",
                    "required": ["type", "title", "status", "detail"],
                    "properties": {
                        "type": {"type": "string"},
                        "title": {"type": "string"},
                        "status": {"type": "integer"},
                        "detail": {"type": "string"},
                        "errors": {"type": "array", "items": {"type": "object"}},
                    },
                }
            },
            "responses": {
                "Problem": {
                    "description": "an RFC 9457 problem document",
                    "content": {
                        "application/problem+json": {
                            "schema": {"$ref": "#/components/schemas/Problem"}
                        }
                    },
                },
                "Unauthorized": {
                    "description": "credentials are needed (the port is not on loopback)",
                    "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
                    "content": {
                        "application/problem+json": {
                            "schema": {"$ref": "#/components/schemas/Problem"}
                        }
                    },
                },
            },
        },
    }
