"""The step vocabulary: what a scenario file, ``POST /mock/steps`` and the Python API
say to the mock node. One attrs class per step; its YAML/JSON key is the snake_case
``NAME``, its fields are the class's fields, and it carries its own interpretation:
``check`` (against a simulation of what the steps before it will have done, so a whole
list is validated before anything runs) and ``apply`` (to the runner's bucket and node);
``wait`` and ``expect`` are awaited by the runner instead. Adding a step is one class here
(and its line in ``STEP_TYPES``). The same objects in all three spellings::

    - persist: {upto: 40}                   # YAML
    [{"persist": {"upto": 40}}]             # JSON (HTTP)
    Persist(upto=40)                        # Python

Users name things as they do: ``vbuckets: all | 3 | [0, 5]``, ``collection: scope.name``,
``value:`` a JSON object (encoded compactly) or a string, durations as seconds or
``"500ms"``/``"10s"``/``"2m"``. Do not subclass these classes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol, Union

import attrs

from mockdcp.model import KEEP, advance_buckets, iso_time, parse_time
from mockdcp.scenario._check import (
    Simulation,
    check_u32,
    check_upto,
    compact_json,
    for_vbuckets,
    key_bytes,
    opcode_of,
    parse_span,
    resolve_collection,
    resolve_vbuckets,
    split_collection,
    status_of,
)
from mockdcp.util import ModelError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mockdcp.model import (
        Bucket,
        BucketSpec,
        Manifest,
        ManifestChange,
        Role,
        UserChange,
        Users,
        VirtualClock,
    )
    from mockdcp.producer import DataNodes, Node

#: ``all``, one vbucket, or a list of them.
Vbuckets = Union[Literal["all"], int, tuple[int, ...]]  # noqa: UP007 - cattrs resolves it
#: A document body: a JSON value (object, list) encoded compactly, or a string as is.
Value = Union[str, dict[str, object], list[object]]  # noqa: UP007
#: A seqno, or ``high``: each vbucket's high seqno when the step starts.
SeqnoTarget = Union[int, Literal["high"], None]  # noqa: UP007
#: Seconds (number) or a string with a unit: ``500ms``, ``10s``, ``2m``.
Duration = float
#: Server time: seconds (number) or a string with a unit: ``90s``, ``10m``, ``2h``, ``30d``.
Span = Union[int, float, str, None]  # noqa: UP007
#: The default collection, as users spell it.
DEFAULT_COLLECTION = "_default._default"


class Labelled(Protocol):
    """The part of the runner's progress a step sets (``label``)."""

    label: str | None


class StepContext(Protocol):
    """What a step acts on when applied: the runner's bucket and node (``StepRunner``)."""

    @property
    def bucket(self) -> Bucket: ...
    @property
    def node(self) -> Node: ...
    @property
    def seed(self) -> int: ...
    @property
    def progress(self) -> Labelled: ...
    def vbuckets(self, selection: Vbuckets) -> list[int]: ...


@attrs.frozen(kw_only=True)
class Step:
    """Base of every step (``NAME`` is its key in YAML and JSON)."""

    NAME: ClassVar[str] = ""
    #: data, storage, cluster, faults or control
    GROUP: ClassVar[str] = ""

    #: ``wait`` and ``expect`` suspend a step list until their condition holds
    WAITS: ClassVar[bool] = False
    #: ``create_bucket`` and ``delete_bucket`` act on the cluster's buckets, not on the
    #: runner's bucket (they run while it is deleted)
    BUCKETS: ClassVar[bool] = False

    #: the bucket the step acts on (``serve --bucket``, ``create_bucket``); None: the
    #: scenario's (the runner's) bucket. ``wait``, ``expect`` and the bucket steps
    #: take none.
    bucket: str | None = None

    def check(self, sim: Simulation) -> None:
        """Raise ``ValueError`` if this step cannot run on the bucket as the steps before
        it will have left it (``sim``), and record what it will do there. Types were
        checked by the converter; this checks references (vbuckets, collections, names,
        live documents, seqno bounds)."""
        for_vbuckets(self, sim)

    def apply(self, ctx: StepContext) -> None:
        """Do what the step says, now, to the runner's bucket and node."""
        raise NotImplementedError(f"{self.NAME} waits: the runner awaits it")


# -- data ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Set(Step):
    """Write a document: a mutation at the next seqno of its vbucket."""

    NAME = "set"
    GROUP = "data"
    key: str
    value: Value
    collection: str = DEFAULT_COLLECTION
    flags: int = 0
    expiry: int = 0

    def check(self, sim: Simulation) -> None:
        check_u32("flags", self.flags)
        check_u32("expiry", self.expiry)
        sim.write(sim.collection(self.collection), key_bytes(self.key), live=True)

    def apply(self, ctx: StepContext) -> None:
        value = self.value if isinstance(self.value, str) else compact_json(self.value)
        ctx.bucket.set(
            self.key,
            value,
            collection_id=resolve_collection(ctx.bucket, self.collection),
            flags=self.flags,
            expiry=self.expiry,
        )


@attrs.frozen(kw_only=True)
class Delete(Step):
    """Delete a live document: a tombstone at the next seqno."""

    NAME = "delete"
    GROUP = "data"
    key: str
    collection: str = DEFAULT_COLLECTION

    def check(self, sim: Simulation) -> None:
        sim.remove(self.NAME, self.collection, self.key)

    def apply(self, ctx: StepContext) -> None:
        ctx.bucket.delete(self.key, collection_id=resolve_collection(ctx.bucket, self.collection))


@attrs.frozen(kw_only=True)
class Expire(Step):
    """Expire a live document now, as the expiry pager does."""

    NAME = "expire"
    GROUP = "data"
    key: str
    collection: str = DEFAULT_COLLECTION

    def check(self, sim: Simulation) -> None:
        sim.remove(self.NAME, self.collection, self.key)

    def apply(self, ctx: StepContext) -> None:
        ctx.bucket.expire(self.key, collection_id=resolve_collection(ctx.bucket, self.collection))


@attrs.frozen(kw_only=True)
class Touch(Step):
    """Give a live document a new expiry (a mutation with the same value)."""

    NAME = "touch"
    GROUP = "data"
    key: str
    expiry: int
    collection: str = DEFAULT_COLLECTION

    def check(self, sim: Simulation) -> None:
        cid, key = sim.collection(self.collection), key_bytes(self.key)
        sim.require_live(self.NAME, cid, key, self.key)
        check_u32("expiry", self.expiry)
        sim.write(cid, key, live=True)

    def apply(self, ctx: StepContext) -> None:
        cid = resolve_collection(ctx.bucket, self.collection)
        ctx.bucket.touch(self.key, self.expiry, collection_id=cid)


#: durability levels as users spell them (kv_engine ``durability_spec.h``)
DurabilityLevel = Literal["majority", "majority_and_persist_on_master", "persist_to_majority"]


