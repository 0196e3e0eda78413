"""Triggers and expectations as pure predicates over the producer's events.

A ``ProgressTrigger`` (the ``wait: {consumer: ...}`` step) and an ``ExpectationCheck``
(the ``expect`` step) are fed every event the node records (``observe``) and say when
they are met. Nothing here waits or reads a clock: the runner does, so these are tested
with hand-made event sequences.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import attrs

from mockdcp.producer import events as ev
from mockdcp.scenario._check import resolve_vbuckets

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mockdcp.model import Bucket
    from mockdcp.scenario import steps as st


@attrs.define
class ProgressTrigger:
    """What ``wait: {consumer: ...}`` waits for; every given condition must hold.

    ``targets`` are the seqnos to be written per vbucket (from ``seqno``, with ``high``
    resolved when the wait starts; vbuckets with nothing to send are left out): the
    runner holds those streams there (``Node.hold``) so nothing past them is sent before
    the steps after the wait have run.
    """

    spec: st.ConsumerProgress
    targets: dict[int, int]
    vbuckets: list[int]
    written: dict[int, tuple[int, int]] = attrs.field(factory=dict)
    #: vbucket -> the highest seqno seen written (for a timeout's message)
    reached: dict[int, int] = attrs.field(factory=dict)
    acked_total: dict[int, int] = attrs.field(factory=dict)
    opened: set[int] = attrs.field(factory=set)
    open_conns: set[int] = attrs.field(factory=set)
    bytes_acked: int = 0
    noops_answered: int = 0
    noops_missed: int = 0
    rollbacks: dict[int, int] = attrs.field(factory=dict)
    rolled_back: set[int] = attrs.field(factory=set)

    @classmethod
    def start(
        cls, spec: st.ConsumerProgress, bucket: Bucket, open_conns: Iterable[int] = ()
    ) -> ProgressTrigger:
        vbuckets = resolve_vbuckets(spec.vbucket, bucket.num_vbuckets)
        targets: dict[int, int] = {}
        if spec.seqno is not None:
            for vb in vbuckets:
                seqno = bucket.vbucket(vb).high_seqno if spec.seqno == "high" else spec.seqno
                if seqno > 0:
                    targets[vb] = seqno
        return cls(spec, targets, vbuckets, open_conns=set(open_conns))

    def seen(self, conn_id: int, vbucket: int, seqno: int, flow_bytes: int) -> None:
        """Frames of ``vbucket`` up to ``seqno`` are written on ``conn_id`` (counted by
        flow control up to ``flow_bytes``): the target is met if it is at or below."""
        if seqno > self.reached.get(vbucket, 0):
            self.reached[vbucket] = seqno
        target = self.targets.get(vbucket)
        if target is not None and seqno >= target and vbucket not in self.written:
            self.written[vbucket] = (conn_id, flow_bytes)

    def resumed(self, conn_id: int, vbucket: int, start_seqno: int) -> None:
        """A stream of ``vbucket`` was opened on ``conn_id`` from ``start_seqno``: the
        consumer holds everything up to it already (it got it on an earlier connection
        or stream), so a target at or below it is met with nothing to write or
        acknowledge (issue 45: a consumer that reconnected after getting every item
        waited for a write that would never come)."""
        self.seen(conn_id, vbucket, start_seqno, 0)

    def _counts(self, event: ev.ProducerEvent) -> bool:
        return self.spec.connection is None or event.name == self.spec.connection

    def observe(self, event: ev.ProducerEvent) -> None:
        if isinstance(event, ev.ConnectionOpened):
            self.open_conns.add(event.conn_id)
        elif isinstance(event, ev.ConnectionClosed):
            self.open_conns.discard(event.conn_id)
            if event.reason.startswith("idle") and self._counts(event):
                self.noops_missed += 1
        if not self._counts(event):
            return
        if isinstance(event, ev.SeqnoWritten | ev.StreamWritten):
            flow_bytes = event.flow_bytes if isinstance(event, ev.SeqnoWritten) else 0
            self.seen(event.conn_id, event.vbucket, event.seqno, flow_bytes)
        elif isinstance(event, ev.BytesAcked):
            self.bytes_acked += event.nbytes
            self.acked_total[event.conn_id] = event.total
        elif isinstance(event, ev.StreamOpened):
            self.opened.add(event.vbucket)
            self.resumed(event.conn_id, event.vbucket, event.start_seqno)
        elif isinstance(event, ev.NoopAnswered):
            self.noops_answered += 1
        elif isinstance(event, ev.StreamRequested):
            self._on_request(event)

    def _on_request(self, event: ev.StreamRequested) -> None:
        if event.rollback_seqno is not None:
            self.rollbacks[event.vbucket] = event.rollback_seqno
        elif event.vbucket in self.rollbacks and event.start_seqno <= self.rollbacks[event.vbucket]:
            self.rolled_back.add(event.vbucket)

    def met(self) -> bool:
        s = self.spec
        checks = [
            s.seqno is None or set(self.written) >= set(self.targets),
            not s.acked or all(self._acked(vb) for vb in self.targets),
            s.connections is None or len(self.open_conns) >= s.connections,
            not s.streams or self.opened >= set(self.vbuckets),
            s.bytes_acked is None or self.bytes_acked >= s.bytes_acked,
            s.noops_answered is None or self.noops_answered >= s.noops_answered,
            s.noops_missed is None or self.noops_missed >= s.noops_missed,
            not s.rollback or self.rolled_back >= set(self.vbuckets),
        ]
        return all(checks)

    def _acked(self, vb: int) -> bool:
        if vb not in self.written:
            return False
        conn, flow_bytes = self.written[vb]
        return self.acked_total.get(conn, 0) >= flow_bytes

    def describe(self) -> str:
        """What is still missing, for a timeout message (the counts are of what
        happened since the wait began)."""
        missing = sorted(set(self.targets) - set(self.written))
        parts = []
        if missing:
            shown = ", ".join(
                f"vb {vb} seqno {self.targets[vb]} (written up to {self.reached.get(vb, 0)})"
                for vb in missing[:5]
            )
            parts.append(f"not yet written: {shown}{' ...' if len(missing) > 5 else ''}")
        parts.append(
            f"connections {len(self.open_conns)}; since the wait began: streams opened "
            f"{len(self.opened)}, bytes acked {self.bytes_acked}, noops answered "
            f"{self.noops_answered}, rollbacks taken {sorted(self.rolled_back)}"
        )
        return "; ".join(parts)


class Route(enum.StrEnum):
    """How a consumer reached the right outcome of an expectation that has more than one
    way there (reports show it beside the verdict)."""

    #: ROLLBACK answered, then asked again at or below its seqno
    ROLLED_BACK = "rolled back"
    #: no ROLLBACK needed: after the branch it asked again from at or below the branch
    #: point, although it had been sent writes above it (it held them back, as
    #: java-dcp-client's rollback mitigation does: kafka-connect-couchbase
    #: ``couchbase.persistence.polling.interval``)
    RESUMED_BELOW_BRANCH = "resumed below the branch"
    #: it was never sent a write above the branch point (it streamed only what was
    #: persisted) and went on with the new branch
    MITIGATED = "mitigated"
    #: a resume with the snapshot range the consumer received
    SNAPSHOT_RECEIVED = "the snapshot received"
    #: a resume at the end of a complete snapshot, given as (seqno, seqno): the same
    #: point (kv_engine ``docs/dcp/documentation/rollback.md``: a consumer that holds a
    #: whole snapshot may resume with either range)
    COMPLETE_SNAPSHOT = "the complete snapshot at its end"
    #: a resume below the expected point by a consumer that mitigates rollbacks (it asks
    #: OBSERVE_SEQNO and delivers a write only once told it is persisted: java-dcp-client
    #: ``PersistencePollingHandler``, whose ``StreamEventBuffer`` drops what it held back
    #: when the stream ends): it resumes from what it delivered, and is sent the rest again
    HELD_BACK = "held back unpersisted writes"


@attrs.frozen
class Branch:
    """Where the stream's history was cut before an expectation began: when (events
    after it count as the consumer's answer to it) and, when known, the seqno the new
    branch starts from (a consumer at or below it holds nothing the cut lost)."""

    time: float
    seqno: int | None = None


@attrs.define
class ExpectationCheck:
    """One ``expect`` step: fed the events since the scenario began, then each new one;
    ``passed`` once what it names has happened.

    Expectations judge outcomes, not one way to them (issue 29): a ``rollback``
    passes when the consumer takes the ROLLBACK, or when, after the branch, it asks
    again from at or below the branch point without needing one (``route`` says
    which); a ``resume`` with a snapshot range also passes with the other range that
    names the same complete snapshot, and from below the expected point when the
    consumer mitigates rollbacks (it had not delivered what it was sent). Whether the
    consumer ended up holding writes the branch lost, or all the writes, is its final
    state's question (``mockdcp check`` verifies that).
    """

    spec: st.Expect
    #: when the expect step began (for ``reconnected``)
    began: float
    #: the history cut a ``rollback`` expectation is about (None: only a ROLLBACK shows it)
    branch: Branch | None = None
    passed: bool = False
    detail: str = ""
    route: Route | None = None
    #: ``conformant``: the first violation the protocol checker reported
    _violation: ev.ProtocolViolation | None = None
    _rollback_to: int | None = None
    _acked: int = 0
    _counted: int = 0
    _closed_at: float | None = None
    _requests: list[ev.StreamRequested] = attrs.field(factory=list)
    #: the highest seqno of the rollback's vbucket written before the branch
    _sent_before: int = 0
    #: OBSERVE_SEQNO was answered (``SeqnoObserved``): the consumer mitigates rollbacks
    _observing: bool = False
    #: ``resume``: an accepted request from below the expected point, which passes once
    #: the consumer shows it mitigates rollbacks (it may poll only after requesting)
    _below: ev.StreamRequested | None = None

    @property
    def name(self) -> str:
        s = self.spec
        if s.name:
            return s.name
        if s.rollback is not None:
            to = "" if s.rollback.to is None else f" to {s.rollback.to}"
            return f"rollback of vbucket {s.rollback.vbucket}{to}"
        if s.resume is not None:
            return f"resume of vbucket {s.resume.vbucket} from {s.resume.seqno}"
        if s.acked is not None:
            return f"{s.acked} bytes acknowledged"
        if s.reconnected:
            return f"reconnected within {s.within:g}s"
        if s.conformant:
            return "no protocol violations"
        if s.configs_pushed is not None:
            return f"{s.configs_pushed} cluster configs pushed"
        return f"{s.noops_answered} noops answered"

    @property
    def settled(self) -> bool:
        """Nothing later can change the outcome: passed, or (``conformant``) a
        violation seen. The runner waits for it up to ``within``, then ``finish``es."""
        return self._violation is not None if self.spec.conformant else self.passed

    def finish(self) -> None:
        """``within`` is over (or the check settled): a ``conformant`` check passes when
        no violation came."""
        if self.spec.conformant:
            self.passed = self._violation is None
            self.detail = "" if self.passed else self._violation_text()
            if self.passed:
                self.detail = "the protocol checker reported nothing"

    def _violation_text(self) -> str:
        v = self._violation
        assert v is not None
        where = f" (conn {v.conn_id} {v.name!r})"
        return f"{v.rule}: {v.message}{where} [{v.summary}]"

    def observe(self, event: ev.ProducerEvent) -> None:
        if self.passed or self._violation is not None:
            return
        s = self.spec
        if s.conformant:
            if isinstance(event, ev.ProtocolViolation):
                self._violation = event
            return
        if isinstance(event, ev.SeqnoObserved):
            self._observing = True
            if self._below is not None:
                self._pass_held_back(self._below)
        elif isinstance(event, ev.StreamRequested):
            self._requests.append(event)
            if s.rollback is not None:
                self._on_rollback_request(event)
            elif s.resume is not None:
                self._on_resume_request(event)
        elif isinstance(event, ev.SeqnoWritten | ev.StreamWritten) and s.rollback is not None:
            self._on_written(event)
        elif isinstance(event, ev.BytesAcked) and s.acked is not None:
            self._acked += event.nbytes
            self.passed = self._acked >= s.acked
        elif isinstance(event, ev.NoopAnswered) and s.noops_answered is not None:
            self._counted += 1
            self.passed = self._counted >= s.noops_answered
        elif isinstance(event, ev.ConfigPushed) and s.configs_pushed is not None:
            self._counted += 1
            self.passed = self._counted >= s.configs_pushed
        elif s.reconnected:
            self._on_connection(event)

    @property
    def branch_point(self) -> int | None:
        """The seqno at or below which a consumer holds nothing the branch lost: the
        expected ROLLBACK seqno and the new branch's start, the lower of those known."""
        target = self.spec.rollback
        known = [
            seqno
            for seqno in (
                None if target is None else target.to,
                None if self.branch is None else self.branch.seqno,
            )
            if seqno is not None
        ]
        return min(known) if known else None

    def _on_written(self, event: ev.SeqnoWritten | ev.StreamWritten) -> None:
        target = self.spec.rollback
        assert target is not None
        if event.vbucket == target.vbucket and (
            self.branch is None or event.time <= self.branch.time
        ):
            self._sent_before = max(self._sent_before, event.seqno)

    def _on_rollback_request(self, event: ev.StreamRequested) -> None:
        target = self.spec.rollback
        assert target is not None
        if event.vbucket != target.vbucket:
            return
        if event.rollback_seqno is not None:
            if self._rollback_to is not None and event.start_seqno > self._rollback_to:
                self.detail = (
                    f"ROLLBACK to {self._rollback_to} sent, but the consumer re-requested "
                    f"from {event.start_seqno}"
                )
            if target.to is None or event.rollback_seqno == target.to:
                self._rollback_to = event.rollback_seqno
            else:
                self.detail = f"ROLLBACK to {event.rollback_seqno}, expected {target.to}"
        elif self._rollback_to is not None and event.start_seqno <= self._rollback_to:
            self._pass(
                Route.ROLLED_BACK,
                f"re-requested from {event.start_seqno} after ROLLBACK to {self._rollback_to}",
            )
        elif self._rollback_to is not None:
            self.detail = (
                f"ROLLBACK to {self._rollback_to} sent, but the consumer re-requested "
                f"from {event.start_seqno}"
            )
        else:
            self._on_request_without_rollback(event)

    def _on_request_without_rollback(self, event: ev.StreamRequested) -> None:
        """A request that needed no ROLLBACK: right if it came after the branch, was
        accepted, and starts at or below the branch point."""
        point = self.branch_point
        if self.branch is None or point is None or event.time <= self.branch.time:
            return
        if event.status != "SUCCESS":
            return
        if event.start_seqno > point:
            self.detail = (
                f"accepted from {event.start_seqno}, above the branch point {point}, "
                "without a ROLLBACK"
            )
            return
        if self._sent_before <= point:
            self._pass(
                Route.MITIGATED,
                f"never sent past the branch point {point}; re-requested from "
                f"{event.start_seqno} on the new branch",
            )
        else:
            self._pass(
                Route.RESUMED_BELOW_BRANCH,
                f"re-requested from {event.start_seqno} (at or below the branch point "
                f"{point}, sent up to {self._sent_before}) without needing a ROLLBACK",
            )

    def _pass(self, route: Route, detail: str) -> None:
        self.passed, self.route = True, route
        self.detail = f"{route}: {detail}"

    def _on_resume_request(self, event: ev.StreamRequested) -> None:
        r = self.spec.resume
        assert r is not None
        if event.vbucket != r.vbucket:
            return
        if event.status != "SUCCESS":
            self.detail = f"a request from {event.start_seqno} was answered {event.status}"
            return
        wanted = {
            "start seqno": (event.start_seqno, r.seqno),
            "snap start": (event.snap_start_seqno, r.snap_start),
            "snap end": (event.snap_end_seqno, r.snap_end),
            "uuid": (event.vbucket_uuid, r.uuid),
        }
        wrong = [
            f"{k} {got} (expected {exp})"
            for k, (got, exp) in wanted.items()
            if exp is not None and got != exp
        ]
        snapshot = f"snapshot {event.snap_start_seqno}-{event.snap_end_seqno}"
        if not wrong:
            route = (
                Route.COMPLETE_SNAPSHOT
                if event.snap_start_seqno == event.snap_end_seqno == event.start_seqno
                else Route.SNAPSHOT_RECEIVED
            )
            self._pass(route, f"requested from {event.start_seqno} with the {snapshot}")
        elif self._same_complete_snapshot(event):
            self._pass(
                Route.COMPLETE_SNAPSHOT if r.snap_start != r.snap_end else Route.SNAPSHOT_RECEIVED,
                f"requested from {event.start_seqno} with the {snapshot} (the same complete "
                f"snapshot as {r.snap_start}-{r.snap_end})",
            )
        else:
            self.detail = "requested with " + ", ".join(wrong)
            if self._below_point(event):
                self._below = event
                if self._observing:
                    self._pass_held_back(event)

    def _below_point(self, event: ev.StreamRequested) -> bool:
        """A request from below the expected point, within the snapshot it names
        (whether the consumer could hold that snapshot is the protocol checker's
        question): right for a consumer that mitigates rollbacks."""
        r = self.spec.resume
        assert r is not None
        return (
            event.start_seqno < r.seqno
            and event.snap_start_seqno <= event.start_seqno <= event.snap_end_seqno
            and (r.uuid is None or event.vbucket_uuid in (r.uuid, 0))
        )

    def _pass_held_back(self, event: ev.StreamRequested) -> None:
        r = self.spec.resume
        assert r is not None
        snapshot = f"snapshot {event.snap_start_seqno}-{event.snap_end_seqno}"
        self._pass(
            Route.HELD_BACK,
            f"requested from {event.start_seqno} with the {snapshot}, below {r.seqno}: "
            "it polls OBSERVE_SEQNO and delivers only persisted writes",
        )

    def _same_complete_snapshot(self, event: ev.StreamRequested) -> bool:
        """The request names the complete snapshot ending at ``seqno`` as the expectation
        does, by the other of its two ranges: (seqno, seqno) for the one received, or
        the other way round. Only the snapshot range differs; a start within a snapshot
        has one right range, the one received."""
        r = self.spec.resume
        assert r is not None
        if event.start_seqno != r.seqno or (r.uuid is not None and event.vbucket_uuid != r.uuid):
            return False
        expected_end = r.seqno if r.snap_end is None else r.snap_end
        return (
            expected_end == r.seqno
            and event.snap_end_seqno == r.seqno
            and event.snap_start_seqno <= r.seqno
            and (r.snap_start is None or r.snap_start <= r.seqno)
        )

    def _on_connection(self, event: ev.ProducerEvent) -> None:
        if isinstance(event, ev.ConnectionClosed):
            self._closed_at = event.time
        elif isinstance(event, ev.DcpOpened) and self._closed_at is not None:
            took = event.time - self._closed_at
            if took <= self.spec.within:
                self.passed = True
                self.detail = f"reconnected after {took:.2f}s"

    def failure(self) -> str:
        """Why the expectation did not pass (for the report)."""
        if self.detail:
            return self.detail
        if self.spec.rollback is not None:
            if self._rollback_to is not None:
                return "rollback never taken"
            point = self.branch_point
            if point is None:
                return "no ROLLBACK sent"
            return (
                f"no ROLLBACK taken, nor an accepted request at or below the branch point "
                f"{point} after the branch"
            )
        if self.spec.resume is not None:
            return f"no stream request for vbucket {self.spec.resume.vbucket}"
        if self.spec.acked is not None:
            return f"{self._acked} bytes acknowledged"
        if self.spec.reconnected:
            return "no DCP connection after the last disconnect"
        if self.spec.conformant and self._violation is not None:
            return self._violation_text()
        if self.spec.configs_pushed is not None:
            return (
                f"{self._counted} cluster configs pushed (pushes go to connections whose "
                "HELLO asked for clustermap change notification)"
            )
        return f"{self._counted} noops answered"
