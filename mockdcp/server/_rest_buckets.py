"""ns_server's REST writes for buckets, scopes and collections, as a node answers them.

Each call is a spelling of a step (``create_bucket``, ``delete_bucket``, ``flush``,
``create_scope``, ``drop_scope``, ``create_collection``, ``drop_collection``): the form is
validated as ns_server validates it, then the step is applied through the bucket's step
runner, so the change is the model operation the step makes, counted in the runner's
progress, streamed as the step's system events, and in the oracle and ``/mock/state``.
A refused call changes nothing.

Status codes and bodies (apps/ns_server/src):

* ``POST /pools/default/buckets`` (form ``name``, ``bucketType``, ``ramQuota`` or
  ``ramQuotaMB`` in MiB, ``storageBackend``, ``replicaNumber``, ``flushEnabled``):
  202 with ``Location``, or 400 ``{"errors": {field: message}}``
  (menelaus_web_buckets.erl ``handle_bucket_create``, ``format_error_response``);
* ``DELETE /pools/default/buckets/{b}``: 200 (``handle_bucket_delete``);
* ``POST /pools/default/buckets/{b}/controller/doFlush``: 200, or 400
  ``{"_": "Flush is disabled for the bucket"}`` (``do_handle_bucket_flush``);
* ``GET /pools/default/buckets/{b}/scopes``: the manifest, uids in hex
  (collections.erl ``jsonify_manifest``);
* ``POST .../scopes`` (``name``), ``DELETE .../scopes/{s}``, ``POST
  .../scopes/{s}/collections`` (``name``, ``maxTTL``, ``history``), ``DELETE
  .../scopes/{s}/collections/{c}``: 200 ``{"uid": "<new manifest uid, hex>"}``
  (menelaus_web_collections.erl ``handle_rv``), which a client waits for with
  GET_COLLECTIONS_MANIFEST; a form field refused: 400 ``{"errors": {field: message}}``
  (validator.erl); a duplicate: 400, an unknown scope or collection: 404, both
  ``{"errors": {"_": message}}`` (``get_err_code_msg``).

A bucket that does not exist: 404 ``Requested resource not found.`` (menelaus_web.erl
``check_bucket_uuid``, before any handler). A body that is not a form: 400.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import TYPE_CHECKING

from starlette.responses import Response
from starlette.routing import Route

from mockdcp.model import BucketSpec, BucketType, bucket_name_error
from mockdcp.server._control import JSONResponse, read_body

if TYPE_CHECKING:
    from starlette.requests import Request

    from mockdcp.producer import Node
    from mockdcp.scenario import Step
    from mockdcp.server._serve import MockDcpServer

NOT_FOUND = b"Requested resource not found.\r\n"
#: menelaus_web_collections.erl ``name_validator``
_COLLECTION_NAME = re.compile(r"[0-9A-Za-z_%\-]+")
#: collections.erl ``get_maxTTL_min_value`` (7.6: ``NO_EXPIRY``) and ``MAX_32BIT_SIGNED_INT``
MIN_MAX_TTL, MAX_MAX_TTL = -1, 0x7FFFFFFF
#: ns_server's default ``replicaNumber`` for a new bucket (``DEFAULT_MEMBASE_NUM_REPLICAS``)
DEFAULT_REPLICAS = 1
_MAX_REPLICAS = 3


class FormError(Exception):
    """A body that is not a form."""


def parse_form(body: bytes) -> list[tuple[str, str]]:
    """The ``application/x-www-form-urlencoded`` fields of ``body``, in order."""
    try:
        text = body.decode("utf-8")
        return urllib.parse.parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormError(
            f"the body is not a form (application/x-www-form-urlencoded): {exc}"
        ) from None


def _number(text: str | None) -> int | None:
    """menelaus_util ``parse_validate_number``'s integer, or None (invalid)."""
    if text is None or not re.fullmatch(r"-?[0-9]+", text.strip()):
        return None
    return int(text)


