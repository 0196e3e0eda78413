"""The ASGI application of the management port: the Couchbase-compatible endpoints real
clients bootstrap from, and the control API (``_control.py``), on Starlette.

Couchbase endpoints (what gocbcore, go-dcp and the SDKs read; ns_server's REST API,
docs.couchbase.com "Cluster info" and "Bucket info"):

* ``GET /pools`` → implementationVersion (go-dcp parses X.Y.Z), the node's server
  version (``mockdcp.protocol.PROFILES``);
* ``GET /pools/default`` → the node list, each with its ``version`` and
  ``clusterCompatibility`` (ns_server ``menelaus_web_node.erl``), and the cluster's
  ``clusterCompatVersion`` (``menelaus_web_pools.erl``, "major.minor");
* ``GET /pools/default/terseClusterInfo`` → ``clusterUUID`` and
  ``clusterCompatVersion`` (of ns_server ``get_terse_cluster_info``'s default fields,
  those a mock node has);
* ``GET /pools/default/buckets`` and ``/pools/default/buckets/{bucket}`` → bucket info
  (bucketType ``membase``, storageBackend ``couchstore`` or ``magma`` with its history
  retention);
* ``GET /pools/default/b/{bucket}`` → the terse config;
* ``GET /pools/default/bs/{bucket}`` and ``/pools/default/bucketsStreaming/{bucket}`` →
  a long-lived response streaming the config, each object followed by four newlines, and
  again whenever its revision changes;
* ``GET /whoami`` → the user.

Who may call what (``_Guard``): the Couchbase endpoints need the bucket users' Basic
credentials (401 otherwise), as a real node's do, or, over HTTPS, a client certificate
that maps to a user; the control API needs them too unless the port is on a loopback
address or ``--control-open`` was given; ``/mock/health`` and ``/mock/ca.pem`` never do.
A trailing slash is ignored. ``$HOST`` in a config stands for the host the client
addressed (its Host header).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Route

from mockdcp.model import METADATA_PURGE_AGE
from mockdcp.producer import NodeStatus
from mockdcp.protocol import ServicePorts
from mockdcp.server import _control
from mockdcp.server._control import JSONResponse

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.requests import Request
    from starlette.types import ASGIApp, Receive, Scope, Send

    from mockdcp.model import Bucket
    from mockdcp.producer import Node
    from mockdcp.server._http import CertificateUsers
    from mockdcp.server._serve import MockDcpServer

#: seconds between checks of the config revision on a streaming config response
STREAM_POLL = 0.5
#: the key under which ``_Guard`` leaves the authenticated user in the ASGI scope
USER_KEY = "mockdcp.user"
#: what anyone may read: liveness, and the CA to trust
OPEN_PATHS = frozenset({"/mock/health", "/mock/ca.pem"})


def basic_user(headers: Mapping[str, str], users: Mapping[str, str]) -> str | None:
    """The user named by a valid ``Authorization: Basic`` header, or None."""
    value = headers.get("authorization", "")
    if value[:6].lower() != "basic ":
        return None
    try:
        user, _, password = base64.b64decode(value[6:], validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return user if users.get(user) == password else None


def _is_control(path: str) -> bool:
    return path.startswith("/mock/") or path == "/metrics"


class _Guard:
    """Pure ASGI middleware: drops a trailing slash, checks credentials (module doc)."""

    def __init__(
        self,
        app: ASGIApp,
        node: Node,
        control_open: bool,
        certificate_users: CertificateUsers | None = None,
    ) -> None:
        self.app = app
        self.node = node
        self.control_open = control_open
        self.certificate_users = certificate_users if certificate_users is not None else {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if len(path) > 1 and path.endswith("/"):
            scope = {**scope, "path": path.rstrip("/") or "/"}
            path = scope["path"]
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        user = self._certificate_user(scope) or basic_user(headers, self.node.users)
        scope = {**scope, USER_KEY: user}
        if (
            user is None
            and path not in OPEN_PATHS
            and not (self.control_open and _is_control(path))
        ):
            response = _control.problem(
                401,
                "Unauthorized",
                "this endpoint needs the Basic credentials of a bucket user",
                headers={"www-authenticate": 'Basic realm="mockdcp"'},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _certificate_user(self, scope: Scope) -> str | None:
        """The user of the HTTPS connection's client certificate, if it has one."""
        if not self.certificate_users or scope.get("scheme") != "https":
            return None
        client, server = scope.get("client"), scope.get("server")
        if client is None or server is None:
            return None
        key = ((str(client[0]), int(client[1])), (str(server[0]), int(server[1])))
        return self.certificate_users.get(key)


