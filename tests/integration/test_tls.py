from __future__ import annotations

import contextlib
import datetime
import json
import ssl
import stat
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from mockdcp import Server, ServerError
from mockdcp.client import DcpConsumer
from mockdcp.model import Bucket
from mockdcp.protocol import (
    DcpOpen,
    DcpOpenFlag,
    Frame,
    FrameReader,
    Hello,
    HelloFeature,
    Magic,
    SaslAuth,
    SaslListMechs,
    SelectBucket,
    Status,
)
from mockdcp.pytest_plugin import serve_options
from mockdcp.server import EXTERNAL_KEYWORDS, TLS_KEYWORDS, MockDcpServer, _certs, serve
from mockdcp.server._client_cert import CertPath, ClientCertRule, Mapped

from ._raw import wait_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytest_plugins = ["pytester"]

DOCS = 200
FEATURES = (HelloFeature.XERROR, HelloFeature.JSON, HelloFeature.SELECT_BUCKET)


@contextlib.asynccontextmanager
async def _tls_server(
    tmp_path: Path,
    **options: Any,  # noqa: ANN401 - serve()'s keywords
) -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 16, seed=4, clock=time.time)
    for i in range(DOCS):
        bucket.set(f"doc::{i}", json.dumps({"i": i}))
    tls: dict[str, Any] = {"tls": True, "tls_port": 0, "https_port": 0, "tls_dir": tmp_path / "ca"}
    async with serve(port=0, http_port=0, bucket_obj=bucket, **(tls | options)) as server:
        yield server


def _client_context(ca_pem: bytes, cert: _certs.Identity | None, tmp_path: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    if cert is not None:
        cert_file, key_file = tmp_path / "client.pem", tmp_path / "client-key.pem"
        cert_file.write_bytes(cert.cert_pem)
        key_file.write_bytes(cert.key_pem)
        context.load_cert_chain(cert_file, key_file)
    return context


class TlsClient:
    """A memcached-binary client over trio's own TLS stream (not mockdcp's)."""

    def __init__(self, stream: trio.SSLStream[trio.SocketStream]) -> None:
        self.stream = stream
        self.reader = FrameReader()
        self.opaque = 10

    @classmethod
    async def connect(
        cls, port: int, context: ssl.SSLContext, host: str = "127.0.0.1"
    ) -> TlsClient:
        tcp = await trio.open_tcp_stream("127.0.0.1", port)
        stream = trio.SSLStream(tcp, context, server_hostname=host)
        try:
            await stream.do_handshake()
        except BaseException:
            await tcp.aclose()
            raise
        return cls(stream)

    def next_opaque(self) -> int:
        self.opaque += 1
        return self.opaque

    async def call(self, message: Any) -> Frame:  # noqa: ANN401 - any request message
        await self.stream.send_all(message.encode())
        with trio.fail_after(5):
            while True:
                frame = self.reader.next_frame()
                if frame is not None:
                    if frame.magic is Magic.RESPONSE and frame.opaque == message.opaque:
                        return frame
                    continue
                data = await self.stream.receive_some(65536)
                if not data:
                    raise EOFError("server closed the connection")
                self.reader.feed(data)

    async def hello(self) -> Frame:
        return await self.call(Hello(opaque=self.next_opaque(), agent=b"tls", features=FEATURES))

    async def aclose(self) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.stream.aclose()


def _issue(ca_dir: Path, name: str, names: list[x509.GeneralName] | None = None) -> _certs.Identity:
    return _certs.issue_certificate(_certs.load_or_create_ca(ca_dir), name, names or [])


def _tls_connect(server: MockDcpServer, context: ssl.SSLContext) -> Any:  # noqa: ANN401
    async def connect() -> trio.abc.Stream:
        assert server.tls_port is not None
        tcp = await trio.open_tcp_stream("127.0.0.1", server.tls_port)
        stream = trio.SSLStream(tcp, context, server_hostname="localhost")
        await stream.do_handshake()
        return stream

    return connect


# -- the handshake and the certificate -------------------------------------------------------


async def test_tls_port_presents_a_node_certificate_signed_by_the_kept_ca(tmp_path: Path) -> None:
    options = {"external_host": "cb.example.com", "tls_names": ["mockdcp"]}
    async with _tls_server(tmp_path, **options) as server:
        assert server.ca_pem == (tmp_path / "ca" / "ca.pem").read_bytes()
        context = _client_context(server.ca_pem, None, tmp_path)
        for host in ("127.0.0.1", "localhost", "cb.example.com", "mockdcp"):
            client = await TlsClient.connect(server.tls_port or 0, context, host=host)
            assert (await client.hello()).status == Status.SUCCESS
            await client.aclose()
        der = client.stream.getpeercert(binary_form=True)
        assert der is not None
        sans = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        )
        assert {str(ip) for ip in sans.value.get_values_for_type(x509.IPAddress)} == {
            "127.0.0.1",
            "::1",
        }
        with pytest.raises(trio.BrokenResourceError):  # a name it is not for
            await TlsClient.connect(server.tls_port or 0, context, host="other.example.com")


