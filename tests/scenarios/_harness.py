"""Running a library scenario in-process against one consumer, and what came of it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from mockdcp.cli._check import _nothing_queued
from mockdcp.cli._explore_inprocess import settled
from mockdcp.producer.events import ProtocolViolation
from mockdcp.server import serve
from mockdcp.util._errors import MockDcpError

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.client import ClusterConsumer, DcpConsumer
    from mockdcp.producer import CheckerLimits
    from mockdcp.scenario import ExpectationResult, Scenario
    from mockdcp.server import MockDcpServer

LIBRARY = Path(__file__).resolve().parents[2] / "mockdcp" / "scenarios"
#: seconds one scenario may take before the test gives up on it
SCENARIO_LIMIT = 40.0
#: seconds the consumer gets, after the scenario's last step, to take in what was sent
SETTLE = 2.0
#: the longest wait on the consumer or expectation window of a scenario ``hurried`` for
#: a consumer that never meets them: three times the checker limits the tests give
#: (``CheckerLimits(ack_stall=1.0, reopen_within=1.0)``), and more than six times what
#: the reference consumer takes for a whole library scenario in-process (under 0.5 s,
#: but for a scenario's own ``wait: {seconds}``, which stays as it is)
HURRY = 3.0


def library() -> list[Path]:
    """Every scenario file of the library, by name."""
    return sorted(LIBRARY.glob("*.yaml"))


def hurried_text(path: Path, within: float = HURRY) -> str:
    """The library scenario at ``path`` (YAML) with every wait on the consumer's
    progress timing out, and every expectation's window ending, after ``within`` seconds
    at most (a wrong consumer that never meets one fails it that much sooner; what the
    scenario does, its ``wait: {seconds}`` included, is as it was). For the tests of
    what a wrong consumer gets wrong: the library's own windows are sized for consumers
    in other processes (a JVM's start, a re-open within 5 s) and are what the reference
    consumer passes (``test_library_scenario_passes_with_the_reference_consumer``), and
    the reference consumer passes each hurried one too
    (``test_the_reference_consumer_passes_each_hurried_scenario``)."""
    import yaml

    from mockdcp.scenario import Expect, Wait, parse_duration

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for step in data["steps"]:
        [(kind, args)] = step.items()
        if kind == "wait" and "consumer" in args:
            timeout = parse_duration(args.get("timeout", attrs.fields(Wait).timeout.default))
            args["timeout"] = min(timeout, within)
        elif kind == "expect":
            window = parse_duration(args.get("within", attrs.fields(Expect).within.default))
            args["within"] = min(window, within)
    text: str = yaml.safe_dump(data, sort_keys=False)
    return text


def hurried(path: Path, within: float = HURRY) -> Scenario:
    """``hurried_text``'s scenario."""
    from mockdcp.scenario import parse_scenario

    return parse_scenario(hurried_text(path, within), str(path))


def hurried_file(path: Path, directory: Path, within: float = HURRY) -> Path:
    """``hurried_text`` written to ``directory`` under the scenario's file name."""
    hurried = directory / path.name
    hurried.write_text(hurried_text(path, within), encoding="utf-8")
    return hurried


@attrs.frozen
class Outcome:
    """What a run of a scenario showed."""

    expectations: list[ExpectationResult]
    #: why the scenario stopped early (a wait timed out), if it did
    failure: str | None
    #: the consumer's own error, if it stopped with one
    consumer_error: str | None
    #: the consumer's live documents are the bucket's (same seqno and value per key)
    converged: bool
    violations: list[str]
    #: what the server's protocol checker reported of the consumer: "rule: message"
    protocol_violations: list[str] = attrs.field(factory=list)

    @property
    def passed(self) -> bool:
        return (
            self.failure is None
            and self.consumer_error is None
            and all(e.passed for e in self.expectations)
        )

    def explain(self) -> str:
        failed = [f"{e.name}: {e.detail}" for e in self.expectations if not e.passed]
        return (
            f"failure={self.failure!r} consumer_error={self.consumer_error!r} "
            f"failed expectations={failed} converged={self.converged} "
            f"violations={self.violations[:3]} "
            f"protocol violations={self.protocol_violations[:3]}"
        )


async def run_scenario(
    path: Path | Scenario,
    make_consumer: Callable[[str, int], DcpConsumer | ClusterConsumer],
    limit: float = SCENARIO_LIMIT,
    *,
    checker_limits: CheckerLimits | None = None,
) -> Outcome:
    """Serve ``path`` on free ports, run the consumer until the scenario ends
    (``checker_limits``: the protocol checker's, instead of the defaults)."""
    async with serve(port=0, http_port=0, scenario=path) as server:
        if checker_limits is not None:
            server.node.checker_limits = checker_limits
        consumer = make_consumer(server.host, server.kv_port)
        error: str | None = None
        stopped = trio.Event()

        async def consume() -> None:
            nonlocal error
            try:
                await consumer.run()
            except (MockDcpError, OSError, trio.BrokenResourceError) as exc:
                error = repr(exc)
            finally:
                stopped.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            with trio.move_on_after(limit) as scope:
                # a consumer that stopped (``run`` streams until cancelled: it raised)
                # answers nothing more: what is left of the scenario could only time out
                await _first(server.scenario_done, stopped)
            # "written" is not "received": give the consumer a moment to catch up
            gone = stopped.is_set() and not server.scenario_done.is_set()
            failed = server.runner.progress.failure or scope.cancelled_caught or gone
            settle = 0.0 if failed else SETTLE
            with trio.move_on_after(settle):
                # (the consumer's state has no event to wait on: polled; nothing may be
                # held for it either, as ``mockdcp check`` asks)
                await settled(
                    lambda: _nothing_queued(server) and converged(consumer, server),
                    lambda: error is not None,
                    0.01,
                )
            nursery.cancel_scope.cancel()
        failure = server.runner.progress.failure
        if scope.cancelled_caught:
            failure = f"the scenario did not finish within {limit:g}s"
        elif gone and failure is None:
            failure = "the consumer stopped before the scenario ended"
        return Outcome(
            server.expectations(),
            failure,
            error,
            converged(consumer, server),
            list(consumer.state.violations),
            protocol_violations(server),
        )


async def _first(*events: trio.Event) -> None:
    """Return once any of ``events`` is set."""
    async with trio.open_nursery() as nursery:

        async def wait(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        for event in events:
            nursery.start_soon(wait, event)


def protocol_violations(server: MockDcpServer) -> list[str]:
    """What the server's protocol checker reported, one "rule: message [frame]" each."""
    return [
        f"{e.rule}: {e.message} [{e.summary}]"
        for e in server.node.events
        if isinstance(e, ProtocolViolation)
    ]


def converged(consumer: DcpConsumer | ClusterConsumer, server: MockDcpServer) -> bool:
    """The consumer holds exactly the bucket's live documents (seqno and value)."""
    held = {k: (v.seqno, bytes(v.value)) for k, v in consumer.state.documents().items()}
    oracle = {k: (i.seqno, bytes(i.value)) for k, i in server.oracle().items()}
    return held == oracle
