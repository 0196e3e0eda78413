"""The bucket: vbuckets, and the steps that change them.

Every step validates all of its arguments first and raises ``ModelError`` before changing
anything. Every change is published on ``feed`` as one ``Change`` record
(``mockdcp.model._changes``: the flusher, the cluster and the producer's streams are
told what changed). Deterministic: uuids come from ``random.Random(seed)``, CAS and
delete times from the injected ``clock`` (seconds since the epoch).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from mockdcp.model._bucket_collections import CollectionsSteps
from mockdcp.model._bucket_core import BucketCore, check_no_prepare
from mockdcp.model._bucket_durable import DurableWrites
from mockdcp.model._bucket_loads import BulkLoads
from mockdcp.model._bucket_storage import StorageSteps
from mockdcp.model._changes import Change, ChangeFeed
from mockdcp.model._clock import ServerTimers, VirtualClock
from mockdcp.model._ephemeral import (
    Ephemeral,
    MemoryUse,
    check_bucket_type,
)
from mockdcp.model._flusher import Flusher
from mockdcp.model._item import (
    Item,
    ItemKind,
)
from mockdcp.model._manifest import (
    CollectionsSpec,
    Manifest,
    declare,
)
from mockdcp.model._timers import ClockAdvanced, advance
from mockdcp.model._validate import (
    as_bytes,
    check_datatype,
    check_u32,
    check_value,
    guess_datatype,
    with_xattrs,
)
from mockdcp.model._vbucket import VBucket, collection_high_seqnos, high_seqnos
from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from mockdcp.model._oracle import Oracle

Clock = Callable[[], float]

MAX_VBUCKETS = 1024

#: the storage backends of a Couchbase bucket (``storageBackend`` in ns_server's bucket
#: config)
STORAGE_BACKENDS = ("couchstore", "magma")
#: history retained by default on a Magma bucket, in bytes for the whole bucket; an
#: assumption of the mock (ns_server ships 0, i.e. off, and most 7.6 Magma buckets
#: are given a retention): change streams work without configuration
DEFAULT_MAGMA_HISTORY_BYTES = 4 * 1024**3
#: kv_engine's default ``dcp_backfill_in_progress_per_connection_limit``
#: (``configuration.json``; ``KVStoreScanTracker::canCreateBackfill``, MB-57304)
BACKFILLS_PER_CONNECTION = 1


def check_backfill_limit(limit: object) -> int:
    """``limit`` as a bucket's ``backfills_per_connection`` (an int ≥ 1, kv_engine
    ``dcp_backfill_in_progress_per_connection_limit``); ``ModelError`` otherwise."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ModelError(f"backfills_per_connection is an integer ≥ 1, not {limit!r}")
    return limit


def _ephemeral_of(bucket_type: str, storage: str, ephemeral: Ephemeral | None) -> Ephemeral | None:
    """An ephemeral bucket's settings (default ``Ephemeral()``); None for a couchbase one,
    which takes none."""
    check_bucket_type(bucket_type, storage)
    if ephemeral is not None and bucket_type != "ephemeral":
        raise ModelError("eviction policy and memory quota settings are an ephemeral bucket's")
    return (ephemeral or Ephemeral()) if bucket_type == "ephemeral" else None