async def test_a_server_trusting_no_mockdcp_ca_refuses_the_node_certificate(tmp_path: Path) -> None:
    async with _tls_server(tmp_path) as server:
        stranger = ssl.create_default_context(cadata=_certs.make_ca().cert_pem.decode())
        with pytest.raises(trio.BrokenResourceError) as refused:
            await TlsClient.connect(server.tls_port or 0, stranger)
        assert isinstance(refused.value.__cause__, ssl.SSLCertVerificationError)


async def test_the_ca_is_made_once_with_private_permissions_and_kept(tmp_path: Path) -> None:
    directory = tmp_path / "data" / "mockdcp"
    async with _tls_server(tmp_path, tls_dir=directory) as first:
        pem = first.ca_pem
    async with _tls_server(tmp_path, tls_dir=directory) as second:
        assert second.ca_pem == pem
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "ca-key.pem").stat().st_mode) == 0o600


def test_servers_starting_at_once_share_one_ca(tmp_path: Path) -> None:
    made: list[bytes] = []
    threads = [
        threading.Thread(
            target=lambda: made.append(_certs.load_or_create_ca(tmp_path / "ca").cert_pem)
        )
        for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 6
    assert len(set(made)) == 1


def test_default_tls_dir_follows_xdg_data_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOCKDCP_TLS_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", "/srv/data")
    assert str(_certs.default_tls_dir()) == "/srv/data/mockdcp"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", "/home/u")
    assert str(_certs.default_tls_dir()) == "/home/u/.local/share/mockdcp"
    monkeypatch.setenv("MOCKDCP_TLS_DIR", "/var/lib/mockdcp/tls")
    assert str(_certs.default_tls_dir()) == "/var/lib/mockdcp/tls"


# -- KV over TLS --------------------------------------------------------------------------------


async def test_the_reference_consumer_streams_every_document_over_tls(tmp_path: Path) -> None:
    async with _tls_server(tmp_path) as server:
        assert server.tls_connection_string == f"couchbases://127.0.0.1:{server.tls_port}"
        context = _client_context(server.ca_pem or b"", None, tmp_path)
        consumer = DcpConsumer(
            "127.0.0.1", 0, vbuckets=range(16), connect=_tls_connect(server, context)
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer.run)
            with trio.fail_after(20):
                await wait_until(lambda: consumer.state.items >= DOCS)
            nursery.cancel_scope.cancel()
        assert {key for _, key in consumer.state.documents()} == {
            f"doc::{i}".encode() for i in range(DOCS)
        }


async def test_plaintext_on_the_tls_port_is_closed_at_once(tmp_path: Path) -> None:
    async with _tls_server(tmp_path) as server:
        hello = Hello(opaque=1, agent=b"plain", features=FEATURES).encode()
        tcp = await trio.open_tcp_stream("127.0.0.1", server.tls_port or 0)
        await tcp.send_all(hello)
        started = trio.current_time()
        with trio.fail_after(3):
            while await tcp.receive_some(4096):  # nothing memcached: at most an alert
                pass
        assert trio.current_time() - started < 3
        await tcp.aclose()
        # the plain port is unaffected
        plain = await trio.open_tcp_stream("127.0.0.1", server.kv_port)
        await plain.send_all(hello)
        reader = FrameReader()
        with trio.fail_after(5):
            while (frame := reader.next_frame()) is None:
                reader.feed(await plain.receive_some(4096))
        assert frame.status == Status.SUCCESS
        await plain.aclose()


async def test_a_client_that_never_starts_the_handshake_is_closed_after_the_timeout(
    tmp_path: Path,
) -> None:
    async with _tls_server(tmp_path, tls_handshake_timeout=0.5) as server:
        tcp = await trio.open_tcp_stream("127.0.0.1", server.tls_port or 0)
        started = trio.current_time()
        with trio.fail_after(5):
            assert await tcp.receive_some(4096) == b""
        assert 0.4 < trio.current_time() - started < 3
        await tcp.aclose()


async def test_pcap_records_the_decrypted_bytes_of_tls_connections(tmp_path: Path) -> None:
    capture = tmp_path / "kv.pcap"
    async with _tls_server(tmp_path, pcap=capture) as server:
        client = await TlsClient.connect(
            server.tls_port or 0, _client_context(server.ca_pem or b"", None, tmp_path)
        )
        probe = Hello(opaque=client.next_opaque(), agent=b"pcap-probe-7f3a", features=FEATURES)
        assert (await client.call(probe)).status == Status.SUCCESS
        await client.aclose()
        tls_port = server.tls_port
    data = capture.read_bytes()
    assert b"pcap-probe-7f3a" in data  # the HELLO's agent, as sent before encryption
    assert tls_port is not None
    assert tls_port.to_bytes(2, "big") in data  # the flow is on the TLS port


# -- client certificates ----------------------------------------------------------------------


async def test_a_client_certificate_authenticates_without_sasl(tmp_path: Path) -> None:
    cert = _issue(tmp_path / "ca", "Administrator")
    async with _tls_server(tmp_path, client_cert_auth="enable") as server:
        context = _client_context(server.ca_pem or b"", cert, tmp_path)
        client = await TlsClient.connect(server.tls_port or 0, context)
        assert (await client.hello()).status == Status.SUCCESS
        selected = await client.call(SelectBucket(opaque=client.next_opaque(), bucket="default"))
        assert selected.status == Status.SUCCESS
        opened = await client.call(
            DcpOpen(opaque=client.next_opaque(), name=b"cert", flags=int(DcpOpenFlag.PRODUCER))
        )
        assert opened.status == Status.SUCCESS
        mechs = await client.call(SaslListMechs(opaque=client.next_opaque()))
        assert (mechs.status, mechs.value) == (Status.SUCCESS, b"")
        sasl = await client.call(
            SaslAuth(
                opaque=client.next_opaque(), mechanism="PLAIN", payload=b"\0Administrator\0password"
            )
        )
        assert sasl.status == Status.NOT_SUPPORTED
        (conn,) = server.node.matching()
        assert conn.user == "Administrator"
        assert "authenticated" in {e.kind for e in server.node.events}
        await client.aclose()


async def test_enable_lets_a_client_without_a_certificate_use_sasl(tmp_path: Path) -> None:
    async with _tls_server(tmp_path, client_cert_auth="enable") as server:
        client = await TlsClient.connect(
            server.tls_port or 0, _client_context(server.ca_pem or b"", None, tmp_path)
        )
        await client.hello()
        mechs = await client.call(SaslListMechs(opaque=client.next_opaque()))
        assert b"PLAIN" in mechs.value
        sasl = await client.call(
            SaslAuth(
                opaque=client.next_opaque(), mechanism="PLAIN", payload=b"\0Administrator\0password"
            )
        )
        assert sasl.status == Status.SUCCESS
        await client.aclose()


async def _hello(server: MockDcpServer, context: ssl.SSLContext) -> None:
    client = await TlsClient.connect(server.tls_port or 0, context)
    try:
        await client.hello()  # TLS 1.3: the server's verdict comes after the client's Finished
    finally:
        await client.aclose()


async def _refused_alert(server: MockDcpServer, context: ssl.SSLContext) -> str:
    """The alert the node refused the client with, as the client's TLS library reports it."""
    with pytest.raises(trio.BrokenResourceError) as refused:
        await _hello(server, context)
    cause = refused.value.__cause__
    assert isinstance(cause, ssl.SSLError)
    return str(cause.reason)


async def test_mandatory_refuses_a_client_without_a_certificate_with_certificate_required(
    tmp_path: Path,
) -> None:
    async with _tls_server(tmp_path, client_cert_auth="mandatory") as server:
        context = _client_context(server.ca_pem or b"", None, tmp_path)
        assert "CERTIFICATE_REQUIRED" in await _refused_alert(server, context)


async def test_a_certificate_from_another_ca_is_refused_with_unknown_ca(tmp_path: Path) -> None:
    stranger = _certs.issue_certificate(_certs.make_ca(), "Administrator", [])
    async with _tls_server(tmp_path, client_cert_auth="mandatory") as server:
        context = _client_context(server.ca_pem or b"", stranger, tmp_path)
        assert "UNKNOWN_CA" in await _refused_alert(server, context)


async def test_a_certificate_naming_no_user_is_disconnected(tmp_path: Path) -> None:
    cert = _issue(tmp_path / "ca", "mallory")
    async with _tls_server(tmp_path, client_cert_auth="mandatory") as server:
        context = _client_context(server.ca_pem or b"", cert, tmp_path)
        with pytest.raises((EOFError, trio.BrokenResourceError)):
            await _hello(server, context)
        assert server.node.matching() == []


async def test_the_user_comes_from_a_san_uri_with_prefix_and_delimiter(tmp_path: Path) -> None:
    uri = x509.UniformResourceIdentifier("couchbase://Administrator@cluster/default")
    other = x509.UniformResourceIdentifier("urn:li:test")
    cert = _issue(tmp_path / "ca", "not-a-user", [other, uri])
    options = {
        "client_cert_auth": "mandatory",
        "client_cert_path": "san.uri",
        "client_cert_prefix": "couchbase://",
        "client_cert_delimiter": "@",
    }
    async with _tls_server(tmp_path, **options) as server:
        client = await TlsClient.connect(
            server.tls_port or 0, _client_context(server.ca_pem or b"", cert, tmp_path)
        )
        await client.hello()
        (conn,) = server.node.matching()
        assert conn.user == "Administrator"
        await client.aclose()


@pytest.mark.parametrize(
    ("rule", "value", "user"),
    [
        (ClientCertRule(), "Administrator", "Administrator"),
        (ClientCertRule(prefix="cb-"), "cb-Administrator", "Administrator"),
        (ClientCertRule(prefix="cb-"), "Administrator", ""),
        (ClientCertRule(delimiter="@."), "Administrator@example.com", "Administrator"),
        (ClientCertRule(delimiter=".@"), "admin.x@y", "admin"),
        (ClientCertRule(prefix="couchbase://", delimiter="@"), "couchbase://u@c/b", "u"),
    ],
)
def test_a_rule_cuts_the_user_name_as_kv_engine_matches_a_pattern(
    rule: ClientCertRule, value: str, user: str
) -> None:
    assert rule.user_name(value) == user


def test_a_rule_maps_emails_and_dns_names_and_reports_why_not() -> None:
    ca = _certs.make_ca()
    names = [x509.RFC822Name("Administrator@example.com"), x509.DNSName("svc.example.com")]
    cert = _certs.issue_certificate(ca, "cn-user", names).certificate
    users = {"Administrator", "svc", "cn-user"}
    by_email = ClientCertRule(path=CertPath.SAN_EMAIL, delimiter="@").map(cert, users)
    assert (by_email.status, by_email.user) == (Mapped.SUCCESS, "Administrator")
    by_dns = ClientCertRule(path=CertPath.SAN_DNSNAME, delimiter=".").map(cert, users)
    assert (by_dns.status, by_dns.user) == (Mapped.SUCCESS, "svc")
    assert ClientCertRule().map(cert, users).user == "cn-user"
    assert ClientCertRule().map(cert, {"x"}).status is Mapped.NO_MATCH
    bare = _certs.issue_certificate(ca, "x", []).certificate
    assert ClientCertRule(path=CertPath.SAN_URI).map(bare, {"x"}).status is Mapped.ERROR


# -- bad input: certificate files and options ----------------------------------------------------


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _expired(ca: _certs.Identity) -> _certs.Identity:
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    return _certs.issue_certificate(ca, "old", [], days=1, not_before=start)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("mismatch", "does not match the certificate"),
        ("expired", "expired on"),
        ("missing", "cannot read the TLS certificate"),
        ("not-pem", "holds no PEM certificate"),
        ("encrypted", "is encrypted"),
        ("other-ca", "is not signed by the CA"),
        ("not-self-signed", "is not self-signed"),
    ],
)
async def test_bad_certificate_files_fail_at_start_with_a_clear_error(
    tmp_path: Path, case: str, message: str
) -> None:
    ca = _certs.make_ca()
    node, other = _certs.issue_certificate(ca, "n", []), _certs.issue_certificate(ca, "m", [])
    cert, key = (
        _write(tmp_path / "n.pem", node.cert_pem),
        _write(tmp_path / "n-key.pem", node.key_pem),
    )
    ca_file: Path | None = _write(tmp_path / "ca.pem", ca.cert_pem)
    if case == "mismatch":
        key = _write(tmp_path / "m-key.pem", other.key_pem)
    elif case == "expired":
        old = _expired(ca)
        cert, key = (
            _write(tmp_path / "o.pem", old.cert_pem),
            _write(tmp_path / "o-key.pem", old.key_pem),
        )
    elif case == "missing":
        cert = tmp_path / "nothing.pem"
    elif case == "not-pem":
        cert = _write(tmp_path / "junk.pem", b"not a certificate\n")
    elif case == "encrypted":
        private = serialization.load_pem_private_key(node.key_pem, password=None)
        locked = private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
        key = _write(tmp_path / "locked-key.pem", locked)
    elif case == "other-ca":
        ca_file = _write(tmp_path / "other-ca.pem", _certs.make_ca().cert_pem)
    elif case == "not-self-signed":
        ca_file = None
    with pytest.raises(ServerError, match=message):
        async with _tls_server(tmp_path, tls_cert=cert, tls_key=key, tls_ca=ca_file):
            pass


