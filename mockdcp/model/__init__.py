"""The bucket model of a data node: vbuckets, checkpoints, dedup, disk, purge, failover;
and of a cluster of them: the vbucket map, replica copies, rebalance and failover.

Pure: no I/O and no clock of its own (time comes from the injected clock). The cold
tier and the disk segments (numpy's arrays) load on first use (``__getattr__``):
serving an empty bucket, or a bucket written key by key, does not import numpy; the KV
document commands (``Documents``) load on a client's first one, the roles and their
privileges (``_rbac``) on the first look at a user, the oracle and the loaders when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model._bucket import (
    BACKFILLS_PER_CONNECTION as BACKFILLS_PER_CONNECTION,
    Bucket as Bucket,
)
from mockdcp.model._bucket_spec import (
    BucketSpec as BucketSpec,
    BucketType as BucketType,
    bucket_name_error as bucket_name_error,
)
from mockdcp.model._changes import (
    BranchCut as BranchCut,
    Change as Change,
    ChangeFeed as ChangeFeed,
)
from mockdcp.model._checkpoint import (
    Checkpoint as Checkpoint,
    Cursor as Cursor,
    MemoryBatch as MemoryBatch,
)
from mockdcp.model._clock import (
    METADATA_PURGE_AGE as METADATA_PURGE_AGE,
    ServerTimers as ServerTimers,
    VirtualClock as VirtualClock,
    iso_time as iso_time,
    make_clock as make_clock,
    parse_time as parse_time,
)
from mockdcp.model._cluster import (
    Cluster as Cluster,
    NodeView as NodeView,
)
from mockdcp.model._disk_store import DiskSnapshot as DiskSnapshot
from mockdcp.model._ephemeral import (
    BUCKET_TYPES as BUCKET_TYPES,
    DEFAULT_PURGE_AGE as DEFAULT_PURGE_AGE,
    EVICTION_POLICIES as EVICTION_POLICIES,
    Ephemeral as Ephemeral,
    MemoryFull as MemoryFull,
    NoPersistence as NoPersistence,
    ephemeral_settings as ephemeral_settings,
    public_persisted_seqno as public_persisted_seqno,
)
from mockdcp.model._failover import FailoverTable as FailoverTable, needs_rollback as needs_rollback
from mockdcp.model._flusher import (
    DEFAULT_FLUSH_INTERVAL as DEFAULT_FLUSH_INTERVAL,
    Flusher as Flusher,
)
from mockdcp.model._item import (
    DEFAULT_PREFIX as DEFAULT_PREFIX,
    DURABILITY_LEVELS as DURABILITY_LEVELS,
    SYSTEM_COLLECTION_ID as SYSTEM_COLLECTION_ID,
    TAG_COLLECTION as TAG_COLLECTION,
    TAG_DATATYPE as TAG_DATATYPE,
    TAG_DURABLE as TAG_DURABLE,
    TAG_EMPTY as TAG_EMPTY,
    TAG_SYSTEM as TAG_SYSTEM,
    TAG_TOMBSTONE as TAG_TOMBSTONE,
    CommittedItem as CommittedItem,
    DurableItem as DurableItem,
    Item as Item,
    ItemKind as ItemKind,
    SystemEventItem as SystemEventItem,
    any_durable as any_durable,
    any_outside_default as any_outside_default,
    any_system as any_system,
    vbucket_of as vbucket_of,
)
from mockdcp.model._manifest import (
    KEEP as KEEP,
    Manifest as Manifest,
    ManifestChange as ManifestChange,
)
from mockdcp.model._timers import (
    ClockAdvanced as ClockAdvanced,
    WallTimers as WallTimers,
    advance_buckets as advance_buckets,
)
from mockdcp.model._users import (
    Users as Users,
    as_users as as_users,
    check_password as check_password,
    check_user_name as check_user_name,
)
from mockdcp.model._validate import (
    check_value as check_value,
    vbucket_ids as vbucket_ids,
)
from mockdcp.model._vbmap import (
    MAX_REPLICAS as MAX_REPLICAS,
    VBucketMap as VBucketMap,
    VBucketMove as VBucketMove,
)
from mockdcp.model._vbucket import VBucket as VBucket
from mockdcp.util import lazy_getattr

if TYPE_CHECKING:
    from mockdcp.model._cold import (
        HEAD as HEAD,
        HEAD_DTYPE as HEAD_DTYPE,
        ColdSegment as ColdSegment,
        build_tags as build_tags,
        head_dtype as head_dtype,
    )
    from mockdcp.model._disk_segment import (
        DiskSegment as DiskSegment,
        crc32_keys as crc32_keys,
        on_disk_changes as on_disk_changes,
        stable_key_hash as stable_key_hash,
        stable_key_hashes as stable_key_hashes,
    )
    from mockdcp.model._documents import (
        Documents as Documents,
        KvError as KvError,
        Written as Written,
    )
    from mockdcp.model._loader import ColdLoad as ColdLoad
    from mockdcp.model._oracle import Oracle as Oracle, json_row as json_row
    from mockdcp.model._rbac import (
        ROLES as ROLES,
        Privilege as Privilege,
        Role as Role,
        UnknownRoles as UnknownRoles,
        User as User,
        UserChange as UserChange,
        parse_roles as parse_roles,
    )
else:
    _LAZY = {
        # the KV document commands (sub-document paths, the request classes): on a
        # client's first document command, not before the ready line
        "Documents": "_documents",
        "KvError": "_documents",
        "Written": "_documents",
        "HEAD": "_cold",
        "HEAD_DTYPE": "_cold",
        "ColdSegment": "_cold",
        "build_tags": "_cold",
        "head_dtype": "_cold",
        "DiskSegment": "_disk_segment",
        "crc32_keys": "_disk_segment",
        "on_disk_changes": "_disk_segment",
        "stable_key_hash": "_disk_segment",
        "stable_key_hashes": "_disk_segment",
        # a bulk load into the cold tier, the oracle: on first use
        "ColdLoad": "_loader",
        "Oracle": "_oracle",
        "json_row": "_oracle",
        # the roles and their privileges: on the first look at a user (``_users``)
        "ROLES": "_rbac",
        "Privilege": "_rbac",
        "Role": "_rbac",
        "UnknownRoles": "_rbac",
        "User": "_rbac",
        "UserChange": "_rbac",
        "parse_roles": "_rbac",
    }
    __getattr__ = lazy_getattr(__name__, _LAZY, globals())
