"""The reference DCP consumer (powers ``mockdcp tail``, the benchmark and convergence tests)."""

from __future__ import annotations

from mockdcp.client._consumer import (
    CallbackError as CallbackError,
    ConsumerError as ConsumerError,
    ConsumerState as ConsumerState,
    DcpConsumer as DcpConsumer,
    VbPosition as VbPosition,
    Version as Version,
)
