"""The OpenAPI 3.1 document of the control API, served at ``/mock/openapi.json``; with
the ns_server routes that are spellings of steps (users and roles, ``_rest_rbac.py``;
buckets, scopes and collections, ``_rest_buckets.py``), which answer as a node does
(ns_server's JSON, not problem documents).

Written by hand beside the handlers of ``_control.py`` (the routes are few, and the
document is what clients and schemathesis read); tests/http checks that every control
route is described and that the server answers as described.
"""

from __future__ import annotations

from typing import Any

from mockdcp.scenario.steps import STEPS_BY_NAME

_PROBLEM = {"$ref": "#/components/responses/Problem"}
_UNAUTHORIZED = {"$ref": "#/components/responses/Unauthorized"}
_SECURITY: list[dict[str, list[str]]] = [{}, {"basic": []}]

_INT = {"type": "integer", "minimum": 0}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


#: ``?bucket=NAME``: the bucket a control read is about (issue 42)
_BUCKET_PARAMETER = {
    "name": "bucket",
    "in": "query",
    "required": False,
    "schema": {"type": "string"},
    "description": "the bucket (serve --bucket); the first bucket when absent; 404 for none",
}


def _get(
    summary: str, ok: dict[str, Any], *, open_: bool = False, per_bucket: bool = False
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": ok, "4XX": _PROBLEM},
    }
    if per_bucket:
        op["parameters"] = [_BUCKET_PARAMETER]
    if not open_:
        op["security"] = _SECURITY
        op["responses"]["401"] = _UNAUTHORIZED
    return {"get": op}


_STREAM = {
    "type": "object",
    "description": "a stream's counters (StreamStatistics)",
    "required": ["vbucket", "stream_id", "state", "items_sent", "last_sent_seqno"],
    "properties": {
        "vbucket": _INT,
        "stream_id": {"type": ["integer", "null"]},
        "state": {"type": "string"},
        "items_sent": _INT,
        "markers_sent": _INT,
        "backfills": _INT,
        "last_sent_seqno": _INT,
        "last_read_seqno": _INT,
        "written_seqno": {**_INT, "description": "the last item's seqno on the socket"},
    },
}

_CONNECTION = {
    "type": "object",
    "description": "a KV connection's counters (ConnectionStatistics) and its streams",
    "required": ["conn_id", "name", "state", "bytes_sent", "streams"],
    "properties": {
        "conn_id": _INT,
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
            "description": "the highest seqno a live stream of the vbucket has written",
        },
        "active_node": {"type": ["string", "null"], "description": "the node of its active"},
        "replicas": {
            "type": "array",
            "description": "its replica copies, in chain order",
            "items": {
                "type": "object",
                "properties": {
                    "node": {"type": "string"},
                    "high_seqno": _INT,
                    "persisted_seqno": _INT,
                    "paused": {"type": "boolean", "description": "replication into it held"},
                },
            },
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

_EXPECTATION = {
    "type": "object",
    "required": ["name", "passed", "detail", "step"],
    "properties": {
        "name": {"type": "string"},
        "passed": {"type": "boolean"},
        "detail": {"type": "string"},
        "step": {"type": "integer", "description": "the expect step's index"},
        "route": {
            "type": ["string", "null"],
            "description": (
                "how the consumer reached a right outcome, for expectations with more than "
                "one (rollback: rolled back, resumed below the branch, mitigated; resume: "
                "the snapshot received, or the complete snapshot at its end)"
            ),
        },
    },
}

_PROGRESS = {
    "type": "object",
    "description": "the step runner's progress",
    "properties": {
        "applied": _INT,
        "current": {"type": ["string", "null"], "description": "the step running now"},
        "label": {"type": ["string", "null"]},
        "expectations": {"type": "array", "items": _EXPECTATION},
        "failure": {"type": ["string", "null"]},
        "finished": {"type": "boolean"},
    },
}

_CLUSTER_NODE = {
    "type": "object",
    "required": ["number", "name", "status", "host", "kv_port", "http_port"],
    "properties": {
        "number": {**_INT, "description": "in join order, from 0 (what the steps name)"},
        "name": {"type": "string"},
        "status": {"enum": ["active", "added", "down", "failed_over", "removed"]},
        "host": {"type": "string"},
        "kv_port": _INT,
        "http_port": _INT,
        "tls_port": {"type": ["integer", "null"]},
        "https_port": {"type": ["integer", "null"]},
        "active_vbuckets": _INT,
        "replica_vbuckets": _INT,
        "connections": _INT,
    },
}

_CLUSTER = {
    "type": "object",
    "description": "the data nodes, the map's revision and replica count, a rebalance",
    "properties": {
        "nodes": {"type": "array", "items": _CLUSTER_NODE},
        "replicas": _INT,
        "rev": _INT,
        "rebalance": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"done": _INT, "moves": _INT},
                    "description": "the rebalance under way: moves done of all",
                },
                {"type": "null"},
            ]
        },
    },
}