def _host(request: Request, default: str) -> str:
    """The host the client addressed, from its Host header (``[v6]:port`` or ``h:port``)."""
    host = request.headers.get("host")
    if not host:
        return default
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else default
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


#: ns_server's default auto-compaction thresholds (database fragmentation 30%)
_AUTO_COMPACTION: dict[str, object] = {
    "parallelDBAndViewCompaction": False,
    "databaseFragmentationThreshold": {"percentage": 30, "size": "undefined"},
}


def _purge_days(bucket: Bucket) -> float:
    """The bucket's metadata purge age in days, as ns_server's ``purgeInterval``."""
    days = bucket.timers.metadata_purge_age / 86_400
    return int(days) if days == int(days) else round(days, 4)


class CouchbaseEndpoints:
    """The ns_server endpoints of one ``Node`` (module docstring)."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def routes(self) -> list[Route]:
        return [
            Route("/whoami", self.whoami, methods=["GET"]),
            Route("/pools", self.pools, methods=["GET"]),
            Route("/pools/default", self.pool_default, methods=["GET"]),
            Route("/pools/default/terseClusterInfo", self.terse_cluster_info, methods=["GET"]),
            Route("/pools/default/buckets", self.buckets, methods=["GET"]),
            Route("/pools/default/buckets/{bucket}", self.bucket_info, methods=["GET"]),
            Route("/pools/default/b/{bucket}", self.terse_config, methods=["GET"]),
            Route("/settings/autoCompaction", self.auto_compaction, methods=["GET"]),
            Route("/pools/default/bs/{bucket}", self.streaming_config, methods=["GET"]),
            Route(
                "/pools/default/bucketsStreaming/{bucket}",
                self.streaming_config,
                methods=["GET"],
            ),
        ]

    def _bucket_node(self, request: Request) -> Node | Response:
        """The node serving the path's bucket on this data node, or ns_server's 404."""
        node = self.node.buckets.node(request.path_params["bucket"], self.node.name)
        if node is None:
            return Response(b"Requested resource not found.\r\n", 404, media_type="text/plain")
        return node

    async def whoami(self, request: Request) -> Response:
        """The caller and its roles (ns_server's ``/whoami``)."""
        user = request.scope.get(USER_KEY)
        found = self.node.users.user(user) if user is not None else None
        roles = [] if found is None else [r.as_json() for r in found.roles]
        return JSONResponse({"id": user, "domain": "local", "roles": roles})

    async def pools(self, request: Request) -> Response:
        node = self.node
        return JSONResponse(
            {
                "isAdminCreds": True,
                "isEnterprise": True,
                "implementationVersion": node.version,
                "componentsVersion": {"ns_server": node.version},
                "pools": [
                    {
                        "name": "default",
                        "uri": "/pools/default",
                        "streamingUri": "/poolsStreaming/default",
                    }
                ],
                "uuid": node.bucket_uuid,
            }
        )

    async def auto_compaction(self, request: Request) -> Response:
        """The cluster's auto-compaction settings (ns_server
        ``menelaus_web_autocompaction:handle_get_global_settings``): ``purgeInterval`` is
        the metadata purge age in days (3 by default), the bucket's here."""
        return JSONResponse(
            {
                "autoCompactionSettings": _AUTO_COMPACTION,
                "purgeInterval": _purge_days(self.node.bucket),
            }
        )

    async def pool_default(self, request: Request) -> Response:
        host = _host(request, self.node.host)
        return JSONResponse(
            {
                "name": "default",
                "nodes": self._node_entries(host, members=True),
                "buckets": {"uri": "/pools/default/buckets"},
                "rebalanceStatus": "running" if self.node.topology.rebalancing else "none",
                "clusterCompatVersion": self.node.profile.compat_version,
            }
        )

    async def terse_cluster_info(self, request: Request) -> Response:
        return JSONResponse(
            {
                "clusterUUID": self.node.bucket_uuid,
                "clusterCompatVersion": self.node.profile.compat_version,
            }
        )

    async def buckets(self, request: Request) -> Response:
        """Every bucket, sorted by name (menelaus_web_buckets.erl ``handle_bucket_list``)."""
        host = _host(request, self.node.host)
        directory = self.node.buckets
        nodes = [directory.node(name, self.node.name) for name in sorted(directory.names)]
        return JSONResponse([self._bucket_info(n, host) for n in nodes if n is not None])

    async def bucket_info(self, request: Request) -> Response:
        node = self._bucket_node(request)
        if isinstance(node, Response):
            return node
        return JSONResponse(self._bucket_info(node, _host(request, self.node.host)))

    async def terse_config(self, request: Request) -> Response:
        node = self._bucket_node(request)
        if isinstance(node, Response):
            return node
        return JSONResponse(node.config(_host(request, self.node.host)))

    async def streaming_config(self, request: Request) -> Response:
        """A chunked response that sends the config again whenever its revision changes."""
        node = self._bucket_node(request)
        if isinstance(node, Response):
            return node
        return ConfigStream(node, _host(request, self.node.host))

    def _node_entries(
        self, host: str, *, members: bool = False, bucket: Node | None = None
    ) -> list[dict[str, Any]]:
        """The nodes of the bucket (``bucket``'s map's server list), or with ``members``
        every node of the cluster but those rebalanced out (ns_server's
        ``/pools/default`` lists failed-over and added nodes too, with their
        ``clusterMembership``)."""
        topology = (bucket or self.node).topology
        if members:
            nodes = [
                n for n in topology.nodes.values() if topology.status(n) is not NodeStatus.REMOVED
            ]
        else:
            nodes = topology.serving()
        return [self._node_entry(n, host if n.name == self.node.name else n.host) for n in nodes]

    def _node_entry(self, node: Node, host: str) -> dict[str, Any]:
        """A ``/pools/default`` node: with TLS, ``ports.httpsMgmt``; its alternate
        addresses as in the config (ns_server lists them in both)."""
        status = node.topology.status(node)
        membership = {
            NodeStatus.ADDED: "inactiveAdded",
            NodeStatus.FAILED_OVER: "inactiveFailed",
        }.get(status, "active")
        entry: dict[str, Any] = {
            "hostname": f"{host}:{node.http_port}",
            "clusterMembership": membership,
            "status": "unhealthy" if status is NodeStatus.DOWN else "healthy",
            "version": node.version,
            "clusterCompatibility": node.profile.cluster_compatibility,
            "services": ["kv"],
            "ports": {"direct": node.kv_port},
        }
        if node.name == self.node.name:
            entry["thisNode"] = True
        net = node.network
        if net.mgmt_ssl is not None:
            entry["ports"]["httpsMgmt"] = net.mgmt_ssl
        if net.alternate:
            own = ServicePorts(
                kv=node.kv_port, mgmt=node.http_port, kv_ssl=net.kv_ssl, mgmt_ssl=net.mgmt_ssl
            )
            entry["alternateAddresses"] = {n: a.as_json(own) for n, a in net.alternate.items()}
        return entry

    def _bucket_info(self, node: Node, host: str) -> dict[str, Any]:
        """A bucket's entry of ``/pools/default/buckets``: its config, type, storage and
        the settings it was made with (menelaus_web_buckets.erl
        ``build_dynamic_bucket_info``: ``replicaNumber``, ``quota``; ``controllers`` with
        ``flush`` only when flush is enabled, ``build_controllers``)."""
        model = node.bucket
        name = model.name
        spec = node.buckets.spec(name)
        info = node.config(host)
        entries = self._node_entries(host, bucket=node)
        info.update(
            {
                "bucketType": "membase" if spec is None else spec.type.config_type,
                "storageBackend": model.storage,
                "uri": f"/pools/default/buckets/{name}",
                "streamingUri": f"/pools/default/bucketsStreaming/{name}",
                "nodes": entries,
            }
        )
        if spec is not None:
            quota = spec.ram_quota_mb * 1024 * 1024
            controllers = {"compactAll": f"/pools/default/buckets/{name}/controller/compactBucket"}
            if spec.flush_enabled:
                controllers["flush"] = f"/pools/default/buckets/{name}/controller/doFlush"
            info.update(
                replicaNumber=spec.replicas,
                quota={"ram": quota * len(entries), "rawRAM": quota},
                controllers=controllers,
            )
        # ns_server (``menelaus_web_buckets``) reports no purgeInterval for a bucket on the
        # cluster's settings, and the bucket's own beside its settings otherwise
        if model.timers.metadata_purge_age == METADATA_PURGE_AGE:
            info["autoCompactionSettings"] = False
        else:
            info["autoCompactionSettings"] = _AUTO_COMPACTION
            info["purgeInterval"] = _purge_days(model)
        if model.ephemeral is not None:
            _ephemeral_info(info, model)
        if model.storage == "magma":  # ns_server 7.2+ reports a Magma bucket's retention
            info["historyRetentionSeconds"] = model.history_retention_seconds
            info["historyRetentionBytes"] = model.history_retention_bytes
            info["historyRetentionCollectionDefault"] = model.manifest.history_default
        return info


def _ephemeral_info(info: dict[str, Any], bucket: Bucket) -> None:
    """An ephemeral bucket's fields as ns_server reports them (``menelaus_web_buckets.erl``
    ``build_bucket_info``): ``bucketType`` ``ephemeral`` (``ns_bucket:external_bucket_type``),
    no ``storageBackend`` (no disk), ``evictionPolicy`` noEviction or nruEviction
    (``build_eviction_policy``), the purge interval in days (the purge age / 86400,
    ``memcached_bucket_config.erl``) and the RAM quota in bytes. go-dcp reads
    ``bucketType`` here to turn its rollback mitigation off (go-dcp-kafka issue #66)."""
    settings = bucket.ephemeral
    assert settings is not None
    info["bucketType"] = "ephemeral"
    info.pop("storageBackend", None)
    info["evictionPolicy"] = settings.eviction_policy
    info["purgeInterval"] = settings.purge_age / 86400
    if settings.memory_quota is not None:
        info["quota"] = {"ram": settings.memory_quota, "rawRAM": settings.memory_quota}


class ConfigStream(Response):
    """The streaming config response: the config, four newlines, and again whenever its
    revision changes, until the client goes away (``http.disconnect``), the bucket is
    deleted or the server stops. A task, not an async generator, so nothing is left to finalize."""

    def __init__(self, node: Node, host: str) -> None:  # no body: no content-length
        self.node = node
        self.host = host
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", b"application/json")]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._configs, send, nursery.cancel_scope)
            while (await receive())["type"] != "http.disconnect":
                pass
            nursery.cancel_scope.cancel()

    async def _configs(self, send: Send, done: trio.CancelScope) -> None:
        """The configs, until the bucket is deleted: then the response ends (a deleted
        bucket's streaming config is gone; the client's next request gets 404)."""
        sent: tuple[int, int] | None = None
        while True:
            if self.node.deleted:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                done.cancel()
                return
            current = (self.node.config_epoch, self.node.config_rev)
            if current != sent:
                body = json.dumps(self.node.config(self.host)).encode() + b"\n\n\n\n"
                await send({"type": "http.response.body", "body": body, "more_body": True})
                sent = current
            await trio.sleep(STREAM_POLL)


async def _http_error(request: Request, exc: Exception) -> Response:
    """The router's 404 and 405, as RFC 9457 problem documents."""
    assert isinstance(exc, HTTPException)
    detail = {
        404: f"no endpoint at {request.url.path}",
        405: f"{request.method} is not allowed on {request.url.path}",
    }.get(exc.status_code, exc.detail)
    return _control.problem(exc.status_code, exc.detail, detail, headers=exc.headers)


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, _control.Problem)
    return exc.response()


def build_app(
    server: MockDcpServer,
    tasks: trio.Nursery,
    *,
    control_open: bool,
    certificate_users: CertificateUsers | None = None,
    node: Node | None = None,
) -> ASGIApp:
    """The whole management-port application, behind its guard; ``tasks`` runs what
    outlives a request (a posted scenario); ``certificate_users``: the users of the
    HTTPS connections' client certificates."""
    from mockdcp.server._rest_rbac import RbacEndpoints

    node = node or server.node
    from mockdcp.server._rest_buckets import BucketRest

    control = _control.ControlApi(server, tasks)
    rbac = RbacEndpoints(node.users, control.apply_steps, USER_KEY)
    routes = [
        *CouchbaseEndpoints(node).routes(),
        *BucketRest(server, node).routes(),  # ns_server's writes (buckets, collections)
        *rbac.routes(),  # ns_server's users and roles
        *control.routes(),
    ]
    handlers = {HTTPException: _http_error, _control.Problem: _problem}
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.router.redirect_slashes = False
    return _Guard(app, node, control_open, certificate_users)
