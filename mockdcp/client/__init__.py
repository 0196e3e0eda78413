"""The reference DCP consumer (powers ``mockdcp tail``, the benchmark and convergence tests).

``ConsumerCore`` is its protocol without I/O (requests to send, frames received, the
actions that follow); ``DcpConsumer`` drives it on trio; ``ConsumerState`` is what it holds.
"""

from __future__ import annotations

from mockdcp.client._cluster import ClusterConsumer as ClusterConsumer
from mockdcp.client._consumer import DcpConsumer as DcpConsumer, EventCallback as EventCallback
from mockdcp.client._core import (
    Action as Action,
    ConsumerCore as ConsumerCore,
    Emit as Emit,
    Reopen as Reopen,
    Send as Send,
)
from mockdcp.client._output import (
    document_rows as document_rows,
    stream_progress as stream_progress,
    write_documents as write_documents,
    write_progress as write_progress,
)
from mockdcp.client._state import (
    AuthenticationFailed as AuthenticationFailed,
    CallbackError as CallbackError,
    ConsumerError as ConsumerError,
    ConsumerState as ConsumerState,
    StreamRefused as StreamRefused,
    VbPosition as VbPosition,
    Version as Version,
)
from mockdcp.client._streams import (
    CollectionInfo as CollectionInfo,
    ManifestView as ManifestView,
    StreamFilter as StreamFilter,
    StreamKey as StreamKey,
)
