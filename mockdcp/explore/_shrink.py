"""Shrinking a failing schedule: the smaller schedules to try, smallest change last.

``candidates(scenario)`` yields schedules one simplification away, each valid (checked
on the scenario simulation): first each wait for time pinned to the consumer's progress
(``_pinned``: the one step whose effect depends on how fast the machine is), then whole
runs of steps dropped (halves, then quarters, then one step at a time, as delta
debugging does), a scope or collection a step creates declared by the bucket from the
start instead (one step fewer), fewer documents per ``generate``, fewer vbuckets and
nodes, earlier triggers (a ``wait`` for less progress or no time), simpler values, and
a failover's loss named by seqno instead of by what was persisted (which lets the
persistence hold and the wait for the flusher go). The command runs
each candidate several times and keeps the first that still fails with the same
anomaly (``Shrinker``), then starts over from it, until no candidate fails or the time
budget is spent. Nothing here runs a consumer: the caller passes the judge in.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import attrs

from mockdcp.explore._generate import WAIT_TIMEOUT, is_valid
from mockdcp.scenario import (
    Simulation,
    resolve_vbuckets,
    scenario_bucket,
    split_collection,
    steps as st,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from mockdcp.scenario import BucketSpec, Scenario

#: the closing steps every schedule keeps (the final wait and the conformance check)
TAIL = 2


def _with_steps(scenario: Scenario, steps: list[st.Step]) -> Scenario:
    return attrs.evolve(scenario, steps=tuple(steps))


def _body(scenario: Scenario) -> tuple[list[st.Step], list[st.Step]]:
    steps = list(scenario.steps)
    cut = max(0, len(steps) - TAIL)
    return steps[:cut], steps[cut:]


def _pinned(scenario: Scenario) -> Iterator[Scenario]:
    """Each wait for time (``wait: {seconds: S}``, but the pause of a node's outage)
    made a wait for the consumer's progress, ``seqno: high``: every write made before it
    sent to the consumer, nothing after it until the next wait (the runner holds the
    streams there). What a wait for time leaves the consumer holding depends on how fast
    the machine runs it: a failure found with it can pass on a loaded machine (a write
    and its deletion, sent together, reach a consumer de-duplicated: kv_engine
    ``engines/ep/src/checkpoint.cc`` keeps one item per key in an open checkpoint).
    Pinned, the steps after it act on the consumer at the same point on every run, so a
    schedule shrunk from it fails every replay (``mockdcp check``), not now and then."""
    body, tail = _body(scenario)
    for i, step in enumerate(body):
        outage = i > 0 and isinstance(body[i - 1], st.NodeDown)
        if isinstance(step, st.Wait) and step.consumer is None and not outage:
            pinned = st.Wait(consumer=st.ConsumerProgress(seqno="high"), timeout=WAIT_TIMEOUT)
            yield _with_steps(scenario, [*body[:i], pinned, *body[i + 1 :], *tail])


def _drops(scenario: Scenario) -> Iterator[Scenario]:
    body, tail = _body(scenario)
    n = len(body)
    size = n // 2
    while size >= 1:
        for start in range(0, n, size):
            yield _with_steps(scenario, body[:start] + body[start + size :] + tail)
        size //= 2


def _declared(spec: BucketSpec, step: st.CreateScope | st.CreateCollection) -> BucketSpec | None:
    """``spec`` with the scope or collection ``step`` creates among its own (created
    before anything else, as ``bucket: {collections: ...}`` declares them); None where
    the bucket declares its collections with settings (not plain lists of names)."""
    if not all(isinstance(names, list) for names in spec.collections.values()):
        return None
    collections = {scope: list(names) for scope, names in spec.collections.items()}
    if isinstance(step, st.CreateScope):
        collections.setdefault(step.name, [])
    else:
        scope, name = split_collection(step.collection)
        collections.setdefault(scope, []).append(name)
    return attrs.evolve(spec, collections=collections)


def _created_at_start(scenario: Scenario) -> Iterator[Scenario]:
    """A scope or a collection (without a max TTL or history setting) a step creates,
    declared by the bucket instead: one step fewer, when what fails needs the collection
    but not its creation while the consumer streams (the vocabulary has no write that
    creates its collection). A bucket's declared collections take the first seqnos of
    every vbucket, as on a real bucket whose collections were created before any client
    connected (``Bucket``'s ``collections``); the validator refuses the candidate where
    the earlier existence matters to a later step (a scope created again, a collection
    dropped before its creation's place)."""
    body, tail = _body(scenario)
    for i, step in enumerate(body):
        settings = isinstance(step, st.CreateCollection) and (
            step.max_ttl is not None or step.history is not None
        )
        if settings:
            continue
        if isinstance(step, st.CreateScope | st.CreateCollection):
            bucket = _declared(scenario.bucket, step)
            if bucket is not None:
                steps = (*body[:i], *body[i + 1 :], *tail)
                yield attrs.evolve(scenario, bucket=bucket, steps=steps)


def _simpler_step(step: st.Step) -> Iterator[st.Step]:
    if isinstance(step, st.Generate) and step.docs > 1:
        yield attrs.evolve(step, docs=max(1, step.docs // 2))
        yield attrs.evolve(step, docs=1)
    if isinstance(step, st.Wait):
        if step.seconds:
            yield attrs.evolve(step, seconds=0.0)
        c = step.consumer
        if c is not None and isinstance(c.seqno, int) and c.seqno > 1:
            yield attrs.evolve(step, consumer=attrs.evolve(c, seqno=c.seqno // 2))
    if isinstance(step, st.Set | st.SyncWrite) and step.value != "v":
        yield attrs.evolve(step, value="v")
    if isinstance(step, st.Set) and step.expiry:
        yield attrs.evolve(step, expiry=0)
    if isinstance(step, st.Stall | st.Throttle | st.Delay) and step.seconds > 0.05:
        yield attrs.evolve(step, seconds=0.05)
    if isinstance(step, st.Rebalance) and step.interval:
        yield attrs.evolve(step, interval=0.0)


def _simpler_steps(scenario: Scenario) -> Iterator[Scenario]:
    body, tail = _body(scenario)
    for i, step in enumerate(body):
        for simpler in _simpler_step(step):
            yield _with_steps(scenario, [*body[:i], simpler, *body[i + 1 :], *tail])


def _smaller_cluster(scenario: Scenario) -> Iterator[Scenario]:
    spec = scenario.bucket
    if spec.nodes > 1:
        nodes = spec.nodes - 1
        smaller = attrs.evolve(spec, nodes=nodes, replicas=min(spec.replicas, nodes - 1))
        needs = scenario.needs if nodes > 1 else ()
        yield attrs.evolve(scenario, bucket=smaller, needs=needs)
    if spec.vbuckets > max(1, spec.nodes):
        fewer = max(spec.nodes, spec.vbuckets // 2)
        yield attrs.evolve(scenario, bucket=attrs.evolve(spec, vbuckets=fewer))


#: seqnos ``_loss_by_seqno`` tries per failover, largest (least lost) first
LOSS_SEQNOS = 4


def _loss_by_seqno(scenario: Scenario) -> Iterator[Scenario]:
    """A failover that loses what was not persisted (``lose_unpersisted``, no
    ``lose_after``) given the seqno it loses after instead: each high seqno its vbuckets
    reached before it, below the one they have then (``LOSS_SEQNOS`` of them, largest
    first). The same size, but what was persisted no longer matters to it, so the steps
    that only arranged that (``persistence: {paused: true}``, a wait for the flusher)
    can be dropped next. A failover's loss is a seqno either way: the replica promoted
    has what it was sent, and a consumer that streamed past it rolls back to the branch
    point (kv_engine ``docs/dcp/documentation/rollback.md``); ``lose_after`` is how the
    step names that seqno."""
    body, tail = _body(scenario)
    spec = scenario.bucket
    sim = Simulation.of(scenario_bucket(scenario), nodes=spec.nodes, replicas=spec.replicas)
    reached: set[int] = set()
    for i, step in enumerate(body):
        if (
            isinstance(step, st.Failover)
            and step.lose_unpersisted
            and step.lose_after is None
            and sim.bucket.ephemeral is None
        ):
            vbs = resolve_vbuckets(step.vbuckets, sim.num_vbuckets)
            high = min(sim.high[v] for v in vbs)
            below = sorted((s for s in reached if s < high), reverse=True)[:LOSS_SEQNOS]
            for seqno in below:
                failover = attrs.evolve(step, lose_after=seqno)
                yield _with_steps(scenario, [*body[:i], failover, *body[i + 1 :], *tail])
        try:
            step.check(sim)
        except ValueError:
            return  # the validator refuses the scenario: nothing to try
        reached.update(sim.high)


def candidates(scenario: Scenario) -> Iterator[Scenario]:
    """Valid schedules one simplification smaller (see the module docstring)."""
    groups = (_pinned, _drops, _created_at_start, _smaller_cluster, _simpler_steps, _loss_by_seqno)
    for group in groups:
        for candidate in group(scenario):
            if candidate != scenario and is_valid(candidate):
                yield candidate


def size(scenario: Scenario) -> int:
    """The steps a shrunk schedule is measured by (the closing two not counted)."""
    return len(_body(scenario)[0])


@attrs.define
class ShrinkResult:
    """Where shrinking got: the smallest failing schedule, its failure rate, effort."""

    scenario: Scenario
    #: runs of the smallest schedule that failed with the anomaly, and runs made
    failed: int
    runs: int
    #: candidates tried, accepted, seconds spent, and whether the budget ran out first
    tried: int = 0
    accepted: int = 0
    seconds: float = 0.0
    exhausted: bool = False
    #: of ``runs`` fresh runs of the smallest schedule once shrinking stopped, how many
    #: failed with the anomaly (``confirm``); None: not re-run (nothing was accepted)
    rerun_failed: int | None = None

    @property
    def rate(self) -> float:
        return self.failed / self.runs if self.runs else 0.0

    @property
    def rerun_rate(self) -> float | None:
        if self.rerun_failed is None:
            return None
        return self.rerun_failed / self.runs if self.runs else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "steps": size(self.scenario),
            "failed": self.failed,
            "runs": self.runs,
            "rate": self.rate,
            "tried": self.tried,
            "accepted": self.accepted,
            "seconds": round(self.seconds, 3),
            "budget_ran_out": self.exhausted,
            "rerun_failed": self.rerun_failed,
            "rerun_rate": self.rerun_rate,
        }


async def shrink(
    scenario: Scenario,
    fails: Callable[[Scenario], Awaitable[bool]],
    *,
    runs: int = 2,
    budget: float = 60.0,
    clock: Callable[[], float] = time.monotonic,
    on_accept: Callable[[ShrinkResult], None] | None = None,
) -> ShrinkResult:
    """The smallest schedule reached from ``scenario`` whose runs still fail
    (``fails``: one run shows the anomaly) in at least half of ``runs``, within
    ``budget`` seconds; the result's rate is over the last ``runs`` of it.
    ``on_accept``: told of each smaller schedule found (an interrupted shrink keeps it).
    A schedule shrunk from ``scenario`` is run ``runs`` times more once shrinking stops
    (``confirm``, beyond the budget)."""
    started = clock()
    result = ShrinkResult(scenario, failed=0, runs=runs)

    async def rate(candidate: Scenario) -> int:
        failed = 0
        for i in range(runs):
            failed += await fails(candidate)
            if failed * 2 + (runs - i - 1) * 2 < runs:  # half can no longer fail
                break
        return failed

    result.failed = await rate(scenario)
    progress = result.failed > 0  # a failure that does not come back: nothing to shrink
    while progress:
        progress = False
        for candidate in candidates(result.scenario):
            if clock() - started > budget:
                result.exhausted = True
                result.seconds = clock() - started
                return await confirm(result, fails)
            result.tried += 1
            failed = await rate(candidate)
            if failed * 2 >= runs and failed > 0:
                result.scenario, result.failed = candidate, failed
                result.accepted += 1
                result.seconds = clock() - started
                if on_accept is not None:
                    on_accept(result)
                progress = True
                break
    result.seconds = clock() - started
    return await confirm(result, fails)


async def confirm(
    result: ShrinkResult, fails: Callable[[Scenario], Awaitable[bool]]
) -> ShrinkResult:
    """``result`` with its smallest schedule run ``result.runs`` times more, each run
    counted (``rerun_failed``), if shrinking accepted any candidate. A candidate is
    kept for failing in the runs it was tried with, so its rate there is chosen, not
    measured: a racy one (a ``wait: {seconds: 0}`` kept where a wait pinned to the
    consumer's progress lost the failure) can pass that test by luck, and the file
    written then fails only now and then on replay. The fresh runs say how often."""
    if result.accepted:
        result.rerun_failed = 0
        for _ in range(result.runs):
            result.rerun_failed += await fails(result.scenario)
    return result


__all__ = ["ShrinkResult", "candidates", "confirm", "shrink", "size"]
