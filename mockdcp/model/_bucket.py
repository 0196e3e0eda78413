"""The bucket: vbuckets, and the steps that change them.

Every step validates all of its arguments first and raises ``ModelError`` before changing
anything. Every change is published on ``feed`` as one ``Change`` record
(``mockdcp.model._changes``: the flusher, the cluster and the producer's streams are
told what changed). Deterministic: uuids come from ``random.Random(seed)``, CAS and
delete times from the injected ``clock`` (seconds since the epoch).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext

import attrs

from mockdcp.model._changes import BranchCut, Change, ChangeFeed
from mockdcp.model._clock import ServerTimers, VirtualClock
from mockdcp.model._ephemeral import (
    Ephemeral,
    MemoryUse,
    check_bucket_type,
    check_room,
    estimate,
    eviction_victims,
    lose_everything,
    no_persistence,
    purge_by_age,
    sync_sequence_list,
)
from mockdcp.model._flusher import Flusher
from mockdcp.model._item import (
    DURABILITY_LEVELS,
    CommittedItem,
    DurableItem,
    Item,
    ItemKind,
    SystemEventItem,
    vbucket_of,
)
from mockdcp.model._loader import BulkLoad, ColdLoad
from mockdcp.model._manifest import (
    KEEP,
    CollectionsSpec,
    Keep,
    Manifest,
    ManifestChange,
    ManifestEvent,
    VBucketManifest,
    declare,
)
from mockdcp.model._oracle import Oracle
from mockdcp.model._timers import ClockAdvanced, advance
from mockdcp.model._validate import (
    as_bytes,
    check_columns,
    check_datatype,
    check_u32,
    check_value,
    guess_datatype,
    with_xattrs,
)
from mockdcp.model._vbucket import VBucket, collection_high_seqnos, high_seqnos
from mockdcp.protocol import VBucketState
from mockdcp.util import ModelError

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


class Bucket:
    """A Couchbase bucket of ``num_vbuckets`` active vbuckets on one node."""

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
        self.vbuckets = [
            VBucket(
                i,
                self.rng,
                max_failover_entries=max_failover_entries,
                checkpoint_max_items=checkpoint_max_items,
                checkpoint_max_bytes=checkpoint_max_bytes,
                retains_history=self.retains_history,
            )
            for i in range(num_vbuckets)
        ]
        #: the background persistence policy; off (interval None) until the server
        #: sets its interval and drives it (``mockdcp/server/_flusher.py``)
        self.flusher = Flusher(self)
        #: the bucket's collections manifest (``mockdcp.model._manifest``)
        self.manifest = Manifest()
        self.manifest.history_allowed = self.manifest.history_default = storage == "magma"
        for change in declare(self.manifest, collections or {}):
            self._apply_change(change)

    @property
    def retains_history(self) -> bool:
        """Magma with a retention (kv_engine ``KVBucket::isHistoryRetentionEnabled``):
        ``change_streams`` may be enabled."""
        return bool(self.history_retention_bytes or self.history_retention_seconds)

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

    def vbucket(self, vbid: int) -> VBucket:
        """The vbucket ``vbid``; ``ModelError`` if there is none."""
        if not isinstance(vbid, int) or not 0 <= vbid < self.num_vbuckets:
            raise ModelError(f"no vbucket {vbid!r} (the bucket has {self.num_vbuckets})")
        return self.vbuckets[vbid]

    def vbucket_of(self, key: bytes | str) -> int:
        return vbucket_of(as_bytes(key, "key"), self.num_vbuckets)

    def _targets(self, vbucket: int | None) -> list[VBucket]:
        return list(self.vbuckets) if vbucket is None else [self.vbucket(vbucket)]

    def publish(self, change: Change) -> None:
        """Hand ``change`` to the feed's subscribers: on an ephemeral bucket once the
        sequence lists hold its writes and the pager made room (``_ephemeral_settle``,
        whose deletions join the change)."""
        if change.reset:
            self._memory.forget(change.reset)
        if self.ephemeral is not None:
            change = self._ephemeral_settle(change)
        self.feed.publish(change)

    def touched(self, vbids: Iterable[int]) -> None:
        """Publish that the active copies of ``vbids`` changed (writes, a storage step
        that cuts nothing)."""
        self.publish(Change(tuple(vbids)))

    def branch_cut(self, vb: VBucket) -> BranchCut:
        """The branch ``vb``'s newest failover entry opened."""
        uuid, seqno = vb.failover.entries[0]
        return BranchCut(vb.vbid, uuid, seqno)

    # -- the ephemeral bucket (``_ephemeral``) -------------------------------------------

    def _ephemeral_settle(self, change: Change) -> Change:
        """The sequence lists of the vbuckets changed hold every write; with nruEviction
        above the high watermark, the pager's deletions are written (each a tombstone at
        the next seqno of its vbucket) and join the change."""
        settings = self.ephemeral
        assert settings is not None
        vbuckets = self.vbuckets
        for vbid in change.vbuckets:
            sync_sequence_list(vbuckets[vbid])
        if settings.memory_quota is None or settings.eviction_policy != "nruEviction":
            return change
        victims = eviction_victims(settings, vbuckets, self._memory.used(vbuckets))
        for item in victims:
            vb = vbuckets[item.vbucket]
            vb.mutate(
                self._next_cas(),
                key=item.key,
                collection_id=item.collection_id,
                kind=ItemKind.DELETION,
                delete_time=int(self.clock()),
            )
            sync_sequence_list(vb)
            self.auto_deleted += 1
        if not victims:
            return change
        vbids = tuple(sorted({*change.vbuckets, *(it.vbucket for it in victims)}))
        return attrs.evolve(change, vbuckets=vbids)

    def memory_used(self) -> int:
        """Bytes the items take (an ephemeral bucket's quota counts them)."""
        return self._memory.used(self.vbuckets)

    def _check_room(self, key: bytes, value: bytes) -> None:
        """``MemoryFull`` when an ephemeral noEviction bucket is full."""
        settings = self.ephemeral
        if settings is not None and settings.memory_quota is not None:
            check_room(settings, self.memory_used(), estimate(key, value))

    def _check_persistent(self, what: str) -> None:
        """``NoPersistence`` on an ephemeral bucket."""
        if self.ephemeral is not None:
            raise no_persistence(what, self.name)

    def ephemeral_purge(
        self, vbucket: int | None = None, *, age: int | None = None, now: float | None = None
    ) -> int:
        """The ephemeral purger's pass (``_ephemeral.purge_by_age``) at ``now`` (default:
        the bucket's clock): tombstones at least ``age`` seconds old (default: the
        bucket's purge age) leave the sequence list, the purge seqno rises; a stream
        whose backfill then starts at or below it ends with Rollback. Returns how many
        went. ``ModelError`` on a couchbase bucket (its tombstones go at compaction:
        ``purge``)."""
        if self.ephemeral is None:
            raise ModelError(
                f"ephemeral_purge: bucket {self.name!r} is not ephemeral (its tombstones"
                " are purged by compaction: purge)"
            )
        if age is not None and (not isinstance(age, int) or isinstance(age, bool) or age < 0):
            raise ModelError(f"ephemeral_purge age is seconds >= 0, not {age!r}")
        targets = self._targets(vbucket)
        when = self.clock() if now is None else now
        limit = self.ephemeral.purge_age if age is None else age
        n = sum(purge_by_age(vb, when, limit).count for vb in targets)
        self.touched(vb.vbid for vb in targets)
        return n

    def _next_cas(self) -> int:
        return self.reserve_cas(1)

    def reserve_cas(self, count: int) -> int:
        """The first of ``count`` consecutive CAS values, each above every CAS given
        before (a hybrid logical clock: nanoseconds with the low 16 bits clear)."""
        first = max(self._last_cas + 1, int(self.clock() * 1e9) & ~0xFFFF)
        if count:
            self._last_cas = first + count - 1
        return first

    @property
    def last_cas(self) -> int:
        """The highest CAS given (or reserved) so far."""
        return self._last_cas

    def give_back_cas(self, last: int) -> None:
        """CAS values reserved above ``last`` were not used (a bulk load stopped at a
        refused row): the next one given follows ``last`` (or the clock)."""
        self._last_cas = last

    def advance_cas(self, cas: int) -> None:
        """Every CAS given from now on is above ``cas`` (documents loaded with their own
        CAS values, as an on-disk corpus's)."""
        self._last_cas = max(self._last_cas, cas)

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
        return Oracle(out, names)

    # -- data steps ------------------------------------------------------------------

    def _locate(
        self, key: bytes | str, vbucket: int | None, collection_id: int = 0
    ) -> tuple[bytes, VBucket]:
        check_u32(collection_id=collection_id)
        self.manifest.check_collection(collection_id)
        k = as_bytes(key, "key")
        if not 1 <= len(k) <= 250:
            raise ModelError(f"a key has 1..250 bytes, not {len(k)}")
        vb = self.vbucket(vbucket_of(k, self.num_vbuckets) if vbucket is None else vbucket)
        vb.check_writable()
        return k, vb

    def _write(self, vb: VBucket, item_fields: dict[str, object]) -> Item:
        item = vb.mutate(self._next_cas(), **item_fields)
        self.publish(Change((vb.vbid,)))
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
        _check_no_prepare(vb, k, collection_id)
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

    def set_many(
        self,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        *,
        collection_ids: Sequence[int] | None = None,
        flags: Sequence[int] | int = 0,
        expiry: Sequence[int] | int = 0,
        datatypes: Sequence[int | None] | int | None = None,
    ) -> int:
        """Write many documents at once, as ``set`` would one after the other (the same
        items, seqnos, rev seqnos, de-duplication and frames; CAS from one reading of
        the clock for the whole batch, so equal to ``set``'s with a clock that does not
        move meanwhile). Returns how many were written.

        The whole batch is validated first: ``ModelError`` names the row and the field,
        and nothing is written. Streams are told once per vbucket, after the batch.
        """
        steps = self.set_many_steps(
            keys,
            values,
            collection_ids=collection_ids,
            flags=flags,
            expiry=expiry,
            datatypes=datatypes,
            rows_per_step=None,
        )
        # the collector off for the whole batch, its rows included (``_write_vbuckets``)
        with self.pause_collector():
            return sum(steps)

    def set_many_steps(
        self,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        *,
        collection_ids: Sequence[int] | None = None,
        flags: Sequence[int] | int = 0,
        expiry: Sequence[int] | int = 0,
        datatypes: Sequence[int | None] | int | None = None,
        rows_per_step: int | None = 1024,
    ) -> Iterator[int]:
        """``set_many`` in steps, for a caller that must not stop for long (an event
        loop loading a large bucket runs other work between two steps).

        The columns are checked now (``ModelError`` for a bad length or flag, as
        ``set_many``). The steps of the iterator returned then validate the rows,
        ``rows_per_step`` at a time (all of them when None), yielding 0 after each but
        the last (``ModelError`` naming the row and field: nothing is written), then
        write the rows of whole vbuckets, about ``rows_per_step`` rows a step (each
        vbucket's rows in batch order), tell their streams, and yield how many rows
        they wrote. The CAS values are reserved at the first step. A vbucket that
        stopped being active, or a collection dropped, meanwhile raises ``ModelError``
        at the step that would write it (the steps before stay written). Validating
        costs about 0.5 µs a row, writing 1.5 to 2 (fewer rows a vbucket, more: give
        large batches, tens of thousands of rows, for speed).
        """
        columns = check_columns(
            keys,
            values,
            collection_ids=collection_ids,
            flags=flags,
            expiry=expiry,
            datatypes=datatypes,
            check_collection=self.manifest.check_collection,
        )
        step = len(columns) if rows_per_step is None else rows_per_step
        settings = self.ephemeral
        if settings is not None and settings.memory_quota is not None:
            # the rows' sizes as given (a row of the wrong type is refused by name later)
            rows = zip(keys, values, strict=True)  # the columns' lengths were checked
            needed = sum(estimate(b"", b"") + _size(k) + _size(v) for k, v in rows)
            check_room(settings, self.memory_used(), needed)
        return BulkLoad(self, columns, step).steps()

    def cold_load(self) -> ColdLoad:
        """A bulk load into the cold tier (``mockdcp.model._cold``): batches given to
        ``ColdLoad.add`` (validated as ``set_many`` validates, framed, nothing visible
        yet), then ``ColdLoad.finish`` makes them every vbucket's persisted documents at
        once, as a node leaves a bulk load after warm-up: on disk, no checkpoint holding
        them, about 80 bytes of memory an item beside its key and value and no Python
        object per item. The documents get the seqnos, rev seqnos (a key loaded twice:
        one more the second time; the first version is replaced), CAS and frames
        ``set_many`` gives them; streams read them from disk.

        ``ModelError`` if a vbucket already holds a document (the cold tier is a bulk
        load into an empty bucket), and, at ``finish``, if one was written meanwhile;
        also on an ephemeral bucket with a memory quota, whose writes the quota counts
        one batch at a time (``set_many``: a full noEviction bucket refuses them)."""
        if self.ephemeral is not None and self.ephemeral.memory_quota is not None:
            raise ModelError(
                "an ephemeral bucket with a memory quota loads through set_many (its quota"
                " counts every write)"
            )
        return ColdLoad(self)

    def load_cold(
        self,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        *,
        collection_ids: Sequence[int] | None = None,
        flags: Sequence[int] | int = 0,
        expiry: Sequence[int] | int = 0,
        datatypes: Sequence[int | None] | int | None = None,
    ) -> int:
        """One batch through ``cold_load``; returns how many documents."""
        load = self.cold_load()
        load.add(
            keys,
            values,
            collection_ids=collection_ids,
            flags=flags,
            expiry=expiry,
            datatypes=datatypes,
        )
        return load.finish()

    def _live(
        self, key: bytes | str, collection_id: int, vbucket: int | None
    ) -> tuple[Item, VBucket]:
        k, vb = self._locate(key, vbucket, collection_id)
        _check_no_prepare(vb, k, collection_id)
        return vb.live(k, collection_id), vb

    # -- durable writes ----------------------------------------------------------------

    def sync_write(
        self,
        key: bytes | str,
        value: bytes | str = b"",
        *,
        collection_id: int = 0,
        level: str | int = "majority",
        outcome: str = "commit",
        deleted: bool = False,
        flags: int = 0,
        expiry: int = 0,
        datatype: int | None = None,
        vbucket: int | None = None,
    ) -> Item:
        """A durable write (kv_engine ``VBucket::set`` with a durability requirement):
        a prepare at the next seqno of the document's vbucket, then (``outcome``) its
        commit or abort at the seqno after, or (``pending``) nothing yet: ``commit``
        or ``abort`` completes it later. ``deleted`` prepares a deletion (of a live
        document). Returns the last item written. ``ModelError`` (nothing written) for
        a bad argument or a key whose prepare is still pending (a node answers
        SYNC_WRITE_IN_PROGRESS)."""
        levels = DURABILITY_LEVELS
        code = levels.get(level) if isinstance(level, str) else level
        if code is None or code not in levels.values():
            raise ModelError(f"durability level {level!r} is not one of {', '.join(levels)}")
        if outcome not in ("commit", "abort", "pending"):
            raise ModelError(f"outcome {outcome!r} is not commit, abort or pending")
        k, vb = self._locate(key, vbucket, collection_id)
        _check_no_prepare(vb, k, collection_id)
        if deleted:
            vb.live(k, collection_id)
        v = as_bytes(value, "value")
        check_u32(flags=flags, expiry=expiry)
        if datatype is not None:
            check_datatype(datatype)
            check_value(v, datatype)
        dt = guess_datatype(v) if datatype is None else datatype
        self._check_room(k, v)
        item: Item = vb.prepare(
            self._next_cas(),
            level=code,
            deleted=deleted,
            key=k,
            collection_id=collection_id,
            value=v,
            flags=flags,
            expiry=expiry,
            datatype=dt,
        )
        if outcome == "commit":
            item = vb.commit(k, collection_id)
        elif outcome == "abort":
            item = vb.abort(k, collection_id, self._next_cas())
        self.publish(Change((vb.vbid,)))
        return item

    def pending_prepare(
        self, key: bytes | str, *, collection_id: int = 0, vbucket: int | None = None
    ) -> DurableItem | None:
        """The document's prepare waiting for a commit or an abort, if any."""
        k = as_bytes(key, "key")
        vb = self.vbucket(vbucket_of(k, self.num_vbuckets) if vbucket is None else vbucket)
        return vb.pending.get((collection_id, k))

    def _pending(
        self, key: bytes | str, collection_id: int, vbucket: int | None, what: str
    ) -> tuple[bytes, VBucket]:
        k, vb = self._locate(key, vbucket, collection_id)
        if (collection_id, k) not in vb.pending:
            raise ModelError(f"no pending durable write of {k!r} to {what}")
        return k, vb

    def commit(
        self, key: bytes | str, *, collection_id: int = 0, vbucket: int | None = None
    ) -> CommittedItem:
        """Commit the document's pending prepare: its value becomes visible at the next
        seqno. ``ModelError`` if it has none."""
        k, vb = self._pending(key, collection_id, vbucket, "commit")
        item = vb.commit(k, collection_id)
        self.publish(Change((vb.vbid,)))
        return item

    def abort(
        self, key: bytes | str, *, collection_id: int = 0, vbucket: int | None = None
    ) -> DurableItem:
        """Abort the document's pending prepare (an abort at the next seqno; the
        committed document, if any, stays as it was). ``ModelError`` if it has none."""
        k, vb = self._pending(key, collection_id, vbucket, "abort")
        item = vb.abort(k, collection_id, self._next_cas())
        self.publish(Change((vb.vbid,)))
        return item

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

    # -- storage steps -------------------------------------------------------------------

    def checkpoint(self, vbucket: int | None = None) -> None:
        """Close the open checkpoint(s): the next write starts a new one."""
        targets = self._targets(vbucket)
        for vb in targets:
            vb.close_checkpoint()
        self.touched(vb.vbid for vb in targets)

    def persist(self, vbucket: int | None = None, upto: int | None = None) -> None:
        """Write items up to ``upto`` (default: everything) to disk.
        ``NoPersistence`` on an ephemeral bucket."""
        self._check_persistent("persist")
        targets = self._targets(vbucket)
        if upto is not None:
            for vb in targets:
                vb.check_persist(upto)
        for vb in targets:
            vb.persist(vb.high_seqno if upto is None else upto)
            self._retain(vb)
        self.touched(vb.vbid for vb in targets)

    def _retain(self, vb: VBucket) -> None:
        """Hold the vbucket's history within the retention (its share of the bytes,
        kv_engine ``MagmaKVStore::setHistoryRetentionBytes``: bytes / vbuckets)."""
        if self.retains_history:
            share = self.history_retention_bytes // self.num_vbuckets
            if self.history_retention_bytes and not share:
                share = 1
            vb.purge_history(vb.retention_cut(self.clock(), share, self.history_retention_seconds))

    def purge_history(self, vbucket: int | None = None, upto: int | None = None) -> None:
        """Apply the history retention now (magma's compaction), or with ``upto`` purge
        history up to that persisted seqno whatever the retention: the history start
        seqno moves above it, and change-streams backfills from below it get a
        de-duplicated snapshot first. ``ModelError`` on a bucket without history."""
        self._check_persistent("purge_history")
        if not self.retains_history:
            raise ModelError(f"bucket {self.name!r} ({self.storage}) retains no history")
        targets = self._targets(vbucket)
        if upto is not None:
            for vb in targets:
                vb.check_purge(upto)
        for vb in targets:
            if upto is None:
                self._retain(vb)
            else:
                vb.purge_history(upto)
        self.touched(vb.vbid for vb in targets)

    def purge(self, vbucket: int | None = None, upto: int | None = None) -> int:
        """Remove on-disk tombstones at or below ``upto`` (default: the persisted seqno).

        The purge seqno becomes the highest seqno removed (kv_engine
        ``docs/dcp/documentation/rollback.md``, PurgeSeqno: compaction raises it to the
        newest purged tombstone); it does not move when nothing was purged. Returns how
        many tombstones went. ``NoPersistence`` on an ephemeral bucket (no compaction:
        ``ephemeral_purge``).
        """
        self._check_persistent("purge")
        targets = self._targets(vbucket)
        if upto is not None:
            for vb in targets:
                vb.check_purge(upto)
        n = sum(vb.purge(vb.persisted_seqno if upto is None else upto) for vb in targets)
        self.touched(vb.vbid for vb in targets)
        return n

    def drop_cursor(
        self, vbucket: int | None = None, name: str | None = None
    ) -> list[tuple[int, str]]:
        """Drop stream cursors: those streams switch from memory to disk (kv_engine
        ``ActiveStream::handleSlowStream``)."""
        targets = self._targets(vbucket)
        dropped = [(vb.vbid, n) for vb in targets for n in vb.drop_cursor(name)]
        self.touched(sorted({vbid for vbid, _ in dropped}))
        return dropped

    def restart(self, vbucket: int | None = None) -> None:
        """An unclean restart: everything above the persisted seqno is lost, then warmup
        adds a failover entry at the persisted seqno (kv_engine ``vbucket_loader.cc``).

        An ephemeral bucket loses everything: it has no warmup, its vbuckets are made
        anew (kv_engine ``EphemeralBucket::makeVBucket`` with no persisted state), empty,
        with a new failover table (a new uuid at seqno 0): consumers roll back to 0."""
        targets = self._targets(vbucket)
        branched = []
        for vb in targets:
            if self.ephemeral is not None:
                lose_everything(vb)
            else:
                vb.warmup()
            if self.ephemeral is not None or vb.state is VBucketState.ACTIVE:
                branched.append(vb)
            self._catch_up(vb)
        self._publish_reset(targets, branched)

    def _publish_reset(self, targets: Sequence[VBucket], branched: Sequence[VBucket]) -> None:
        """Publish that ``targets`` were reset (history cut or state changed: their
        streams end) and ``branched`` of them got a new failover entry."""
        vbids = tuple(vb.vbid for vb in targets)
        cuts = tuple(self.branch_cut(vb) for vb in branched)
        self.publish(Change(vbids, reset=frozenset(vbids), branches=cuts))

    def cut_branch(
        self,
        vbucket: int | None = None,
        *,
        lose_after: int | None = None,
        lose_unpersisted: bool = True,
    ) -> None:
        """Cut the branch of ``vbucket`` (all when None), as a failover of its active
        does: a replica that had everything up to ``lose_after`` takes over, what came
        after is lost and a failover entry opens a new branch there (kv_engine
        ``failover-table.cc``). ``failover`` is the same operation, under the name the
        Python API has always given it (failing a node over is ``Cluster.failover_node``).

        ``lose_after`` defaults to the persisted seqno (``lose_unpersisted``) or the high
        seqno (nothing lost: only the branch changes). It may be below the persisted seqno:
        how far a replica had got depends on replication, not on the active's flusher, so
        items the old active had on disk can be lost too.
        """
        targets = self._targets(vbucket)
        if lose_after is not None:
            for vb in targets:
                vb.check_history(lose_after)
        for vb in targets:
            seqno = (
                lose_after
                if lose_after is not None
                else (vb.persisted_seqno if lose_unpersisted else vb.high_seqno)
            )
            vb.cut_branch(seqno)
            self._catch_up(vb)
        self._publish_reset(targets, targets)

    failover = cut_branch

    def set_vbucket_state(self, vbucket: int, state: VBucketState | int) -> None:
        """Change a vbucket's state; streams of it end with STATE_CHANGED (kv_engine
        ``DcpProducer::closeStreamDueToVbStateChange``).

        Becoming active from any other state is a promotion and adds a failover entry
        (kv_engine ``kv_bucket.cc``); a takeover (mockdcp has no TAKEOVER streams) would not.
        """
        vb = self.vbucket(vbucket)
        try:
            new = VBucketState(state)
        except ValueError:
            raise ModelError(f"no vbucket state {state!r}") from None
        if vb.set_state(new):
            self._publish_reset([vb], [vb] if new is VBucketState.ACTIVE else [])

    def flush(self) -> None:
        """Bucket flush: every vbucket emptied and its seqnos restarted from 0 with a new
        failover table (kv_engine recreates the vbuckets on flush)."""
        for vb in self.vbuckets:
            vb.flush()
            self._catch_up(vb)
        self._publish_reset(self.vbuckets, self.vbuckets)

    # -- collections steps (the manifest) ------------------------------------------------

    def _write_events(self, vb: VBucket, events: Iterable[ManifestEvent]) -> None:
        for ev in events:
            vb.write_system_event(
                SystemEventItem(
                    vbucket=vb.vbid,
                    seqno=vb.high_seqno + 1,
                    cas=self._next_cas(),
                    event=ev.event,
                    manifest_uid=ev.manifest_uid,
                    scope_id=ev.scope_id,
                    collection_id=ev.collection_id,
                    name=ev.name,
                    max_ttl=ev.max_ttl,
                    flush_uid=ev.flush_uid,
                    history=ev.history,
                )
            )

    def _apply_change(self, change: ManifestChange) -> None:
        """Make a validated change current; its events go into every vbucket, but one
        whose node is down (``VBucket.online``), which catches up when it is back."""
        self.manifest.apply(change)
        history = frozenset(c.cid for c in change.collections if c.history)
        for vb in self.vbuckets:
            vb.history_collections = history
        for vb in self.vbuckets:
            if vb.online:
                self._write_events(vb, change.events)
        self.publish(Change(range(self.num_vbuckets), collections=True))

    def _catch_up(self, vb: VBucket) -> None:
        """After history was cut (failover, restart, flush), write the manifest changes
        the vbucket lost again, at new seqnos: its manifest follows the bucket's, as
        kv_engine's vbucket manifest does when the current one is applied to it."""
        state = VBucketManifest.replay(e.as_manifest_event() for e in vb.system_events)
        self._write_events(vb, state.catch_up(self.manifest))

    def manifest_json(self) -> dict[str, object]:
        """The manifest as GET_COLLECTIONS_MANIFEST returns it."""
        return self.manifest.to_json()

    def resolve_collection(self, path: str) -> int:
        """The id of ``scope.collection`` (``ModelError`` if unknown)."""
        return self.manifest.resolve(path)

    def collection_name(self, cid: int) -> tuple[str, str]:
        """(scope, collection) of collection id ``cid`` (``ModelError`` if unknown)."""
        return self.manifest.name_of(cid)

    def create_scope(self, name: str) -> int:
        """Create a scope; returns its id (8 up). ``ModelError`` if the name is invalid
        or taken."""
        change = self.manifest.plan_create_scope(name)
        self._apply_change(change)
        return change.events[-1].scope_id

    def drop_scope(self, name: str) -> None:
        """Drop a scope and every collection in it (not ``_default``)."""
        self._apply_change(self.manifest.plan_drop_scope(name))

    def create_collection(
        self, scope: str, name: str, *, max_ttl: int | None = None, history: bool | None = None
    ) -> int:
        """Create a collection in ``scope``; returns its id (8 up). ``max_ttl`` in
        seconds (None: none of its own); ``history`` None: the bucket's default (true
        on Magma); true on couchstore is a ``ModelError``."""
        change = self.manifest.plan_create_collection(scope, name, max_ttl=max_ttl, history=history)
        self._apply_change(change)
        cid = change.events[-1].collection_id
        assert cid is not None
        return cid

    def drop_collection(self, scope: str, name: str) -> None:
        """Drop a collection (``_default._default`` included; it cannot come back).
        Its documents leave the oracle; writes to it are refused from now on."""
        self._apply_change(self.manifest.plan_drop_collection(scope, name))

    def flush_collection(self, scope: str, name: str) -> None:
        """Empty a collection: its begin event again at a new seqno of every vbucket,
        carrying the flush's manifest uid; its documents leave the oracle."""
        self._apply_change(self.manifest.plan_flush_collection(scope, name))

    def modify_collection(
        self,
        scope: str,
        name: str,
        *,
        max_ttl: int | Keep | None = KEEP,
        history: bool | Keep = KEEP,
    ) -> None:
        """Give a collection a new max TTL and/or history setting (a MODIFY_COLLECTION
        event); what is not given stays."""
        change = self.manifest.plan_modify_collection(scope, name, max_ttl=max_ttl, history=history)
        self._apply_change(change)


def _size(value: object) -> int:
    """``len(value)`` of a row's key or value, 0 for what has none (refused later)."""
    return len(value) if isinstance(value, (bytes, bytearray, memoryview, str)) else 0


def _check_no_prepare(vb: VBucket, key: bytes, collection_id: int) -> None:
    """``ModelError`` if the document has a prepare pending: a node refuses other writes
    of it with SYNC_WRITE_IN_PROGRESS until the prepare completes."""
    if vb.pending and (collection_id, key) in vb.pending:
        raise ModelError(f"a durable write of {key!r} is in progress (SYNC_WRITE_IN_PROGRESS)")


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
