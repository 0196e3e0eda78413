from __future__ import annotations

import base64
import json
import ssl
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import trio

from mockdcp.model import Bucket
from mockdcp.server import MockDcpServer, _certs, serve

from .conftest import AUTH

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 8, seed=5, clock=time.time)
    options: dict[str, Any] = {"tls_port": 0, "https_port": 0, "tls_dir": tmp_path / "ca"}
    async with serve(port=0, http_port=0, bucket_obj=bucket, tls=True, **options) as server:
        yield server


def _context(ca_pem: bytes | None, tmp_path: Path, cert: _certs.Identity | None = None) -> Any:  # noqa: ANN401
    context = ssl.create_default_context(cadata=(ca_pem or b"").decode())
    if cert is not None:
        (tmp_path / "c.pem").write_bytes(cert.cert_pem)
        (tmp_path / "c-key.pem").write_bytes(cert.key_pem)
        context.load_cert_chain(tmp_path / "c.pem", tmp_path / "c-key.pem")
    return context


def _https(server: MockDcpServer, context: ssl.SSLContext, **kw: Any) -> httpx.AsyncClient:  # noqa: ANN401
    assert server.https_url is not None
    return httpx.AsyncClient(base_url=server.https_url, verify=context, timeout=10, **kw)


async def test_https_serves_the_config_with_the_tls_ports(
    tls_server: MockDcpServer, tmp_path: Path
) -> None:
    async with _https(tls_server, _context(tls_server.ca_pem, tmp_path), auth=AUTH) as client:
        config = (await client.get("/pools/default/b/default")).json()
        pools = (await client.get("/pools/default")).json()
    (node,) = config["nodesExt"]
    assert node["services"] == {
        "kv": tls_server.kv_port,
        "mgmt": tls_server.http_port,
        "kvSSL": tls_server.tls_port,
        "mgmtSSL": tls_server.https_port,
    }
    assert pools["nodes"][0]["ports"]["httpsMgmt"] == tls_server.https_port


async def test_the_streaming_config_over_https_lists_the_tls_ports(
    tls_server: MockDcpServer, tmp_path: Path
) -> None:
    assert tls_server.https_port is not None
    tcp = await trio.open_tcp_stream("127.0.0.1", tls_server.https_port)
    stream = trio.SSLStream(tcp, _context(tls_server.ca_pem, tmp_path), server_hostname="localhost")
    auth = base64.b64encode(b"Administrator:password").decode()
    request = f"GET /pools/default/bs/default HTTP/1.1\r\nHost: h\r\nAuthorization: Basic {auth}"
    await stream.send_all(f"{request}\r\n\r\n".encode())
    received = b""
    with trio.fail_after(5):
        while b"\n\n\n\n" not in received:
            received += await stream.receive_some(65536)
    await stream.aclose()
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    chunk = body.split(b"\r\n", 1)[1]  # chunked: the first chunk's size, then its data
    config = json.loads(chunk.split(b"\n\n\n\n")[0])
    assert config["nodesExt"][0]["services"]["kvSSL"] == tls_server.tls_port


async def test_the_ca_is_served_to_anyone_over_http_and_https(
    tls_server: MockDcpServer, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=tls_server.http_url, timeout=10) as plain:
        over_http = await plain.get("/mock/ca.pem")
    async with _https(tls_server, _context(tls_server.ca_pem, tmp_path)) as secure:
        over_https = await secure.get("/mock/ca.pem")
    for response in (over_http, over_https):
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-pem-file"
        assert response.content == tls_server.ca_pem


async def test_without_tls_the_ca_is_not_found() -> None:
    async with (
        serve(port=0, http_port=0, vbuckets=4, tls=False) as plain,
        httpx.AsyncClient(base_url=plain.http_url, timeout=10) as anonymous,
    ):
        response = await anonymous.get("/mock/ca.pem")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


async def test_a_client_certificate_is_the_user_of_its_https_requests(tmp_path: Path) -> None:
    ca_dir = tmp_path / "ca"
    cert = _certs.issue_certificate(_certs.load_or_create_ca(ca_dir), "Administrator", [])
    options: dict[str, Any] = {"tls_port": 0, "https_port": 0, "tls_dir": ca_dir}
    async with serve(
        port=0, http_port=0, vbuckets=4, tls=True, client_cert_auth="enable", **options
    ) as server:
        async with _https(server, _context(server.ca_pem, tmp_path, cert)) as by_cert:
            whoami = await by_cert.get("/whoami")
            config = await by_cert.get("/pools/default/b/default")
        async with _https(server, _context(server.ca_pem, tmp_path)) as nobody:
            refused = await nobody.get("/whoami")
        async with httpx.AsyncClient(base_url=server.http_url, timeout=10) as plain:
            plain_refused = await plain.get("/whoami")
    assert whoami.status_code == 200
    assert whoami.json()["id"] == "Administrator"
    assert config.status_code == 200
    assert refused.status_code == 401
    assert plain_refused.status_code == 401


async def test_mandatory_client_certificates_refuse_https_without_one(tmp_path: Path) -> None:
    options: dict[str, Any] = {"tls_port": 0, "https_port": 0, "tls_dir": tmp_path / "ca"}
    async with serve(
        port=0, http_port=0, vbuckets=4, tls=True, client_cert_auth="mandatory", **options
    ) as server:
        async with _https(server, _context(server.ca_pem, tmp_path), auth=AUTH) as client:
            with pytest.raises(httpx.TransportError):
                await client.get("/pools")
        async with httpx.AsyncClient(base_url=server.http_url, auth=AUTH, timeout=10) as plain:
            assert (await plain.get("/pools")).status_code == 200  # the plain port is not TLS


async def test_plain_http_on_the_https_port_is_closed(tls_server: MockDcpServer) -> None:
    assert tls_server.https_port is not None
    tcp = await trio.open_tcp_stream("127.0.0.1", tls_server.https_port)
    await tcp.send_all(b"GET /pools HTTP/1.1\r\nHost: x\r\n\r\n")
    with trio.fail_after(3):
        while await tcp.receive_some(4096):
            pass
    await tcp.aclose()
