"""The control API is the contract of the Java and Go helpers (``integrations/*``).

Each helper lists what it uses of the API in its ``control-routes.json``: per route the
method, path, success status, content types and every response field it decodes
(``a.b``: member ``b`` of object ``a``; ``a[].b``: member ``b`` of each item of array
``a``). Here every listed route must be in the server's ``/mock/openapi.json`` with that
status, those content types and those fields, so a change of the API that would break a
helper fails this suite, with or without Java and Go on the machine (their own suites
check the same against a live server and check that their clients use only what is
listed).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from mockdcp import Server

REPO = Path(__file__).resolve().parents[2]
LISTS = sorted(
    p for p in (REPO / "integrations").rglob("control-routes.json") if "target" not in p.parts
)


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    with Server(port=0, http_port=0, vbuckets=4) as server:
        url = f"http://127.0.0.1:{server.http_port}/mock/openapi.json"
        with urllib.request.urlopen(url, timeout=30) as response:
            document: dict[str, Any] = json.load(response)
    return document


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = document
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _has_field(document: dict[str, Any], schema: dict[str, Any], field: str) -> bool:
    """True when ``field`` (``a.b``, ``a[].b``) is described by ``schema`` (by one of its
    ``oneOf``/``anyOf``/``allOf`` branches, where it has them)."""
    schema = _resolve(document, schema)
    branches = [*schema.get("oneOf", []), *schema.get("anyOf", []), *schema.get("allOf", [])]
    if any(_has_field(document, branch, field) for branch in branches):
        return True
    part, _, rest = field.partition(".")
    name, is_array = (part[:-2], True) if part.endswith("[]") else (part, False)
    properties = schema.get("properties", {})
    if name in properties:
        member = properties[name]
    elif isinstance(schema.get("additionalProperties"), dict):
        member = schema["additionalProperties"]  # a map: any member name
    else:
        return False
    if is_array:
        member = _resolve(document, member)
        if member.get("type") != "array":
            return False
        member = member["items"]
    return not rest or _has_field(document, member, rest)


def problems(document: dict[str, Any], routes: dict[str, Any]) -> list[str]:
    """What a helper's route list asks of ``document`` that it does not have."""
    found = []
    for name, route in routes.items():
        operation = document["paths"].get(route["path"], {}).get(route["method"].lower())
        if operation is None:
            found.append(f"{name}: no {route['method']} {route['path']}")
            continue
        response = operation.get("responses", {}).get(str(route["status"]))
        if response is None:
            found.append(f"{name}: {route['path']} does not answer {route['status']}")
            continue
        content = response.get("content", {})
        wanted = route.get("response")
        if wanted is not None and wanted not in content:
            found.append(f"{name}: {route['path']} answers {sorted(content)}, not {wanted}")
            continue
        request = route.get("request")
        if request is not None and request not in operation.get("requestBody", {}).get(
            "content", {}
        ):
            found.append(f"{name}: {route['path']} takes no {request} body")
        schema = content.get(wanted, {}).get("schema", {}) if wanted else {}
        found += [
            f"{name}: {route['path']} has no field {field!r}"
            for field in route.get("fields", [])
            if not _has_field(document, schema, field)
        ]
    return found


def _routes(listing: Path) -> dict[str, Any]:
    """The routes of a helper's list: under ``routes`` (Go) or at the top (Java), each
    an object with ``method`` and ``path``."""
    document = json.loads(listing.read_text())
    table = document.get("routes", document)
    return {k: v for k, v in table.items() if isinstance(v, dict) and "path" in v}


def test_each_helper_lists_the_routes_it_uses() -> None:
    assert {p.relative_to(REPO / "integrations").parts[0] for p in LISTS} == {"go", "java"}


@pytest.mark.parametrize(
    "listing", LISTS, ids=lambda p: p.relative_to(REPO / "integrations").parts[0]
)
def test_every_route_and_field_a_helper_uses_is_in_the_openapi_document(
    openapi: dict[str, Any], listing: Path
) -> None:
    routes = _routes(listing)
    assert routes
    assert problems(openapi, routes) == []


def test_a_route_gone_from_the_api_fails_the_contract(openapi: dict[str, Any]) -> None:
    routes = {"state": {"method": "GET", "path": "/mock/state", "status": 200}}
    assert problems(openapi, routes) == []
    gone = {**openapi, "paths": {k: v for k, v in openapi["paths"].items() if k != "/mock/state"}}
    assert problems(gone, routes) == ["state: no GET /mock/state"]


def test_a_field_gone_from_a_response_fails_the_contract(openapi: dict[str, Any]) -> None:
    routes = {
        "state": {
            "method": "GET",
            "path": "/mock/state",
            "status": 200,
            "response": "application/json",
            "fields": ["connections[].conn_id", "connections[].no_such_counter"],
        }
    }
    assert problems(openapi, routes) == [
        "state: /mock/state has no field 'connections[].no_such_counter'"
    ]
