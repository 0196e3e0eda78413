"""TLS on the node's ports: the options, the server contexts, and accepting a client.

A data node serves KV over TLS on 11207 and the management API over HTTPS on 18091,
beside the plain ports, with a node certificate its CA signed (``_certs.py``). With
client-certificate authentication on, it asks each client for a certificate, verifies it
against the CA, and a certificate that verifies authenticates the connection as the user
it maps to (``_client_cert.py``); a client without one, where one is mandatory, or with
one the CA did not sign, fails the handshake with the alert OpenSSL gives (kv_engine
``TlsConfiguration::createServerContext``: ``SSL_VERIFY_PEER``, plus
``SSL_VERIFY_FAIL_IF_NO_PEER_CERT`` when mandatory). TLS 1.2 is the oldest version
accepted, as a 7.x cluster's default ``tlsMinVersion``.

Accepting (``TlsSetup.accept``) runs the handshake within ``handshake_timeout`` seconds:
plaintext on a TLS port (a memcached request or an HTTP request) fails at once, a peer
that sends nothing is dropped when the time is up; either way the connection is closed
cleanly, never left hanging.

A node serves its TLS ports always (``--no-tls`` leaves them out); the material they
need (``cryptography``, the kept CA, a node certificate, the contexts) is made on first
use, in a worker thread: a server that no client reaches over TLS never loads it, and
``mockdcp serve`` is ready as fast without it (``TlsSetup.ready``). Certificate files
given (``--tls-cert``) are read at start, so a bad one fails there.
"""

from __future__ import annotations

import logging
import ssl
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from mockdcp.server._client_cert import ClientCertAuth, ClientCertRule, Mapped
from mockdcp.server._tls_stream import TlsHandshakeError, TlsStream
from mockdcp.util import ServerError

if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Sequence

    from mockdcp.server import _certs

log = logging.getLogger("mockdcp.server")

#: a node's TLS ports
DEFAULT_TLS_PORT = 11207
DEFAULT_HTTPS_PORT = 18091
#: seconds a client has to complete the TLS handshake
DEFAULT_HANDSHAKE_TIMEOUT = 10.0


@attrs.frozen(kw_only=True)
class TlsOptions:
    """What a server was asked for (``serve(tls=True, ...)``, ``mockdcp serve --tls``).

    ``directory``: where the CA is kept (None: ``_certs.default_tls_dir()``), unless
    ``cert_file`` and ``key_file`` (and ``ca_file``, the CA that signed them) are given.
    ``names``: more host names or addresses the node certificate is valid for.
    """

    port: int = DEFAULT_TLS_PORT
    https_port: int = DEFAULT_HTTPS_PORT
    directory: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    ca_file: Path | None = None
    names: tuple[str, ...] = ()
    client_cert_auth: ClientCertAuth = ClientCertAuth.DISABLE
    client_cert_rule: ClientCertRule = attrs.field(factory=ClientCertRule)
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT

    def __attrs_post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ServerError("a TLS certificate file and its key file go together")
        if self.ca_file is not None and self.cert_file is None:
            raise ServerError("a TLS CA file goes with the certificate and key it signed")
        if not self.handshake_timeout > 0:
            raise ServerError(
                f"the TLS handshake timeout must be > 0, not {self.handshake_timeout}"
            )


class TlsRefused(Exception):
    """A client was refused on a TLS port; ``stream`` is to be closed."""

    def __init__(self, reason: str, stream: TlsStream) -> None:
        super().__init__(reason)
        self.stream = stream


@attrs.frozen
class Accepted:
    """A client through the handshake: its stream and the user its certificate maps to
    (None without client-certificate authentication)."""

    stream: TlsStream
    user: str | None


@attrs.frozen
class _Material:
    """What TLS serves with (``prepare_material``)."""

    kv_context: ssl.SSLContext
    https_context: ssl.SSLContext
    ca_pem: bytes
    ca_file: Path | None


