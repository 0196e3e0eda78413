"""Applying steps to a running node, in order: the scenario runner.

``StepRunner.apply(steps)`` checks the whole list first (types were checked by the
converter, references by ``check_steps``): a bad list changes nothing. Then each step is
applied; ``wait`` and ``expect`` suspend the list until their condition holds. The
streams a seqno wait holds (``Node.hold``) stay held until the runner reaches the next
``wait``/``expect`` or the end of the list, so the steps after a wait act between exactly
the frames the wait names, on every run.

This is trio code (it waits): each step applies itself (``Step.apply``, given the runner
as its context) to the node and the bucket, which are pure; ``wait`` and ``expect`` are
awaited here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from mockdcp.producer.events import ConnectionOpened, StreamOpened
from mockdcp.scenario import steps as st
from mockdcp.scenario._check import resolve_vbuckets
from mockdcp.scenario._triggers import Branch, ExpectationCheck, ProgressTrigger
from mockdcp.scenario._validate import check_steps
from mockdcp.util import ModelError, ScenarioError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mockdcp.model import BranchCut, Bucket, Change
    from mockdcp.producer import Node, ProducerEvent


#: seconds with no event before a ``conformant`` window may end early (``_at_rest``):
#: a consumer answers what it was sent within milliseconds (the reference consumer and
#: java-dcp-client re-open an ended stream within 50 ms)
AT_REST_AFTER = 0.1
#: how often a ``conformant`` window looks again whether it may end (time alone can put
#: it at rest: ``AT_REST_AFTER`` passing with no event)
AT_REST_POLL = 0.05


@attrs.frozen
class ExpectationResult:
    """One ``expect`` step's outcome, as reports show it."""

    name: str
    passed: bool
    detail: str
    step: int
    #: how the consumer got there, for expectations with more than one way (``Route``)
    route: str | None = None

    def as_dict(self) -> dict[str, object]:
        return attrs.asdict(self)


def _now() -> float:
    """trio's clock, which stamps the node's events; outside ``trio.run`` (steps applied
    by synchronous code, with no consumer to answer) minus infinity: every event is
    after it."""
    try:
        return trio.current_time()
    except RuntimeError:
        return float("-inf")


@attrs.frozen
class _OtherBucket:
    """The ``StepContext`` of a step applied to another bucket than the runner's."""

    node: Node
    runner: StepRunner

    @property
    def bucket(self) -> Bucket:
        return self.node.bucket

    @property
    def seed(self) -> int:
        return self.runner.seed

    @property
    def progress(self) -> Progress:
        return self.runner.progress

    def vbuckets(self, selection: st.Vbuckets) -> list[int]:
        return resolve_vbuckets(selection, self.node.bucket.num_vbuckets)


@attrs.frozen
class ConsumerStart:
    """A consumer started with the scenario (``apply``'s ``consumer_starts_within``):
    the seconds its start may take, and what counts as its start. ``on_stream``: its
    first stream opened, not its first connection, and a timed ``wait`` waits for it
    too, so that the whole schedule counts from it (``mockdcp explore``'s consumer
    processes: a JVM's first connection may close before it streams, and its next one
    come seconds later, on a loaded machine)."""

    within: float
    on_stream: bool = False

    def describe(self) -> str:
        what = "opened a stream" if self.on_stream else "connected"
        return f"the consumer never {what} within {self.within:g}s"


class StepFailed(ScenarioError):
    """A step could not be applied, or a ``wait`` timed out: the scenario stops."""


@attrs.define
class Progress:
    """Where a runner is: steps applied, the current step and label, expectations."""

    applied: int = 0
    current: str | None = None
    label: str | None = None
    expectations: list[ExpectationResult] = attrs.field(factory=list)
    failure: str | None = None
    finished: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "applied": self.applied,
            "current": self.current,
            "label": self.label,
            "expectations": [e.as_dict() for e in self.expectations],
            "failure": self.failure,
            "finished": self.finished,
        }