class Bucket(BulkLoads, DurableWrites, StorageSteps, CollectionsSteps, BucketCore):
    """A Couchbase bucket of ``num_vbuckets`` active vbuckets on one node: its parts
    (``_bucket_core``: the vbuckets and the change feed, with the CAS clock
    ``_bucket_cas``; ``_bucket_collections``, ``_bucket_storage``, ``_bucket_durable``,
    ``_bucket_loads``) and the document writes one at a time."""

    def __init__(
        self,
        name: str = "default",
        num_vbuckets: int = 1024,
        *,
        seed: int = 0,
        clock: Clock,
        checkpoint_max_items: int = 10_000,
        checkpoint_max_bytes: int = 10 * 1024 * 1024,
        max_failover_entries: int = 25,
        collections: CollectionsSpec | None = None,
        pause_collector: Callable[[], AbstractContextManager[object]] = nullcontext,
        storage: str = "couchstore",
        history_retention_bytes: int | None = None,
        history_retention_seconds: int | None = None,
        backfills_per_connection: int = BACKFILLS_PER_CONNECTION,
        bucket_type: str = "couchbase",
        ephemeral: Ephemeral | None = None,
        timers: ServerTimers | None = None,
    ) -> None:
        """``pause_collector`` holds the garbage collector off around a bulk write: the
        model changes no process-wide state itself, so the shell passes
        ``mockdcp.util.collector_paused`` (a load then runs about a third faster); by
        default nothing is paused.

        ``collections`` declares scopes and their collections, created (in order, one
        manifest change each) before anything else: ``{"inventory": ["hotel",
        "airline"]}``, or with a max TTL ``{"inventory": {"hotel": {"maxTTL": 60}}}`` /
        ``[{"name": "hotel", "maxTTL": 60}]``. Their creation events take the first
        seqnos of every vbucket, as on a real bucket whose collections were created
        before any client connected. Without it only ``_default._default`` exists and
        the vbuckets hold no system event. A collection's ``history`` (``{"name":
        "hotel", "history": true}``) defaults to true on a Magma bucket.

        ``storage`` is ``couchstore`` (the default) or ``magma``; only Magma retains
        history (kv_engine ``configuration.json`` ``history_retention_bytes`` /
        ``_seconds``, 0 = no limit of that kind; retention is on when either is
        above 0, ``KVBucket::isHistoryRetentionEnabled``). Magma defaults to
        ``DEFAULT_MAGMA_HISTORY_BYTES``; a retention on couchstore is a ``ModelError``.

        ``backfills_per_connection``: how many backfills one DCP connection reads at
        once, the others waiting their turn (kv_engine ``configuration.json``
        ``dcp_backfill_in_progress_per_connection_limit``, 1 by default since MB-57304;
        a larger value stages an older node, whose backfills of one connection
        interleave). It is read when a connection opens (``backfills_per_connection``
        may be changed between connections).

        ``clock`` is the wall clock (the shell's ``time.time``) or a ``VirtualClock``,
        which only ``advance_clock`` moves; ``timers``: the intervals of the node's
        timed tasks that run as it moves (``ServerTimers``, a node's defaults).

        ``bucket_type`` ``ephemeral`` makes an ephemeral bucket (``_ephemeral``): no
        disk, backfills read the sequence list, tombstones purged by age
        (``ephemeral_purge``), the ``ephemeral`` settings' eviction policy and memory
        quota (default ``Ephemeral()``: noEviction, no quota, a day's purge age); the
        persistence steps raise ``NoPersistence``."""
        self.bucket_type = bucket_type
        #: the ephemeral settings (None: a couchbase bucket)
        self.ephemeral = _ephemeral_of(bucket_type, storage, ephemeral)
        self._memory = MemoryUse()
        #: documents the nruEviction pager deleted (kv_engine ``auto_delete_count``)
        self.auto_deleted = 0
        retention = _check_retention(storage, history_retention_bytes, history_retention_seconds)
        self.backfills_per_connection = check_backfill_limit(backfills_per_connection)
        if not 1 <= num_vbuckets <= MAX_VBUCKETS:
            raise ModelError(f"a bucket has 1..{MAX_VBUCKETS} vbuckets, not {num_vbuckets}")
        if checkpoint_max_items < 1 or checkpoint_max_bytes < 1:
            raise ModelError("checkpoint limits must be positive")
        self.name = name
        self.num_vbuckets = num_vbuckets
        self.storage = storage
        self.history_retention_bytes, self.history_retention_seconds = retention
        self.rng = random.Random(seed)
        self.clock = clock
        #: the intervals of the expiry pager, compaction and the backfill idle limit
        self.timers = ServerTimers() if timers is None else timers
        self.pause_collector = pause_collector
        self._last_cas = 0
        #: every change of the bucket, published (``publish``) as one ``Change``
        self.feed = ChangeFeed()
        self._writes = tuple(Change((vbid,)) for vbid in range(num_vbuckets))
        self.vbuckets = self._new_vbuckets(
            max_failover_entries, checkpoint_max_items, checkpoint_max_bytes
        )
        #: the background persistence policy; off (interval None) until the server
        #: sets its interval and drives it (``mockdcp/server/_flusher.py``)
        self.flusher = Flusher(self)
        #: the bucket's collections manifest (``mockdcp.model._manifest``)
        self.manifest = Manifest()
        self.manifest.history_allowed = self.manifest.history_default = storage == "magma"
        for change in declare(self.manifest, collections or {}):
            self._apply_change(change)

    def _new_vbuckets(
        self, max_failover_entries: int, checkpoint_max_items: int, checkpoint_max_bytes: int
    ) -> list[VBucket]:
        """The bucket's vbuckets, active and empty; a couchbase bucket's fold persisted
        writes into the cold tier (``_compaction``)."""
        vbuckets = [
            VBucket(
                i,
                self.rng,
                max_failover_entries=max_failover_entries,
                checkpoint_max_items=checkpoint_max_items,
                checkpoint_max_bytes=checkpoint_max_bytes,
                retains_history=self.retains_history,
            )
            for i in range(self.num_vbuckets)
        ]
        for vb in vbuckets:
            vb.store.compacts = self.ephemeral is None
        return vbuckets

    @property
    def virtual_clock(self) -> VirtualClock | None:
        """The bucket's clock if it is virtual (moved by ``advance_clock``), else None."""
        return self.clock if isinstance(self.clock, VirtualClock) else None

    def advance_clock(self, to: float) -> ClockAdvanced:
        """Move the virtual clock to ``to`` (seconds since the epoch), running what a
        node does on its timers meanwhile (``mockdcp.model._timers``: the expiry pager,
        compaction purging old tombstones, Magma's history retention by seconds).
        ``ModelError`` on a wall-clock bucket or for a time before the clock's; nothing
        changes then."""
        clock = self.virtual_clock
        if clock is None:
            raise ModelError(
                f"bucket {self.name!r} runs on the wall clock: advance_clock needs a "
                "virtual clock (serve --clock virtual)"
            )
        if not to >= clock.now:
            raise ModelError(f"advance_clock cannot go back: the clock is at {clock!r}")
        return advance(self, clock, to)

    # -- lookups ---------------------------------------------------------------------

    def high_seqnos(self, state: int | None = None) -> list[tuple[int, int]]:
        """(vbucket, high seqno) for GET_ALL_VB_SEQNOS; ``state`` 0/None = every live one."""
        return high_seqnos(self.vbuckets, state)

    def collection_high_seqnos(
        self, collection_id: int, state: int | None = None
    ) -> list[tuple[int, int]]:
        """(vbucket, high seqno of the collection) for GET_ALL_VB_SEQNOS with a collection
        id: the seqno of its newest item or system event (0 if none in that vbucket);
        ``ModelError`` if the collection is not in the manifest."""
        self.manifest.check_collection(collection_id)
        return collection_high_seqnos(self.vbuckets, collection_id, state)

    def oracle(self) -> Oracle:
        """(collection, key) → newest live item: what a correct consumer must hold, with
        its rows (``Oracle.rows``, the shape of ``GET /mock/oracle`` and the pipeline).

        Documents of dropped collections are not there (a consumer that saw the drop
        forgets them), nor are system events."""
        live = self.manifest.collections
        out: dict[tuple[int, bytes], Item] = {}
        for vb in self.vbuckets:
            out.update(
                {key: item for key, item in vb.hash_table() if not item.deleted and key[0] in live}
            )
        names = {cid: self.manifest.name_of(cid) for cid in {cid for cid, _ in out}}
        from mockdcp.model._oracle import Oracle  # on first use

        return Oracle(out, names)

    # -- data steps ------------------------------------------------------------------

    def _write(self, vb: VBucket, item_fields: dict[str, object]) -> Item:
        item = vb.mutate(self._next_cas(), **item_fields)
        self.wrote(vb.vbid)
        return item

    def set(
        self,
        key: bytes | str,
        value: bytes | str,
        *,
        collection_id: int = 0,
        flags: int = 0,
        expiry: int = 0,
        datatype: int | None = None,
        vbucket: int | None = None,
        xattrs: Mapping[str, str | bytes] | Mapping[bytes, str | bytes] | None = None,
    ) -> Item:
        """Write a document (a mutation at the next seqno of its vbucket).

        ``value`` is stored as given: ``datatype`` says what it is (JSON, SNAPPY for a
        Snappy-compressed value, XATTR for a value that starts with an xattr section;
        guessed as JSON or raw when None). ``xattrs`` puts an xattr section in front of
        the value (inside the compression when the datatype has SNAPPY) and sets XATTR.
        Raises ``ModelError`` for a bad key, field or value, before writing anything.
        """
        k, vb = self._locate(key, vbucket, collection_id)
        check_no_prepare(vb, k, collection_id)
        v = as_bytes(value, "value")
        check_u32(flags=flags, expiry=expiry)
        if datatype is not None:
            check_datatype(datatype)
            check_value(v, datatype)
        dt = guess_datatype(v) if datatype is None else datatype
        if xattrs is not None:
            v, dt = with_xattrs(v, dt, xattrs)
        self._check_room(k, v)
        return self._write(
            vb,
            {
                "key": k,
                "collection_id": collection_id,
                "flags": flags,
                "expiry": expiry,
                "datatype": dt,
                "value": v,
            },
        )

    def _live(
        self, key: bytes | str, collection_id: int, vbucket: int | None
    ) -> tuple[Item, VBucket]:
        k, vb = self._locate(key, vbucket, collection_id)
        check_no_prepare(vb, k, collection_id)
        return vb.live(k, collection_id), vb

    def delete(
        self, key: bytes | str, *, collection_id: int = 0, vbucket: int | None = None
    ) -> Item:
        """Delete a live document: a tombstone at the next seqno."""
        old, vb = self._live(key, collection_id, vbucket)
        return self._write(
            vb,
            {
                "key": old.key,
                "collection_id": collection_id,
                "kind": ItemKind.DELETION,
                "delete_time": int(self.clock()),
            },
        )

    def expire(
        self, key: bytes | str, *, collection_id: int = 0, vbucket: int | None = None
    ) -> Item:
        """Expire a live document now (as the expiry pager does): an EXPIRATION tombstone
        whose delete time is the document's expiry, or now if it had none."""
        old, vb = self._live(key, collection_id, vbucket)
        when = old.expiry or int(self.clock())
        return self._write(
            vb,
            {
                "key": old.key,
                "collection_id": collection_id,
                "kind": ItemKind.EXPIRATION,
                "delete_time": when,
            },
        )

    def expire_due(self, docs: Sequence[tuple[int, int, bytes]]) -> int:
        """The expiry pager's run (``mockdcp.model._timers``): each (vbucket, collection,
        key) expired as ``expire`` expires it, in the order given, the streams of each
        vbucket told once after. A document no longer live, or with a durable write
        pending, or in a vbucket that takes no writes, is left; returns how many
        expired."""
        done: set[int] = set()
        expired = 0
        for vbid, cid, key in docs:
            vb = self.vbuckets[vbid]
            old = vb.get(key, cid)
            if old is None or old.deleted or (vb.pending and (cid, key) in vb.pending):
                continue
            if vb.state is not VBucketState.ACTIVE or not vb.online:
                continue
            vb.mutate(
                self._next_cas(),
                key=key,
                collection_id=cid,
                kind=ItemKind.EXPIRATION,
                delete_time=old.expiry or int(self.clock()),
            )
            done.add(vbid)
            expired += 1
        self.touched(sorted(done))
        return expired

    def touch(
        self, key: bytes | str, expiry: int, *, collection_id: int = 0, vbucket: int | None = None
    ) -> Item:
        """Give a live document a new expiry: a mutation with the same value."""
        old, vb = self._live(key, collection_id, vbucket)
        check_u32(expiry=expiry)
        self._check_room(old.key, old.value)
        return self._write(
            vb,
            {
                "key": old.key,
                "collection_id": collection_id,
                "flags": old.flags,
                "expiry": expiry,
                "datatype": old.datatype,
                "value": old.value,
            },
        )


def _check_retention(storage: str, max_bytes: int | None, seconds: int | None) -> tuple[int, int]:
    """(bytes, seconds) of history retention for ``storage``; ``ModelError`` for an
    unknown backend, a negative limit, or a retention on couchstore."""
    if storage not in STORAGE_BACKENDS:
        raise ModelError(f"storage is one of {', '.join(STORAGE_BACKENDS)}, not {storage!r}")
    for what, value in (("bytes", max_bytes), ("seconds", seconds)):
        if value is not None and (not isinstance(value, int) or value < 0):
            raise ModelError(f"history retention {what} is a count >= 0, not {value!r}")
    if storage == "couchstore":
        if max_bytes or seconds:
            raise ModelError("history retention needs a magma bucket")
        return 0, 0
    if max_bytes is None and seconds is None:
        return DEFAULT_MAGMA_HISTORY_BYTES, 0
    return max_bytes or 0, seconds or 0