@attrs.frozen(kw_only=True)
class SyncWrite(Step):
    """A durable write: a prepare at the next seqno, then its commit (the value becomes
    visible) or abort (discarded) at the seqno after, or (``pending``) neither until a
    ``commit`` or ``abort`` step; other writes of the key wait for it."""

    NAME = "sync_write"
    GROUP = "data"
    key: str
    value: Value
    collection: str = DEFAULT_COLLECTION
    level: DurabilityLevel = "majority"
    outcome: Literal["commit", "abort", "pending"] = "commit"

    def check(self, sim: Simulation) -> None:
        cid, key = sim.collection(self.collection), key_bytes(self.key)
        sim.durable(self.NAME, cid, key, self.key, self.outcome)

    def apply(self, ctx: StepContext) -> None:
        value = self.value if isinstance(self.value, str) else compact_json(self.value)
        ctx.bucket.sync_write(
            self.key,
            value,
            collection_id=resolve_collection(ctx.bucket, self.collection),
            level=self.level,
            outcome=self.outcome,
        )


@attrs.frozen(kw_only=True)
class Commit(Step):
    """Commit a pending durable write: its value becomes visible at the next seqno."""

    NAME = "commit"
    GROUP = "data"
    key: str
    collection: str = DEFAULT_COLLECTION

    def check(self, sim: Simulation) -> None:
        cid, key = sim.collection(self.collection), key_bytes(self.key)
        sim.durable(self.NAME, cid, key, self.key, "commit")

    def apply(self, ctx: StepContext) -> None:
        ctx.bucket.commit(self.key, collection_id=resolve_collection(ctx.bucket, self.collection))


@attrs.frozen(kw_only=True)
class Abort(Step):
    """Abort a pending durable write: an abort at the next seqno discards its value."""

    NAME = "abort"
    GROUP = "data"
    key: str
    collection: str = DEFAULT_COLLECTION

    def check(self, sim: Simulation) -> None:
        cid, key = sim.collection(self.collection), key_bytes(self.key)
        sim.durable(self.NAME, cid, key, self.key, "abort")

    def apply(self, ctx: StepContext) -> None:
        ctx.bucket.abort(self.key, collection_id=resolve_collection(ctx.bucket, self.collection))


@attrs.frozen(kw_only=True)
class Generate(Step):
    """``docs`` seeded Faker documents, keys ``{prefix}::{n:06d}`` from ``start`` on
    (generating the same keys again updates them)."""

    NAME = "generate"
    GROUP = "data"
    docs: int
    collection: str = DEFAULT_COLLECTION
    prefix: str = "doc"
    start: int = 0

    #: the seed of the Faker pools every ``generate`` draws from (``mockdcp serve``'s),
    #: drawn once per process: a new seed's pools cost about 0.1 s, more than a whole
    #: explore schedule. The values combine them with numpy draws seeded by the
    #: scenario's seed and ``start``: the same scenario writes the same bytes; drawn
    #: ``BLOCK`` documents at a time (``serve --docs`` draws 1024: most steps write a few)
    POOL_SEED: ClassVar[int] = 0
    BLOCK: ClassVar[int] = 64

    def check(self, sim: Simulation) -> None:
        cid = sim.collection(self.collection)
        if not 0 <= self.docs <= 10_000_000 or self.start < 0:
            raise ValueError("generate takes 0..10,000,000 docs from a start >= 0")
        for n in range(self.start, self.start + self.docs):
            sim.write(cid, key_bytes(f"{self.prefix}::{n:06d}"), live=True)

    def apply(self, ctx: StepContext) -> None:
        from mockdcp.data import faker_documents

        cid = resolve_collection(ctx.bucket, self.collection)
        seed = ctx.seed * 1_000_003 + self.start
        docs = faker_documents(self.docs, seed, pool_seed=self.POOL_SEED, block=self.BLOCK)
        for n, (_key, body) in zip(range(self.start, self.start + self.docs), docs, strict=True):
            ctx.bucket.set(f"{self.prefix}::{n:06d}", body, collection_id=cid)


@attrs.frozen(kw_only=True)
class Load(Step):
    """Load a Parquet corpus directory (``mockdcp corpus``) into the bucket."""

    NAME = "load"
    GROUP = "data"
    corpus: str

    def check(self, sim: Simulation) -> None:
        from mockdcp.data import PipelineError, require_pipeline

        if not os.path.isdir(self.corpus):
            raise ValueError(f"no corpus directory {self.corpus!r}")
        try:
            require_pipeline(spark=False)
        except PipelineError as exc:
            raise ValueError(str(exc)) from None
        sim.certain = False

    def apply(self, ctx: StepContext) -> None:
        from mockdcp.data import load_corpus_sync

        load_corpus_sync(ctx.bucket, self.corpus)


# -- storage ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Checkpoint(Step):
    """Close the open checkpoint: the next write starts a new one."""

    NAME = "checkpoint"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"

    def apply(self, ctx: StepContext) -> None:
        for vb in ctx.vbuckets(self.vbuckets):
            ctx.bucket.checkpoint(vb)


@attrs.frozen(kw_only=True)
class Persist(Step):
    """Write items up to ``upto`` (default: all) to disk."""

    NAME = "persist"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"
    upto: int | None = None

    def check(self, sim: Simulation) -> None:
        _refuse_on_ephemeral(self, sim)
        vbs = for_vbuckets(self, sim)
        check_upto(self.upto, self.vbuckets, {v: sim.high[v] for v in vbs}, "high seqno")
        for v in vbs:
            upto = sim.high[v] if self.upto is None else min(self.upto, sim.high[v])
            sim.persisted[v] = max(sim.persisted[v], upto)

    def apply(self, ctx: StepContext) -> None:
        for vb in ctx.vbuckets(self.vbuckets):
            v = ctx.bucket.vbucket(vb)
            upto = v.high_seqno if self.upto is None else min(self.upto, v.high_seqno)
            if upto > v.persisted_seqno:
                ctx.bucket.persist(vb, upto)


@attrs.frozen(kw_only=True)
class Persistence(Step):
    """Hold (``paused: true``) or release the background flusher; ``persist`` works
    while it is held."""

    NAME = "persistence"
    GROUP = "storage"
    paused: bool

    def check(self, sim: Simulation) -> None:
        _refuse_on_ephemeral(self, sim)

    def apply(self, ctx: StepContext) -> None:
        if self.paused:
            ctx.bucket.flusher.pause()
        else:
            ctx.bucket.flusher.resume()


@attrs.frozen(kw_only=True)
class Purge(Step):
    """Purge persisted tombstones up to ``upto`` (default: the persisted seqno)."""

    NAME = "purge"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"
    upto: int | None = None

    def check(self, sim: Simulation) -> None:
        _refuse_on_ephemeral(self, sim)
        vbs = for_vbuckets(self, sim)
        bounds = {v: sim.persisted[v] for v in vbs}
        check_upto(self.upto, self.vbuckets, bounds, "persisted seqno")

    def apply(self, ctx: StepContext) -> None:
        for vb in ctx.vbuckets(self.vbuckets):
            v = ctx.bucket.vbucket(vb)
            upto = v.persisted_seqno if self.upto is None else min(self.upto, v.persisted_seqno)
            ctx.bucket.purge(vb, upto)