_STATE = {
    "type": "object",
    "required": ["bucket", "connections", "streams", "vbuckets", "totals", "scenario"],
    "properties": {
        "bucket": {"type": "string"},
        "server_version": {
            "type": "object",
            "description": "the release the node behaves as (7.0, 7.2, 7.6, 8.0) and the "
            "version string it reports",
            "properties": {"release": {"type": "string"}, "reports": {"type": "string"}},
        },
        "buckets": {
            "type": "array",
            "items": {"type": "string"},
            "description": "every bucket of the server, in the order they were made",
        },
        "num_vbuckets": _INT,
        "kv_port": _INT,
        "http_port": _INT,
        "connections": {"type": "array", "items": _CONNECTION},
        "streams": {
            "type": "object",
            "properties": {
                "total": _INT,
                "by_state": {"type": "object", "additionalProperties": _INT},
            },
        },
        "vbuckets": {"type": "array", "items": _VBUCKET},
        "cluster": _CLUSTER,
        "totals": {
            "type": "object",
            "description": "counters since the server started (what /metrics reports)",
            "additionalProperties": _INT,
        },
        "persistence_paused": {"type": "boolean"},
        "clock": {
            "type": "object",
            "description": (
                "the bucket's clock: wall, or virtual (moved by advance_clock) with its "
                "time; the intervals of the node's timed tasks in seconds"
            ),
            "required": ["kind", "timers"],
            "properties": {
                "kind": {"type": "string", "enum": ["wall", "virtual"]},
                "now": {"type": "string", "format": "date-time"},
                "timers": {"type": "object", "additionalProperties": _INT},
            },
        },
        "scenario": {"oneOf": [_PROGRESS, {"type": "null"}]},
    },
}

_ORACLE_ROW = {
    "type": "object",
    "required": ["scope", "collection", "key", "datatype", "flags", "expiry", "rev", "cas"],
    "properties": {
        "scope": {"type": "string"},
        "collection": {"type": "string"},
        "key": {"type": "string"},
        "value": {"type": "string", "description": "the value, when it is UTF-8 text"},
        "value_base64": {"type": "string", "description": "the value, when it is not"},
        "datatype": _INT,
        "flags": _INT,
        "expiry": _INT,
        "rev": _INT,
        "seqno": _INT,
        "vbucket": _INT,
        "cas": {"type": "integer", "description": "as a signed 64-bit integer"},
    },
}

_STEPS_BODY = {
    "type": "array",
    "description": (
        "Steps in order, each an object with one member: the step's name (set, delete, "
        "persist, failover, disconnect, wait, expect, ...: the scenario vocabulary) and "
        "its fields. The whole list is checked before any step is applied."
    ),
    "items": {
        "type": "object",
        "minProperties": 1,
        "maxProperties": 1,
        "propertyNames": {"enum": sorted(STEPS_BY_NAME)},
        "additionalProperties": {"type": ["object", "null"]},
    },
    "examples": [[{"set": {"key": "user::1", "value": {"name": "Ada"}}}, {"persist": {}}]],
}


_SCENARIO = {
    "type": "object",
    "description": "a scenario file's content (as YAML, or the same as JSON)",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "seed": {"type": "integer"},
        "bucket": {"type": ["object", "null"], "description": "name, vbuckets, collections"},
        "steps": {"anyOf": [_STEPS_BODY, {"type": "null"}], "description": "null: none"},
    },
}


def _problems(*codes: str) -> dict[str, Any]:
    return dict.fromkeys(codes, _PROBLEM)


