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

import contextlib
import json
from typing import TYPE_CHECKING, Any

import attrs
import trio
from starlette.responses import JSONResponse as _StarletteJSON, PlainTextResponse, Response
from starlette.routing import Route

from mockdcp.server import _control_state

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from starlette.requests import Request

    from mockdcp.model import Bucket
    from mockdcp.scenario import Problem as ScenarioProblem, ScenarioProblems, Step
    from mockdcp.server._serve import MockDcpServer

#: largest request body the control API reads (bytes): a step list, a scenario file
MAX_BODY = 4 * 1024 * 1024
#: seconds a client has to send its whole request body
BODY_TIMEOUT = 10.0

PROBLEM_TYPE = "application/problem+json"


class JSONResponse(_StarletteJSON):
    """JSON with every non-ASCII character escaped: text from a request (a scenario's
    name, a key) may hold lone surrogates, which are valid JSON escapes but not UTF-8."""

    def render(self, content: object) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode("ascii")


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
        async with contextlib.aclosing(request.stream()) as chunks:
            async for chunk in chunks:
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


@attrs.frozen
class BucketMetrics:
    """One bucket's ``/metrics`` counters: ``totals`` (``_control_state.totals``, with
    ``steps_applied``), its streams by state, and ``cluster``: its map's ``rev``,
    ``replica_lag`` and ``rebalance_moves_left`` (``_control_state.bucket_metrics``)."""

    totals: Mapping[str, int]
    streams: Mapping[str, int]
    cluster: Mapping[str, int]