@attrs.frozen(kw_only=True)
class PurgeHistory(Step):
    """Magma's history retention now (compaction), or with ``upto`` the history up to
    that persisted seqno purged whatever the retention: the history start seqno moves
    above it (a bucket that retains history only)."""

    NAME = "purge_history"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"
    upto: int | None = None

    def check(self, sim: Simulation) -> None:
        _refuse_on_ephemeral(self, sim)
        if not sim.manifest.history_allowed:
            raise ValueError("purge_history needs a magma bucket (couchstore keeps no history)")
        vbs = for_vbuckets(self, sim)
        check_upto(self.upto, self.vbuckets, {v: sim.persisted[v] for v in vbs}, "persisted seqno")

    def apply(self, ctx: StepContext) -> None:
        for vb in ctx.vbuckets(self.vbuckets):
            v = ctx.bucket.vbucket(vb)
            upto = None if self.upto is None else min(self.upto, v.persisted_seqno)
            ctx.bucket.purge_history(vb, upto)


@attrs.frozen(kw_only=True)
class EphemeralPurge(Step):
    """An ephemeral bucket's tombstone purger runs now (kv_engine
    ``ephemeral_tombstone_purger.cc``): tombstones deleted at least ``age`` seconds ago
    (default: the bucket's ``ephemeral_purge_age``, a day as ns_server sets it) leave the
    sequence list and the purge seqno rises; a backfill that then starts at or below it
    ends its stream with Rollback (``backfill_memory.cc``)."""

    NAME = "ephemeral_purge"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"
    age: int | None = None

    def check(self, sim: Simulation) -> None:
        for_vbuckets(self, sim)
        if sim.bucket.ephemeral is None:
            raise ValueError(
                "ephemeral_purge needs an ephemeral bucket (bucket: {type: ephemeral}); a"
                " couchbase bucket's tombstones go at compaction: purge"
            )
        if self.age is not None and self.age < 0:
            raise ValueError(f"age is seconds >= 0, not {self.age}")

    def apply(self, ctx: StepContext) -> None:
        for vb in ctx.vbuckets(self.vbuckets):
            ctx.bucket.ephemeral_purge(vb, age=self.age)


def _refuse_on_ephemeral(step: Step, sim: Simulation) -> None:
    """``ValueError`` naming ``step`` on an ephemeral bucket: it has no disk, no
    flusher and no compaction (kv_engine ``ephemeral_bucket.cc``)."""
    if sim.bucket.ephemeral is not None:
        raise ValueError(
            f"{step.NAME}: the bucket is ephemeral and has no persistence (no disk, no"
            " flusher, no compaction: kv_engine ephemeral_bucket.cc); its tombstones are"
            " purged by age: ephemeral_purge"
        )


@attrs.frozen(kw_only=True)
class DropCursor(Step):
    """The memory-to-disk switch: drop the streams' cursors (of the connections named
    ``connection``, or all) so they backfill from disk."""

    NAME = "drop_cursor"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"
    connection: str | None = None

    def apply(self, ctx: StepContext) -> None:
        ctx.node.steps.drop_cursor(ctx.vbuckets(self.vbuckets), self.connection)


@attrs.frozen(kw_only=True)
class Restart(Step):
    """An unclean node restart: unpersisted items are lost, warmup adds a failover
    entry, every connection drops. On an ephemeral bucket everything is lost: empty
    vbuckets with new uuids (consumers roll back to 0). With ``vbuckets: all`` every
    bucket of the server restarts (they live in one process); with a list, only those
    vbuckets of the step's bucket."""

    NAME = "restart"
    GROUP = "storage"
    vbuckets: Vbuckets = "all"

    def check(self, sim: Simulation) -> None:
        # an ephemeral bucket loses everything (``Bucket.restart``)
        lost = 0 if sim.bucket.ephemeral is not None else None
        sim.lose(for_vbuckets(self, sim), lose_after=lost, lose_unpersisted=True)

    def apply(self, ctx: StepContext) -> None:
        if self.vbuckets == "all":
            every_bucket(ctx.node).restart()
        else:
            ctx.node.restart(ctx.vbuckets(self.vbuckets))


@attrs.frozen(kw_only=True)
class AdvanceClock(Step):
    """Move the bucket's virtual clock (``serve --clock virtual``; a scenario's bucket
    clock is virtual) by ``seconds`` (``30d``, ``2h``...) or ``to`` an ISO 8601 time,
    and do what a node does on its timers meanwhile, in time order: the expiry pager
    (every ``exp_pager_stime``, 600 s: expired documents become expirations, sent as
    each connection negotiated), compaction (every 30 s: persisted tombstones older
    than the metadata purge age, 3 days, are purged and the purge seqno rises; Magma's
    history older than ``history_retention_seconds`` goes), and a backfill held back by
    its consumer (flow-control window full) for ``dcp_backfill_idle_limit_seconds``
    (720 s) ends STREAM_END SLOW (from server version 8.0). The clock is the node's:
    every bucket's timers run, whichever bucket the step names. Refused on a wall-clock
    server and backwards. Connection timers (noops, flow control) keep real time."""

    NAME = "advance_clock"
    GROUP = "storage"
    seconds: Span = None
    to: str | None = None

    def check(self, sim: Simulation) -> None:
        clock = sim.bucket.virtual_clock
        if (self.seconds is None) == (self.to is None):
            raise ValueError("advance_clock takes one of seconds or to")
        if clock is None:
            raise ValueError(
                "advance_clock needs a virtual clock: this server runs on the wall clock "
                "(serve --clock virtual)"
            )
        now = clock.now if sim.clock is None else sim.clock
        target = self._target(now)
        if target < now:
            raise ValueError(
                f"advance_clock cannot go back: to {self.to} is before the clock ({iso_time(now)})"
            )
        for each in sim.peers or [sim]:  # the node's clock: every bucket's timers run
            each.clock = target
            # the pager and compaction decide liveness and seqnos from here on
            each.certain, each.live = False, {}

    def _target(self, now: float) -> float:
        if self.to is not None:
            try:
                return parse_time(self.to)
            except ModelError as exc:
                raise ValueError(f"to: {exc}") from None
        seconds = parse_span(self.seconds)  # a number, or "30d" from Python
        assert seconds is not None
        return now + seconds

    def apply(self, ctx: StepContext) -> None:
        clock = ctx.bucket.virtual_clock
        if clock is None:  # checked; a bucket swapped since still refuses
            raise ValueError("advance_clock needs a virtual clock")
        nodes = _on_clock(ctx.node, clock)
        moved = advance_buckets([n.bucket for n in nodes], clock, self._target(clock.now))
        for node, each in zip(nodes, moved, strict=True):
            node.steps.end_idle_backfills(each.start, each.end)


