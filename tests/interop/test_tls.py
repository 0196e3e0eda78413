"""The real clients over TLS, with a client certificate, and through mapped ports.

Each case checks the client's documents against the oracle, and what it sent against the
server's packet capture (which holds the decrypted bytes of TLS connections). What the
clients do, pinned here:

* over TLS java-dcp-client authenticates with SASL PLAIN (its ``AuthHandler`` skips
  SASL_LIST_MECHS), while gocbcore v10.9 (and go-dcp on it) switches to SCRAM-SHA512:
  ``PasswordAuthProvider.DefaultAuthMechanisms`` gives PLAIN without TLS and the SCRAM
  list with it, the reverse of what one might expect; each checks the node's
  certificate against the CA it was given (java-dcp-client also checks the host name);
* go-dcp reads ``/pools`` and the bucket over HTTPS with its own HTTP client (fasthttp),
  which trusts the system's CAs, not ``rootCAPath``: its user adds the cluster's CA to
  them (here: ``SSL_CERT_FILE``), as for any HTTPS service;
* with a client certificate (java-dcp-client ``CertificateAuthenticator``, gocbcore an
  ``AuthProvider`` whose credentials are empty, as gocb's ``CertificateAuthenticator``)
  no SASL request is sent at all: the certificate is the user;
* seeded on an address that is not the node's own (a mapped port), every client takes
  the ``external`` alternate address: each KV connection it opens goes through the
  mapping.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from mockdcp.model import Bucket
from mockdcp.protocol import Opcode
from mockdcp.server import MockDcpServer, _certs, serve

from ._forward import Forwarder
from ._wire import read_capture
from .test_clients import converge, load, oracle_docs, seen_docs

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

pytestmark = pytest.mark.interop

CLIENTS = ["java", "gocbcore", "godcp"]
#: the SASL mechanism each client uses over TLS (module docstring)
TLS_MECHANISM = {"java": b"PLAIN", "gocbcore": b"SCRAM-SHA512", "godcp": b"SCRAM-SHA512"}


@contextlib.asynccontextmanager
async def _node(
    tmp_path: Path,
    **options: Any,  # noqa: ANN401 - serve()'s keywords
) -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 64, seed=12, clock=time.time)
    async with serve(
        port=0, http_port=0, bucket_obj=bucket, pcap=tmp_path / "kv.pcap", **options
    ) as server:
        yield server


def _tls(tmp_path: Path) -> dict[str, Any]:
    return {"tls": True, "tls_port": 0, "https_port": 0, "tls_dir": tmp_path / "ca"}


def _ca_file(server: MockDcpServer, tmp_path: Path) -> Path:
    path = tmp_path / "cluster-ca.pem"
    path.write_bytes(server.ca_pem or b"")
    return path


def _env(client: str, ca: Path) -> dict[str, str]:
    """go-dcp's HTTP client trusts the system's CAs only (module docstring)."""
    return {"SSL_CERT_FILE": str(ca)} if client == "godcp" else {}


def _sasl_mechanisms(tmp_path: Path, port: int) -> set[bytes]:
    conns = read_capture(tmp_path / "kv.pcap", port)
    assert conns, "the client opened KV connections"
    return {f.key for c in conns for f in c.requests(Opcode.SASL_AUTH)}


@pytest.mark.parametrize("client", CLIENTS)
async def test_streams_over_tls_checking_the_node_certificate(
    client: str, tmp_path: Path, start_client: Callable[..., Any]
) -> None:
    async with _node(tmp_path, **_tls(tmp_path)) as server:
        load(server, 1000, "tls")
        ca = _ca_file(server, tmp_path)
        run = await start_client(
            client,
            server,
            "--tls-ca",
            str(ca),
            kv_port=server.tls_port,
            http_port=server.https_port,
            env=_env(client, ca),
        )
        await converge(run, server)
        await run.stop()
        tls_port = server.tls_port or 0
    assert _sasl_mechanisms(tmp_path, tls_port) == {TLS_MECHANISM[client]}
    assert read_capture(tmp_path / "kv.pcap", server.kv_port) == []  # the plain port: unused


@pytest.mark.parametrize("client", ["java", "gocbcore"])
async def test_a_client_trusting_another_ca_does_not_connect(
    client: str, tmp_path: Path, start_client: Callable[..., Any]
) -> None:
    other = tmp_path / "other-ca.pem"
    other.write_bytes(_certs.make_ca().cert_pem)
    timeout = (
        ["--connect-timeout-seconds", "5"] if client == "java" else ["--connect-timeout", "5s"]
    )
    async with _node(tmp_path, **_tls(tmp_path)) as server:
        load(server, 10, "never")
        run = await start_client(
            client,
            server,
            "--tls-ca",
            str(other),
            *timeout,
            kv_port=server.tls_port,
            http_port=server.https_port,
        )
        with trio.fail_after(60):
            await run.process.wait()
        assert run.process.stdin is not None
        await run.process.stdin.aclose()
        assert run.process.returncode == 1
        assert server.node.matching() == []
    assert seen_docs(run) == {}


def _client_files(client: str, ca_dir: Path, tmp_path: Path) -> list[str]:
    """The client certificate of Administrator, as each client's program takes it."""
    identity = _certs.issue_certificate(_certs.load_or_create_ca(ca_dir), "Administrator", [])
    if client == "java":
        key = serialization.load_pem_private_key(identity.key_pem, password=None)
        store = pkcs12.serialize_key_and_certificates(
            b"administrator",
            key,  # type: ignore[arg-type]
            identity.certificate,
            None,
            serialization.BestAvailableEncryption(b"changeit"),
        )
        path = tmp_path / "administrator.p12"
        path.write_bytes(store)
        return ["--client-keystore", str(path), "--client-keystore-password", "changeit"]
    cert, key_file = tmp_path / "administrator.pem", tmp_path / "administrator-key.pem"
    cert.write_bytes(identity.cert_pem)
    key_file.write_bytes(identity.key_pem)
    return ["--client-cert", str(cert), "--client-key", str(key_file)]


