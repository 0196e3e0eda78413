from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any
from unittest import mock

import trio
import trio.lowlevel
import trio.testing
from hypothesis import HealthCheck, example, given, settings, strategies as st

from mockdcp.cli._explore_inprocess import settled
from mockdcp.client import ConsumerState, DcpConsumer, StreamFilter
from mockdcp.model import Bucket
from mockdcp.producer import Node, _stream
from mockdcp.scenario import ScenarioProblems, StepRunner, steps
from mockdcp.server._kv import KvService, Wakeups

if TYPE_CHECKING:
    from collections.abc import Callable

VBUCKETS = 4
KEYS = [f"k{i}" for i in range(10)]

keys = st.sampled_from(KEYS)
vbs = st.one_of(st.none(), st.integers(0, VBUCKETS - 1))
ops = st.one_of(
    st.tuples(st.just("set"), keys, st.integers(0, 99)),
    st.tuples(st.just("set"), keys, st.integers(0, 99)),
    st.tuples(st.just("set"), keys, st.integers(0, 99)),
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("expire"), keys),
    st.tuples(st.just("touch"), keys),
    st.tuples(st.just("checkpoint"), vbs),
    st.tuples(st.just("persist"), vbs),
    st.tuples(st.just("persist_behind"), vbs, st.integers(1, 4)),
    st.tuples(st.just("purge"), vbs),
    st.tuples(st.just("restart"), vbs),
    st.tuples(st.just("failover"), vbs, st.booleans()),
    st.tuples(st.just("drop_cursor"), vbs),
    st.tuples(st.just("compact"), vbs),
    st.tuples(st.just("disconnect")),
    st.tuples(st.just("settle"), st.integers(1, 20)),
)

#: collections a schedule writes to, creates, modifies and drops (``inventory.rail`` and
#: ``inventory.bus`` do not exist at first); ``_default._default`` can be dropped too
PATHS = [
    "_default._default",
    "inventory.hotel",
    "inventory.air",
    "inventory.rail",
    "inventory.bus",
]
paths = st.sampled_from(PATHS)
collection_ops = st.one_of(
    ops,
    st.tuples(st.just("cset"), paths, keys, st.integers(0, 99)),
    st.tuples(st.just("cset"), paths, keys, st.integers(0, 99)),
    st.tuples(st.just("create_collection"), st.sampled_from(PATHS[3:])),
    st.tuples(st.just("drop_collection"), paths),
    st.tuples(st.just("modify_collection"), paths, st.one_of(st.none(), st.integers(1, 99))),
)
#: a legacy consumer cannot see ``_default`` dropped (its streams just end): the same
#: operations without that drop
legacy_collection_ops = collection_ops.filter(
    lambda op: op[:2] != ("drop_collection", "_default._default")
)


def to_steps(op: tuple[Any, ...], bucket: Bucket, now: float) -> list[steps.Step]:
    """One generated operation as the scenario steps that do it."""
    kind = op[0]
    if kind == "cset":
        return [steps.Set(key=op[2], value={"v": op[3]}, collection=op[1])]
    if kind in ("create_collection", "drop_collection"):
        return [steps.STEPS_BY_NAME[kind](collection=op[1])]  # type: ignore[call-arg]
    if kind == "modify_collection":
        return [steps.ModifyCollection(collection=op[1], max_ttl=op[2])]
    sel: steps.Vbuckets = "all" if len(op) < 2 or op[1] is None else op[1]
    if kind == "set":
        return [steps.Set(key=op[1], value={"v": op[2]})]
    if kind in ("delete", "expire"):
        return [steps.STEPS_BY_NAME[kind](key=op[1])]  # type: ignore[call-arg]
    if kind == "touch":
        return [steps.Touch(key=op[1], expiry=int(now) + 3600)]
    if kind == "persist_behind":  # a flusher that lags the writes by a few seqnos
        vbs = bucket.vbuckets if op[1] is None else [bucket.vbucket(op[1])]
        return [steps.Persist(vbuckets=vb.vbid, upto=vb.high_seqno - op[2]) for vb in vbs]
    if kind == "failover":
        return [steps.Failover(vbuckets=sel, lose_unpersisted=op[2])]
    if kind == "compact":  # what a node does in the background: close, flush, purge
        return [
            steps.Checkpoint(vbuckets=sel),
            steps.Persist(vbuckets=sel),
            steps.Purge(vbuckets=sel),
        ]
    if kind == "disconnect":
        return [steps.Disconnect()]
    return [steps.STEPS_BY_NAME[kind](vbuckets=sel)]  # type: ignore[call-arg]