async def test_given_certificate_files_are_served(tmp_path: Path) -> None:
    ca = _certs.make_ca()
    node = _certs.issue_certificate(ca, "node", _certs.alt_names(["127.0.0.1"]))
    files = {
        "tls_cert": _write(tmp_path / "n.pem", node.cert_pem),
        "tls_key": _write(tmp_path / "n-key.pem", node.key_pem),
        "tls_ca": _write(tmp_path / "ca.pem", ca.cert_pem),
    }
    async with _tls_server(tmp_path, **files) as server:
        assert server.ca_pem == ca.cert_pem
        client = await TlsClient.connect(
            server.tls_port or 0, _client_context(ca.cert_pem, None, tmp_path)
        )
        assert (await client.hello()).status == Status.SUCCESS
        await client.aclose()
    assert not (tmp_path / "ca").exists()  # no CA made when files are given


def test_bad_certificate_files_on_the_command_line_print_one_line(tmp_path: Path) -> None:
    ca = _certs.make_ca()
    node = _certs.issue_certificate(ca, "n", [])
    cert = _write(tmp_path / "n.pem", node.cert_pem)
    key = _write(tmp_path / "k.pem", _certs.issue_certificate(ca, "m", []).key_pem)
    args = ["--port", "0", "--http-port", "0", "--docs", "0", "--tls", "--tls-port", "0"]
    args += ["--https-port", "0", "--tls-cert", str(cert), "--tls-key", str(key)]
    result = subprocess.run(
        [sys.executable, "-m", "mockdcp", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert (
        result.stderr.strip() == f"mockdcp: the TLS key {key} does not match the certificate {cert}"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tls": False, "tls_cert": "x.pem"}, "tls_cert needs TLS"),
        ({"tls": False, "client_cert_auth": "mandatory"}, "client_cert_auth needs TLS"),
        (
            {"tls": False, "external_host": "h", "external_kv_tls_port": 2},
            "external_kv_tls_port needs TLS",
        ),
        ({"external_kv_port": 2}, "needs external_host"),
        ({"tls": True, "client_cert_auth": "sometimes"}, "client_cert_auth must be one of"),
        ({"tls": True, "client_cert_path": "subject.o"}, "client_cert_path must be one of"),
        ({"tls": True, "tls_port": 70000}, "tls_port must be a port number"),
        ({"tls": True, "tls_cert": "x.pem"}, "go together"),
    ],
)
async def test_options_that_cannot_work_are_refused_before_listening(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ServerError, match=message):
        async with serve(port=0, http_port=0, vbuckets=4, **options):
            pass


async def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="tls_prot"):
        async with serve(port=0, http_port=0, vbuckets=4, tls_prot=1):  # type: ignore[call-arg]
            pass