def _post(
    summary: str,
    body: dict[str, Any],
    ok: tuple[str, dict[str, Any]],
    *errors: str,
    per_bucket: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "security": _SECURITY,
        "requestBody": {"required": True, "content": body},
        "responses": {
            ok[0]: ok[1],
            "401": _UNAUTHORIZED,
            **_problems("400", "408", "413", "415", *errors),
        },
    }
    if per_bucket:
        op["parameters"] = [_BUCKET_PARAMETER]
        op["responses"].update(_problems("404"))
    return {"post": op}


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
        per_bucket=True,
    ),
    "/mock/openapi.json": _get("This document", _json({"type": "object"}, "OpenAPI 3.1")),
    "/mock/steps": _post(
        "Apply steps, in order, before the reply",
        {"application/json": {"schema": _STEPS_BODY}},
        (
            "200",
            _json(
                {
                    "type": "object",
                    "required": ["applied", "progress"],
                    "properties": {"applied": _INT, "progress": _PROGRESS},
                },
                "every step was applied; an expect step that was not met does not stop"
                " the list: its outcome is in progress.expectations (passed false)",
            ),
        ),
        "409",
        "422",
        per_bucket=True,
    ),
    "/mock/scenario": _post(
        "Load a scenario and run its steps in the background",
        {
            "application/yaml": {"schema": {"type": "string"}},
            "application/json": {"schema": _SCENARIO},
        },
        (
            "202",
            _json(
                {
                    "type": "object",
                    "required": ["scenario", "steps"],
                    "properties": {
                        "scenario": {"type": "string"},
                        "steps": _INT,
                        "state": {"type": "string"},
                    },
                },
                "the scenario is valid and runs; GET /mock/state shows its progress",
            ),
        ),
        "409",
        "422",
    ),
    "/mock/oracle": _get(
        "The final state a correct consumer must hold: one row per live document",
        _json(
            {
                "type": "object",
                "required": ["rows"],
                "properties": {
                    "rows": {"type": "array", "items": _ORACLE_ROW},
                    "corpus": {
                        "type": "string",
                        "description": "a bucket over an on-disk corpus (serve --corpus "
                        "DIR --on-disk): the corpus's path; rows are then only the live "
                        "documents written since start, and mockdcp oracle --url merges "
                        "them with the corpus's own oracle",
                    },
                    "gone": {
                        "type": "array",
                        "description": "on-disk corpus: its keys deleted, expired or cut "
                        "by a rollback since start",
                        "items": {
                            "type": "object",
                            "required": ["scope", "collection", "key"],
                            "properties": {
                                "scope": {"type": "string"},
                                "collection": {"type": "string"},
                                "key": {"type": "string"},
                            },
                        },
                    },
                    "collections": {
                        "type": "array",
                        "description": "on-disk corpus: the collections whose corpus "
                        "documents still count (live, not flushed since start)",
                        "items": {
                            "type": "object",
                            "required": ["scope", "collection"],
                            "properties": {
                                "scope": {"type": "string"},
                                "collection": {"type": "string"},
                            },
                        },
                    },
                },
            },
            "the oracle's rows, sorted by scope, collection and key (with corpus, gone "
            "and collections for a bucket over an on-disk corpus)",
        ),
        per_bucket=True,
    ),
    "/mock/expectations": _get(
        "The outcomes of the expect steps applied so far",
        _json(
            {
                "type": "object",
                "required": ["expectations", "passed"],
                "properties": {
                    "expectations": {"type": "array", "items": _EXPECTATION},
                    "passed": {"type": "boolean", "description": "every one passed"},
                },
            },
            "the expectations",
        ),
        per_bucket=True,
    ),
    "/mock/ca.pem": _get(
        "The CA that signs the TLS ports' certificates (404 without TLS); always open",
        {
            "description": "the CA certificate, PEM",
            "content": {"application/x-pem-file": {"schema": {"type": "string"}}},
        },
        open_=True,
    ),
    "/metrics": _get(
        "Counters in the Prometheus text format",
        {
            "description": "Prometheus text exposition format 0.0.4",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
    ),
}


