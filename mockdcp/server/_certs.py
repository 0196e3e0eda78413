"""The certificates of the TLS ports: a CA made once and kept for the user, the node
certificate it signs at every start, and certificate files the user gives, checked.

A Couchbase cluster serves 11207 and 18091 with a node certificate its CA signed; clients
trust that CA (java-dcp-client ``securityConfig.trustCertificate``, gocbcore
``TLSRootCAProvider``, go-dcp ``rootCAPath``). mockdcp does the same with a CA of its
own, made on first use in ``default_tls_dir()`` (``$XDG_DATA_HOME/mockdcp`` or
``~/.local/share/mockdcp``; ``--tls-dir``) and kept there, so a user trusts it once:
``ca.pem`` (the certificate, printed by ``mockdcp ca``) and ``ca-key.pem`` (its key,
mode 0600, in a directory of mode 0700). Servers started at once share it: the first
makes it under an exclusive lock on ``.lock`` in that directory, the others read it.

The node certificate is made afresh at each start (EC P-256, like the CA), valid for
``localhost``, ``127.0.0.1``, ``::1``, the bind address and the external host, for
server and client authentication. Client certificates for client-certificate
authentication are issued the same way (``issue_certificate``, ``mockdcp ca --client``).

Files given instead (``--tls-cert``, ``--tls-key``, ``--tls-ca``) are checked at start:
readable, PEM, the key matching the certificate, the certificate valid now and signed by
the CA. Each problem is a ``ServerError`` that names the file.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import ipaddress
import os
import secrets
from typing import TYPE_CHECKING

import attrs
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mockdcp.server._tls_dir import CA_FILE as CA_FILE, default_tls_dir as default_tls_dir
from mockdcp.util import ServerError

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path

    from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes

CA_KEY_FILE = "ca-key.pem"
#: days the CA is valid: it is trusted once and kept
CA_DAYS = 3650
#: days a node or client certificate is valid (a node's is made at every start)
LEAF_DAYS = 365
#: certificates start this long before now, for peers whose clock is behind (containers)
CLOCK_SKEW = datetime.timedelta(hours=1)


@attrs.frozen
class Identity:
    """A certificate and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def private_key(self) -> CertificateIssuerPrivateKeyTypes:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)  # only ours are signed with
        return key


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_ca(common_name: str | None = None) -> Identity:
    """A new self-signed CA (unique name: two machines' CAs never look alike)."""
    key = _new_key()
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mockdcp"),
            x509.NameAttribute(
                NameOID.COMMON_NAME, common_name or f"mockdcp CA {secrets.token_hex(4)}"
            ),
        ]
    )
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Identity(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def alt_names(
    hosts: Iterable[str] = (),
    *,
    emails: Iterable[str] = (),
    uris: Iterable[str] = (),
) -> list[x509.GeneralName]:
    """Subject alternative names: an IP address entry for each address among ``hosts``,
    a DNS name for the others; then e-mail addresses and URIs. Duplicates go."""
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(h for h in hosts if h):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    names += [x509.RFC822Name(e) for e in emails]
    names += [x509.UniformResourceIdentifier(u) for u in uris]
    return names


def issue_certificate(
    ca: Identity,
    common_name: str,
    names: list[x509.GeneralName],
    *,
    days: int = LEAF_DAYS,
    not_before: datetime.datetime | None = None,
) -> Identity:
    """A certificate for ``common_name`` with subject alternative ``names``, signed by
    ``ca``, good for TLS servers and clients."""
    key = _new_key()
    issuer = ca.certificate
    start = not_before or _now() - CLOCK_SKEW
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + CLOCK_SKEW + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    with contextlib.suppress(x509.ExtensionNotFound):  # every CA made here has one
        ski = issuer.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca.private_key(), hashes.SHA256())
    return Identity(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def node_identity(ca: Identity, hosts: Iterable[str]) -> Identity:
    """The node certificate of one start: valid for the loopback names and ``hosts``
    (the bind address when it is not a wildcard, the external host, extra names)."""
    wildcard = {"", "0.0.0.0", "::"}
    every = ["localhost", "127.0.0.1", "::1", *(h for h in hosts if h not in wildcard)]
    return issue_certificate(ca, "mockdcp node", alt_names(every))


# -- the kept CA --------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on ``directory/.lock`` (servers starting at once)."""
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _write_private(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a new ``path`` created with ``mode``, then move it in place."""
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(partial, path)


def load_or_create_ca(directory: Path) -> Identity:
    """The CA kept in ``directory``, made there first if there is none.

    Raises ``ServerError`` when the directory cannot be made or read, when it holds a
    certificate without its key (or the reverse), or when the CA there has expired.
    """
    cert_path, key_path = directory / CA_FILE, directory / CA_KEY_FILE
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _locked(directory):
            if not cert_path.exists() and not key_path.exists():
                ca = make_ca()
                _write_private(key_path, ca.key_pem, 0o600)
                _write_private(cert_path, ca.cert_pem, 0o644)
                return ca
            ca = Identity(cert_path.read_bytes(), key_path.read_bytes())
    except OSError as exc:
        raise ServerError(f"cannot keep the mockdcp CA in {directory}: {exc}") from exc
    cert = _certificate(ca.cert_pem, cert_path)
    _key(ca.key_pem, key_path)
    check_dates(cert, f"the mockdcp CA {cert_path} (delete {directory} to make a new one)")
    return ca


# -- files the user gives -----------------------------------------------------------------


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ServerError(f"cannot read the TLS {what} {path}: {exc.strerror or exc}") from exc


def _certificates(data: bytes, path: Path) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise ServerError(f"{path} holds no PEM certificate") from None
    return certs


def _certificate(data: bytes, path: Path) -> x509.Certificate:
    return _certificates(data, path)[0]


def _key(data: bytes, path: Path) -> object:
    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError:  # "Password was not given but private key is encrypted"
        raise ServerError(f"the TLS key {path} is encrypted: give it unencrypted") from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise ServerError(f"{path} holds no PEM private key mockdcp can read ({exc})") from None


def check_dates(cert: x509.Certificate, what: str, now: datetime.datetime | None = None) -> None:
    """Raise ``ServerError`` unless ``cert`` is valid at ``now``."""
    now = now or _now()
    if cert.not_valid_after_utc < now:
        raise ServerError(f"{what} expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC")
    if cert.not_valid_before_utc > now:
        start = cert.not_valid_before_utc
        raise ServerError(f"{what} is not valid before {start:%Y-%m-%d %H:%M} UTC")


def _public(key: object) -> bytes:
    public = key.public_key()  # type: ignore[attr-defined]
    data: bytes = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return data


def load_files(cert_file: Path, key_file: Path, ca_file: Path | None) -> tuple[Identity, bytes]:
    """The node identity in ``cert_file`` (PEM, the node certificate first, then any
    intermediates) and ``key_file``, and the PEM of the CA that signed it (``ca_file``;
    without one, the certificate must be self-signed and is its own CA).

    Raises ``ServerError`` naming the file: unreadable, not PEM, an encrypted key, a key
    that is not the certificate's, a certificate expired or not yet valid, or one the
    CA did not sign.
    """
    cert_pem, key_pem = _read(cert_file, "certificate"), _read(key_file, "key")
    cert = _certificate(cert_pem, cert_file)
    key = _key(key_pem, key_file)
    if _public(key) != _public(cert):
        raise ServerError(f"the TLS key {key_file} does not match the certificate {cert_file}")
    check_dates(cert, f"the TLS certificate {cert_file}")
    if ca_file is None:
        if cert.issuer != cert.subject:
            raise ServerError(
                f"the TLS certificate {cert_file} is not self-signed: give its CA (--tls-ca)"
            )
        return Identity(cert_pem, key_pem), cert_pem
    ca_pem = _read(ca_file, "CA")
    chain = _certificates(cert_pem, cert_file)
    cas = _certificates(ca_pem, ca_file)
    for ca in cas:
        check_dates(ca, f"the TLS CA {ca_file}")
    if not any(_issued_by(chain[-1], ca) for ca in cas):
        raise ServerError(f"the TLS certificate {cert_file} is not signed by the CA {ca_file}")
    return Identity(cert_pem, key_pem), ca_pem


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
