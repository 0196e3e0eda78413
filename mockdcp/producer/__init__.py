"""Per-connection and per-stream producer state machines. Pure: no I/O, no clock."""

from __future__ import annotations

from mockdcp.producer._connection import Connection as Connection
from mockdcp.producer._connection import ConnectionStatistics as ConnectionStatistics
from mockdcp.producer._controls import DcpSettings as DcpSettings
from mockdcp.producer._controls import apply_control as apply_control
from mockdcp.producer._node import Node as Node
from mockdcp.producer._state import ConnectionState as ConnectionState
from mockdcp.producer._state import StreamState as StreamState
from mockdcp.producer._stream import Stream as Stream
from mockdcp.producer._stream import StreamStatistics as StreamStatistics
from mockdcp.producer._stream_request import StreamRequestDecision as StreamRequestDecision
from mockdcp.producer._stream_request import decide_stream_request as decide_stream_request
