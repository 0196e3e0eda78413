"""Client-certificate authentication: which user a TLS client certificate is.

What a data node does (kv_engine ``docs/ssl_client_cert.md``, ``daemon/client_cert_config.cc``,
``Connection::onTlsConnect``), configured as ns_server's ``client-cert-auth`` setting is:

* ``disable``: no certificate is asked for; clients authenticate with SASL.
* ``enable``: a certificate is asked for; a client may send none (it then uses SASL), but
  one it sends must verify against the CA.
* ``mandatory``: a client without a certificate (or with one that does not verify) fails
  the TLS handshake.

A certificate that verifies is mapped to a user by one rule: ``path`` names the field
(``subject.cn``, ``san.uri``, ``san.dnsname``, ``san.email``), ``prefix`` must start the
value and is cut off, and the value ends before the first of the ``delimiter``
characters. Among several SAN entries of the field, the first that yields an existing
user wins. A certificate that maps to no existing user, or lacks the field, is refused:
the node closes the connection. A connection authenticated by its certificate cannot
use SASL any more (SASL_AUTH answers NOT_SUPPORTED, SASL_LIST_MECHS lists nothing).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Container

    from cryptography import x509


class ClientCertAuth(enum.Enum):
    """ns_server's ``client-cert-auth`` state."""

    #: no certificate asked for
    DISABLE = "disable"
    #: asked for; optional, verified when sent
    ENABLE = "enable"
    #: required: no certificate, no handshake
    MANDATORY = "mandatory"


class CertPath(enum.Enum):
    """The certificate field a user name is read from (kv_engine ``createMapping``)."""

    SUBJECT_CN = "subject.cn"
    SAN_URI = "san.uri"
    SAN_DNSNAME = "san.dnsname"
    SAN_EMAIL = "san.email"


def _san_type(
    path: CertPath,
) -> type[x509.UniformResourceIdentifier | x509.DNSName | x509.RFC822Name]:
    """The SAN entry type of ``path`` (cryptography is loaded when a certificate is read,
    not when the server starts)."""
    from cryptography import x509

    types: dict[CertPath, type[x509.UniformResourceIdentifier | x509.DNSName | x509.RFC822Name]] = {
        CertPath.SAN_URI: x509.UniformResourceIdentifier,
        CertPath.SAN_DNSNAME: x509.DNSName,
        CertPath.SAN_EMAIL: x509.RFC822Name,
    }
    return types[path]


class Mapped(enum.Enum):
    """The outcome of a lookup (kv_engine ``cb::x509::Status``)."""

    SUCCESS = "success"
    #: no value matched the prefix, or the user does not exist
    NO_MATCH = "no match"
    #: the certificate lacks the field
    ERROR = "error"


@attrs.frozen
class CertUser:
    """What a certificate maps to: the user on SUCCESS, else why not."""

    status: Mapped
    user: str = ""
    reason: str = ""


@attrs.frozen(kw_only=True)
class ClientCertRule:
    """One mapping rule: ``path``, ``prefix``, ``delimiter`` (module docstring)."""

    path: CertPath = CertPath.SUBJECT_CN
    prefix: str = ""
    delimiter: str = ""

    def user_name(self, value: str) -> str:
        """The user name in one field value, or "" when the prefix does not start it
        (kv_engine ``Mapping::matchPattern``)."""
        if self.prefix:
            if not value.startswith(self.prefix):
                return ""
            value = value[len(self.prefix) :]
        if self.delimiter:
            cut = [i for i in (value.find(d) for d in self.delimiter) if i >= 0]
            if cut:
                value = value[: min(cut)]
        return value

    def map(self, cert: x509.Certificate, users: Container[str]) -> CertUser:
        """The user ``cert`` authenticates as, among ``users``."""
        from cryptography import x509

        if self.path is CertPath.SUBJECT_CN:
            return self._common_name(cert, users)
        try:
            sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return CertUser(Mapped.ERROR, reason="the certificate has no subject alternative name")
        for value in sans.get_values_for_type(_san_type(self.path)):
            name = self.user_name(str(value))
            if name and name in users:
                return CertUser(Mapped.SUCCESS, name)
        return CertUser(Mapped.NO_MATCH, reason=f"no {self.path.value} names a user")

    def _common_name(self, cert: x509.Certificate, users: Container[str]) -> CertUser:
        from cryptography.x509.oid import NameOID

        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        if not names:
            return CertUser(Mapped.ERROR, reason="the certificate has no common name")
        value = names[0].value
        name = self.user_name(value if isinstance(value, str) else value.decode())
        if not name:
            return CertUser(Mapped.NO_MATCH, reason="the common name does not match the prefix")
        if name not in users:
            return CertUser(Mapped.NO_MATCH, name, reason=f"no user {name!r}")
        return CertUser(Mapped.SUCCESS, name)