def bucket_form_spec(
    form: dict[str, str], existing: list[str]
) -> tuple[BucketSpec | None, dict[str, str]]:
    """A new bucket from ``POST /pools/default/buckets``'s form, or ns_server's field
    errors (menelaus_web_buckets.erl ``validate_bucket_name``, ``get_bucket_type``,
    ``parse_validate_ram_quota``, ``quota_size_error``, ``parse_validate_replicas_number``,
    ``parse_validate_flush_enabled``, ``do_get_storage_mode_based_on_storage_backend``)."""
    errors: dict[str, str] = {}
    name = form.get("name")
    if name is None:
        errors["name"] = "Bucket name needs to be specified"
    else:
        error = bucket_name_error(name)
        if error is None and name.lower() in (n.lower() for n in existing):
            error = "Bucket with given name already exists"
        if error is not None:
            errors["name"] = error
    kind = BucketType.COUCHBASE
    given = form.get("bucketType")
    if given is not None and given not in ("couchbase", "membase"):
        if given in ("ephemeral", "memcached"):  # ns_server's, not (yet) mockdcp's
            errors["bucketType"] = f"mockdcp serves couchbase buckets, not {given}"
        else:
            errors["bucketType"] = "invalid bucket type"
    quota_text = form.get("ramQuota", form.get("ramQuotaMB"))
    quota = _number(quota_text)
    if quota is None:
        errors["ramQuota"] = "The RAM Quota must be specified and must be a positive integer."
    elif quota < 0:
        errors["ramQuota"] = "The RAM Quota cannot be negative."
    elif quota < 100:
        errors["ramQuota"] = "RAM quota cannot be less than 100 MiB"
    replicas = _number(form.get("replicaNumber", str(DEFAULT_REPLICAS)))
    if replicas is None:
        errors["replicaNumber"] = (
            "The replica number must be specified and must be a non-negative integer."
        )
    elif replicas < 0:
        errors["replicaNumber"] = "Replica number must be equal to or greater than 0"
    elif replicas > _MAX_REPLICAS:
        errors["replicaNumber"] = f"Replica number larger than {_MAX_REPLICAS} is not supported."
    flush = form.get("flushEnabled", "0")
    if flush not in ("0", "1"):
        errors["flushEnabled"] = "flushEnabled can only be 1 or 0"
    storage = form.get("storageBackend", "couchstore")
    if storage not in ("couchstore", "magma"):
        errors["storage_mode"] = "storage backend must be couchstore or magma"
    if errors:
        return None, errors
    assert name is not None
    assert quota is not None
    assert replicas is not None
    spec = BucketSpec(
        name=name,
        type=kind,
        ram_quota_mb=quota,
        replicas=replicas,
        flush_enabled=flush == "1",
        storage=storage,
    )
    return spec, {}


def collection_name_error(form: dict[str, str], allowed: frozenset[str]) -> dict[str, str]:
    """validator.erl's errors for a scope's or collection's form: ``name`` required, of
    1..251 characters of ``[0-9A-Za-z_%-]``, not starting with ``_`` or ``%``; a key
    other than ``allowed``: ``Unsupported key`` (menelaus_web_collections.erl
    ``scope_validators``)."""
    errors = {key: "Unsupported key" for key in form if key not in allowed}
    name = form.get("name")
    if name is None:
        errors["name"] = "The value must be supplied"
    elif not 1 <= len(name) <= 251:
        errors["name"] = f"Name length ({len(name)}) must be in the range from 1 to 251, inclusive"
    elif _COLLECTION_NAME.fullmatch(name) is None:
        errors["name"] = "Can only contain characters A-Z, a-z, 0-9 and the following symbols _ - %"
    elif name[0] in "_%":
        errors["name"] = "First character must not be _ or %"
    return errors


