"""How a node is reached: its TLS options and its alternate (external) address.

``serve(external_host=..., external_kv_port=..., ...)`` is the alternate address a
Couchbase node gets from ``couchbase-cli setting-alternate-address`` (what Testcontainers'
Couchbase module sets for a container whose ports are mapped): every cluster map the
node sends, over CCCP, HTTP, in NOT_MY_VBUCKET bodies and pushes, then carries
``alternateAddresses.external`` for it (``protocol/_cluster_config.py``), and clients
whose seed is that address use it. ``serve(tls=..., ...)`` are the TLS keywords
(``TlsArguments``, ``_tls.py``): TLS is served unless ``tls=False``, as a 7.x node
always serves and lists its TLS ports. Both are checked here, before anything listens;
the TLS material (``cryptography``) is loaded on first use (``_tls.TlsSetup``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import attrs

from mockdcp.protocol import EXTERNAL_NETWORK, AlternateAddress, NodeNetwork
from mockdcp.util import ServerError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.server._client_cert import CertPath, ClientCertAuth
    from mockdcp.server._tls import TlsOptions, TlsSetup


class TlsArguments(TypedDict, total=False):
    """The TLS keywords of ``serve`` (and ``Server``, the pytest marker): the options of
    ``mockdcp serve``'s TLS group, same names and defaults: ``tls`` is on unless False
    (``--no-tls``; True, ``--tls``: its material is made at start, not on first use);
    ``tls_port`` and ``https_port`` default to ``default_tls_ports``."""

    tls: bool | None
    tls_port: int | None
    https_port: int | None
    tls_dir: str | os.PathLike[str] | None
    tls_cert: str | os.PathLike[str] | None
    tls_key: str | os.PathLike[str] | None
    tls_ca: str | os.PathLike[str] | None
    tls_names: Sequence[str]
    client_cert_auth: str | ClientCertAuth
    client_cert_path: str | CertPath
    client_cert_prefix: str
    client_cert_delimiter: str
    tls_handshake_timeout: float


#: every TLS keyword (``TlsArguments``)
TLS_KEYWORDS = frozenset(TlsArguments.__optional_keys__)
#: the external-address keywords of ``serve``
EXTERNAL_KEYWORDS = frozenset(
    {
        "external_host",
        "external_kv_port",
        "external_http_port",
        "external_kv_tls_port",
        "external_https_port",
    }
)


def _port(name: str, value: int | None, lowest: int) -> int | None:
    if value is not None and not lowest <= value <= 65535:
        raise ServerError(f"{name} must be a port number ({lowest}..65535), not {value}")
    return value


def _checked_port(name: str, value: int) -> int:
    """A port to listen on (0 = a free one)."""
    _port(name, value, 0)
    return value


def _path(value: str | os.PathLike[str] | None) -> Path | None:
    return None if value is None else Path(os.fspath(value)).expanduser()


def default_tls_ports(kv_port: int, http_port: int, nodes: int = 1) -> tuple[int, int]:
    """A node's TLS ports beside its plain ones: KV over TLS 3 below the KV port (11207
    for 11210; after the plain ports for more than 3 nodes, whose KV ports are
    consecutive), HTTPS 10000 above the management port (18091 for 8091); a free port
    (0) where the plain one is 0."""
    tls = 0 if kv_port == 0 else kv_port - 3 if nodes <= 3 and kv_port > 3 else kv_port + nodes
    https = 0 if http_port == 0 or http_port + 10000 + nodes > 65535 else http_port + 10000
    return (tls if tls + nodes <= 65535 else 0), https


def _tls_options(arguments: TlsArguments, defaults: tuple[int, int]) -> TlsOptions:
    from mockdcp.server._client_cert import CertPath, ClientCertAuth, ClientCertRule
    from mockdcp.server._tls import DEFAULT_HANDSHAKE_TIMEOUT, TlsOptions

    try:
        mode = ClientCertAuth(arguments.get("client_cert_auth", ClientCertAuth.DISABLE))
    except ValueError:
        modes = ", ".join(m.value for m in ClientCertAuth)
        raise ServerError(f"client_cert_auth must be one of {modes}") from None
    try:
        path = CertPath(arguments.get("client_cert_path", CertPath.SUBJECT_CN))
    except ValueError:
        paths = ", ".join(p.value for p in CertPath)
        raise ServerError(f"client_cert_path must be one of {paths}") from None
    rule = ClientCertRule(
        path=path,
        prefix=arguments.get("client_cert_prefix", ""),
        delimiter=arguments.get("client_cert_delimiter", ""),
    )
    tls_port, https_port = arguments.get("tls_port"), arguments.get("https_port")
    return TlsOptions(
        port=_checked_port("tls_port", defaults[0] if tls_port is None else tls_port),
        https_port=_checked_port("https_port", defaults[1] if https_port is None else https_port),
        directory=_path(arguments.get("tls_dir")),
        cert_file=_path(arguments.get("tls_cert")),
        key_file=_path(arguments.get("tls_key")),
        ca_file=_path(arguments.get("tls_ca")),
        names=tuple(arguments.get("tls_names", ())),
        client_cert_auth=mode,
        client_cert_rule=rule,
        handshake_timeout=arguments.get("tls_handshake_timeout", DEFAULT_HANDSHAKE_TIMEOUT),
    )


def _tls_only(arguments: TlsArguments) -> list[str]:
    """The TLS keywords given that mean something only with TLS on."""
    names = [k for k in ("tls_dir", "tls_cert", "tls_key", "tls_ca") if arguments.get(k)]
    if arguments.get("tls_names"):
        names.append("tls_names")
    mode = arguments.get("client_cert_auth", "disable")
    if str(getattr(mode, "value", mode)) != "disable":
        names.append("client_cert_auth")
    return names


@attrs.frozen(kw_only=True)
class NetworkOptions:
    """The checked TLS and external-address options of one server."""

    bind_host: str
    external: AlternateAddress | None = None
    tls: TlsOptions | None = None
    #: TLS was asked for (``tls=True``, ``--tls``): its material is made at start, as
    #: before TLS was on by default; else on first use
    tls_asked: bool = False

    @classmethod
    def build(
        cls,
        host: str,
        *,
        external_host: str | None = None,
        external_kv_port: int | None = None,
        external_http_port: int | None = None,
        external_kv_tls_port: int | None = None,
        external_https_port: int | None = None,
        kv_port: int = 11210,
        http_port: int = 8091,
        nodes: int = 1,
        **tls: object,
    ) -> NetworkOptions:
        """Check ``serve``'s keywords (``kv_port``, ``http_port`` and ``nodes``: what the
        TLS ports default from). Raises ``TypeError`` for an unknown keyword,
        ``ServerError`` for a bad value or an option without the one it needs."""
        unknown = sorted(set(tls) - TLS_KEYWORDS)
        if unknown:
            raise TypeError(f"serve() got an unexpected keyword argument {unknown[0]!r}")
        arguments: TlsArguments = tls  # type: ignore[assignment]  # the keys were checked
        ports = {
            "external_kv_port": external_kv_port,
            "external_http_port": external_http_port,
            "external_kv_tls_port": external_kv_tls_port,
            "external_https_port": external_https_port,
        }
        for name, value in ports.items():
            _port(name, value, 1)
        given = [name for name, value in ports.items() if value is not None]
        if given and not external_host:
            raise ServerError(f"{given[0]} needs external_host (--external-host)")
        on = arguments.get("tls") is not False  # a node serves TLS always
        needing = _tls_only(arguments) + [k for k in ports if "tls" in k or "https" in k]
        needing = [k for k in needing if k in arguments or ports.get(k) is not None]
        if not on and needing:
            raise ServerError(f"{needing[0]} needs TLS (not tls=False, --no-tls)")
        external = None
        if external_host:
            external = AlternateAddress(
                hostname=external_host,
                kv=external_kv_port,
                mgmt=external_http_port,
                kv_ssl=external_kv_tls_port,
                mgmt_ssl=external_https_port,
            )
        defaults = default_tls_ports(kv_port, http_port, nodes)
        return cls(
            bind_host=host,
            external=external,
            tls=_tls_options(arguments, defaults) if on else None,
            tls_asked=arguments.get("tls") is True,
        )

    def prepare_tls(self) -> TlsSetup | None:
        """The TLS contexts and CA (None without TLS); the node certificate is valid for
        the bind address and the external host. Raises ``ServerError``."""
        if self.tls is None:
            return None
        from mockdcp.server._tls import prepare_tls

        hosts = [self.bind_host, *([self.external.hostname] if self.external else [])]
        return prepare_tls(self.tls, hosts, now=self.tls_asked)


def node_network(
    options: NetworkOptions, tls_port: int | None, https_port: int | None
) -> NodeNetwork:
    """What the node's cluster map advertises: its TLS ports, its external address."""
    alternate = {} if options.external is None else {EXTERNAL_NETWORK: options.external}
    return NodeNetwork(kv_ssl=tls_port, mgmt_ssl=https_port, alternate=alternate)