def test_the_pytest_marker_takes_every_tls_and_external_keyword() -> None:
    assert serve_options() >= TLS_KEYWORDS | EXTERNAL_KEYWORDS


MARKED_TLS = """
import socket, ssl

import pytest


@pytest.mark.mockdcp(vbuckets=4, tls=True, tls_dir=TLS_DIR, client_cert_auth="enable")
def test_tls(mockdcp):
    assert mockdcp.tls_port not in (None, 11207)
    assert mockdcp.https_port not in (None, 18091)
    context = ssl.create_default_context(cadata=mockdcp.ca_pem.decode())
    with socket.create_connection(("127.0.0.1", mockdcp.tls_port)) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.version()
"""


def test_the_pytest_marker_serves_tls_on_free_ports(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(MARKED_TLS.replace("TLS_DIR", repr(str(tmp_path))))
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_server_in_a_thread_reports_its_tls_ports_and_ca(tmp_path: Path) -> None:
    options = {"tls": True, "tls_port": 0, "https_port": 0, "tls_dir": tmp_path}
    with Server(port=0, http_port=0, vbuckets=4, **options) as server:
        assert server.tls_port
        assert server.https_port
        assert server.ca_pem == (tmp_path / "ca.pem").read_bytes()
        assert server.tls_connection_string == f"couchbases://127.0.0.1:{server.tls_port}"
    with Server(port=0, http_port=0, vbuckets=4, tls=False) as plain:
        assert (plain.tls_port, plain.https_port, plain.ca_pem) == (None, None, None)


# -- the ca command ---------------------------------------------------------------------------


def test_ca_command_prints_the_kept_ca_and_issues_client_certificates(tmp_path: Path) -> None:
    def ca(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mockdcp", "ca", "--tls-dir", str(tmp_path / "ca"), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )

    printed = ca().stdout
    assert printed.encode() == (tmp_path / "ca" / "ca.pem").read_bytes()
    assert ca().stdout == printed  # made once
    ca("--client", "alice", "--out-dir", str(tmp_path / "out"))
    issued = x509.load_pem_x509_certificate((tmp_path / "out" / "alice.pem").read_bytes())
    issued.verify_directly_issued_by(x509.load_pem_x509_certificate(printed.encode()))
    assert issued.subject.rfc4514_string() == "CN=alice"
    assert stat.S_IMODE((tmp_path / "out" / "alice-key.pem").stat().st_mode) == 0o600


def test_serve_prints_the_tls_ports_and_the_ca_in_its_ready_line(tmp_path: Path) -> None:
    args = ["--port", "0", "--http-port", "0", "--docs", "0", "--json", "--tls"]
    args += ["--tls-port", "0", "--https-port", "0", "--tls-dir", str(tmp_path)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mockdcp", "serve", *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert ready["tls_port"] > 0
    assert ready["https_port"] > 0
    assert ready["tls_connection_string"] == f"couchbases://127.0.0.1:{ready['tls_port']}"
    assert ready["https"] == f"https://127.0.0.1:{ready['https_port']}"
    assert ready["ca_file"] == str(tmp_path / "ca.pem")
