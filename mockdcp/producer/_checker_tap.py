"""The protocol checker's tap on one connection: what it is shown, and what it found.

The checker (``_checker``) only observes: it is shown each request before its answer,
each reply, what each write carries (stream progress, STREAM_ENDs, DCP_NOOPs) when it
is handed out, and the time; what it finds becomes ``ProtocolViolation`` events. One
that fails is a bug of its own, logged, and the producer goes on as if it were not
there. Sources of the rules it checks: ``_checker_rules``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mockdcp.producer import events as ev
from mockdcp.protocol import DcpNoop, StreamEnd, StreamEndReason

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.producer._checker import CheckerRegistry, ConnectionChecker
    from mockdcp.producer._checker_rules import Violation
    from mockdcp.producer._controls import DcpSettings
    from mockdcp.producer._faults import Corruption
    from mockdcp.producer._flow import FlowWindow
    from mockdcp.protocol import Frame, Message, Response

log = logging.getLogger("mockdcp.producer")


class CheckerTap:
    """The checker watching connection ``conn_id`` from its DCP_OPEN on (``watch``),
    reporting through ``record``; ``name`` gives the connection's name now."""

    def __init__(
        self, conn_id: int, name: Callable[[], str], record: Callable[[ev.ProducerEvent], None]
    ) -> None:
        self.conn_id = conn_id
        self._name = name
        self._record = record
        self.checker: ConnectionChecker | None = None
        #: how many of the events handed out and not yet written it was shown
        self._told = 0

    def watch(
        self,
        checkers: CheckerRegistry,
        frame: Frame,
        now: float,
        *,
        opened_at: float,
        flow: FlowWindow,
        settings: DcpSettings,
        node: str = "",
    ) -> None:
        """DCP_OPEN succeeded (``frame``) on a connection to ``node`` (its name in the
        cluster: the checker counts reconnects per node): the checker of the
        connection's name watches it from now on (a second DCP_OPEN starts watching
        afresh)."""
        if self.checker is not None:
            self.checker.closed_at(now)
        try:
            checker, found = checkers.checker(self._name()).connect(
                self.conn_id,
                now,
                opened_at=opened_at,
                frame=frame,
                flow=flow,
                settings=settings,
                node=node,
            )
        except Exception:
            log.exception("connection %d: the protocol checker failed", self.conn_id)
            return
        self.checker = checker
        self.report(found)

    @property
    def snapshot_observer(self) -> Callable[[int, int | None, int, int, bool], None] | None:
        """What a stream tells of each snapshot it queues (None: no checker)."""
        return None if self.checker is None else self.checker.snapshot

    def request(self, msg: Message | Response | None, frame: Frame, now: float) -> None:
        """A request arrives (``msg`` None: it did not decode), before its answer.
        (``observe`` written out: this and ``reply`` run for every request.)"""
        checker = self.checker
        if checker is None:
            return
        try:
            found = checker.request(msg, frame, now)
        except Exception:
            log.exception("connection %d: the protocol checker failed", self.conn_id)
            return
        if found:
            self.report(found)

    def reply(self, response: Response, now: float) -> None:
        """A reply is queued."""
        checker = self.checker
        if checker is None:
            return
        try:
            found = checker.answered(response, now)
        except Exception:
            log.exception("connection %d: the protocol checker failed", self.conn_id)
            return
        if found:
            self.report(found)

    def handed_out(self, events: list[ev.ProducerEvent], now: float) -> None:
        """``events`` describe what was handed out to be written and not yet written;
        show the checker those it was not shown, and the time. Shown when handed out,
        not once written: the shell writes, then reports the write, and a consumer may
        answer (a DCP_NOOP's reply, a stream request after a STREAM_END) before that
        report; what it answers must already be known."""
        if self.checker is None:
            return
        if self._told < len(events):
            told, self._told = events[self._told :], len(events)
            self.observe(_written, self.checker, told, now)

    def written(self) -> None:
        """What was handed out is written: the next events are new."""
        self._told = 0

    def tick(self, now: float) -> None:
        if self.checker is not None:
            self.observe(self.checker.tick, now)

    def deadline(self) -> float | None:
        """When the checker must be shown the time again (None: no need)."""
        return None if self.checker is None else self.checker.deadline()

    def closed_at(self, now: float) -> None:
        if self.checker is not None:
            self.checker.closed_at(now)

    def corrupted(self, kind: Corruption) -> None:
        """A damaged frame was handed out (the ``corrupt`` step)."""
        if self.checker is not None:
            self.checker.corrupted(kind)

    def observe(self, verb: Callable[..., list[Violation]], *args: object) -> None:
        """Run one of the checker's verbs and ``report`` what it found (a failure is
        logged: the checker only observes)."""
        try:
            self.report(verb(*args))
        except Exception:
            log.exception("connection %d: the protocol checker failed", self.conn_id)

    def report(self, violations: list[Violation]) -> None:
        """Record what the checker found (``ProtocolViolation`` events)."""
        if not violations:  # (most verbs find nothing: no name asked for)
            return
        name = self._name()
        for v in violations:
            log.info(
                "connection %d (%s): %s: %s [%s]",
                self.conn_id,
                name,
                v.rule,
                v.message,
                v.summary,
            )
            self._record(
                ev.ProtocolViolation(
                    time=v.time,
                    conn_id=self.conn_id,
                    name=name,
                    rule=v.rule,
                    message=v.message,
                    vbucket=v.vbucket,
                    stream_id=v.stream_id,
                    summary=v.summary,
                    frame=v.frame.hex(),
                )
            )


def _written(
    checker: ConnectionChecker, events: list[ev.ProducerEvent], now: float
) -> list[Violation]:
    """Tell the checker what a write carries: each stream's last seqno, STREAM_ENDs
    and DCP_NOOPs."""
    found: list[Violation] = []
    for event in events:
        if isinstance(event, ev.StreamWritten):
            checker.written(event.vbucket, event.stream_id, event.seqno)
        elif isinstance(event, ev.StreamEnded) and event.reason:
            end = StreamEnd(
                opaque=event.opaque,
                vbucket=event.vbucket,
                reason=StreamEndReason[event.reason],
                stream_id=event.stream_id,
            )
            found += checker.sent(end, now)
        elif isinstance(event, ev.NoopSent):
            found += checker.sent(DcpNoop(opaque=event.opaque), now)
    return found