def apply(op: tuple[Any, ...], runner: StepRunner, now: float) -> None:
    for step in to_steps(op, runner.bucket, now):
        # a step that does not apply now (a delete of a missing key) changes nothing
        with contextlib.suppress(ScenarioProblems):
            runner.apply_now([step])


def documents(state: ConsumerState) -> dict[tuple[int, bytes], bytes]:
    return {k: v.value for k, v in state.documents().items()}


def oracle(
    bucket: Bucket, *, legacy: bool = False, scope: int | None = None
) -> dict[tuple[int, bytes], bytes]:
    """What a consumer must hold; a legacy one only the default collection's documents,
    one whose streams cover a scope only that scope's."""
    if scope is not None:
        cols = {c.cid for c in bucket.manifest.collections.values() if c.scope_id == scope}
        return {k: it.value for k, it in bucket.oracle().items() if k[0] in cols}
    return {k: it.value for k, it in bucket.oracle().items() if not legacy or k[0] == 0}


async def scenario(
    steps: list[tuple[Any, ...]],
    collections: bool = True,
    manifest: dict[str, list[str]] | None = None,
    streams: list[StreamFilter] | None = None,
) -> tuple[ConsumerState, Bucket]:
    clock = [1_700_000_000.0]
    #: filtered streams that together cover one scope: the documents they must hold
    scope = next((f.scope for f in streams or () if f.scope is not None), None)
    bucket = Bucket("default", VBUCKETS, seed=5, clock=lambda: clock[0], collections=manifest or {})
    wakeups = Wakeups()
    node = Node(bucket=bucket, users={"u": "p"}, idle_timeout=1e9, wake=wakeups.wake)
    kv = KvService(node, wakeups)
    runner = StepRunner(node)
    state = ConsumerState()
    async with trio.open_nursery() as nursery:

        async def connect() -> trio.abc.Stream:
            client, server = trio.testing.memory_stream_pair()
            nursery.start_soon(kv.handle, server)
            return client

        consumer = DcpConsumer(
            "mock",
            0,
            user="u",
            password="p",
            vbuckets=range(VBUCKETS),
            state=state,
            buffer_size=4096,
            connect=connect,
            mechanism="PLAIN",
            collections=collections,
            streams=streams or (),
        )
        await nursery.start(consumer.run)
        for op in steps:
            clock[0] += 1
            if op[0] == "settle":
                for _ in range(op[1]):
                    await trio.lowlevel.checkpoint()
            else:
                apply(op, runner, clock[0])

        def converged() -> bool:
            return documents(state) == oracle(bucket, legacy=not collections, scope=scope)

        with trio.fail_after(30):  # virtual time (autojump clock)
            # Converged, and still so once the server and the consumer have nothing
            # left to do: a write and its deletion leave the oracle as it was, so the
            # two agree before the consumer has read either; it must have read both.
            await settled(converged, lambda: False, 0.25)
        nursery.cancel_scope.cancel()
    return state, bucket


#: Cases found or feared: both properties below run them before the random ones.
EXAMPLES: list[list[tuple[Any, ...]]] = [
    # the consumer is away while a tombstone above its position is purged: rollback to 0
    [
        ("set", "k1", 1),
        ("set", "k2", 2),
        ("settle", 20),
        ("disconnect",),
        ("delete", "k1"),
        ("compact", None),
    ],
    # dedup inside a snapshot, then a failover below its end: roll back to a consistent point
    [
        ("set", "k1", 1),
        ("persist", None),
        ("set", "k2", 1),
        ("set", "k1", 2),
        ("settle", 20),
        ("failover", None, True),
    ],
    # a version deduplicated in memory is still the newest at a partial persist (restart)
    [
        ("set", "k1", 1),
        ("set", "k6", 1),
        ("set", "k1", 2),
        ("persist_behind", None, 1),
        ("drop_cursor", None),
        ("settle", 20),
        ("restart", None),
    ],
    # the cursor is dropped while keys are rewritten: memory to disk and back
    [
        ("set", "k1", 1),
        ("settle", 20),
        ("set", "k1", 2),
        ("compact", None),
        ("drop_cursor", None),
        ("set", "k3", 3),
    ],
    # an open checkpoint read twice (the second batch starts inside it): k3, k4 share vb 0
    [("set", "k3", 1), ("settle", 20), ("set", "k4", 1), ("settle", 20), ("set", "k3", 2)],
]


