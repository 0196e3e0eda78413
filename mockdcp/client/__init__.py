"""The reference DCP consumer (powers ``mockdcp tail``, the benchmark and convergence tests)."""

from __future__ import annotations

from mockdcp.client._consumer import ConsumerError as ConsumerError
from mockdcp.client._consumer import ConsumerState as ConsumerState
from mockdcp.client._consumer import DcpConsumer as DcpConsumer
from mockdcp.client._consumer import VbPosition as VbPosition
from mockdcp.client._consumer import Version as Version
