"""The bucket model of a data node: vbuckets, checkpoints, dedup, disk, purge, failover.

Pure: no I/O and no clock of its own (time comes from the injected clock).
"""

from __future__ import annotations

from mockdcp.model._bucket import Bucket as Bucket
from mockdcp.model._checkpoint import (
    Checkpoint as Checkpoint,
    Cursor as Cursor,
    MemoryBatch as MemoryBatch,
)
from mockdcp.model._failover import FailoverTable as FailoverTable, needs_rollback as needs_rollback
from mockdcp.model._flusher import (
    DEFAULT_FLUSH_INTERVAL as DEFAULT_FLUSH_INTERVAL,
    Flusher as Flusher,
)
from mockdcp.model._item import Item as Item, ItemKind as ItemKind, vbucket_of as vbucket_of
from mockdcp.model._vbucket import DiskSnapshot as DiskSnapshot, VBucket as VBucket
