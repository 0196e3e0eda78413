"""The cluster-config ("terse bucket config") JSON that clients bootstrap from.

Served by GET_CLUSTER_CONFIG (CCCP), in NOT_MY_VBUCKET bodies, and over HTTP
(``/pools/default/b/{bucket}`` and the streaming ``/pools/default/bs/{bucket}``).
What each client reads is in its parser (couchbase-jvm-clients ``ClusterTopologyParser.java``
for java-dcp-client, gocbcore ``config.go``); the shape below is a minimal config that
all three clients accept:

* ``rev`` ≥ 1 and increasing on every topology change (Java ignores a config whose
  (revEpoch, rev) is not strictly newer);
* ``nodesExt[].hostname`` is the real address clients were given as seed: Java does not
  substitute ``$HOST`` there (``ClusterTopologyParser.java``). As a real node does,
  ``$HOST`` stands for the node's own address in ``nodes[]`` and ``serverList``, fields
  Java ignores and gocbcore rewrites with the host the config came from;
* ``nodes`` has one entry per KV node (gocbcore ignores nodesExt entries past it);
* ``bucketCapabilities`` lists ``collections`` because HELLO COLLECTIONS is granted.

A node with TLS lists ``kvSSL`` and ``mgmtSSL`` beside ``kv`` and ``mgmt`` in its
``services``; clients with TLS on take those (gocbcore ``endpointsFromPorts``,
java-dcp-client ``PortSelector.TLS``). ``alternateAddresses`` appears only when the node
has one (``mockdcp serve --external-host``), as ns_server writes it once
``couchbase-cli setting-alternate-address`` set one: ``{"external": {"hostname": H,
"ports": {...}}}``. A client picks the "external" network when its seed is not one of
the default network's addresses: java-dcp-client's ``NetworkSelector`` (AUTO) takes the
network whose host and port match a seed, gocbcore's ``buildFirstRouteConfig`` takes
"default" when a seed matches a default KV or management endpoint and "external"
otherwise (with HTTP seeds its comparison never matches, so go-dcp always takes
"external" when there is one).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

from mockdcp.protocol._versions import DEFAULT_PROFILE, ServerProfile

if TYPE_CHECKING:
    from collections.abc import Mapping

#: What VERSION and ``/pools`` answer by default: the newest profile's (clients parse
#: X.Y.Z); ``mockdcp.protocol._versions`` has the others.
SERVER_VERSION = DEFAULT_PROFILE.version


#: the network name clients select for addresses outside the cluster's own network
EXTERNAL_NETWORK = "external"


@attrs.frozen(kw_only=True)
class ServicePorts:
    """The ports of a node's services as ``nodesExt[].services`` names them; the TLS ones
    only when the node listens with TLS."""

    kv: int
    mgmt: int
    kv_ssl: int | None = None
    mgmt_ssl: int | None = None

    def as_json(self) -> dict[str, int]:
        """``{"kv": .., "mgmt": .., "kvSSL": .., "mgmtSSL": ..}`` without the absent ones."""
        names = {"kv": self.kv, "mgmt": self.mgmt, "kvSSL": self.kv_ssl, "mgmtSSL": self.mgmt_ssl}
        return {name: port for name, port in names.items() if port is not None}


@attrs.frozen(kw_only=True)
class AlternateAddress:
    """Where clients outside the node's network reach it (ns_server
    ``alternateAddresses.<network>``): a host, and the ports mapped to the node's own.

    A port left None is the node's own port: the entry always lists every service the
    node has, because gocbcore takes an alternate address's ``ports`` whole (a missing
    ``mgmt`` there leaves it without a management endpoint: an invalid route config).
    """

    hostname: str
    kv: int | None = None
    mgmt: int | None = None
    kv_ssl: int | None = None
    mgmt_ssl: int | None = None

    @property
    def maps_ports(self) -> bool:
        return any(p is not None for p in (self.kv, self.mgmt, self.kv_ssl, self.mgmt_ssl))

    def as_json(self, own: ServicePorts) -> dict[str, Any]:
        """The ``alternateAddresses`` entry of a node whose own ports are ``own``:
        ``ports`` only when some port is mapped."""
        entry: dict[str, Any] = {"hostname": self.hostname}
        if self.maps_ports:
            entry["ports"] = ServicePorts(
                kv=self.kv or own.kv,
                mgmt=self.mgmt or own.mgmt,
                kv_ssl=_mapped(self.kv_ssl, own.kv_ssl),
                mgmt_ssl=_mapped(self.mgmt_ssl, own.mgmt_ssl),
            ).as_json()
        return entry


def _mapped(external: int | None, own: int | None) -> int | None:
    """An external TLS port, or the node's own; none where the node has no TLS."""
    if own is None:
        return None
    return external if external is not None else own


@attrs.frozen(kw_only=True)
class NodeNetwork:
    """What a node advertises beyond its plain ports: its TLS ports and its alternate
    addresses by network name (``EXTERNAL_NETWORK``)."""

    kv_ssl: int | None = None
    mgmt_ssl: int | None = None
    alternate: Mapping[str, AlternateAddress] = attrs.field(factory=dict)


