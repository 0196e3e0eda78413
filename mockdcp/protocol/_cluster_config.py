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
* no ``alternateAddresses`` (gocbcore would pick the "external" network);
* ``bucketCapabilities`` lists ``collections`` because HELLO COLLECTIONS is granted.
"""

from __future__ import annotations

import json
from typing import Any

#: What VERSION and ``/pools`` answer: a 7.x server (clients parse X.Y.Z).
SERVER_VERSION = "7.6.2-3721-enterprise"

BUCKET_CAPABILITIES = (
    "collections",
    "durableWrite",
    "tombstonedUserXAttrs",
    "couchapi",
    "subdoc.ReplaceBodyWithXattr",
    "subdoc.DocumentMacroSupport",
    "subdoc.ReviveDocument",
    "dcp.IgnorePurgedTombstones",
    "preserveExpiry",
    "querySystemCollection",
    "mobileSystemCollection",
    "rangeScan",
    "dcp",
    "cccp",
    "xattr",
    "nodesExt",
    "xdcrCheckpointing",
)


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
) -> dict[str, Any]:
    """The terse bucket config of a one-node cluster serving every vbucket."""
    vbmap = vbucket_map if vbucket_map is not None else [[0] for _ in range(num_vbuckets)]
    return {
        "rev": rev,
        "revEpoch": rev_epoch,
        "name": bucket,
        "uuid": bucket_uuid,
        "bucketType": "membase",
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
        "nodesExt": [
            {
                "hostname": host,
                "thisNode": True,
                "services": {"kv": kv_port, "mgmt": http_port},
            }
        ],
        "vBucketServerMap": {
            "hashAlgorithm": "CRC",
            "numReplicas": 0,
            "serverList": [f"$HOST:{kv_port}"],
            "vBucketMap": vbmap,
        },
        "bucketCapabilitiesVer": "",
        "bucketCapabilities": list(BUCKET_CAPABILITIES),
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
