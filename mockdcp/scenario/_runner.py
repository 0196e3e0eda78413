"""Applying steps to a running node, in order: the scenario runner.

``StepRunner.apply(steps)`` checks the whole list first (types were checked by the
converter, references by ``check_steps``): a bad list changes nothing. Then each step is
applied; ``wait`` and ``expect`` suspend the list until their condition holds. The
streams a seqno wait holds (``Node.hold``) stay held until the runner reaches the next
``wait``/``expect`` or the end of the list, so the steps after a wait act between exactly
the frames the wait names, on every run.

This is trio code (it waits); the steps' effects go through the node and the bucket,
which are pure.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs
import trio

from mockdcp._errors import ModelError, ScenarioError
from mockdcp.scenario import steps as st
from mockdcp.scenario._check import (
    check_steps,
    opcode_of,
    resolve_collection,
    resolve_vbuckets,
    split_collection,
    status_of,
)
from mockdcp.scenario._triggers import ExpectationCheck, ProgressTrigger

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mockdcp.model import Bucket
    from mockdcp.producer import Node
    from mockdcp.producer._events import ProducerEvent


@attrs.frozen
class ExpectationResult:
    """One ``expect`` step's outcome, as reports show it."""

    name: str
    passed: bool
    detail: str
    step: int

    def as_dict(self) -> dict[str, object]:
        return attrs.asdict(self)


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

    def __init__(
        self,
        node: Node,
        *,
        seed: int = 0,
        set_persistence: Callable[[bool], None] | None = None,
    ) -> None:
        self.node = node
        self.seed = seed
        self.progress = Progress()
        self.set_persistence = set_persistence
        #: every event the node kept, and each new one (expectations look back)
        self.history: list[ProducerEvent] = list(node.events)
        self._observers: list[Callable[[ProducerEvent], None]] = []
        self._changed = trio.Event()
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
        check_steps(steps, self.node.bucket, source)

    async def apply(
        self, steps: Sequence[st.Step], source: str = "<steps>", *, first: int = 0
    ) -> None:
        """Check every step, then apply them in order (see the module docstring).
        ``first``: the number of the first step in its file (0-based), for reports.

        Raises ``ScenarioProblems`` (nothing applied) or ``StepFailed``.
        """
        self.check(steps, source)
        try:
            for index, step in enumerate(steps, first):
                self.progress.current = f"{index + 1}/{first + len(steps)} {step.NAME}"
                if isinstance(step, st.Wait | st.Expect):
                    self.node.release()
                    await self._control(step, index)
                else:
                    self._apply_now(step)
                self.progress.applied += 1
        except StepFailed as exc:
            self.progress.failure = str(exc)
            raise
        finally:
            self.node.release()
            self.progress.current = None

    def apply_now(self, steps: Sequence[st.Step], source: str = "<steps>") -> None:
        """Check and apply steps that do not wait (``wait``/``expect`` are refused),
        all before returning: the HTTP API's ``POST /mock/steps`` of immediate steps."""
        waiting = [i for i, s in enumerate(steps) if isinstance(s, st.Wait | st.Expect)]
        if waiting:
            raise StepFailed(f"step {waiting[0] + 1} waits; use apply() for it")
        self.check(steps, source)
        for step in steps:
            self._apply_now(step)
            self.progress.applied += 1

    def _apply_now(self, step: st.Step) -> None:
        try:
            _APPLY[type(step)](self, step)
        except (ModelError, ValueError) as exc:
            raise StepFailed(f"{step.NAME}: {exc}") from exc

    def _vbs(self, sel: st.Vbuckets) -> list[int]:
        return resolve_vbuckets(sel, self.node.bucket.num_vbuckets)

    # -- control steps ----------------------------------------------------------------

    async def _control(self, step: st.Wait | st.Expect, index: int) -> None:
        if isinstance(step, st.Wait):
            await self._wait(step)
        else:
            await self._expect(step, index)

    async def _wait(self, step: st.Wait) -> None:
        if step.consumer is None:
            await trio.sleep(step.seconds or 0)
            return
        trigger = ProgressTrigger.start(
            step.consumer, self.node.bucket, self.node.connections.keys()
        )
        for conn in self.node.matching(step.consumer.connection):
            sent = conn.flow.acked + conn.flow.unacked
            for (vb, _sid), seqno in conn.streams.written.items():
                trigger.seen(conn.conn_id, vb, seqno, sent)  # written before the wait
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

    async def _expect(self, step: st.Expect, index: int) -> None:
        check = ExpectationCheck(step, began=trio.current_time())
        for event in self.history:
            check.observe(event)
        self._observers.append(check.observe)
        try:
            with trio.move_on_after(step.within):
                while not check.passed:
                    await self._changes()
        finally:
            self._observers.remove(check.observe)
        detail = check.detail if check.passed else check.failure()
        self.progress.expectations.append(
            ExpectationResult(check.name, check.passed, detail, index + 1)
        )

    # -- the other steps --------------------------------------------------------------

    def _set(self, step: st.Set) -> None:
        value = step.value if isinstance(step.value, str) else _json(step.value)
        self.bucket.set(
            step.key,
            value,
            collection_id=resolve_collection(self.bucket, step.collection),
            flags=step.flags,
            expiry=step.expiry,
        )

    def _delete(self, step: st.Delete) -> None:
        self.bucket.delete(step.key, collection_id=resolve_collection(self.bucket, step.collection))

    def _expire(self, step: st.Expire) -> None:
        self.bucket.expire(step.key, collection_id=resolve_collection(self.bucket, step.collection))

    def _touch(self, step: st.Touch) -> None:
        cid = resolve_collection(self.bucket, step.collection)
        self.bucket.touch(step.key, step.expiry, collection_id=cid)

    def _generate(self, step: st.Generate) -> None:
        from mockdcp._dataset import faker_documents

        cid = resolve_collection(self.bucket, step.collection)
        docs = faker_documents(step.docs, self.seed * 1_000_003 + step.start)
        for n, (_key, body) in zip(range(step.start, step.start + step.docs), docs, strict=True):
            self.bucket.set(f"{step.prefix}::{n:06d}", body, collection_id=cid)

    def _load(self, step: st.Load) -> None:
        from mockdcp.pipeline import load_corpus_sync

        load_corpus_sync(self.bucket, step.corpus)

    def _checkpoint(self, step: st.Checkpoint) -> None:
        for vb in self._vbs(step.vbuckets):
            self.bucket.checkpoint(vb)

    def _persist(self, step: st.Persist) -> None:
        for vb in self._vbs(step.vbuckets):
            v = self.bucket.vbucket(vb)
            upto = v.high_seqno if step.upto is None else min(step.upto, v.high_seqno)
            if upto > v.persisted_seqno:
                self.bucket.persist(vb, upto)

    def _persistence(self, step: st.Persistence) -> None:
        if self.set_persistence is None:
            raise ValueError("this server has no flusher to hold or release")
        self.set_persistence(step.paused)

    def _purge(self, step: st.Purge) -> None:
        for vb in self._vbs(step.vbuckets):
            v = self.bucket.vbucket(vb)
            upto = v.persisted_seqno if step.upto is None else min(step.upto, v.persisted_seqno)
            self.bucket.purge(vb, upto)

    def _drop_cursor(self, step: st.DropCursor) -> None:
        self.node.drop_cursor(self._vbs(step.vbuckets), step.connection)

    def _restart(self, step: st.Restart) -> None:
        vbs = self._vbs(step.vbuckets)
        self.node.restart(None if step.vbuckets == "all" else vbs)

    def _failover(self, step: st.Failover) -> None:
        vbs = self._vbs(step.vbuckets)
        for vb in vbs:
            high = self.bucket.vbucket(vb).high_seqno
            lose_after = None if step.lose_after is None else min(step.lose_after, high)
            # the node's failover: streams end (or, after the last, connections drop)
            # before anything can observe the new branch
            self.node.failover(
                vb,
                lose_after=lose_after,
                lose_unpersisted=step.lose_unpersisted,
                disconnect=step.disconnect and vb == vbs[-1],
            )

    def _set_vbucket_state(self, step: st.SetVbucketState) -> None:
        from mockdcp.protocol import VBucketState

        for vb in self._vbs(step.vbuckets):
            self.bucket.set_vbucket_state(vb, VBucketState[step.state.upper()])

    def _move_vbucket(self, step: st.MoveVbucket) -> None:
        self.node.move_vbuckets(self._vbs(step.vbuckets))

    def _create_scope(self, step: st.CreateScope) -> None:
        self.bucket.create_scope(step.name)

    def _drop_scope(self, step: st.DropScope) -> None:
        self.bucket.drop_scope(step.name)

    def _create_collection(self, step: st.CreateCollection) -> None:
        scope, name = split_collection(step.collection)
        self.bucket.create_collection(scope, name, max_ttl=step.max_ttl)

    def _drop_collection(self, step: st.DropCollection) -> None:
        self.bucket.drop_collection(*split_collection(step.collection))

    def _modify_collection(self, step: st.ModifyCollection) -> None:
        scope, name = split_collection(step.collection)
        self.bucket.modify_collection(scope, name, max_ttl=step.max_ttl)

    def _flush_collection(self, step: st.FlushCollection) -> None:
        self.bucket.flush_collection(*split_collection(step.collection))

    def _flush(self, step: st.Flush) -> None:
        self.bucket.flush()

    def _disconnect(self, step: st.Disconnect) -> None:
        self.node.disconnect("disconnect step", step.connection)

    def _stall(self, step: st.Stall) -> None:
        self.node.stall(step.seconds, step.connection)

    def _throttle(self, step: st.Throttle) -> None:
        self.node.throttle(step.bytes_per_second, step.seconds, step.connection)

    def _delay(self, step: st.Delay) -> None:
        opcodes = None if step.request is None else frozenset({opcode_of(step.request)})
        self.node.delay(step.seconds, opcodes, step.count, step.connection)

    def _corrupt(self, step: st.Corrupt) -> None:
        from mockdcp.producer._faults import Corruption

        self.node.corrupt(Corruption(step.kind), step.connection)

    def _end_stream(self, step: st.EndStream) -> None:
        from mockdcp.protocol import StreamEndReason

        reason = StreamEndReason[step.reason.upper()]
        self.node.end_streams(self._vbs(step.vbuckets), reason, step.connection)

    def _reject(self, step: st.Reject) -> None:
        from mockdcp.producer._node import Rejection
        from mockdcp.protocol import Status

        self.node.reject(
            Rejection(
                opcode_of(step.request),
                Status(status_of(step.status)),
                step.count,
                step.vbucket,
            )
        )

    def _refuse_connections(self, step: st.RefuseConnections) -> None:
        self.node.refusing = step.enabled

    def _label(self, step: st.Label) -> None:
        self.progress.label = step.name


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