def _on_clock(node: Node, clock: VirtualClock) -> list[Node]:
    """``node`` and a node of each other bucket of its cluster that runs on ``clock``
    (the node's clock, which ``create_bucket`` gives every bucket it makes)."""
    nodes, seen = [node], {id(node.bucket)}
    for name in node.buckets.names:
        other = node.buckets.first_node(name)
        if other.bucket.clock is clock and id(other.bucket) not in seen:
            seen.add(id(other.bucket))
            nodes.append(other)
    return nodes


# -- cluster ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Failover(Step):
    """A replica takes over: items after ``lose_after`` (default: the persisted seqno
    with ``lose_unpersisted``, else none) are lost and a new branch starts. Streams of
    the vbuckets end (STATE_CHANGED), or with ``disconnect`` every connection drops."""

    NAME = "failover"
    GROUP = "cluster"
    vbuckets: Vbuckets = "all"
    lose_unpersisted: bool = True
    lose_after: int | None = None
    disconnect: bool = False

    def check(self, sim: Simulation) -> None:
        vbs = for_vbuckets(self, sim)
        if self.lose_after is not None:
            bounds = {v: sim.high[v] for v in vbs}
            check_upto(self.lose_after, self.vbuckets, bounds, "high seqno")
        sim.lose(vbs, lose_after=self.lose_after, lose_unpersisted=self.lose_unpersisted)

    def apply(self, ctx: StepContext) -> None:
        vbs = ctx.vbuckets(self.vbuckets)
        for vb in vbs:
            high = ctx.bucket.vbucket(vb).high_seqno
            lose_after = None if self.lose_after is None else min(self.lose_after, high)
            # the node's failover: streams end (or, after the last, connections drop)
            # before anything can observe the new branch
            ctx.node.cut_branch(
                vb,
                lose_after=lose_after,
                lose_unpersisted=self.lose_unpersisted,
                disconnect=self.disconnect and vb == vbs[-1],
            )


@attrs.frozen(kw_only=True)
class SetVbucketState(Step):
    """Change vbucket states; their streams end with STATE_CHANGED."""

    NAME = "set_vbucket_state"
    GROUP = "cluster"
    vbuckets: Vbuckets
    state: Literal["active", "replica", "pending", "dead"]

    def apply(self, ctx: StepContext) -> None:
        from mockdcp.protocol import VBucketState

        for vb in ctx.vbuckets(self.vbuckets):
            ctx.bucket.set_vbucket_state(vb, VBucketState[self.state.upper()])


@attrs.frozen(kw_only=True)
class MoveVbucket(Step):
    """The vbuckets move away: dead here (NOT_MY_VBUCKET with the config), and the
    config revision advances."""

    NAME = "move_vbucket"
    GROUP = "cluster"
    vbuckets: Vbuckets

    def apply(self, ctx: StepContext) -> None:
        ctx.node.move_vbuckets(ctx.vbuckets(self.vbuckets))


# -- the cluster's nodes ------------------------------------------------------------------


def every_bucket(node: Node) -> DataNodes:
    """The topology steps over every bucket of ``node``'s cluster, its own first (every
    bucket spans every data node: ``mockdcp.producer._data_nodes``)."""
    from mockdcp.producer import DataNodes

    return DataNodes(node.buckets, node.topology)


@attrs.frozen(kw_only=True)
class AddNode(Step):
    """A new data node joins the cluster (listening on the next ports), holding nothing
    until a ``rebalance``; it is numbered after the others."""

    NAME = "add_node"
    GROUP = "cluster"

    def check(self, sim: Simulation) -> None:
        sim.nodes.add_node()

    def apply(self, ctx: StepContext) -> None:
        every_bucket(ctx.node).add_node()


@attrs.frozen(kw_only=True)
class RemoveNode(Step):
    """Mark node ``node`` to leave: the next ``rebalance`` moves its vbuckets away and
    takes it out (its ports then close)."""

    NAME = "remove_node"
    GROUP = "cluster"
    node: int

    def check(self, sim: Simulation) -> None:
        sim.nodes.remove_node(self.node)

    def apply(self, ctx: StepContext) -> None:
        every_bucket(ctx.node).remove_node(self.node)


@attrs.frozen(kw_only=True)
class Rebalance(Step):
    """Move to the balanced map of the current nodes (ns_server's rebalance), a vbucket
    at a time: each moved active is handed over by a takeover (the same history and
    vbucket uuid: no consumer rolls back), the old copy goes dead (its streams end
    STATE_CHANGED, stream requests and OBSERVE_SEQNO there get NOT_MY_VBUCKET with the
    new config; GET_FAILOVER_LOG is answered from the dead copy, and a dropped replica
    stays a replica, until ns_server deletes them when the move is done, after the wait
    that follows the takeover), and the
    config revision advances per move (pushed to clients that asked). ``vbuckets``:
    only these moves, in this order (each must be one the rebalance makes);
    ``interval``: seconds between moves (half before and half after each takeover, the
    new copy built in between); ``mid_move``: the last move stops once its new copies
    are built, before its takeover (the next ``rebalance`` finishes it). Nodes marked by
    ``remove_node`` leave once they hold nothing; failed-over nodes are dropped.
    ``out_delay``: seconds the nodes leaving stay up after a bucket's moves, answering
    NOT_MY_VBUCKET with the new map, before they go (ns_server's
    ``rebalance_out_delay_seconds``, 10 s on a real cluster; 0 unless given)."""

    NAME = "rebalance"
    GROUP = "cluster"
    vbuckets: tuple[int, ...] | None = None
    interval: Duration = 0.0
    mid_move: bool = False
    out_delay: Duration = 0.0

    @property
    def timed(self) -> bool:
        """Time passes in it (the runner sleeps ``moves``' waits)."""
        return bool(self.interval or self.out_delay)

    def check(self, sim: Simulation) -> None:
        if self.interval < 0:
            raise ValueError(f"rebalance: interval must be >= 0 seconds, not {self.interval}")
        if self.out_delay < 0:
            raise ValueError(f"rebalance: out_delay must be >= 0 seconds, not {self.out_delay}")
        sim.nodes.rebalance(self.vbuckets)
        sim.certain = False

    def apply(self, ctx: StepContext) -> None:
        for _ in self.moves(ctx):
            pass

    def moves(self, ctx: StepContext) -> Iterator[float]:
        """Carry the rebalance out over every bucket (``DataNodes.rebalance``: the
        other buckets' moves, then this one's); yields the seconds to wait at each point
        where time passes (the runner sleeps them; ``apply`` does not)."""
        yield from every_bucket(ctx.node).rebalance(
            self.vbuckets, interval=self.interval, mid_move=self.mid_move, out_delay=self.out_delay
        )


