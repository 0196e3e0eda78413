"""Per-connection and per-stream producer state machines. Pure: no I/O, no clock.

A module a job: ``_node`` (the node: its connections), ``_connection_steps`` and
``_rejections`` (the steps that act on them), ``_connection`` (the byte pump of one
connection), ``_access`` (who it is, what its user may still do), ``_bucket_move``
(SELECT_BUCKET's move to another bucket's node), ``_dispatch`` (the one handler
table) and the handlers (``_session_handlers``, ``_lookup_handlers``, ``_dcp_handlers``,
``_document_handlers``), ``_replies`` (every answer), ``_scheduler`` (streams drained
under flow control and holds), ``_stream_request`` (the decision on a stream request),
``_stream`` (one stream: backfill, memory, end), ``_encoder`` and ``_filter`` (the shared
frames per connection and filter), ``_checker`` and ``_checker_rules`` (the protocol
checker on every DCP connection, and its rules), ``_topology`` (the cluster the nodes
make: the map they serve, its revision, the topology steps), ``_data_nodes`` (those
steps over every bucket), ``events`` (what the node reports).

``Node`` loads at once; the connection and stream machinery (and with it the message
classes) load on first use, so ``mockdcp serve`` listens before paying for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.producer._buckets import Buckets as Buckets
from mockdcp.producer._node import (
    RETIRED_COUNTERS as RETIRED_COUNTERS,
    Node as Node,
)
from mockdcp.producer._rejections import Rejection as Rejection
from mockdcp.producer._topology import (
    CLOSED_STATUSES as CLOSED_STATUSES,
    NodeStatus as NodeStatus,
    Topology as Topology,
)
from mockdcp.util import lazy_getattr

if TYPE_CHECKING:
    from mockdcp.producer._checker import (
        CheckerRegistry as CheckerRegistry,
        ConnectionChecker as ConnectionChecker,
        ProtocolChecker as ProtocolChecker,
    )
    from mockdcp.producer._checker_rules import (
        RULES as RULES,
        CheckerLimits as CheckerLimits,
        StreamHistory as StreamHistory,
        Violation as Violation,
    )
    from mockdcp.producer._connection import (
        Connection as Connection,
        ConnectionStatistics as ConnectionStatistics,
    )
    from mockdcp.producer._controls import (
        DcpSettings as DcpSettings,
        apply_control as apply_control,
    )
    from mockdcp.producer._data_nodes import DataNodes as DataNodes
    from mockdcp.producer._faults import (
        Corruption as Corruption,
    )
    from mockdcp.producer._output import (
        DEFAULT_OUTPUT_LIMIT as DEFAULT_OUTPUT_LIMIT,
    )
    from mockdcp.producer._state import (
        ConnectionState as ConnectionState,
        StreamState as StreamState,
    )
    from mockdcp.producer._stream import Stream as Stream, StreamStatistics as StreamStatistics
    from mockdcp.producer._stream_request import (
        StreamRequestDecision as StreamRequestDecision,
        decide_stream_request as decide_stream_request,
    )
    from mockdcp.producer.events import (
        ProducerEvent as ProducerEvent,
    )

_LAZY: dict[str, str] = {
    # the topology steps over every bucket (a scenario's, the control API's): on first use
    "DataNodes": "_data_nodes",
    "CheckerRegistry": "_checker",
    "ConnectionChecker": "_checker",
    "ProtocolChecker": "_checker",
    "RULES": "_checker_rules",
    "CheckerLimits": "_checker_rules",
    "StreamHistory": "_checker_rules",
    "Violation": "_checker_rules",
    "DEFAULT_OUTPUT_LIMIT": "_output",
    "Corruption": "_faults",
    "ProducerEvent": "events",
    "Connection": "_connection",
    "ConnectionStatistics": "_connection",
    "DcpSettings": "_controls",
    "apply_control": "_controls",
    "ConnectionState": "_state",
    "StreamState": "_state",
    "Stream": "_stream",
    "StreamStatistics": "_stream",
    "StreamRequestDecision": "_stream_request",
    "decide_stream_request": "_stream_request",
}


if not TYPE_CHECKING:
    # At run time only: the type checker sees the names imported above and nothing
    # else, so a misspelled import fails ``mypy --strict`` (tests/test_exports.py).
    __getattr__ = lazy_getattr(__name__, _LAZY, globals())


def preload() -> None:
    """Load the connection and stream machinery (and the message classes) now: the shell
    calls it once it is ready, so the first client does not pay for it."""
    from mockdcp.producer import _connection  # noqa: F401