def prometheus_text(
    buckets: Mapping[str, BucketMetrics], nodes: Mapping[str, int] | None = None
) -> str:
    """``/metrics`` in the Prometheus text exposition format (version 0.0.4).

    ``buckets``: each bucket's counters (``BucketMetrics``), every series of them
    labelled ``bucket="NAME"``, as Couchbase's own exporter labels a bucket's stats
    (kv_engine ``statistics/labelled_collector.cc``: ``BucketStatCollector`` adds the
    ``bucket`` label to each stat it collects, e.g. ``kv_dcp_items_sent{bucket=...}``);
    ``nodes``: the cluster's data nodes by status (no bucket: every bucket spans them).
    """
    lines: list[str] = []
    names = list(buckets)

    def label(bucket: str, extra: str = "") -> str:
        escaped = bucket.replace("\\", "\\\\").replace('"', '\\"')
        return "{" + f'bucket="{escaped}"' + (f",{extra}" if extra else "") + "}"

    def metric(name: str, kind: str, text: str, samples: list[tuple[str, int]]) -> None:
        lines.extend([f"# HELP {name} {text}", f"# TYPE {name} {kind}"])
        lines.extend(f"{name}{labels} {value}" for labels, value in samples)

    def per_bucket(name: str, kind: str, text: str, value: Callable[[BucketMetrics], int]) -> None:
        metric(name, kind, text, [(label(b), value(buckets[b])) for b in names])

    def counter(name: str, text: str, key: str) -> None:
        per_bucket(f"mockdcp_{name}_total", "counter", text, lambda m: m.totals[key])

    per_bucket(
        "mockdcp_connections",
        "gauge",
        "KV connections open now.",
        lambda m: m.totals["connections_open"],
    )
    counter("connections", "KV connections accepted.", "connections_opened")
    metric(
        "mockdcp_streams",
        "gauge",
        "DCP streams open now, by state.",
        [
            (label(b, f'state="{state}"'), n)
            for b in names
            for state, n in sorted(buckets[b].streams.items())
        ],
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
    counter(
        "protocol_violations",
        "DCP rules the consumers broke, as the protocol checker reported them.",
        "protocol_violations",
    )
    counter("steps_applied", "Scenario steps applied.", "steps_applied")
    if nodes is not None:
        metric(
            "mockdcp_nodes",
            "gauge",
            "Data nodes of the cluster, by status.",
            [(f'{{status="{status}"}}', n) for status, n in sorted(nodes.items())],
        )
    per_bucket(
        "mockdcp_config_revision",
        "gauge",
        "The bucket's cluster map revision.",
        lambda m: m.cluster["rev"],
    )
    per_bucket(
        "mockdcp_replica_lag_items",
        "gauge",
        "Seqnos the replicas are behind their actives, summed over every replica.",
        lambda m: m.cluster["replica_lag"],
    )
    per_bucket(
        "mockdcp_rebalance_moves_left",
        "gauge",
        "vbucket moves the rebalance under way has still to make (0: none under way).",
        lambda m: m.cluster["rebalance_moves_left"],
    )
    return "\n".join(lines) + "\n"


def _step_errors(problems: list[ScenarioProblem]) -> list[dict[str, object]]:
    """The ``errors`` member of a 422: each bad step's index (0-based, as in the
    request's array), field, line (scenario files) and message, and a JSON pointer."""
    out: list[dict[str, object]] = []
    for p in problems:
        error: dict[str, object] = {"step": p.step, "field": p.field, "detail": p.message}
        if p.line is not None:
            error["line"] = p.line
        if p.step is not None:  # RFC 6901, into the posted array
            parts = [str(p.step), *(p.field.split(".") if p.field else [])]
            error["pointer"] = "/" + "/".join(parts)
        out.append(error)
    return out


def _invalid(exc: ScenarioProblems, what: str) -> Problem:
    return Problem(422, f"Invalid {what}", str(exc), errors=_step_errors(exc.problems))


class ControlApi:
    """The ``/mock`` handlers of one server. ``tasks`` runs posted scenarios."""

    def __init__(self, server: MockDcpServer, tasks: trio.Nursery) -> None:
        self.server = server
        self.node = server.node
        self.tasks = tasks
        #: steps from HTTP are applied one request at a time, in arrival order
        self._apply_lock = trio.Lock()
        self._scenario_running = False

    def routes(self) -> list[Route]:
        return [
            Route("/mock/health", self.health, methods=["GET"]),
            Route("/mock/state", self.state, methods=["GET"]),
            Route("/mock/steps", self.post_steps, methods=["POST"]),
            Route("/mock/scenario", self.post_scenario, methods=["POST"]),
            Route("/mock/oracle", self.oracle, methods=["GET"]),
            Route("/mock/expectations", self.expectations, methods=["GET"]),
            Route("/mock/openapi.json", self.openapi, methods=["GET"]),
            Route("/mock/ca.pem", self.ca, methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
        ]

    async def apply_steps(self, steps: Sequence[Step], source: str) -> None:
        """Check and apply ``steps`` as ``POST /mock/steps`` does, one request at a time
        (ns_server's REST routes are spellings of steps); ``Problem`` 422/409 if they
        cannot run."""
        from mockdcp.scenario import ScenarioProblems, StepFailed

        async with self._apply_lock:
            runner = self.server.runner
            try:
                runner.check(steps, source)
                await runner.apply(steps, source)
            except ScenarioProblems as exc:
                raise _invalid(exc, "Steps") from None
            except StepFailed as exc:
                raise Problem(409, "Step Failed", str(exc)) from None

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    def _bucket(self, request: Request) -> str | None:
        """``?bucket=NAME`` (None: the first bucket); 404 for a bucket there is not."""
        name = request.query_params.get("bucket")
        if name is not None and not self.server.buckets.exists(name):
            raise Problem(
                404, "Not Found", f"no bucket {name!r} (the buckets: {self.server.buckets.names})"
            )
        return name

    async def state(self, request: Request) -> Response:
        return JSONResponse(_control_state.server_state(self.server, self._bucket(request)))

    async def openapi(self, request: Request) -> Response:
        # imported here: the step vocabulary it describes (the scenario package) is
        # otherwise not needed by the HTTP stack, imported beside a server's first streams
        from mockdcp.server._control_openapi import openapi_document

        return JSONResponse(openapi_document())

    async def ca(self, request: Request) -> Response:
        """The CA that signs the TLS ports' certificates (PEM); 404 without TLS."""
        if self.server.ca_pem is None:
            raise Problem(404, "Not Found", "this server has no TLS (it was started with --no-tls)")
        return Response(self.server.ca_pem, media_type="application/x-pem-file")

    async def metrics(self, request: Request) -> Response:
        """Every bucket's series, labelled with its name (``prometheus_text``)."""
        buckets = {}
        for name in self.server.buckets.names:
            node = self.server.bucket_node(name)
            totals = _control_state.totals(node)
            # the runners are made on first use
            runner = self.server._runner if node is self.server.node else None
            runner = self.server._runners.get(name) if runner is None else runner
            totals["steps_applied"] = 0 if runner is None else runner.progress.applied
            buckets[name] = BucketMetrics(
                totals,
                _control_state.streams_by_state(node),
                _control_state.bucket_metrics(node),
            )
        return PlainTextResponse(
            prometheus_text(buckets, _control_state.nodes_by_status(self.node)),
            media_type="text/plain; version=0.0.4",
        )

    async def post_steps(self, request: Request) -> Response:
        """A JSON array of steps: all parsed and checked against the bucket (``?bucket=``,
        the first by default) first (422 naming each bad step and field, nothing
        applied), then applied in order before the reply; a ``wait`` or ``expect`` step
        holds the reply until it is met."""
        from mockdcp.scenario import ScenarioProblems, StepFailed, parse_steps

        data = await read_json(request)
        source = "POST /mock/steps"
        bucket = self._bucket(request)  # ?bucket=NAME: that bucket's steps
        async with self._apply_lock:
            runner = self.server.runner_for(bucket)
            try:
                steps = parse_steps(data, source=source)
                runner.check(steps, source)
            except ScenarioProblems as exc:
                raise _invalid(exc, "Steps") from None
            before = runner.progress.applied
            try:
                await runner.apply(steps, source)
            except StepFailed as exc:
                applied = runner.progress.applied - before
                raise Problem(
                    409, "Step Failed", str(exc), applied=applied, failed_step=applied
                ) from None
        return JSONResponse({"applied": len(steps), "progress": runner.progress.as_dict()})

    async def post_scenario(self, request: Request) -> Response:
        """A scenario (YAML or JSON text): parsed and checked whole (422), then its steps
        run in the background against this server's bucket (202); 409 while another
        posted scenario runs."""
        from mockdcp.scenario import ScenarioProblems, parse_scenario

        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind and kind not in _SCENARIO_TYPES:
            raise Problem(
                415,
                "Unsupported Media Type",
                f"a scenario is YAML or JSON ({', '.join(sorted(_SCENARIO_TYPES))}), not {kind}",
            )
        body = await read_body(request)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise Problem(400, "Bad Request", "the scenario is not UTF-8 text") from None
        source = "POST /mock/scenario"
        if self._scenario_running:
            raise Problem(409, "Conflict", "a posted scenario is still running")
        try:
            scenario = parse_scenario(text, source)
            self.server.runner.check(scenario.steps, source)
        except ScenarioProblems as exc:
            raise _invalid(exc, "Scenario") from None
        self._scenario_running = True
        self.tasks.start_soon(self._run_scenario, list(scenario.steps), source)
        return JSONResponse(
            {"scenario": scenario.name, "steps": len(scenario.steps), "state": "/mock/state"},
            202,
            headers={"location": "/mock/state"},
        )

    async def _run_scenario(self, steps: list[Step], source: str) -> None:
        self.server.runner.progress.finished = False
        try:  # beside POST /mock/steps, as a scenario given to ``serve`` runs
            await self.server.run_rest(steps, source, 0)
        finally:
            self._scenario_running = False

    async def oracle(self, request: Request) -> Response:
        bucket = self._bucket(request)
        corpus = self.server.corpus
        if bucket is None and corpus is not None and corpus.get("on_disk"):
            return JSONResponse(on_disk_oracle(self.server.bucket, str(corpus["path"])))
        return JSONResponse(self.server.oracle(bucket).to_json())

    async def expectations(self, request: Request) -> Response:
        results = [e.as_dict() for e in self.server.expectations(self._bucket(request))]
        return JSONResponse({"expectations": results, "passed": all(e["passed"] for e in results)})


#: what ``POST /mock/scenario`` reads (JSON is YAML too)
_SCENARIO_TYPES = frozenset(
    {
        "application/yaml",
        "application/x-yaml",
        "text/yaml",
        "text/x-yaml",
        "application/json",
        "text/plain",
    }
)


def on_disk_oracle(bucket: Bucket, corpus: str) -> dict[str, Any]:
    """``GET /mock/oracle`` of a bucket over an on-disk corpus: not its millions of rows
    but what ``mockdcp oracle --url`` merges with the corpus's own oracle (Spark): the
    corpus, the live documents written since start (``rows``), the corpus's keys gone
    since (``gone``) and the collections whose corpus documents still count
    (``collections``: ``mockdcp.model.on_disk_changes``)."""
    from mockdcp.model import on_disk_changes

    live, gone, kept = on_disk_changes(bucket)
    return {
        "corpus": corpus,
        **live.to_json(),
        "gone": [
            {"scope": s, "collection": c, "key": k.decode("utf-8", "backslashreplace")}
            for s, c, k in gone
        ],
        "collections": [{"scope": s, "collection": c} for s, c in kept],
    }
