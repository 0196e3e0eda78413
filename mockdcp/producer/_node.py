"""What every connection of one mock data node shares: the bucket, users, the topology.

Pure (no I/O): the trio shell owns a ``Node`` and gives each connection a reference.
``wake`` is set by the shell; the node calls it for a connection that must be looked at
again from outside its own I/O (another producer took its name, a step ended its streams).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import attrs

from mockdcp.protocol._cluster_config import SERVER_VERSION, cluster_config, encode_config

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from mockdcp.model import Bucket
    from mockdcp.producer._connection import Connection

#: producer.md §7: a noop-enabled connection silent this long is disconnected.
DEFAULT_IDLE_TIMEOUT = 360.0

#: the ``ConnectionStatistics`` counters a closed connection leaves in ``Node.retired``
RETIRED_COUNTERS = (
    "bytes_received",
    "bytes_sent",
    "acked_bytes",
    "noops_sent",
    "noops_answered",
    "messages_sent",
    "acks",
)


@attrs.define(kw_only=True)
class Node:
    """One data node serving one bucket."""

    bucket: Bucket
    users: Mapping[str, str]
    host: str = "127.0.0.1"
    kv_port: int = 11210
    http_port: int = 8091
    version: str = SERVER_VERSION
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    config_rev: int = 1
    config_epoch: int = 1
    bucket_uuid: str = ""
    producers: dict[bytes, Connection] = attrs.field(factory=dict)
    connections: set[Connection] = attrs.field(factory=set)
    wake: Callable[[Connection], None] = lambda conn: None
    #: events of every connection so far, by kind ("rollback", "stream_opened"...)
    counters: Counter[str] = attrs.field(factory=Counter)
    #: the final counters of closed connections ("bytes_sent"...; "connections": how many)
    retired: Counter[str] = attrs.field(factory=Counter)

    def __attrs_post_init__(self) -> None:
        if not self.bucket_uuid:
            self.bucket_uuid = f"{self.bucket.rng.getrandbits(128):032x}"
        self.bucket.listeners.append(self._on_vbucket_change)

    def _on_vbucket_change(self, vbid: int) -> None:
        for conn in list(self.connections):
            if conn.on_vbucket_change(vbid):
                self.wake(conn)

    def config(self, host: str | None = None) -> dict[str, object]:
        """The current cluster config; ``host`` as the client addressed us."""
        return cluster_config(
            bucket=self.bucket.name,
            bucket_uuid=self.bucket_uuid,
            host=host or self.host,
            kv_port=self.kv_port,
            http_port=self.http_port,
            num_vbuckets=self.bucket.num_vbuckets,
            rev=self.config_rev,
            rev_epoch=self.config_epoch,
        )

    def config_bytes(self, host: str | None = None) -> bytes:
        return encode_config(self.config(host))

    def claim_producer_name(self, name: bytes, conn: Connection) -> None:
        """producer.md §1.3: a new producer with a live name disconnects the old one."""
        old = self.producers.get(name)
        if old is not None and old is not conn and not old.closed:
            old.close("replaced by a new producer connection with the same name")
            self.wake(old)
        self.producers[name] = conn

    def forget(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            stats = attrs.asdict(conn.statistics())
            self.retired.update({k: stats[k] for k in RETIRED_COUNTERS})
            self.retired["connections"] += 1
        for name, c in list(self.producers.items()):
            if c is conn:
                del self.producers[name]

    def close_all(self, reason: str) -> None:
        """Drop every connection (a node restart)."""
        for conn in list(self.connections):
            conn.close(reason)
            self.wake(conn)