@attrs.frozen(kw_only=True)
class FailoverNode(Step):
    """Fail node ``node`` over. Hard (default): for each vbucket it was active for, a
    replica is promoted with what it has (a new failover entry at its high seqno; writes
    it had not received are gone, and consumers past it roll back); its connections drop
    and its ports close. ``graceful``: its actives are first handed over to replicas
    (no loss). It stays listed until a ``rebalance`` drops it. ``out_delay`` (graceful
    only): seconds the node stays up after the handovers, answering NOT_MY_VBUCKET
    with the new map, before it is failed over (ns_server's
    ``rebalance_out_delay_seconds``, 10 s on a real cluster; 0 unless given; a hard
    failover does not wait)."""

    NAME = "failover_node"
    GROUP = "cluster"
    node: int
    graceful: bool = False
    out_delay: Duration = 0.0

    @property
    def timed(self) -> bool:
        """Time passes in it (the runner sleeps ``moves``' waits)."""
        return bool(self.out_delay)

    def check(self, sim: Simulation) -> None:
        if self.out_delay < 0:
            raise ValueError(f"failover_node: out_delay must be >= 0 seconds, not {self.out_delay}")
        if self.out_delay and not self.graceful:
            raise ValueError(
                "failover_node: out_delay needs graceful: true (ns_server's hard failover"
                " does not wait)"
            )
        sim.nodes.failover_node(self.node, self.graceful)
        sim.certain = False

    def apply(self, ctx: StepContext) -> None:
        for _ in self.moves(ctx):
            pass

    def moves(self, ctx: StepContext) -> Iterator[float]:
        """Carry the failover out over every bucket (``DataNodes.failover_node``);
        yields the seconds to wait (the runner sleeps them; ``apply`` does not)."""
        yield from every_bucket(ctx.node).failover_node(
            self.node, graceful=self.graceful, out_delay=self.out_delay
        )


@attrs.frozen(kw_only=True)
class NodeDown(Step):
    """Node ``node`` stops uncleanly: what it had not persisted is lost, its connections
    drop and its ports refuse until ``node_up``."""

    NAME = "node_down"
    GROUP = "cluster"
    node: int

    def check(self, sim: Simulation) -> None:
        sim.nodes.node_down(self.node)
        sim.certain = False

    def apply(self, ctx: StepContext) -> None:
        every_bucket(ctx.node).node_down(self.node)


@attrs.frozen(kw_only=True)
class NodeUp(Step):
    """Node ``node`` is back (warmup): its vbuckets hold what it had persisted, each
    active one with a new failover entry; its ports open again."""

    NAME = "node_up"
    GROUP = "cluster"
    node: int

    def check(self, sim: Simulation) -> None:
        sim.nodes.node_up(self.node)

    def apply(self, ctx: StepContext) -> None:
        every_bucket(ctx.node).node_up(self.node)


@attrs.frozen(kw_only=True)
class Replication(Step):
    """Hold (``paused: true``) or release replication into the replicas on ``node``, of
    ``vbucket`` (both: that copy; neither: every replica): held replicas fall behind
    their actives, so a hard failover can lose what they did not get."""

    NAME = "replication"
    GROUP = "cluster"
    paused: bool
    node: int | None = None
    vbucket: int | None = None

    def check(self, sim: Simulation) -> None:
        sim.nodes.check_replication(self.node, self.vbucket)

    def apply(self, ctx: StepContext) -> None:
        topology = ctx.node.topology
        name = None if self.node is None else topology.node(self.node).name
        cluster = topology.cluster
        if self.paused:
            cluster.pause_replication(name, self.vbucket)
        else:
            cluster.resume_replication(name, self.vbucket)
            cluster.replicate(name, self.vbucket)


@attrs.frozen(kw_only=True)
class CreateScope(Step):
    """Create a scope (a system event at the next seqno of every vbucket)."""

    NAME = "create_scope"
    GROUP = "cluster"
    name: str

    def plan(self, manifest: Manifest) -> ManifestChange:
        """The manifest change this step makes (``ModelError`` if it cannot)."""
        return manifest.plan_create_scope(self.name)

    def check(self, sim: Simulation) -> None:
        sim.change_manifest(self.plan, forgets_documents=False)

    def apply(self, ctx: StepContext) -> None:
        ctx.bucket.create_scope(self.name)


@attrs.frozen(kw_only=True)
class DropScope(Step):
    """Drop a scope and every collection in it."""

    NAME = "drop_scope"
    GROUP = "cluster"
    name: str

    def plan(self, manifest: Manifest) -> ManifestChange:
        """The manifest change this step makes (``ModelError`` if it cannot)."""
        return manifest.plan_drop_scope(self.name)

    def check(self, sim: Simulation) -> None:
        sim.change_manifest(self.plan, forgets_documents=True)

    def apply(self, ctx: StepContext) -> None:
        ctx.bucket.drop_scope(self.name)


@attrs.frozen(kw_only=True)
class CreateCollection(Step):
    """Create ``scope.name``, with a max TTL in seconds if given; ``history``: every
    revision kept (magma only; default: the bucket's, true on magma)."""

    NAME = "create_collection"
    GROUP = "cluster"
    collection: str
    max_ttl: int | None = None
    history: bool | None = None

    def plan(self, manifest: Manifest) -> ManifestChange:
        """The manifest change this step makes (``ModelError`` if it cannot)."""
        scope, name = split_collection(self.collection)
        return manifest.plan_create_collection(
            scope, name, max_ttl=self.max_ttl, history=self.history
        )

    def check(self, sim: Simulation) -> None:
        sim.change_manifest(self.plan, forgets_documents=False)

    def apply(self, ctx: StepContext) -> None:
        scope, name = split_collection(self.collection)
        ctx.bucket.create_collection(scope, name, max_ttl=self.max_ttl, history=self.history)


@attrs.frozen(kw_only=True)
class DropCollection(Step):
    """Drop ``scope.name`` (``_default._default`` too): its documents leave the oracle."""

    NAME = "drop_collection"
    GROUP = "cluster"
    collection: str

    def plan(self, manifest: Manifest) -> ManifestChange:
        """The manifest change this step makes (``ModelError`` if it cannot)."""
        scope, name = split_collection(self.collection)
        return manifest.plan_drop_collection(scope, name)

    def check(self, sim: Simulation) -> None:
        sim.change_manifest(self.plan, forgets_documents=True)

    def apply(self, ctx: StepContext) -> None:
        scope, name = split_collection(self.collection)
        ctx.bucket.drop_collection(scope, name)


