"""What the reference consumer asks for when it connects, and what it may go without.

* ``hello_features``: the HELLO features it needs (XATTR, XERROR, SELECT_BUCKET, JSON;
  COLLECTIONS when collection-aware; DUPLEX and both forms of cluster map change
  notifications when it takes config pushes: kv_engine ``docs/BinaryProtocol.md``,
  "0x01 Clustermap Change Notification").
* ``control_pairs``: the DCP_CONTROLs after DCP_OPEN, in order: noops, the flow-control
  buffer, stream-ids when its filters carry them, the caller's, and for sync writes
  ``enable_sync_writes`` with ``consumer_name`` (kv_engine sends v2.0 markers, with the
  max visible seqno, only to a named consumer).
* ``optional_refusal``: a control a node may refuse without the bootstrap failing
  (``change_streams``, below).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mockdcp.protocol import HelloFeature

if TYPE_CHECKING:
    from collections.abc import Iterable

log = logging.getLogger("mockdcp.client")

#: DCP_CONTROLs a node may refuse without the bootstrap failing (``optional_refusal``)
OPTIONAL_CONTROLS = frozenset({"change_streams"})


def hello_features(*, collections: bool, clustermap_notification: bool) -> tuple[int, ...]:
    """The features HELLO asks for (module docstring)."""
    features = [
        HelloFeature.XATTR,
        HelloFeature.XERROR,
        HelloFeature.SELECT_BUCKET,
        HelloFeature.JSON,
    ]
    if collections:
        features.append(HelloFeature.COLLECTIONS)
    if clustermap_notification:
        features += [
            HelloFeature.DUPLEX,
            HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION,
            HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF,
        ]
    return tuple(features)


def with_change_streams(
    controls: Iterable[tuple[str, str]], change_streams: bool
) -> list[tuple[str, str]]:
    """The caller's ``controls``, with ``change_streams`` asked for when wanted and not
    already there: history snapshots where the node has them (``optional_refusal``)."""
    extra = list(controls)
    if change_streams and "change_streams" not in dict(extra):
        extra.append(("change_streams", "true"))
    return extra


def control_pairs(
    *,
    name: str,
    noop_interval: float,
    buffer_size: int,
    stream_ids: bool,
    extra: list[tuple[str, str]],
    sync_writes: bool,
) -> list[tuple[str, str]]:
    """The DCP_CONTROLs after DCP_OPEN as (key, value), in order (module docstring); a
    key of ``extra`` wins over the sync-write controls of the same key."""
    controls = [
        ("enable_noop", "true"),
        ("set_noop_interval", str(noop_interval)),
        ("connection_buffer_size", str(buffer_size)),
        *([("enable_stream_id", "true")] if stream_ids else []),
        *extra,
    ]
    if sync_writes:
        sync = [("enable_sync_writes", "true"), ("consumer_name", name)]
        controls += [c for c in sync if c[0] not in dict(extra)]
    return controls


def optional_refusal(key: str, status: int) -> bool:
    """A DCP_CONTROL ``key`` was refused with ``status``: True if the consumer goes on
    without it. ``change_streams`` is optional: a node before 7.2 does not know it
    (EINVAL: kv_engine ``DcpProducer::control`` at ``v7.0.0``) and a couchstore bucket
    cannot retain history (NOT_SUPPORTED), and either streams de-duplicated snapshots,
    which this consumer applies as well (java-dcp-client and the Kafka connector send it
    as an optional control; gocbcore fails the connection instead). Any other refused
    control stops the bootstrap."""
    if key not in OPTIONAL_CONTROLS:
        return False
    log.info("control %s refused (status %#x): streaming without it", key, status)
    return True
