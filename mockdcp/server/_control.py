"""The control API of the management port (``/mock/...`` and ``/metrics``).

Every 4xx is an RFC 9457 problem document (``application/problem+json``: ``type``,
``title``, ``status``, ``detail``, and extension members such as ``errors``). The
OpenAPI document describing these operations is ``_control_openapi.py``, served at
``/mock/openapi.json``.

Request bodies are read whole before anything is done with them, at most ``MAX_BODY``
bytes within ``BODY_TIMEOUT`` seconds (413 and 408 otherwise): a request that is cut
off changes nothing.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import trio
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from mockdcp.server import _control_state
from mockdcp.server._control_openapi import openapi_document

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.requests import Request

    from mockdcp.producer import Node
    from mockdcp.server._serve import MockDcpServer

#: largest request body the control API reads (bytes): a step list, a scenario file
MAX_BODY = 4 * 1024 * 1024
#: seconds a client has to send its whole request body
BODY_TIMEOUT = 10.0

PROBLEM_TYPE = "application/problem+json"


class Problem(Exception):
    """An error answered with a problem document; raised inside a handler."""

    def __init__(self, status: int, title: str, detail: str, **extensions: object) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.extensions = extensions

    def response(self) -> Response:
        return problem(self.status, self.title, self.detail, extensions=self.extensions)


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    extensions: Mapping[str, object] | None = None,
) -> Response:
    """An RFC 9457 problem response (``type`` is ``about:blank``: the title is the
    status's phrase or a short summary, ``detail`` says what was wrong this time)."""
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    body.update(extensions or {})
    return JSONResponse(body, status, headers=dict(headers or {}), media_type=PROBLEM_TYPE)


async def read_body(request: Request) -> bytes:
    """The whole request body; ``Problem`` 413 if larger than ``MAX_BODY``, 408 if it
    does not arrive within ``BODY_TIMEOUT`` seconds."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise Problem(413, "Content Too Large", f"the body limit is {MAX_BODY} bytes")
    parts: list[bytes] = []
    size = 0
    with trio.move_on_after(BODY_TIMEOUT) as scope:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise Problem(413, "Content Too Large", f"the body limit is {MAX_BODY} bytes")
            parts.append(chunk)
    if scope.cancelled_caught:
        raise Problem(408, "Request Timeout", f"the body did not arrive in {BODY_TIMEOUT:g} s")
    return b"".join(parts)


async def read_json(request: Request) -> object:
    """The request body parsed as JSON; ``Problem`` 415 for another content type, 400 if
    it does not parse (``read_body``'s problems too)."""
    kind = request.headers.get("content-type", "application/json").split(";")[0].strip()
    if kind.lower() not in ("application/json", "") and not kind.lower().endswith("+json"):
        raise Problem(415, "Unsupported Media Type", f"expected application/json, not {kind}")
    body = await read_body(request)
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Problem(400, "Bad Request", f"the body is not JSON: {exc}") from None


def prometheus_text(totals: Mapping[str, int], streams: Mapping[str, int]) -> str:
    """``/metrics`` in the Prometheus text exposition format (version 0.0.4)."""
    lines: list[str] = []

    def metric(name: str, kind: str, text: str, samples: list[tuple[str, int]]) -> None:
        lines.extend([f"# HELP {name} {text}", f"# TYPE {name} {kind}"])
        lines.extend(f"{name}{labels} {value}" for labels, value in samples)

    def counter(name: str, text: str, key: str) -> None:
        metric(f"mockdcp_{name}_total", "counter", text, [("", totals[key])])

    metric(
        "mockdcp_connections",
        "gauge",
        "KV connections open now.",
        [("", totals["connections_open"])],
    )
    counter("connections", "KV connections accepted.", "connections_opened")
    metric(
        "mockdcp_streams",
        "gauge",
        "DCP streams open now, by state.",
        [(f'{{state="{state}"}}', n) for state, n in sorted(streams.items())],
    )
    counter(
        "streams_opened", "DCP streams opened (stream requests that succeeded).", "streams_opened"
    )
    counter(
        "frames_sent",
        "DCP stream messages sent (mutations, deletions, expirations, snapshot markers, "
        "system events, stream ends).",
        "messages_sent",
    )
    counter("bytes_sent", "Bytes sent on KV connections.", "bytes_sent")
    counter("bytes_received", "Bytes received on KV connections.", "bytes_received")
    counter("acks", "DCP buffer acknowledgements received.", "acks")
    counter("acked_bytes", "Bytes acknowledged by DCP buffer acknowledgements.", "acked_bytes")
    counter("noops_sent", "DCP noops sent.", "noops_sent")
    counter("noops_answered", "DCP noops answered by consumers.", "noops_answered")
    counter("rollbacks", "Stream requests answered with ROLLBACK.", "rollbacks")
    counter("steps_applied", "Scenario steps applied.", "steps_applied")
    return "\n".join(lines) + "\n"


class ControlApi:
    """The ``/mock`` handlers of one server."""

    def __init__(self, server: MockDcpServer, node: Node) -> None:
        self.server = server
        self.node = node

    def routes(self) -> list[Route]:
        return [
            Route("/mock/health", self.health, methods=["GET"]),
            Route("/mock/state", self.state, methods=["GET"]),
            Route("/mock/openapi.json", self.openapi, methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
        ]

    def steps_applied(self) -> int:
        return self.node.counters["steps_applied"]

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def state(self, request: Request) -> Response:
        return JSONResponse(_control_state.node_state(self.node))

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())

    async def metrics(self, request: Request) -> Response:
        totals = _control_state.totals(self.node)
        totals["steps_applied"] = self.steps_applied()
        streams = _control_state.streams_by_state(self.node)
        return PlainTextResponse(
            prometheus_text(totals, streams), media_type="text/plain; version=0.0.4"
        )