@attrs.frozen(kw_only=True)
class ModifyCollection(Step):
    """Change the max TTL of ``scope.name`` (``null``: none of its own) or, with
    ``history``, whether it keeps every revision (magma only; a ``null`` max TTL then
    keeps the TTL it has)."""

    NAME = "modify_collection"
    GROUP = "cluster"
    collection: str
    max_ttl: int | None = None
    history: bool | None = None

    def plan(self, manifest: Manifest) -> ManifestChange:
        """The manifest change this step makes (``ModelError`` if it cannot)."""
        scope, name = split_collection(self.collection)
        if self.history is None:
            return manifest.plan_modify_collection(scope, name, max_ttl=self.max_ttl)
        ttl = KEEP if self.max_ttl is None else self.max_ttl
        return manifest.plan_modify_collection(scope, name, max_ttl=ttl, history=self.history)

    def check(self, sim: Simulation) -> None:
        sim.change_manifest(self.plan, forgets_documents=False)

    def apply(self, ctx: StepContext) -> None:
        scope, name = split_collection(self.collection)
        if self.history is None:
            ctx.bucket.modify_collection(scope, name, max_ttl=self.max_ttl)
        else:
            ttl = KEEP if self.max_ttl is None else self.max_ttl
            ctx.bucket.modify_collection(scope, name, max_ttl=ttl, history=self.history)


@attrs.frozen(kw_only=True)
class FlushCollection(Step):
    """Flush ``scope.name``: its documents go, the collection stays."""

    NAME = "flush_collection"
    GROUP = "cluster"
    collection: str

    def plan(self, manifest: Manifest) -> ManifestChange:
        """The manifest change this step makes (``ModelError`` if it cannot)."""
        scope, name = split_collection(self.collection)
        return manifest.plan_flush_collection(scope, name)

    def check(self, sim: Simulation) -> None:
        sim.change_manifest(self.plan, forgets_documents=True)

    def apply(self, ctx: StepContext) -> None:
        scope, name = split_collection(self.collection)
        ctx.bucket.flush_collection(scope, name)


@attrs.frozen(kw_only=True)
class Flush(Step):
    """Bucket flush: every vbucket emptied, seqnos from 0, new failover tables."""

    NAME = "flush"
    GROUP = "cluster"

    def check(self, sim: Simulation) -> None:
        sim.flush()

    def apply(self, ctx: StepContext) -> None:
        ctx.bucket.flush()


# -- users -----------------------------------------------------------------------------


def _roles(text: str) -> tuple[Role, ...]:
    """``roles`` as ns_server's form field spells them (comma separated);
    ``ValueError`` naming the bad ones."""
    from mockdcp.model import parse_roles

    return parse_roles(text)


@attrs.frozen(kw_only=True)
class UserStep(Step):
    """A change to the users (one of ns_server's ``/settings/rbac`` calls): checked on
    the simulation's copy of the users, applied to the node's, each through ``change``,
    the model operation."""

    def change(self, users: Users) -> UserChange:
        raise NotImplementedError

    def check(self, sim: Simulation) -> None:
        self.change(sim.users)

    def apply(self, ctx: StepContext) -> None:
        ctx.node.steps.users_changed(self.change(ctx.node.users))


@attrs.frozen(kw_only=True)
class CreateUser(UserStep):
    """Create a local user with ``roles`` (comma separated, as ns_server spells them:
    ``data_dcp_reader[default]``, ``bucket_admin[*]``, ``admin``), or give an existing
    one these roles (and the password and display name when given): ns_server's
    ``PUT /settings/rbac/users/local/{name}``."""

    NAME = "create_user"
    GROUP = "cluster"
    name: str
    password: str | None = None
    roles: str = ""
    full_name: str | None = None

    def change(self, users: Users) -> UserChange:
        """The model operation (``ModelError``/``ValueError`` before any change)."""
        return users.put(
            self.name, password=self.password, roles=_roles(self.roles), full_name=self.full_name
        )


@attrs.frozen(kw_only=True)
class DeleteUser(UserStep):
    """Delete a user: its connections stay until they authenticate again (which fails)."""

    NAME = "delete_user"
    GROUP = "cluster"
    name: str

    def change(self, users: Users) -> UserChange:
        """The model operation (``ModelError`` for an unknown user)."""
        return users.delete(self.name)


@attrs.frozen(kw_only=True)
class Grant(UserStep):
    """Give a user more ``roles`` (comma separated, as ``create_user``'s)."""

    NAME = "grant"
    GROUP = "cluster"
    user: str
    roles: str

    def change(self, users: Users) -> UserChange:
        """The model operation (``ModelError``/``ValueError`` before any change)."""
        return users.grant(self.user, _roles(self.roles))


@attrs.frozen(kw_only=True)
class Revoke(UserStep):
    """Take ``roles`` from a user. Its streams that lose DcpStream end LOST_PRIVILEGES
    at their next snapshot marker (OK on a connection without collections); its DCP
    connections that lose DcpProducer are closed; new requests get EACCESS."""

    NAME = "revoke"
    GROUP = "cluster"
    user: str
    roles: str

    def change(self, users: Users) -> UserChange:
        """The model operation (``ModelError``/``ValueError`` before any change)."""
        return users.revoke(self.user, _roles(self.roles))


@attrs.frozen(kw_only=True)
class ChangePassword(UserStep):
    """Set a user's password: nothing is dropped, the next authentication with the old
    one fails (AUTH_ERROR)."""

    NAME = "change_password"
    GROUP = "cluster"
    user: str
    password: str

    def change(self, users: Users) -> UserChange:
        """The model operation (``ModelError`` before any change)."""
        return users.change_password(self.user, self.password)


# -- buckets ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CreateBucket(Step):
    """Make bucket ``name`` on every data node, as ns_server's ``POST
    /pools/default/buckets`` does: its own vbuckets (as many as the first bucket's),
    collections, config, DCP and oracle. A name deleted before comes back new: new
    vbucket uuids, seqnos from 0, only ``_default._default`` (go-dcp issue #128).
    ``type``: couchbase; ``storage``: couchstore or magma; ``replicas`` placed as far as
    the nodes allow, 1 unless given, as the REST call's ``replicaNumber`` (ns_server
    ``DEFAULT_MEMBASE_NUM_REPLICAS``); ``flush_enabled``: ``doFlush`` allowed;
    ``ram_quota_mb`` >= 100."""

    NAME = "create_bucket"
    GROUP = "cluster"
    BUCKETS = True
    name: str
    type: str = "couchbase"
    storage: str = "couchstore"
    replicas: int = 1
    flush_enabled: bool = False
    ram_quota_mb: int = 100

    def spec(self) -> BucketSpec:
        """The bucket this step makes (``ModelError`` for one a node refuses)."""
        from mockdcp.model import BucketSpec, BucketType

        spec = BucketSpec(
            name=self.name,
            type=BucketType.parse(self.type),
            storage=self.storage,
            replicas=self.replicas,
            flush_enabled=self.flush_enabled,
            ram_quota_mb=self.ram_quota_mb,
        )
        spec.check()
        return spec

    def check(self, sim: Simulation) -> None:
        from mockdcp.util import ModelError

        try:
            self.spec()
        except ModelError as exc:
            raise ValueError(str(exc)) from None
        sim.create_bucket(self.name, self.storage)

    def apply(self, ctx: StepContext) -> None:
        ctx.node.buckets.create(self.spec())