_FORM = "application/x-www-form-urlencoded"
_NS_ERRORS = _json(
    {
        "type": "object",
        "required": ["errors"],
        "properties": {
            "errors": {
                "type": "object",
                "description": "field -> ns_server's message ('_': the request as a whole)",
                "additionalProperties": {"type": "string"},
            }
        },
    },
    "ns_server's field errors; nothing changed",
)
_NS_TEXT = _json({"type": "string"}, "ns_server's JSON string")
_FORBIDDEN = _json(
    {
        "type": "object",
        "required": ["message", "permissions"],
        "properties": {
            "message": {"type": "string"},
            "permissions": {"type": "array", "items": {"type": "string"}},
        },
    },
    "the caller lacks cluster.admin.users!read or !write (only admin has them)",
)
_ROLE_FIELDS: dict[str, Any] = {
    "role": {"type": "string"},
    "bucket_name": {"type": "string"},
    "scope_name": {"type": "string"},
    "collection_name": {"type": "string"},
}
_ROLE = {"type": "object", "required": ["role"], "properties": _ROLE_FIELDS}
_USER = {
    "type": "object",
    "required": ["id", "domain", "roles"],
    "properties": {
        "id": {"type": "string"},
        "domain": {"const": "local"},
        "name": {"type": "string"},
        "roles": {"type": "array", "items": _ROLE},
        "groups": {"type": "array", "items": {"type": "string"}},
        "external_groups": {"type": "array", "items": {"type": "string"}},
    },
}