@attrs.define(kw_only=True, eq=False)
class TlsSetup:
    """The TLS of a running server (``prepare_tls``): its options, and its material made
    on first use (module docstring)."""

    options: TlsOptions
    #: the addresses the node certificate is for
    hosts: tuple[str, ...] = ()
    _material: _Material | None = None
    _making: trio.Event | None = None

    def material(self) -> _Material:
        """The contexts and the CA, made now if not yet (blocking: ``ready`` makes
        them off the event loop). Raises ``ServerError``."""
        if self._material is None:
            self._material = prepare_material(self.options, self.hosts)
        return self._material

    async def ready(self) -> _Material:
        """The material, made in a worker thread the first time."""
        if self._material is not None:
            return self._material
        if self._making is not None:
            await self._making.wait()
            return self.material()
        self._making = trio.Event()
        try:
            self._material = await trio.to_thread.run_sync(
                prepare_material, self.options, self.hosts
            )
        finally:
            self._making.set()
            self._making = None
        return self._material

    @property
    def kv_context(self) -> ssl.SSLContext:
        return self.material().kv_context

    @property
    def https_context(self) -> ssl.SSLContext:
        """The management port's context (ALPN ``http/1.1``)."""
        return self.material().https_context

    @property
    def ca_pem(self) -> bytes:
        """The CA clients trust (PEM), served at ``/mock/ca.pem``."""
        return self.material().ca_pem

    @property
    def ca_file(self) -> Path | None:
        """The file the CA is kept in (the generated CA's, or ``--tls-ca``); the
        generated CA's is named before it is made or read (on first use)."""
        if self._material is not None or self.options.cert_file is not None:
            return self.material().ca_file
        from mockdcp.server._tls_dir import CA_FILE, default_tls_dir

        return (self.options.directory or default_tls_dir()) / CA_FILE

    async def accept(
        self, transport: trio.SocketStream, users: Container[str], *, https: bool = False
    ) -> Accepted:
        """Run the handshake and map the client's certificate.

        Raises ``TlsRefused`` (the handshake failed or timed out, the peer sent
        plaintext, or its certificate maps to no user), or the transport's errors.
        """
        try:
            material = await self.ready()
        except ServerError as exc:  # the CA directory cannot be used: logged, closed
            log.error("TLS connection refused: %s", exc)
            await transport.aclose()
            raise OSError(f"no TLS material: {exc}") from exc
        context = material.https_context if https else material.kv_context
        stream = TlsStream(transport, context, server_side=True)
        timeout = self.options.handshake_timeout
        try:
            with trio.fail_after(timeout):
                await stream.do_handshake()
        except trio.TooSlowError:
            raise TlsRefused(f"no TLS handshake within {timeout:g}s", stream) from None
        except TlsHandshakeError as exc:
            raise TlsRefused(str(exc), stream) from exc
        return Accepted(stream, self._user(stream, users))

    def _user(self, stream: TlsStream, users: Container[str]) -> str | None:
        from cryptography import x509

        der = stream.getpeercert()
        if der is None or self.options.client_cert_auth is ClientCertAuth.DISABLE:
            return None
        mapped = self.options.client_cert_rule.map(x509.load_der_x509_certificate(der), users)
        if mapped.status is not Mapped.SUCCESS:  # kv_engine: the node disconnects
            raise TlsRefused(f"client certificate refused: {mapped.reason}", stream)
        return mapped.user


def server_context(
    identity: _certs.Identity,
    ca_pem: bytes,
    client_cert_auth: ClientCertAuth,
    alpn: Sequence[str] = (),
) -> ssl.SSLContext:
    """A server context with ``identity``, asking for client certificates as
    ``client_cert_auth`` says and verifying them against ``ca_pem``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_RENEGOTIATION
    context.num_tickets = 0  # no session resumption: nothing is sent after the handshake
    # load_cert_chain reads files only: the key lives in a private directory (0700) for
    # the moment it takes
    with tempfile.TemporaryDirectory(prefix="mockdcp-tls-") as private:
        cert, key = Path(private, "node.pem"), Path(private, "node-key.pem")
        cert.write_bytes(identity.cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(identity.key_pem)
        context.load_cert_chain(cert, key)
    if client_cert_auth is not ClientCertAuth.DISABLE:
        context.load_verify_locations(cadata=ca_pem.decode("ascii"))
        mandatory = client_cert_auth is ClientCertAuth.MANDATORY
        context.verify_mode = ssl.CERT_REQUIRED if mandatory else ssl.CERT_OPTIONAL
    if alpn:
        context.set_alpn_protocols(list(alpn))
    return context


def prepare_tls(options: TlsOptions, hosts: Iterable[str], *, now: bool = False) -> TlsSetup:
    """The TLS of a server with ``options``; the node certificate, when mockdcp makes
    it, is valid for ``hosts`` and ``options.names`` too. Certificate files given are
    read now (``ServerError`` for files that cannot serve, ``_certs.load_files``), and
    with ``now`` (TLS asked for) the generated CA's material is made now too; else on
    first use.
    """
    setup = TlsSetup(options=options, hosts=tuple(hosts))
    if now or options.cert_file is not None:
        setup.material()
    return setup


def prepare_material(options: TlsOptions, hosts: Iterable[str]) -> _Material:
    """The contexts and the CA for ``options``. Raises ``ServerError`` for certificate
    files that cannot serve or a CA directory that cannot be used."""
    from mockdcp.server import _certs

    if options.cert_file is not None and options.key_file is not None:
        identity, ca_pem = _certs.load_files(options.cert_file, options.key_file, options.ca_file)
        ca_file = options.ca_file or options.cert_file
    else:
        directory = options.directory or _certs.default_tls_dir()
        ca = _certs.load_or_create_ca(directory)
        identity = _certs.node_identity(ca, [*hosts, *options.names])
        ca_pem, ca_file = ca.cert_pem, directory / _certs.CA_FILE
    mode = options.client_cert_auth
    try:
        kv = server_context(identity, ca_pem, mode)
        https = server_context(identity, ca_pem, mode, alpn=["http/1.1"])
    except (ssl.SSLError, OSError) as exc:
        raise ServerError(f"cannot serve TLS with these certificates: {exc}") from exc
    return _Material(kv_context=kv, https_context=https, ca_pem=ca_pem, ca_file=ca_file)


def client_context(ca_pem: bytes | None = None) -> ssl.SSLContext:
    """A client context that trusts ``ca_pem`` (the bench's consumer, tests)."""
    context = ssl.create_default_context(cadata=None if ca_pem is None else ca_pem.decode())
    return context


def log_refusal(peer: str, port_kind: str, exc: TlsRefused) -> None:
    """One line for a client refused on a TLS port."""
    log.warning("%s connection from %s closed: %s", port_kind, peer, exc)
