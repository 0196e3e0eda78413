"""The reference DCP consumer (powers ``mockdcp tail``, the benchmark and convergence tests)."""

from __future__ import annotations

from mockdcp.client._consumer import (
    CallbackError as CallbackError,
    ConsumerError as ConsumerError,
    ConsumerState as ConsumerState,
    DcpConsumer as DcpConsumer,
    StreamRefused as StreamRefused,
    VbPosition as VbPosition,
    Version as Version,
)
from mockdcp.client._streams import (
    CollectionInfo as CollectionInfo,
    ManifestView as ManifestView,
    StreamFilter as StreamFilter,
)