def _ns(
    summary: str,
    ok: dict[str, Any],
    *,
    body: bool = False,
    errors: dict[str, dict[str, Any]] | None = None,
    parameters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An ns_server route's operation: Basic credentials, ns_server's answers."""
    op: dict[str, Any] = {
        "summary": summary,
        **({"parameters": parameters} if parameters else {}),
        "security": [{"basic": []}],
        "responses": {"200": ok, "401": _UNAUTHORIZED, "403": _FORBIDDEN, **(errors or {})},
    }
    if body:
        form = {
            "type": "object",
            "properties": {
                "password": {"type": "string"},
                "roles": {
                    "type": "string",
                    "description": "comma separated: data_dcp_reader[default],admin",
                },
                "name": {"type": "string"},
            },
        }
        op["requestBody"] = {"required": False, "content": {_FORM: {"schema": form}}}
        op["responses"]["400"] = _NS_ERRORS
    return op


_NAME = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
_DOMAIN = [{"name": "domain", "in": "path", "required": True, "schema": {"type": "string"}}]
_PATHS.update(
    {
        "/settings/rbac/users": {
            "get": _ns("The users (ns_server)", _json({"type": "array", "items": _USER}, "users"))
        },
        "/settings/rbac/users/{domain}": {
            "get": _ns(
                "The users of a domain (local only)",
                _json({"type": "array", "items": _USER}, "users"),
                errors={"404": _NS_TEXT},
                parameters=_DOMAIN,
            ),
        },
        "/settings/rbac/users/{domain}/{name}": {
            "get": _ns(
                "One user",
                _json(_USER, "the user"),
                errors={"404": _NS_TEXT},
                parameters=_DOMAIN + _NAME,
            ),
            "put": _ns(
                "Create a user or replace its roles (the create_user step)",
                _NS_TEXT,
                body=True,
                errors={"404": _NS_TEXT},
                parameters=_DOMAIN + _NAME,
            ),
            "delete": _ns(
                "Delete a user (the delete_user step)",
                _NS_TEXT,
                errors={"404": _NS_TEXT},
                parameters=_DOMAIN + _NAME,
            ),
        },
        "/settings/rbac/roles": {
            "get": _ns(
                "The roles users may be given",
                _json(
                    {
                        "type": "array",
                        "items": {
                            **_ROLE,
                            "properties": {
                                **_ROLE_FIELDS,
                                "name": {"type": "string"},
                                "desc": {"type": "string"},
                            },
                        },
                    },
                    "roles",
                ),
            )
        },
        "/controller/changePassword": {
            "post": {
                **_ns(
                    "Change the caller's own password (the change_password step)",
                    {"description": "changed (no body)"},
                    errors={"404": _NS_TEXT, "400": _NS_ERRORS},
                ),
                "requestBody": {
                    "required": True,
                    "content": {
                        _FORM: {
                            "schema": {
                                "type": "object",
                                "required": ["password"],
                                "properties": {"password": {"type": "string"}},
                            }
                        }
                    },
                },
            }
        },
    }
)


_NS_NOT_FOUND = {
    "description": "no such bucket (ns_server's text), or no such scope or collection",
    "content": {
        "text/plain": {"schema": {"type": "string"}},
        "application/json": _NS_ERRORS["content"]["application/json"],
    },
}
_UID = _json(
    {"type": "object", "required": ["uid"], "properties": {"uid": {"type": "string"}}},
    "the new manifest uid (hex): wait for it with GET_COLLECTIONS_MANIFEST",
)
_EMPTY = {"description": "done (no body)"}


def _form_body(required: list[str], fields: dict[str, str]) -> dict[str, Any]:
    properties = {name: {"type": kind} for name, kind in fields.items()}
    schema = {"type": "object", "required": required, "properties": properties}
    return {"required": bool(required), "content": {_FORM: {"schema": schema}}}


def _bucket_write(
    summary: str,
    ok: dict[str, Any],
    params: list[str],
    *,
    status: str = "200",
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One of ``_rest_buckets.py``'s routes: Basic credentials, ns_server's answers."""
    op: dict[str, Any] = {
        "summary": summary,
        "security": [{"basic": []}],
        "responses": {status: ok, "400": _NS_ERRORS, "401": _UNAUTHORIZED, "404": _NS_NOT_FOUND},
    }
    if params:
        op["parameters"] = [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
            for p in params
        ]
    if body is not None:
        op["requestBody"] = body
    return op


_BUCKETS = "/pools/default/buckets"
_PATHS.update(
    {
        _BUCKETS: {
            "post": _bucket_write(
                "Create a bucket (the create_bucket step): 202 with its Location",
                {"description": "accepted (no body)"},
                [],
                status="202",
                body=_form_body(
                    ["name"],
                    {
                        "name": "string",
                        "bucketType": "string",
                        "ramQuota": "string",
                        "ramQuotaMB": "string",
                        "storageBackend": "string",
                        "replicaNumber": "string",
                        "flushEnabled": "string",
                    },
                ),
            )
        },
        _BUCKETS + "/{bucket}": {
            "delete": _bucket_write("Delete a bucket (the delete_bucket step)", _EMPTY, ["bucket"])
        },
        _BUCKETS + "/{bucket}/controller/doFlush": {
            "post": _bucket_write(
                "Flush a bucket made with flushEnabled=1 (the flush step)", _EMPTY, ["bucket"]
            )
        },
        _BUCKETS + "/{bucket}/scopes": {
            "get": _bucket_write(
                "The bucket's scopes and collections (uids in hex)",
                _json({"type": "object"}, "the collections manifest"),
                ["bucket"],
            ),
            "post": _bucket_write(
                "Create a scope (the create_scope step)",
                _UID,
                ["bucket"],
                body=_form_body(["name"], {"name": "string"}),
            ),
        },
        _BUCKETS + "/{bucket}/scopes/{scope}": {
            "delete": _bucket_write("Drop a scope (the drop_scope step)", _UID, ["bucket", "scope"])
        },
        _BUCKETS + "/{bucket}/scopes/{scope}/collections": {
            "post": _bucket_write(
                "Create a collection (the create_collection step)",
                _UID,
                ["bucket", "scope"],
                body=_form_body(
                    ["name"], {"name": "string", "maxTTL": "string", "history": "string"}
                ),
            )
        },
        _BUCKETS + "/{bucket}/scopes/{scope}/collections/{collection}": {
            "delete": _bucket_write(
                "Drop a collection (the drop_collection step)",
                _UID,
                ["bucket", "scope", "collection"],
            )
        },
    }
)


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
                "server runs with --control-open. /mock/health is always open. The "
                "ns_server routes for users and roles (/settings/rbac, "
                "/controller/changePassword) and for buckets, scopes and collections "
                "(/pools/default/buckets) always need credentials and answer as a node "
                "does."
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
                        "applied": {
                            "type": "integer",
                            "description": "409 of POST /mock/steps: the steps applied"
                            " before the one that failed",
                        },
                        "failed_step": {
                            "type": "integer",
                            "description": "409 of POST /mock/steps: the failed step's index",
                        },
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