@attrs.frozen(kw_only=True)
class DeleteBucket(Step):
    """Delete bucket ``name``, as ns_server's ``DELETE /pools/default/buckets/{name}``
    does: every connection to it closes (kv_engine ``daemon/bucket_destroyer.cc``
    disconnects the bucket's clients), its streams with them; SELECT_BUCKET and the
    config endpoints answer it unknown until ``create_bucket`` makes it again."""

    NAME = "delete_bucket"
    GROUP = "cluster"
    BUCKETS = True
    name: str

    def check(self, sim: Simulation) -> None:
        sim.delete_bucket(self.name)

    def apply(self, ctx: StepContext) -> None:
        ctx.node.buckets.delete(self.name)


# -- faults ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Disconnect(Step):
    """Drop the connections (named ``connection``, or all)."""

    NAME = "disconnect"
    GROUP = "faults"
    connection: str | None = None

    def apply(self, ctx: StepContext) -> None:
        ctx.node.disconnect("disconnect step", self.connection)


@attrs.frozen(kw_only=True)
class Stall(Step):
    """Write nothing to the connections for ``seconds``."""

    NAME = "stall"
    GROUP = "faults"
    seconds: Duration
    connection: str | None = None

    def apply(self, ctx: StepContext) -> None:
        ctx.node.steps.stall(self.seconds, self.connection)


@attrs.frozen(kw_only=True)
class Throttle(Step):
    """Write at most ``bytes_per_second`` to the connections for ``seconds``."""

    NAME = "throttle"
    GROUP = "faults"
    bytes_per_second: int
    seconds: Duration
    connection: str | None = None

    def check(self, sim: Simulation) -> None:
        if self.bytes_per_second <= 0:
            raise ValueError("bytes_per_second must be positive")

    def apply(self, ctx: StepContext) -> None:
        ctx.node.steps.throttle(self.bytes_per_second, self.seconds, self.connection)


@attrs.frozen(kw_only=True)
class Delay(Step):
    """Answer the next ``count`` requests (named by opcode, e.g. ``dcp_stream_req``, or
    any) ``seconds`` late; replies keep their order."""

    NAME = "delay"
    GROUP = "faults"
    seconds: Duration
    request: str | None = None
    count: int = 1
    connection: str | None = None

    def check(self, sim: Simulation) -> None:
        if self.request is not None:
            opcode_of(self.request)

    def apply(self, ctx: StepContext) -> None:
        opcodes = None if self.request is None else frozenset({opcode_of(self.request)})
        ctx.node.steps.delay(self.seconds, opcodes, self.count, self.connection)


@attrs.frozen(kw_only=True)
class Corrupt(Step):
    """Damage the next frame written to the connections: ``magic``, ``opcode``,
    ``length`` (body length off by one: framing breaks) or ``value`` (a byte of the
    body flipped)."""

    NAME = "corrupt"
    GROUP = "faults"
    kind: Literal["magic", "opcode", "length", "value"] = "length"
    connection: str | None = None

    def apply(self, ctx: StepContext) -> None:
        from mockdcp.producer import Corruption

        ctx.node.steps.corrupt(Corruption(self.kind), self.connection)


@attrs.frozen(kw_only=True)
class EndStream(Step):
    """End the vbuckets' live streams with STREAM_END(``reason``); ``rollback`` ends
    them as a node whose vbucket rolls back does, sent as ``state_changed`` (kv_engine
    ``StreamEndResponse::statusToFlags``: reason 6 never reaches the wire)."""

    NAME = "end_stream"
    GROUP = "faults"
    vbuckets: Vbuckets = "all"
    reason: Literal[
        "ok",
        "closed",
        "state_changed",
        "disconnected",
        "too_slow",
        "backfill_failed",
        "rollback",
        "filter_empty",
        "lost_privileges",
    ] = "state_changed"
    connection: str | None = None

    def apply(self, ctx: StepContext) -> None:
        from mockdcp.protocol import StreamEndReason

        reason = StreamEndReason[self.reason.upper()]
        ctx.node.steps.end_streams(ctx.vbuckets(self.vbuckets), reason, self.connection)


@attrs.frozen(kw_only=True)
class Reject(Step):
    """The next ``count`` requests with opcode ``request`` (e.g. ``dcp_stream_req``; on
    ``vbucket`` if given) get ``status`` (e.g. ``not_my_vbucket``, with the config;
    ``etmpfail``)."""

    NAME = "reject"
    GROUP = "faults"
    request: str
    status: str
    count: int = 1
    vbucket: int | None = None

    def check(self, sim: Simulation) -> None:
        opcode_of(self.request)
        status_of(self.status)
        if self.vbucket is not None:
            resolve_vbuckets(self.vbucket, sim.num_vbuckets)

    def apply(self, ctx: StepContext) -> None:
        from mockdcp.producer import Rejection
        from mockdcp.protocol import Status

        status = Status(status_of(self.status))
        rejection = Rejection(opcode_of(self.request), status, self.count, self.vbucket)
        ctx.node.rejections.add(rejection)


@attrs.frozen(kw_only=True)
class RefuseConnections(Step):
    """While ``enabled``, new connections are closed at once."""

    NAME = "refuse_connections"
    GROUP = "faults"
    enabled: bool = True

    def apply(self, ctx: StepContext) -> None:
        ctx.node.refusing = self.enabled


# -- control ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ConsumerProgress:
    """What a ``wait`` waits for, all given conditions together (see ``Wait``)."""

    #: the vbuckets the seqno condition is about
    vbucket: Vbuckets = "all"
    #: every frame up to this seqno (``high``: each vbucket's high seqno when the wait
    #: starts) written to the socket; nothing after it is sent until the wait is over.
    #: A seqno the stream is never sent (a system event a legacy or filtered stream
    #: skips, a write de-duplicated away) is met once the stream read past it
    seqno: SeqnoTarget = None
    #: ... and acknowledged (buffer acks covering those frames; needs flow control)
    acked: bool = False
    #: this many connections open (at least)
    connections: int | None = None
    #: a stream opened on each of the vbuckets (since the wait started)
    streams: bool = False
    #: at least this many bytes acknowledged in all (since the wait started)
    bytes_acked: int | None = None
    #: at least this many noops answered (since the wait started)
    noops_answered: int | None = None
    #: at least this many noops sent and not answered before the next was due
    noops_missed: int | None = None
    #: a rollback taken on each of the vbuckets: ROLLBACK sent, then a request at or
    #: below the rollback seqno (since the wait started)
    rollback: bool = False
    #: only connections with this DCP name count
    connection: str | None = None