@pytest.mark.parametrize("client", ["java", "gocbcore"])
async def test_a_client_certificate_authenticates_without_sasl(
    client: str, tmp_path: Path, start_client: Callable[..., Any]
) -> None:
    options = _tls(tmp_path) | {"client_cert_auth": "mandatory"}
    files = _client_files(client, tmp_path / "ca", tmp_path)
    async with _node(tmp_path, **options) as server:
        load(server, 1000, "cert")
        ca = _ca_file(server, tmp_path)
        run = await start_client(
            client,
            server,
            "--tls-ca",
            str(ca),
            *files,
            kv_port=server.tls_port,
            http_port=server.https_port,
        )
        await converge(run, server)
        users = {conn.user for conn in server.node.matching()}
        await run.stop()
        tls_port = server.tls_port or 0
    assert users == {"Administrator"}
    conns = read_capture(tmp_path / "kv.pcap", tls_port)
    assert conns
    assert [f for c in conns for f in c.requests(Opcode.SASL_AUTH)] == []
    assert [f for c in conns for f in c.requests(Opcode.SASL_STEP)] == []


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
@pytest.mark.parametrize("client", CLIENTS)
async def test_a_client_seeded_on_mapped_ports_follows_the_external_address(
    client: str, tls: bool, tmp_path: Path, start_client: Callable[..., Any]
) -> None:
    kv, http = Forwarder(), Forwarder()
    await kv.listen()
    await http.listen()
    mapped: dict[str, Any] = {"external_host": "localhost"}
    if tls:
        mapped |= {"external_kv_tls_port": kv.port, "external_https_port": http.port}
        mapped |= _tls(tmp_path)
    else:
        mapped |= {"external_kv_port": kv.port, "external_http_port": http.port}
    async with _node(tmp_path, **mapped) as server, trio.open_nursery() as nursery:
        kv_target = (server.tls_port if tls else server.kv_port) or 0
        nursery.start_soon(kv.serve, kv_target)
        nursery.start_soon(http.serve, (server.https_port if tls else server.http_port) or 0)
        load(server, 1000, "mapped")
        extra: list[str] = []
        env: dict[str, str] = {}
        if tls:
            ca = _ca_file(server, tmp_path)
            extra, env = ["--tls-ca", str(ca)], _env(client, ca)
        run = await start_client(
            client, server, *extra, host="localhost", kv_port=kv.port, http_port=http.port, env=env
        )
        await converge(run, server)
        assert seen_docs(run) == oracle_docs(server)
        await run.stop()
        nursery.cancel_scope.cancel()
    conns = read_capture(tmp_path / "kv.pcap", kv_target)
    assert conns
    # every KV connection came through the mapping: none went to the node's own address
    assert {c.port for c in conns} <= kv.sources