def with_examples(test: Callable[..., None]) -> Callable[..., None]:
    for schedule in reversed(EXAMPLES):
        test = example(schedule)(test)
    return test


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=40))
@with_examples
def test_reference_consumer_converges_to_the_oracle(steps: list[tuple[Any, ...]]) -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    state, bucket = trio.run(scenario, steps, clock=clock)
    assert state.violations == []
    assert documents(state) == oracle(bucket)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=40))
@with_examples
def test_reference_consumer_converges_when_batches_go_out_one_frame_a_piece(
    steps: list[tuple[Any, ...]],
) -> None:
    """The producer queues a batch in pieces; with one frame a piece, writes, purges,
    failovers and cursor drops land between the pieces of every batch."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    with mock.patch.object(_stream, "PIECE_BYTES", 1):
        state, bucket = trio.run(scenario, steps, clock=clock)
    assert state.violations == []
    assert documents(state) == oracle(bucket)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=40))
@with_examples
def test_a_legacy_consumer_converges_to_the_oracle(steps: list[tuple[Any, ...]]) -> None:
    """A consumer that does not negotiate collections gets the shared frames without
    their collection prefix, through the same writes, failovers and cursor drops."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    with mock.patch.object(_stream, "PIECE_BYTES", 300):
        state, bucket = trio.run(scenario, steps, False, clock=clock)
    assert state.violations == []
    assert documents(state) == oracle(bucket)


MANIFEST = {"inventory": ["hotel", "air"]}

#: Collection cases: both properties below run them before the random ones.
COLLECTION_EXAMPLES: list[list[tuple[Any, ...]]] = [
    # documents of a collection, then its drop, in memory and after a compaction
    [
        ("cset", "inventory.hotel", "k1", 1),
        ("set", "k2", 1),
        ("settle", 20),
        ("cset", "inventory.hotel", "k3", 1),
        ("drop_collection", "inventory.hotel"),
        ("compact", None),
        ("drop_cursor", None),
    ],
    # the default collection dropped under a consumer, then a new collection
    [
        ("set", "k1", 1),
        ("settle", 20),
        ("drop_collection", "_default._default"),
        ("create_collection", "inventory.rail"),
        ("cset", "inventory.rail", "k1", 2),
        ("modify_collection", "inventory.rail", 5),
        ("failover", None, True),
    ],
]


def with_collection_examples(test: Callable[..., None]) -> Callable[..., None]:
    for schedule in reversed(COLLECTION_EXAMPLES):
        test = example(schedule)(test)
    return test


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(collection_ops, max_size=40))
@with_collection_examples
def test_consumer_converges_through_collection_changes(steps: list[tuple[Any, ...]]) -> None:
    """Creations, modifications and drops (``_default`` included) between the writes,
    failovers and cursor drops: a collection-aware consumer ends with the oracle, which
    forgets a dropped collection's documents."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    with mock.patch.object(_stream, "PIECE_BYTES", 300):
        state, bucket = trio.run(scenario, steps, True, MANIFEST, clock=clock)
    assert state.violations == []
    assert documents(state) == oracle(bucket)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(legacy_collection_ops, max_size=40))
@example(COLLECTION_EXAMPLES[0])
def test_a_legacy_consumer_converges_through_collection_changes(
    steps: list[tuple[Any, ...]],
) -> None:
    """The same schedules for a consumer without collections: it ends with the default
    collection's documents (its streams end when ``_default`` is dropped)."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    state, bucket = trio.run(scenario, steps, False, MANIFEST, clock=clock)
    assert state.violations == []
    assert documents(state) == oracle(bucket, legacy=True)


#: two streams per vbucket with stream ids: one collection, and the scope that holds it
INVENTORY_STREAMS = [StreamFilter(collections=(8,), sid=1), StreamFilter(scope=8, sid=2)]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(collection_ops, max_size=40))
@with_collection_examples
def test_filtered_stream_id_consumer_converges_through_collection_changes(
    steps: list[tuple[Any, ...]],
) -> None:
    """A consumer with a collection stream and a scope stream on every vbucket (stream
    ids 1 and 2) ends with the scope's documents: the collection's stream ends with
    FILTER_EMPTY when it is dropped, the scope's takes in collections created later."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    with mock.patch.object(_stream, "PIECE_BYTES", 300):
        state, bucket = trio.run(scenario, steps, True, MANIFEST, INVENTORY_STREAMS, clock=clock)
    assert state.violations == []
    assert documents(state) == oracle(bucket, scope=8)