def node_ext(
    hostname: str, ports: ServicePorts, network: NodeNetwork, *, this_node: bool
) -> dict[str, Any]:
    """One ``nodesExt`` entry: hostname, services, and the alternate addresses."""
    entry: dict[str, Any] = {"hostname": hostname}
    if this_node:
        entry["thisNode"] = True
    entry["services"] = ports.as_json()
    if network.alternate:
        entry["alternateAddresses"] = {
            name: alt.as_json(ports) for name, alt in network.alternate.items()
        }
    return entry


#: capabilities only a bucket with a disk has (ns_server ``bucket_info_cache.erl``:
#: ``couchapi`` when it can have views, ``rangeScan`` when it is persistent)
PERSISTENT_ONLY = frozenset({"couchapi", "rangeScan"})
#: capabilities only a couchstore bucket has: views (ns_server ``ns_bucket.erl``
#: ``can_have_views``: ``storage_mode(BucketConfig) =:= couchstore``)
COUCHSTORE_ONLY = frozenset({"couchapi"})


def bucket_capabilities(
    profile: ServerProfile = DEFAULT_PROFILE,
    *,
    history: bool = False,
    ephemeral: bool = False,
    magma: bool = False,
) -> list[str]:
    """A bucket's ``bucketCapabilities`` on the ``profile``'s version (ns_server
    ``bucket_info_cache.erl`` ``build_bucket_capabilities``): ``nonDedupedHistory`` on
    Magma from 7.2; an ephemeral bucket has neither ``couchapi`` nor ``rangeScan``
    (clients read a missing ``couchapi`` as ephemeral, gocbcore ``cfgBucket``); a
    ``magma`` bucket has no ``couchapi`` (no views: ``ns_bucket.erl``
    ``can_have_views`` is true for couchstore only)."""
    caps = profile.bucket_capabilities(history=history)
    dropped = (PERSISTENT_ONLY if ephemeral else frozenset()) | (
        COUCHSTORE_ONLY if magma else frozenset()
    )
    return [c for c in caps if c not in dropped]


def cluster_config(
    *,
    bucket: str,
    bucket_uuid: str,
    host: str,
    kv_port: int,
    http_port: int,
    num_vbuckets: int,
    rev: int,
    rev_epoch: int = 1,
    vbucket_map: list[list[int]] | None = None,
    manifest_uid: int = 0,
    network: NodeNetwork | None = None,
    history: bool = False,
    ephemeral: bool = False,
    magma: bool = False,
    profile: ServerProfile = DEFAULT_PROFILE,
) -> dict[str, Any]:
    """The terse bucket config of a one-node cluster serving every vbucket; ``network``:
    its TLS ports and alternate addresses (none by default); ``history``: the bucket
    retains history (Magma), advertised as the ``nonDedupedHistory`` capability from 7.2;
    ``ephemeral``: an ephemeral bucket; ``magma``: a Magma bucket; ``profile``: the
    server version (``bucket_capabilities``)."""
    network = network or NodeNetwork()
    ports = ServicePorts(
        kv=kv_port, mgmt=http_port, kv_ssl=network.kv_ssl, mgmt_ssl=network.mgmt_ssl
    )
    vbmap = vbucket_map if vbucket_map is not None else [[0] for _ in range(num_vbuckets)]
    return {
        "rev": rev,
        "revEpoch": rev_epoch,
        "name": bucket,
        "uuid": bucket_uuid,
        "bucketType": "ephemeral" if ephemeral else "membase",
        "nodeLocator": "vbucket",
        "collectionsManifestUid": f"{manifest_uid:x}",
        "ddocs": {"uri": f"/pools/default/buckets/{bucket}/ddocs"},
        "nodes": [
            {
                "couchApiBase": f"http://$HOST:{http_port}/{bucket}",
                "hostname": f"$HOST:{http_port}",
                "ports": {"direct": kv_port},
            }
        ],
        "nodesExt": [node_ext(host, ports, network, this_node=True)],
        "vBucketServerMap": {
            "hashAlgorithm": "CRC",
            "numReplicas": 0,
            "serverList": [f"$HOST:{kv_port}"],
            "vBucketMap": vbmap,
        },
        "bucketCapabilitiesVer": "",
        "bucketCapabilities": bucket_capabilities(
            profile, history=history, ephemeral=ephemeral, magma=magma
        ),
        "clusterCapabilitiesVer": [1, 0],
        "clusterCapabilities": {"n1ql": ["enhancedPreparedStatements"]},
    }


def encode_config(config: dict[str, Any]) -> bytes:
    """Compact JSON bytes of a config."""
    return json.dumps(config, separators=(",", ":")).encode()


def manifest_uid_error_body(manifest_uid: int = 0) -> bytes:
    """The error body of UNKNOWN_COLLECTION / UNKNOWN_SCOPE: ``{"manifest_uid":"<hex>"}``
    (kv_engine ``Collections::Manager`` error context; SDKs read it)."""
    return json.dumps({"manifest_uid": f"{manifest_uid:x}"}).encode()