def _quoted(text: str) -> str:
    """A name as Erlang's ``~p`` prints a string (ns_server's messages)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _errors(fields: dict[str, str], status: int = 400) -> Response:
    return JSONResponse({"errors": fields}, status)


def _not_found() -> Response:
    return Response(NOT_FOUND, 404, media_type="text/plain")


class BucketRest:
    """The routes of the module docstring, for the management port of ``node``."""

    def __init__(self, server: MockDcpServer, node: Node) -> None:
        self.server = server
        self.node = node

    def routes(self) -> list[Route]:
        base = "/pools/default/buckets"
        return [
            Route(base, self.create_bucket, methods=["POST"]),
            Route(base + "/{bucket}", self.delete_bucket, methods=["DELETE"]),
            Route(base + "/{bucket}/controller/doFlush", self.flush, methods=["POST"]),
            Route(base + "/{bucket}/scopes", self.scopes, methods=["GET"]),
            Route(base + "/{bucket}/scopes", self.create_scope, methods=["POST"]),
            Route(base + "/{bucket}/scopes/{scope}", self.drop_scope, methods=["DELETE"]),
            Route(
                base + "/{bucket}/scopes/{scope}/collections",
                self.create_collection,
                methods=["POST"],
            ),
            Route(
                base + "/{bucket}/scopes/{scope}/collections/{collection}",
                self.drop_collection,
                methods=["DELETE"],
            ),
        ]

    # -- helpers ----------------------------------------------------------------------

    def _bucket(self, request: Request) -> Node | None:
        return self.node.buckets.node(request.path_params["bucket"], self.node.name)

    async def _form(self, request: Request) -> dict[str, str] | Response:
        try:
            return dict(parse_form(await read_body(request)))
        except FormError as exc:
            return _errors({"_": str(exc)})

    def _apply(self, step: Step, bucket: str | None, source: str) -> str | None:
        """Apply ``step`` to ``bucket``'s runner now; the refusal's text, or None."""
        from mockdcp.scenario import ScenarioProblems, StepFailed

        try:
            self.server.runner_for(bucket).apply_now([step], source)
        except ScenarioProblems as exc:
            return "; ".join(p.message for p in exc.problems)
        except StepFailed as exc:
            return str(exc)
        return None

    def _uid(self, node: Node) -> Response:
        return JSONResponse({"uid": f"{node.bucket.manifest.uid:x}"})

    # -- buckets ------------------------------------------------------------------------

    async def create_bucket(self, request: Request) -> Response:
        from mockdcp.scenario import CreateBucket

        form = await self._form(request)
        if isinstance(form, Response):
            return form
        spec, errors = bucket_form_spec(form, self.node.buckets.names)
        if spec is None:
            return _errors(errors)
        step = CreateBucket(
            name=spec.name,
            type=spec.type.value,
            storage=spec.storage,
            replicas=spec.replicas,
            flush_enabled=spec.flush_enabled,
            ram_quota_mb=spec.ram_quota_mb,
        )
        refused = self._apply(step, None, "POST /pools/default/buckets")
        if refused is not None:
            return _errors({"_": refused})
        return Response(b"", 202, headers={"location": f"/pools/default/buckets/{spec.name}"})

    async def delete_bucket(self, request: Request) -> Response:
        from mockdcp.scenario import DeleteBucket

        if self._bucket(request) is None:
            return _not_found()
        name = request.path_params["bucket"]
        refused = self._apply(
            DeleteBucket(name=name), None, f"DELETE /pools/default/buckets/{name}"
        )
        if refused is not None:
            return JSONResponse({"_": refused}, 500)
        return Response(b"", 200)

    async def flush(self, request: Request) -> Response:
        from mockdcp.scenario import Flush

        node = self._bucket(request)
        if node is None:
            return _not_found()
        name = node.bucket.name
        spec = node.buckets.spec(name)
        if spec is None or not spec.flush_enabled:
            return JSONResponse({"_": "Flush is disabled for the bucket"}, 400)
        refused = self._apply(
            Flush(), name, f"POST /pools/default/buckets/{name}/controller/doFlush"
        )
        if refused is not None:
            return JSONResponse({"_": refused}, 503)
        return Response(b"", 200)

    # -- scopes and collections -----------------------------------------------------------

    async def scopes(self, request: Request) -> Response:
        """The manifest as ns_server's REST API gives it (every collection with its
        ``maxTTL`` and ``history``, uids in hex)."""
        node = self._bucket(request)
        if node is None:
            return _not_found()
        manifest = node.bucket.manifest.to_json()
        for scope in manifest["scopes"]:
            for coll in scope["collections"]:
                coll.setdefault("maxTTL", 0)
                coll.setdefault("history", False)
        return JSONResponse(manifest)

    async def create_scope(self, request: Request) -> Response:
        from mockdcp.scenario import CreateScope

        node = self._bucket(request)
        if node is None:
            return _not_found()
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        errors = collection_name_error(form, frozenset({"name"}))
        if errors:
            return _errors(errors)
        name = form["name"]
        if node.bucket.manifest.scope_named(name) is not None:
            return _errors({"_": f"Scope with name {_quoted(name)} already exists"})
        refused = self._apply(CreateScope(name=name), node.bucket.name, request.url.path)
        return self._uid(node) if refused is None else _errors({"_": refused})

    async def drop_scope(self, request: Request) -> Response:
        from mockdcp.scenario import DropScope

        node = self._bucket(request)
        if node is None:
            return _not_found()
        name = request.path_params["scope"]
        if name == "_default":
            return _errors({"_": "Deleting _default scope is not allowed"})
        if node.bucket.manifest.scope_named(name) is None:
            return _errors({"_": f"Scope with name {_quoted(name)} is not found"}, 404)
        refused = self._apply(DropScope(name=name), node.bucket.name, request.url.path)
        return self._uid(node) if refused is None else _errors({"_": refused})

    async def create_collection(self, request: Request) -> Response:
        from mockdcp.scenario import CreateCollection

        node = self._bucket(request)
        if node is None:
            return _not_found()
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        errors = collection_name_error(form, frozenset({"name", "maxTTL", "history"}))
        max_ttl: int | None = None
        if "maxTTL" in form:
            ttl = _number(form["maxTTL"])
            if ttl is None:
                errors["maxTTL"] = "The value must be an integer"
            elif not MIN_MAX_TTL <= ttl <= MAX_MAX_TTL:
                errors["maxTTL"] = (
                    f"The value must be in range from {MIN_MAX_TTL} to {MAX_MAX_TTL} (inclusive)"
                )
            else:
                max_ttl = None if ttl == MIN_MAX_TTL else ttl
        history: bool | None = None
        if "history" in form:
            if form["history"] not in ("true", "false"):
                errors["history"] = "The value must be one of the following: [true,false]"
            else:
                history = form["history"] == "true"
        if errors:
            return _errors(errors)
        if history and not node.bucket.manifest.history_allowed:
            return Response(b"Not allowed on this type of bucket", 400, media_type="text/plain")
        scope, name = request.path_params["scope"], form["name"]
        manifest = node.bucket.manifest
        if manifest.scope_named(scope) is None:
            return _errors({"_": f"Scope with name {_quoted(scope)} is not found"}, 404)
        if manifest.collection_named(scope, name) is not None:
            return _errors(
                {
                    "_": f"Collection with name {_quoted(name)} in scope {_quoted(scope)}"
                    " already exists"
                }
            )
        step = CreateCollection(collection=f"{scope}.{name}", max_ttl=max_ttl, history=history)
        refused = self._apply(step, node.bucket.name, request.url.path)
        return self._uid(node) if refused is None else _errors({"_": refused})

    async def drop_collection(self, request: Request) -> Response:
        from mockdcp.scenario import DropCollection

        node = self._bucket(request)
        if node is None:
            return _not_found()
        scope, name = request.path_params["scope"], request.path_params["collection"]
        manifest = node.bucket.manifest
        if manifest.scope_named(scope) is None:
            return _errors({"_": f"Scope with name {_quoted(scope)} is not found"}, 404)
        if manifest.collection_named(scope, name) is None:
            return _errors(
                {
                    "_": f"Collection with name {_quoted(name)} in scope {_quoted(scope)}"
                    " is not found"
                },
                404,
            )
        step = DropCollection(collection=f"{scope}.{name}")
        refused = self._apply(step, node.bucket.name, request.url.path)
        return self._uid(node) if refused is None else _errors({"_": refused})