@attrs.frozen(kw_only=True)
class Wait(Step):
    """Wait ``seconds``, or until the consumer's progress meets ``consumer`` (failing
    the scenario after ``timeout``)."""

    NAME = "wait"
    GROUP = "control"
    seconds: Duration | None = None
    consumer: ConsumerProgress | None = None
    timeout: Duration = 60.0

    WAITS = True

    def check(self, sim: Simulation) -> None:
        c = self.consumer
        if (self.seconds is None) == (c is None):
            raise ValueError("wait takes either seconds or consumer")
        if c is not None:
            resolve_vbuckets(c.vbucket, sim.num_vbuckets)
            conditions = (
                c.seqno is not None,
                c.connections is not None,
                c.streams,
                c.bytes_acked is not None,
                c.noops_answered is not None,
                c.noops_missed is not None,
                c.rollback,
            )
            if not any(conditions):
                raise ValueError("wait: consumer names no condition")
            if c.acked and c.seqno is None:
                raise ValueError("wait: acked needs a seqno")


@attrs.frozen(kw_only=True)
class RollbackExpectation:
    """The consumer left the history a branch cut on ``vbucket``: the server answered
    ROLLBACK (to ``to``, if given) and the consumer re-requested from a seqno at or
    below it, or, after the branch, its request was accepted from at or below the
    branch point (``to`` and the new failover entry's seqno) with no ROLLBACK needed
    (a consumer that never delivered the lost writes). Reports name the route."""

    vbucket: int
    to: int | None = None


@attrs.frozen(kw_only=True)
class ResumeExpectation:
    """The consumer requested ``vbucket`` from ``seqno`` (with this snapshot range and
    vbucket uuid, where given): a correct resume. A complete snapshot ending at
    ``seqno`` may be named by either of its ranges: the one received, or
    (``seqno``, ``seqno``)."""

    vbucket: int
    seqno: int
    snap_start: int | None = None
    snap_end: int | None = None
    uuid: int | None = None


@attrs.frozen(kw_only=True)
class Expect(Step):
    """What the consumer must have done, checked against what the server observed
    since the scenario started; waits up to ``within`` for it. Exactly one kind.
    ``conformant`` is the other way round: it fails as soon as the protocol checker
    reports a violation, and passes once ``within`` is over without one, or sooner,
    once none can come in what is left of it: nothing happened for 0.1 s, every DCP
    connection the consumer made is up and owes nothing (no ROLLBACK or refusal to ask
    again after, no STREAM_END to re-open, no full flow-control window, no noop
    unanswered), and its noop interval (if it asked for noops) is longer than the
    window."""

    NAME = "expect"
    GROUP = "control"
    rollback: RollbackExpectation | None = None
    resume: ResumeExpectation | None = None
    #: at least this many bytes acknowledged in all
    acked: int | None = None
    #: a new DCP connection after the last one closed, within ``within``
    reconnected: bool = False
    #: at least this many noops answered
    noops_answered: int | None = None
    #: at least this many cluster configs pushed to the consumer (it negotiated HELLO
    #: clustermap change notification, and kept the connections they came on)
    configs_pushed: int | None = None
    #: the protocol checker reported no violation of the consumer since the scenario
    #: began, nor does it for ``within`` more (``0s``: up to this step only; the window
    #: ends sooner once no violation can come in it)
    conformant: bool = False
    #: a free name for reports
    name: str | None = None
    within: Duration = 10.0

    WAITS = True

    def check(self, sim: Simulation) -> None:
        kinds = [
            self.rollback is not None,
            self.resume is not None,
            self.acked is not None,
            self.reconnected,
            self.noops_answered is not None,
            self.configs_pushed is not None,
            self.conformant,
        ]
        if sum(kinds) != 1:
            raise ValueError(
                "expect names exactly one of rollback, resume, acked, reconnected, "
                "noops_answered, configs_pushed, conformant"
            )
        for target in (self.rollback, self.resume):
            if target is not None:
                resolve_vbuckets(target.vbucket, sim.num_vbuckets)


@attrs.frozen(kw_only=True)
class Label(Step):
    """A name for this point of the scenario (reports show the current label)."""

    NAME = "label"
    GROUP = "control"
    name: str

    def apply(self, ctx: StepContext) -> None:
        ctx.progress.label = self.name


STEP_TYPES: tuple[type[Step], ...] = (
    Set,
    Delete,
    Expire,
    Touch,
    SyncWrite,
    Commit,
    Abort,
    Generate,
    Load,
    Checkpoint,
    Persist,
    Persistence,
    Purge,
    PurgeHistory,
    EphemeralPurge,
    DropCursor,
    Restart,
    AdvanceClock,
    Failover,
    SetVbucketState,
    MoveVbucket,
    AddNode,
    RemoveNode,
    Rebalance,
    FailoverNode,
    NodeDown,
    NodeUp,
    Replication,
    CreateScope,
    DropScope,
    CreateCollection,
    DropCollection,
    ModifyCollection,
    FlushCollection,
    Flush,
    CreateUser,
    DeleteUser,
    Grant,
    Revoke,
    ChangePassword,
    CreateBucket,
    DeleteBucket,
    Disconnect,
    Stall,
    Throttle,
    Delay,
    Corrupt,
    EndStream,
    Reject,
    RefuseConnections,
    Wait,
    Expect,
    Label,
)
#: the groups of steps that act on the runner's bucket (refused while it is deleted)
ON_THE_BUCKET = frozenset({"data", "storage", "cluster"})
#: YAML/JSON key -> step class
STEPS_BY_NAME: dict[str, type[Step]] = {cls.NAME: cls for cls in STEP_TYPES}

__all__ = [
    "DEFAULT_COLLECTION",
    "ON_THE_BUCKET",
    "STEPS_BY_NAME",
    "STEP_TYPES",
    "Abort",
    "AddNode",
    "AdvanceClock",
    "ChangePassword",
    "Checkpoint",
    "Commit",
    "ConsumerProgress",
    "Corrupt",
    "CreateBucket",
    "CreateCollection",
    "CreateScope",
    "CreateUser",
    "Delay",
    "Delete",
    "DeleteBucket",
    "DeleteUser",
    "Disconnect",
    "DropCollection",
    "DropCursor",
    "DropScope",
    "Duration",
    "EndStream",
    "EphemeralPurge",
    "Expect",
    "Expire",
    "Failover",
    "FailoverNode",
    "Flush",
    "FlushCollection",
    "Generate",
    "Grant",
    "Label",
    "Load",
    "ModifyCollection",
    "MoveVbucket",
    "NodeDown",
    "NodeUp",
    "Persist",
    "Persistence",
    "Purge",
    "PurgeHistory",
    "Rebalance",
    "RefuseConnections",
    "Reject",
    "RemoveNode",
    "Replication",
    "Restart",
    "ResumeExpectation",
    "Revoke",
    "RollbackExpectation",
    "SeqnoTarget",
    "Set",
    "SetVbucketState",
    "Span",
    "Stall",
    "Step",
    "SyncWrite",
    "Throttle",
    "Touch",
    "Value",
    "Vbuckets",
    "Wait",
]