class StepRunner:
    """Applies steps to one node (see the module docstring)."""

    def __init__(self, node: Node, *, seed: int = 0) -> None:
        self.node = node
        self.seed = seed
        self.progress = Progress()
        #: every event the node kept, and each new one (expectations look back)
        self.history: list[ProducerEvent] = list(node.events)
        self._observers: list[Callable[[ProducerEvent], None]] = []
        self._changed = trio.Event()
        #: per vbucket, the last cut of its history (a new failover entry) by a step
        self.branches: dict[int, Branch] = {}
        #: when the last storage or cluster step was applied (a purge can make a
        #: consumer's position unreachable without a new branch)
        self.last_change: float | None = None
        #: whether a consumer has connected yet (a wait's timeout counts from then)
        self.connected = any(isinstance(e, ConnectionOpened) for e in self.history)
        #: ... and opened a stream
        self.streamed = any(isinstance(e, StreamOpened) for e in self.history)
        node.subscribers.append(self._on_event)

    @property
    def bucket(self) -> Bucket:
        return self.node.bucket

    def close(self) -> None:
        """Stop listening to the node."""
        if self._on_event in self.node.subscribers:
            self.node.subscribers.remove(self._on_event)

    def _on_event(self, event: ProducerEvent) -> None:
        self.history.append(event)
        if isinstance(event, ConnectionOpened):
            self.connected = True
        elif isinstance(event, StreamOpened):
            self.streamed = True
        for observe in list(self._observers):
            observe(event)
        self._changed.set()

    async def _changes(self) -> None:
        """Sleep until the next event."""
        self._changed = trio.Event()
        await self._changed.wait()

    # -- applying ---------------------------------------------------------------------

    def check(self, steps: Sequence[st.Step], source: str = "<steps>") -> None:
        """``ScenarioProblems`` if any step cannot run on this node's bucket."""
        check_steps(steps, self.node.bucket, source, self.node.topology)

    async def apply(
        self,
        steps: Sequence[st.Step],
        source: str = "<steps>",
        *,
        first: int = 0,
        consumer_starts_within: float | ConsumerStart | None = None,
    ) -> None:
        """Check every step, then apply them in order (see the module docstring).
        ``first``: the number of the first step in its file (0-based), for reports.
        ``consumer_starts_within``: the steps run beside a consumer started with them
        (``mockdcp run``, ``check``): a wait on the consumer counts its timeout from the
        consumer's first connection, which must come within these seconds (or, a
        ``ConsumerStart``, its start as that says).

        Raises ``ScenarioProblems`` (nothing applied) or ``StepFailed``.
        """
        self.check(steps, source)
        if isinstance(consumer_starts_within, int | float):
            consumer_starts_within = ConsumerStart(consumer_starts_within)
        try:
            for index, step in enumerate(steps, first):
                self.progress.current = f"{index + 1}/{first + len(steps)} {step.NAME}"
                if isinstance(step, st.Rebalance | st.FailoverNode) and step.timed:
                    await self._timed(step)
                elif isinstance(step, st.Wait | st.Expect):
                    self.node.release()
                    await (
                        self._wait(step, consumer_starts_within)
                        if isinstance(step, st.Wait)
                        else self._expect(step, index)
                    )
                else:
                    self._apply_now(step)
                self.progress.applied += 1
        except StepFailed as exc:
            self.progress.failure = str(exc)
            raise
        finally:
            self.node.release()
            self.progress.current = None

    async def _timed(self, step: st.Rebalance | st.FailoverNode) -> None:
        """A rebalance or a graceful failover spread over time: its moves, with the
        step's waits (``interval``, ``out_delay``) between. The holds a wait before it
        left go as its first wait starts, as they go at a wait for time: a node streams
        what is written during a rebalance and its out delay (the holds kept the
        streams at the last wait's seqnos for the 10 s of ns_server's delay)."""
        try:
            for seconds in step.moves(self):
                self.node.release()
                await trio.sleep(seconds)
        except (ModelError, ValueError) as exc:
            raise StepFailed(f"{step.NAME}: {exc}") from exc

    def apply_now(self, steps: Sequence[st.Step], source: str = "<steps>") -> None:
        """Check and apply steps that do not wait (``wait``/``expect`` are refused),
        all before returning: the HTTP API's ``POST /mock/steps`` of immediate steps."""
        waiting = [i for i, s in enumerate(steps) if s.WAITS]
        if waiting:
            raise StepFailed(f"step {waiting[0] + 1} waits; use apply() for it")
        self.check(steps, source)
        for step in steps:
            self._apply_now(step)
            self.progress.applied += 1

    def _apply_now(self, step: st.Step) -> None:
        if step.bucket is not None and step.bucket != self.bucket.name:
            self._apply_elsewhere(step, step.bucket)
            return
        if self.node.deleted and step.GROUP in st.ON_THE_BUCKET and not step.BUCKETS:
            raise StepFailed(f"{step.NAME}: bucket {self.bucket.name!r} was deleted")
        if step.GROUP not in ("storage", "cluster"):
            try:
                step.apply(self)
            except (ModelError, ValueError) as exc:
                raise StepFailed(f"{step.NAME}: {exc}") from exc
            return
        cuts: list[BranchCut] = []
        before = self.node.bucket

        def note(change: Change) -> None:
            cuts.extend(change.branches)

        before.feed.subscribe(note)
        try:
            step.apply(self)
        except (ModelError, ValueError) as exc:
            raise StepFailed(f"{step.NAME}: {exc}") from exc
        finally:
            before.feed.unsubscribe(note)
        after = self.node.bucket
        if after is not before:  # the bucket made again: each vbucket on a new branch
            cuts += [after.branch_cut(vb) for vb in after.vbuckets[: before.num_vbuckets]]
        self._note_branches(cuts)

    def _apply_elsewhere(self, step: st.Step, bucket: str) -> None:
        """A step with a ``bucket`` field: applied to that bucket's first node (its
        writes, its connections), in this runner's progress."""
        try:
            node = self.node.buckets.first_node(bucket)
            step.apply(_OtherBucket(node, self))
        except (ModelError, ValueError) as exc:
            raise StepFailed(f"{step.NAME}: {exc}") from exc

    def _note_branches(self, cuts: Sequence[BranchCut]) -> None:
        """Record the branches a storage or cluster step cut (published on the change
        feed): per vbucket the last, from its seqno (kv_engine ``failover-table.cc``)."""
        now = _now()
        self.last_change = now
        for cut in cuts:
            self.branches[cut.vbucket] = Branch(now, cut.seqno)

    def vbuckets(self, selection: st.Vbuckets) -> list[int]:
        """The vbuckets a step names, in this node's bucket."""
        return resolve_vbuckets(selection, self.node.bucket.num_vbuckets)

    # -- the steps that wait ----------------------------------------------------------

    async def _wait(self, step: st.Wait, consumer: ConsumerStart | None) -> None:
        if step.consumer is None:
            if consumer is not None and consumer.on_stream:
                await self._consumer_started(consumer)
            await trio.sleep(step.seconds or 0)
            return
        if consumer is not None:
            await self._consumer_started(consumer)
        trigger = ProgressTrigger.start(
            step.consumer, self.node.bucket, self.node.connections.keys()
        )
        opened = self._stream_starts()
        for conn in self.node.matching(step.consumer.connection):
            sent = conn.flow.acked + conn.flow.unacked
            for (vb, _sid), seqno in conn.streams.written.items():
                trigger.seen(conn.conn_id, vb, seqno, sent)  # written before the wait
            for key in conn.streams.streams:  # resumed where the target is met
                start = opened.get((conn.conn_id, *key))
                if start is not None:
                    trigger.resumed(conn.conn_id, key[0], start)
        for vb, seqno in trigger.targets.items():
            if vb not in trigger.written:
                self.node.hold(vb, seqno)
        self._observers.append(trigger.observe)
        try:
            with trio.move_on_after(step.timeout) as scope:
                while not trigger.met():
                    await self._changes()
        finally:
            self._observers.remove(trigger.observe)
        if scope.cancelled_caught:
            raise StepFailed(f"wait timed out after {step.timeout:g}s: {trigger.describe()}")

    async def _consumer_started(self, start: ConsumerStart) -> None:
        """Beside a consumer started with the scenario, a wait on the consumer's progress
        counts its timeout from the consumer's first connection (or its first stream:
        ``ConsumerStart``): how long a consumer takes to start (a JVM, an interpreter on
        a loaded machine) is not progress the scenario asks of it. ``start.within``
        bounds the start (``mockdcp check`` bounds it sooner: ``--connect-timeout``)."""

        def started() -> bool:
            return self.streamed if start.on_stream else self.connected

        if started():
            return
        with trio.move_on_after(start.within):
            while not started():
                await self._changes()
        if not started():
            raise StepFailed(f"{start.describe()} (a wait on it)")

    def _stream_starts(self) -> dict[tuple[int, int, int | None], int]:
        """(connection id, vbucket, stream id) -> the start seqno of the stream last
        opened there."""
        from mockdcp.producer import events as ev

        return {
            (e.conn_id, e.vbucket, e.stream_id): e.start_seqno
            for e in self.history
            if isinstance(e, ev.StreamOpened)
        }

    def _branch_for(self, step: st.Expect) -> Branch | None:
        """The cut a ``rollback`` expectation is about: its vbucket's last new branch,
        or (none) the last storage or cluster step, with no branch seqno."""
        if step.rollback is None:
            return None
        branch = self.branches.get(step.rollback.vbucket)
        if branch is None and self.last_change is not None:
            branch = Branch(self.last_change)
        return branch

    def _at_rest(self, began: float, ends: float) -> bool:
        """A ``conformant`` window (``began`` to ``ends``) may end now: nothing happened
        for ``AT_REST_AFTER`` seconds (what the consumer answers to the last thing it was
        sent is in), and the protocol checker can report nothing before ``ends`` unless
        the consumer sends what it does not owe (``CheckerRegistry.at_rest_until``)."""
        now = trio.current_time()
        last = self.history[-1].time if self.history else now
        return now - last >= AT_REST_AFTER and self.node.checkers.at_rest_until(began, ends)

    async def _expect(self, step: st.Expect, index: int) -> None:
        began = trio.current_time()
        check = ExpectationCheck(step, began=began, branch=self._branch_for(step))
        for event in self.history:
            check.observe(event)
        self._observers.append(check.observe)
        ends = began + step.within
        poll = AT_REST_POLL if step.conformant else float("inf")
        try:
            with trio.move_on_after(step.within):
                while not check.settled and not (step.conformant and self._at_rest(began, ends)):
                    with trio.move_on_after(poll):
                        await self._changes()
        finally:
            self._observers.remove(check.observe)
        check.finish()
        detail = check.detail if check.passed else check.failure()
        route = None if check.route is None or not check.passed else str(check.route)
        self.progress.expectations.append(
            ExpectationResult(check.name, check.passed, detail, index + 1, route)
        )