_APPLY: dict[type, Callable[[StepRunner, Any], None]] = {
    st.Set: StepRunner._set,
    st.Delete: StepRunner._delete,
    st.Expire: StepRunner._expire,
    st.Touch: StepRunner._touch,
    st.Generate: StepRunner._generate,
    st.Load: StepRunner._load,
    st.Checkpoint: StepRunner._checkpoint,
    st.Persist: StepRunner._persist,
    st.Persistence: StepRunner._persistence,
    st.Purge: StepRunner._purge,
    st.DropCursor: StepRunner._drop_cursor,
    st.Restart: StepRunner._restart,
    st.Failover: StepRunner._failover,
    st.SetVbucketState: StepRunner._set_vbucket_state,
    st.MoveVbucket: StepRunner._move_vbucket,
    st.CreateScope: StepRunner._create_scope,
    st.DropScope: StepRunner._drop_scope,
    st.CreateCollection: StepRunner._create_collection,
    st.DropCollection: StepRunner._drop_collection,
    st.ModifyCollection: StepRunner._modify_collection,
    st.FlushCollection: StepRunner._flush_collection,
    st.Flush: StepRunner._flush,
    st.Disconnect: StepRunner._disconnect,
    st.Stall: StepRunner._stall,
    st.Throttle: StepRunner._throttle,
    st.Delay: StepRunner._delay,
    st.Corrupt: StepRunner._corrupt,
    st.EndStream: StepRunner._end_stream,
    st.Reject: StepRunner._reject,
    st.RefuseConnections: StepRunner._refuse_connections,
    st.Label: StepRunner._label,
}
