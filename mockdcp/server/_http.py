"""The management (HTTP) port: the Couchbase config endpoints clients bootstrap from.

h11 on trio: small, fast to import, and enough for these endpoints (design.md names an
ASGI server; the control API of the scenario issue will decide whether one is needed).

Endpoints (clients.md §3.1, §4, §8 "Cluster map"):

* ``GET /pools`` → implementationVersion (go-dcp parses X.Y.Z);
* ``GET /pools/default`` → the node list;
* ``GET /pools/default/buckets`` and ``/pools/default/buckets/{bucket}`` → bucket info
  (bucketType ``membase``, storageBackend ``couchstore``);
* ``GET /pools/default/b/{bucket}`` → the terse config;
* ``GET /pools/default/bs/{bucket}`` and ``/pools/default/bucketsStreaming/{bucket}`` →
  a long-lived response streaming the config, each object followed by four newlines, and
  again whenever its revision changes;
* ``GET /whoami`` → the user.

Basic auth is checked against the configured users (401 otherwise); an unknown bucket
is 404. ``$HOST`` in a config stands for the host the client addressed (Host header).
"""

from __future__ import annotations

import base64
import json
import logging
from typing import TYPE_CHECKING, Any

import h11
import trio

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mockdcp.producer import Node

log = logging.getLogger("mockdcp.http")

MAX_REQUEST = 64 * 1024
STREAM_POLL = 0.5


class HttpService:
    """Serves the config endpoints of one ``Node``."""

    def __init__(self, node: Node) -> None:
        self.node = node

    async def handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST)
        try:
            while True:
                request = await self._next_request(stream, conn)
                if request is None:
                    return
                keep = await self._dispatch(stream, conn, request)
                if not keep or conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (h11.RemoteProtocolError, h11.LocalProtocolError) as exc:
            log.info("bad HTTP request: %s", exc)
            await self._try_send_error(stream, conn)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        except Exception:
            log.exception("HTTP handler failed")
        finally:
            with trio.move_on_after(1) as scope:
                scope.shield = True
                await stream.aclose()

    async def _next_request(
        self, stream: trio.SocketStream, conn: h11.Connection
    ) -> h11.Request | None:
        request = None
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(16384)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.EndOfMessage):
                return request
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _try_send_error(self, stream: trio.SocketStream, conn: h11.Connection) -> None:
        try:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                await self._send(stream, conn, 400, {"error": "bad request"})
        except Exception:
            pass

    async def _send(
        self,
        stream: trio.SocketStream,
        conn: h11.Connection,
        status: int,
        body: object,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs = [("content-type", "application/json"), ("content-length", str(len(data)))]
        hdrs += list((headers or {}).items())
        await stream.send_all(conn.send(h11.Response(status_code=status, headers=hdrs)))
        await stream.send_all(conn.send(h11.Data(data=data)))
        await stream.send_all(conn.send(h11.EndOfMessage()))

    def _authorized(self, request: h11.Request) -> str | None:
        for name, value in request.headers:
            if name == b"authorization" and value[:6].lower() == b"basic ":
                try:
                    user, _, password = base64.b64decode(value[6:]).decode().partition(":")
                except ValueError:
                    return None
                if self.node.users.get(user) == password:
                    return user
        return None

    @staticmethod
    def _host(request: h11.Request, default: str) -> str:
        for name, value in request.headers:
            if name == b"host":
                host = value.decode("latin-1")
                if host.startswith("["):
                    return host[1 : host.index("]")]
                return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
        return default

    async def _dispatch(
        self, stream: trio.SocketStream, conn: h11.Connection, request: h11.Request
    ) -> bool:
        path = request.target.decode("latin-1").split("?", 1)[0].rstrip("/")
        if request.method not in (b"GET", b"HEAD"):
            await self._send(stream, conn, 405, {"error": "method not allowed"})
            return True
        user = self._authorized(request)
        if path == "/mock/health":
            await self._send(stream, conn, 200, {"status": "ok"})
            return True
        if user is None:
            await self._send(
                stream, conn, 401, b"Unauthorized", {"www-authenticate": 'Basic realm="mockdcp"'}
            )
            return True
        host = self._host(request, self.node.host)
        parts = path.split("/")
        bucket = self.node.bucket.name
        if path == "/whoami":
            await self._send(
                stream, conn, 200, {"id": user, "domain": "local", "roles": [{"role": "admin"}]}
            )
        elif path == "/pools":
            await self._send(stream, conn, 200, self._pools())
        elif path == "/pools/default":
            await self._send(stream, conn, 200, self._pool_default(host))
        elif path == "/pools/default/buckets":
            await self._send(stream, conn, 200, [self._bucket_info(host)])
        elif len(parts) == 5 and parts[:3] == ["", "pools", "default"]:
            kind, name = parts[3], parts[4]
            if name != bucket or kind not in ("b", "bs", "buckets", "bucketsStreaming"):
                await self._send(stream, conn, 404, b"Requested resource not found.\r\n")
            elif kind == "buckets":
                await self._send(stream, conn, 200, self._bucket_info(host))
            elif kind == "b":
                await self._send(stream, conn, 200, self.node.config(host))
            else:
                await self._stream_configs(stream, conn, host)
                return False
        else:
            await self._send(stream, conn, 404, b"Not found.\r\n")
        return True

    async def _stream_configs(
        self, stream: trio.SocketStream, conn: h11.Connection, host: str
    ) -> None:
        """A chunked response that sends the config again whenever its rev changes."""
        headers = [("content-type", "application/json"), ("transfer-encoding", "chunked")]
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=headers)))
        sent: tuple[int, int] | None = None
        while True:
            current = (self.node.config_epoch, self.node.config_rev)
            if current != sent:
                body = json.dumps(self.node.config(host)).encode() + b"\n\n\n\n"
                await stream.send_all(conn.send(h11.Data(data=body)))
                sent = current
            await trio.sleep(STREAM_POLL)

    def _pools(self) -> dict[str, Any]:
        return {
            "isAdminCreds": True,
            "isEnterprise": True,
            "implementationVersion": self.node.version,
            "componentsVersion": {"ns_server": self.node.version},
            "pools": [
                {
                    "name": "default",
                    "uri": "/pools/default",
                    "streamingUri": "/poolsStreaming/default",
                }
            ],
            "uuid": self.node.bucket_uuid,
        }

    def _node_entry(self, host: str) -> dict[str, Any]:
        return {
            "hostname": f"{host}:{self.node.http_port}",
            "clusterMembership": "active",
            "status": "healthy",
            "version": self.node.version,
            "services": ["kv"],
            "ports": {"direct": self.node.kv_port},
            "thisNode": True,
        }

    def _pool_default(self, host: str) -> dict[str, Any]:
        return {
            "name": "default",
            "nodes": [self._node_entry(host)],
            "buckets": {"uri": "/pools/default/buckets"},
            "rebalanceStatus": "none",
        }

    def _bucket_info(self, host: str) -> dict[str, Any]:
        info = self.node.config(host)
        info.update(
            {
                "bucketType": "membase",
                "storageBackend": "couchstore",
                "uri": f"/pools/default/buckets/{self.node.bucket.name}",
                "streamingUri": f"/pools/default/bucketsStreaming/{self.node.bucket.name}",
                "nodes": [self._node_entry(host)],
            }
        )
        return info
