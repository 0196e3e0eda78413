"""``mockdcp check``: grade a consumer command against the scenario library (issue 29).

Each scenario that applies to the consumer (its ``needs`` within ``--capabilities``)
runs on a fresh server with free ports; the consumer command starts with the
``MOCKDCP_*`` variables of ``mockdcp run`` plus the scenario's consumer settings,
``MOCKDCP_SCENARIO`` (its name), ``MOCKDCP_OUTPUT`` (where it may write what it holds),
``MOCKDCP_PROGRESS`` (where it may say how far that output goes), ``MOCKDCP_COLLECTIONS``
and ``MOCKDCP_SCOPE`` (which collections hold the scenario's documents, as ``mockdcp
run`` tells them). A scenario passes when its steps all ran, every
expectation was met, the protocol checker reported nothing of the consumer, and the
output (if it wrote one) holds exactly the oracle's documents. Each run's administrator
has a password of its own (``run_users``), given to the consumer alone: another
process's client that reaches the run's free ports with the usual credentials (a
java-dcp-client reconnecting to the port its own server had) is refused at
authentication, never streamed to nor judged as the consumer. Up to ``jobs`` scenarios
run at once; each has a time limit. The consumer's standard output and error are kept
(their last lines go into the report of a scenario it failed).

The report (``CheckReport``) is the same whatever ``jobs`` is, but for the times;
``_check_report.py`` prints it as a report card and writes JUnit XML, JSON and HTML.
"""

from __future__ import annotations

import collections
import enum
import os
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from mockdcp.producer import ProducerEvent
    from mockdcp.scenario import Scenario
    from mockdcp.server import MockDcpServer

#: the protocol checker's limits under ``check``: a scenario lasts seconds, so a stall or
#: a missing re-open must show within them (java-dcp-client and the reference consumer
#: re-open within 50 ms, go-dcp after 1 s)
CHECK_ACK_STALL = 2.0
CHECK_REOPEN_WITHIN = 2.0
#: seconds the consumer gets after the scenario's last step for its output to match,
#: counted from the last sign that it is still catching up (``_Catching``)
SETTLE = 2.0
#: the longest the output is waited for in all, however long the consumer catches up
SETTLE_LIMIT = 30.0
#: events of the consumer's connections that are no sign of catching up: the noops and
#: seqno polls an idle consumer goes on with, the maps pushed to it, what it violates
IDLE_EVENTS = frozenset(
    ("noop_sent", "noop_answered", "config_pushed", "seqno_observed", "protocol_violation")
)
#: seconds a consumer gets to exit after SIGTERM before it is killed
STOP_GRACE = 5.0
#: lines of the consumer's output kept for the report
OUTPUT_LINES = 20
#: an output larger than this (bytes) is verified by the Spark job, not in-process
SPARK_ABOVE = 256 * 1024 * 1024
#: evidence lines kept per failed scenario
EVIDENCE_LINES = 200
#: the phases of one scenario's run, in order (``ScenarioResult.phases``): the server
#: starting, the consumer process starting until its first connection, the scenario
#: (its steps, waits and faults), the output settling, the consumer stopping, judging,
#: the server stopping
PHASES = ("server", "consumer start", "scenario", "settle", "stop", "judge", "server stop")


def run_users() -> Mapping[str, str]:
    """The users of one run's server: the administrator with a password made for this
    run (the consumer is told it: ``MOCKDCP_PASSWORD``), so that only the consumer the
    run started can log in (a scenario's consumer user is added to them)."""
    import secrets

    from mockdcp.server import DEFAULT_USERS

    return {name: f"run-{secrets.token_hex(12)}" for name in DEFAULT_USERS}


class Verdict(enum.StrEnum):
    """A scenario's result."""

    PASSED = "pass"
    FAILED = "fail"
    NOT_APPLICABLE = "not applicable"


@attrs.define
class ScenarioResult:
    """One scenario's verdict, its reason in one line, and what shows it."""

    name: str
    path: str
    verdict: Verdict
    reason: str
    tags: list[str] = attrs.field(factory=list)
    needs: list[str] = attrs.field(factory=list)
    #: the collections the scenario writes documents to, and their one scope (the
    #: consumer's ``MOCKDCP_COLLECTIONS`` and ``MOCKDCP_SCOPE``)
    collections: list[str] = attrs.field(factory=list)
    scope: str = ""
    reproduces: dict[str, str] | None = None
    seconds: float = 0.0
    expectations: list[dict[str, Any]] = attrs.field(factory=list)
    #: what the protocol checker reported of the consumer
    violations: list[dict[str, Any]] = attrs.field(factory=list)
    #: the output's verification (a ``VerifyReport`` as JSON), if it wrote one
    verification: dict[str, Any] | None = None
    #: why the output was not verified, or could not be read
    output: str = ""
    consumer_exit: int | None = None
    #: the consumer's last lines of output (kept for failures)
    consumer_output: list[str] = attrs.field(factory=list)
    #: for a failure: the requests the consumer sent and what it was sent, in order
    evidence: list[str] = attrs.field(factory=list)
    #: for a failure: the expect steps that failed, as written
    failed_steps: list[dict[str, Any]] = attrs.field(factory=list)
    #: where ``seconds`` went, phase by phase (``PHASES``, in order; a phase that did not
    #: happen is absent): all but ``scenario`` is ``check``'s own overhead
    phases: dict[str, float] = attrs.field(factory=dict)
    #: seconds of ``check``'s own, beyond what the scenario itself took (its steps,
    #: waits and faults, from the consumer's first connection to its last step)
    overhead: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "verdict": str(self.verdict)}

    def comparable(self) -> dict[str, Any]:
        """What must not depend on timing or ``jobs``: the verdict, the reason, which
        expectations passed and how, the rules broken, the output's counts."""
        verification = self.verification or {}
        return {
            "name": self.name,
            "verdict": str(self.verdict),
            "reason": self.reason,
            "expectations": [(e["name"], e["passed"], e.get("route")) for e in self.expectations],
            "rules": sorted({v["rule"] for v in self.violations}),
            "output": {k: verification.get(k) for k in ("missing", "phantom", "stale")},
        }


@attrs.define
class CheckReport:
    """Every scenario's result, in library order."""

    command: list[str]
    results: list[ScenarioResult]
    seconds: float
    jobs: int
    capabilities: list[str] | None

    @property
    def passed(self) -> bool:
        """Every scenario that applies passed."""
        return all(r.verdict is not Verdict.FAILED for r in self.results)

    def counts(self) -> dict[str, int]:
        found = collections.Counter(r.verdict for r in self.results)
        return {str(v): found.get(v, 0) for v in Verdict}

    def as_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "counts": self.counts(),
            "command": self.command,
            "seconds": self.seconds,
            "jobs": self.jobs,
            "capabilities": self.capabilities,
            "scenarios": [r.as_dict() for r in self.results],
        }


@attrs.frozen(kw_only=True)
class CheckOptions:
    """How ``check`` runs each scenario."""

    command: list[str]
    jobs: int = 1
    #: seconds per scenario
    limit: float = 60.0
    #: seconds for the consumer to connect before the scenario fails
    connect_within: float = 15.0
    #: the scenario's waits, timed ones too, count from the consumer's first stream, not
    #: its first connection (``ConsumerStart``: ``mockdcp explore``'s schedules)
    start_on_stream: bool = False
    #: what the consumer supports (None: everything)
    capabilities: frozenset[str] | None = None
    #: keep each scenario's output here (``NAME.out``) instead of a temporary directory
    output_dir: Path | None = None
    host: str = "127.0.0.1"


def applicable(scenario: Scenario, capabilities: frozenset[str] | None) -> str | None:
    """Why ``scenario`` does not apply to a consumer with ``capabilities`` (None: it does)."""
    if capabilities is None:
        return None
    missing = [str(n) for n in scenario.needs if str(n) not in capabilities]
    if not missing:
        return None
    declared = ", ".join(sorted(capabilities)) or "nothing"
    return f"needs {', '.join(missing)} (the consumer supports {declared})"


def _meta(scenario: Scenario) -> dict[str, Any]:
    rep = scenario.reproduces
    return {
        "collections": list(scenario.collections()),
        "scope": scenario.scope(),
        "tags": list(scenario.tags),
        "needs": [str(n) for n in scenario.needs],
        "reproduces": None if rep is None else {"summary": rep.summary, "source": rep.source},
    }


# -- one scenario -------------------------------------------------------------------------


@attrs.define
class _Consumer:
    """The consumer process of one scenario and what it printed."""

    proc: trio.Process
    lines: collections.deque[str] = attrs.field(
        factory=lambda: collections.deque(maxlen=OUTPUT_LINES)
    )
    exited: trio.Event = attrs.field(factory=trio.Event)

    async def read(self) -> None:
        """Keep the last lines of its output (read to the end: it must never block)."""
        assert self.proc.stdout is not None
        pending = b""
        async for chunk in self.proc.stdout:
            pending += chunk
            *whole, pending = pending.split(b"\n")
            self.lines.extend(line.decode("utf-8", "replace").rstrip() for line in whole)
        if pending:
            self.lines.append(pending.decode("utf-8", "replace").rstrip())

    async def watch(self) -> None:
        await self.proc.wait()
        self.exited.set()

    async def stop(self) -> None:
        """SIGTERM to its process group, then SIGKILL after ``STOP_GRACE`` seconds
        (``_consumer_process``: also what it started, also once it has exited)."""
        from mockdcp.cli._consumer_process import stop_consumer

        await stop_consumer(self.proc, STOP_GRACE)


async def check_scenario(scenario: Scenario, options: CheckOptions) -> ScenarioResult:
    """Run one scenario against the consumer command (see the module docstring)."""
    started = time.perf_counter()
    result = ScenarioResult(scenario.name, scenario.source, Verdict.PASSED, "", **_meta(scenario))
    why_not = applicable(scenario, options.capabilities)
    if why_not is not None:
        result.verdict, result.reason = Verdict.NOT_APPLICABLE, why_not
        return result
    phases = _Phases(result.phases, started)
    with tempfile.TemporaryDirectory(prefix="mockdcp-check-") as scratch:
        folder = options.output_dir or Path(scratch)
        output = folder / f"{scenario.name}.out"
        await _run(scenario, options, output, result, phases)
    phases.end("server stop")  # and its scratch directory's removal
    result.seconds = phases.last - started  # the phases' sum, whatever the machine's load
    result.overhead = max(0.0, result.seconds - result.phases.get("scenario", 0.0))
    return result


@attrs.define
class _Phases:
    """Times one scenario's run phase by phase (``PHASES``): each ``end`` closes the
    phase begun at the previous one, so the phases add up to ``last`` less the start."""

    into: dict[str, float]
    last: float = attrs.field(factory=time.perf_counter)

    def end(self, phase: str, at: float | None = None) -> None:
        now = time.perf_counter() if at is None else at
        self.into[phase] = self.into.get(phase, 0.0) + max(0.0, now - self.last)
        self.last = max(self.last, now)


async def _run(
    scenario: Scenario,
    options: CheckOptions,
    output: Path,
    result: ScenarioResult,
    phases: _Phases,
) -> None:
    from mockdcp.cli._consumer_process import open_consumer
    from mockdcp.cli._scenario_commands import collections_env, consumer_env
    from mockdcp.producer import CheckerLimits
    from mockdcp.scenario import ConsumerStart
    from mockdcp.server import serve

    progress = _progress_path(output)
    _remove(output)
    _remove(progress)
    async with serve(
        host=options.host,
        port=0,
        http_port=0,
        scenario=scenario,  # as read (``select``): not read and parsed again
        consumer_starts_within=ConsumerStart(options.connect_within, options.start_on_stream),
        users=run_users(),
    ) as server:
        phases.end("server")
        server.node.checker_limits = CheckerLimits(
            ack_stall=CHECK_ACK_STALL, reopen_within=CHECK_REOPEN_WITHIN
        )
        env = {
            **os.environ,
            **consumer_env(server),
            **scenario.consumer.environment(),
            **collections_env(scenario),
            "MOCKDCP_SCENARIO": scenario.name,
            "MOCKDCP_OUTPUT": str(output),
            "MOCKDCP_PROGRESS": str(progress),
        }
        try:
            proc = await open_consumer(
                options.command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        except OSError as exc:
            result.verdict = Verdict.FAILED
            result.reason = f"the consumer command could not start: {exc}"
            return
        consumer = _Consumer(proc)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consumer.read)
                nursery.start_soon(consumer.watch)
                marks: dict[str, float] = {}
                trouble = await _until_done(server, consumer, options, marks)
                if "connected" in marks:
                    phases.end("consumer start", marks["connected"])
                phases.end("scenario" if "connected" in marks else "consumer start")
                if trouble is None:
                    _persist_after(server)
                    await _settle(server, output, progress)
                    phases.end("settle")
                await consumer.stop()
                phases.end("stop")
                nursery.cancel_scope.cancel()
        finally:
            # cancelled (Ctrl-C, a run stopped early): the consumer is never left behind
            with trio.CancelScope(shield=True):
                await consumer.stop()
        _judge(server, scenario, consumer, output, trouble, result)
        phases.end("judge")
    phases.end("server stop")


async def _until_done(
    server: MockDcpServer,
    consumer: _Consumer,
    options: CheckOptions,
    marks: dict[str, float],
) -> str | None:
    """Wait for the scenario's end; what went wrong first instead (the consumer exited,
    never connected, the time limit), if anything. ``marks["connected"]``: when the
    consumer first connected (``time.perf_counter``), if it did."""
    from mockdcp.producer import events

    connected = trio.Event()

    def on_connected() -> None:
        if not connected.is_set():
            marks["connected"] = time.perf_counter()
            connected.set()

    if any(isinstance(e, events.ConnectionOpened) for e in server.runner.history):
        on_connected()

    def on_event(event: ProducerEvent) -> None:
        if isinstance(event, events.ConnectionOpened):
            on_connected()

    server.node.subscribers.append(on_event)
    trouble: list[str] = []
    try:
        async with trio.open_nursery() as nursery:

            async def first(wait: Callable[[], Any], problem: str | None) -> None:
                await wait()
                if problem is not None and not server.scenario_done.is_set():
                    trouble.append(problem)
                nursery.cancel_scope.cancel()

            async def never_connected() -> None:
                with trio.move_on_after(options.connect_within) as scope:
                    await connected.wait()
                if scope.cancelled_caught:
                    within = options.connect_within
                    trouble.append(f"the consumer never connected within {within:g}s")
                    nursery.cancel_scope.cancel()

            nursery.start_soon(first, server.scenario_done.wait, None)
            nursery.start_soon(first, consumer.exited.wait, "exited")
            nursery.start_soon(first, partial(trio.sleep, options.limit), "limit")
            nursery.start_soon(never_connected)
    finally:
        server.node.subscribers.remove(on_event)
    if not trouble:
        return None
    if trouble[0] == "exited":
        code = consumer.proc.returncode
        return f"the consumer exited with {code} before the scenario ended"
    if trouble[0] == "limit":
        return f"the scenario did not finish within {options.limit:g}s"
    return trouble[0]


def _persist_after(server: MockDcpServer) -> None:
    """The scenario is over: a flusher it held (``persistence: {paused: true}``) is
    released, as a node's never stays held (kv_engine ``flusher.cc`` persists within
    milliseconds), and so is replication it held (``replication: {paused: true}``): a
    node's replica streams carry each write within milliseconds too (kv_engine
    ``DcpConsumer``, ``PassiveStream``). A consumer that mitigates rollbacks
    (java-dcp-client ``mitigateRollbacks``, go-dcp's rollback mitigation, which delivers
    up to the lowest seqno the active and every replica persisted: go-dcp
    ``couchbase/rollback_mitigation.go`` ``getMinSeqNo``) delivers a write only once it
    is persisted where it looks: without this, the writes made after the last pause
    would be missing from its output although it behaved as it should."""
    server.set_persistence_paused(False)
    cluster = server.node.topology.cluster
    cluster.resume_replication()
    cluster.replicate()


async def _settle(server: MockDcpServer, output: Path, progress: Path) -> None:
    """ "Written" is not "received": while the consumer keeps an output that does not
    match yet, wait for it (there is no event to wait on: poll), up to ``SETTLE``
    seconds past its last sign of catching up (``_Catching``), ``SETTLE_LIMIT`` in all.
    A scenario's waits are met by what the server writes (``wait: {consumer: {seqno}}``),
    so its last steps may be over before the consumer has read them: on a loaded
    machine it may still have a dropped connection to resume, a backlog to read, when
    the scenario ends. A fixed window failed such a consumer (it held 2 of 8 documents,
    the resume after a corrupted value still to come, when the window ran out) while a
    wrong one that no longer moves is judged as soon as before, and one the scenario
    failed already at once.

    An output that matches ends the wait at once only when the consumer has read
    everything written to it (``_read_all_written``) and nothing is left to write to
    it (``_nothing_queued``), or when it says it has read everything (``progress``,
    ``_reported_all``); otherwise it may match only because the consumer has read
    neither a write nor its deletion (they leave the oracle as it was), and stopping it
    then caught it between the two: a consumer slow to record each mutation was failed
    with the written key "a phantom" (``test_check_settle``), and one whose write and
    deletion were still held by a stall was stopped before it read either. Such a match
    is waited on as a standing output is.

    An output not written yet is waited for in the same way: a consumer slow to start
    (a JVM's, one that writes its output once it has caught up) was stopped at once
    and, having written nothing, passed unverified ("no output written"). A consumer
    that writes no output is judged ``SETTLE`` seconds after its connections fall
    idle."""
    if _failed_already(server):
        return
    rows = server.oracle().rows()
    newest = _newest_seqnos(rows)
    catching = _Catching(server)
    with trio.move_on_after(SETTLE_LIMIT):
        while not _exists(output):
            if not catching.within(SETTLE, _ABSENT):
                return
            await trio.sleep(0.05)
        while True:
            # how far the output goes is read before the output: it was written after
            read_all = _nothing_queued(server) and _read_all_written(server, newest)
            reported = read_all or _reported_all(server, progress)
            standing = _standing(rows, output)
            if standing is None and reported:
                return
            if not catching.within(SETTLE, _MATCHED if standing is None else standing):
                return
            await trio.sleep(0.05)


#: ``_settle``'s mark of an output that matches (``_standing``'s counts are never negative)
_MATCHED = (-1,)
#: ``_settle``'s mark of an output not written yet
_ABSENT = (-2,)


def _progress_path(output: Path) -> Path:
    """Where the consumer may say how far ``output`` goes (``MOCKDCP_PROGRESS``)."""
    return output.with_name(f"{output.name}.progress")


def _newest_seqnos(rows: list[dict[str, Any]]) -> dict[int, int]:
    """The seqno of each vbucket's newest live document among the oracle's ``rows``."""
    newest: dict[int, int] = {}
    for row in rows:
        vb = row["vbucket"]
        newest[vb] = max(newest.get(vb, 0), row["seqno"])
    return newest


def _nothing_queued(server: MockDcpServer) -> bool:
    """Whether no connection of any node of any bucket has anything left to write
    (``Node.holds_output``: frames behind a full flow-control window or a stall, items
    of a vbucket its streams have not read, bytes not yet written). A write and its
    deletion still held there leave the oracle as it was, and ``_read_all_written``
    only sees what was written."""
    return not any(node.holds_output() for node in server.buckets.every_node())


def _read_all_written(server: MockDcpServer, newest: dict[int, int]) -> bool:
    """Whether a consumer whose output matches the oracle has read every item written
    to it: nothing was written on any vbucket past the seqno of its newest live
    document (``newest``, ``_newest_seqnos``), which that output holds (a vbucket's
    items come in seqno order, and an output that holds that version took in what came
    before it). An item written past it (a deletion, a document of a collection dropped
    since, a write a failover lost) may not have been read yet."""
    from mockdcp.producer.events import StreamWritten

    return not any(
        isinstance(e, StreamWritten) and e.seqno > newest.get(e.vbucket, 0)
        for e in server.runner.history
    )


def _reported_all(server: MockDcpServer, progress: Path) -> bool:
    """Whether the consumer says (``MOCKDCP_PROGRESS``, as ``mockdcp tail`` writes it:
    ``mockdcp.client.write_progress``) that its output holds every seqno of every
    vbucket: on the active copy's branch (the newest uuid of its failover log) and up to
    its high seqno. A consumer that says nothing, a vbucket it holds on another branch
    (it has a rollback to come) or below the high seqno (a filtered or legacy stream
    that is never sent the last seqnos) is not taken as having read all. A report that
    cannot be read is none."""
    import json

    try:
        reported = json.loads(progress.read_bytes())["vbuckets"]
        held = {int(vb): (int(p["uuid"]), int(p["seqno"])) for vb, p in reported.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    for vbucket in server.bucket.vbuckets:
        if vbucket.high_seqno == 0:
            continue
        uuid, seqno = held.get(vbucket.vbid, (None, 0))
        if uuid != vbucket.failover.newest_uuid or seqno < vbucket.high_seqno:
            return False
    return True


def _failed_already(server: MockDcpServer) -> bool:
    """The scenario fails whatever the output comes to hold: a rule broken, an
    expectation missed, a step failed. Its output is judged as it is (a consumer that
    re-requests in a loop, ROLLBACK after ROLLBACK, never stops moving)."""
    progress = server.runner.progress
    return (
        progress.failure is not None
        or server.node.counts["protocol_violation"] > 0
        or any(not e.passed for e in progress.expectations)
    )


@attrs.define
class _Catching:
    """Whether the consumer still shows signs of catching up: its connections do
    something other than idle (``IDLE_EVENTS``), or its output stands otherwise against
    the oracle (``_standing``; a file written again as it was is no sign)."""

    server: MockDcpServer
    _mark: tuple[int, tuple[int, ...]] | None = None
    _since: float = 0.0

    def within(self, quiet: float, standing: tuple[int, ...]) -> bool:
        """False once nothing moved for ``quiet`` seconds."""
        now = trio.current_time()
        counts = self.server.node.counts
        mark = (sum(n for kind, n in counts.items() if kind not in IDLE_EVENTS), standing)
        if mark != self._mark:
            self._mark, self._since = mark, now
        return now - self._since < quiet


def _exists(path: Path) -> bool:
    return path.exists()


def _standing(rows: list[dict[str, Any]], output: Path) -> tuple[int, ...] | None:
    """How the output stands against the oracle's ``rows``: None once it matches, else
    its counts (missing, phantom, stale, wrong-value, duplicates, rows, matched; empty
    while it cannot be read)."""
    from mockdcp.data import PipelineError
    from mockdcp.pipeline import verify_rows

    try:
        report = verify_rows(rows, output)
    except PipelineError:
        return ()
    if report.differences == 0:
        return None
    return (
        report.missing,
        report.phantom,
        report.stale,
        report.wrong_value,
        report.duplicates,
        report.actual_rows,
        report.matched,
    )


def _remove(path: Path) -> None:
    """A previous run's output is not this one's."""
    import shutil

    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


# -- judging --------------------------------------------------------------------------


def _judge(
    server: MockDcpServer,
    scenario: Scenario,
    consumer: _Consumer,
    output: Path,
    trouble: str | None,
    result: ScenarioResult,
) -> None:
    """Fill ``result`` from what the server saw, the consumer did and wrote."""
    from mockdcp.producer import events

    progress = server.runner.progress
    history = server.runner.history
    result.expectations = [e.as_dict() for e in progress.expectations]
    result.violations = [_violation(e) for e in history if isinstance(e, events.ProtocolViolation)]
    result.consumer_exit = consumer.proc.returncode
    if trouble is None or not trouble.startswith("the consumer"):
        _verify_output(server, output, result)
    else:
        result.output = "not verified: the consumer did not run the scenario"
    reasons = _reasons(trouble, progress.failure, result)
    if reasons:
        result.verdict = Verdict.FAILED
        result.reason = reasons[0] + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else "")
        result.consumer_output = list(consumer.lines)
        result.evidence = evidence(history)
        result.failed_steps = _failed_steps(scenario, result.expectations)
    else:
        result.reason = _passed_reason(result)


def _reasons(trouble: str | None, failure: str | None, result: ScenarioResult) -> list[str]:
    """Why the scenario failed, the most telling first: the consumer's own trouble, the
    rules it broke, the expectations it missed, a wait that timed out, its output."""
    reasons = [] if trouble is None else [trouble]
    reasons += [f"{v['rule']}: {v['message']}" for v in result.violations]
    reasons += [f"{e['name']}: {e['detail']}" for e in result.expectations if not e["passed"]]
    if failure is not None and trouble is None:
        reasons.append(failure)
    ver = result.verification
    if ver is not None and _differences(ver):
        reasons.append("output: " + _describe_differences(ver))
    elif result.output.startswith("unreadable"):
        reasons.append(f"output {result.output}")
    return reasons


def _differences(ver: dict[str, Any]) -> int:
    return sum(ver[k] for k in ("missing", "phantom", "stale", "wrong_value", "duplicates"))


def _describe_differences(ver: dict[str, Any]) -> str:
    parts = [
        f"{ver[k]} {k.replace('_', '-')}"
        for k in ("missing", "phantom", "stale", "wrong_value", "duplicates")
        if ver[k]
    ]
    shown = next((ver["examples"][k][0] for k in ver["examples"] if ver["examples"][k]), None)
    example = "" if shown is None else f" (e.g. {shown['key']!r})"
    return f"{', '.join(parts)} of {ver['expected']} documents{example}"


def _passed_reason(result: ScenarioResult) -> str:
    n = len(result.expectations)
    routes = sorted({str(e["route"]) for e in result.expectations if e.get("route")})
    text = f"{n} expectation{'s' * (n != 1)} met" if n else "no expectation to meet"
    text += f" ({', '.join(routes)})" if routes else ""
    if result.verification is not None:
        return f"{text}; output verified ({result.verification['matched']} documents)"
    return f"{text}; {result.output}"


def _verify_output(server: MockDcpServer, output: Path, result: ScenarioResult) -> None:
    from mockdcp.data import PipelineError

    if not output.exists():
        result.output = "no output written"
        return
    rows = server.oracle().rows()
    try:
        if _size(output) > SPARK_ABOVE:
            report = _spark_verify(rows, output)
        else:
            from mockdcp.pipeline import verify_rows

            report = verify_rows(rows, output)
    except PipelineError as exc:
        result.output = f"unreadable: {exc}"
        return
    result.verification = report.as_json()
    result.output = "verified"


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _spark_verify(rows: list[dict[str, Any]], output: Path) -> Any:  # noqa: ANN401
    """A large output: the pipeline's Spark job against the oracle written as Parquet."""
    import pyarrow as pa

    from mockdcp.data import ORACLE_COLUMNS, arrow_schema
    from mockdcp.pipeline import verify, write_oracle

    with tempfile.TemporaryDirectory(prefix="mockdcp-oracle-") as folder:
        oracle = write_oracle(
            pa.Table.from_pylist(rows, schema=arrow_schema(ORACLE_COLUMNS)), Path(folder) / "o"
        )
        return verify(oracle, output)


def _violation(e: Any) -> dict[str, Any]:  # noqa: ANN401
    return {
        "rule": e.rule,
        "message": e.message,
        "connection": e.name,
        "vbucket": e.vbucket,
        "summary": e.summary,
        "frame": e.frame,
        "time": e.time,
    }


def _failed_steps(scenario: Scenario, expectations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The expect steps that failed, as the scenario spells them (``{expect: {...}}``)."""
    out = []
    for e in expectations:
        if not e["passed"] and 0 < e["step"] <= len(scenario.steps):
            step = scenario.steps[e["step"] - 1]
            fields = attrs.asdict(step, filter=lambda a, v: v != a.default)
            out.append({"step": e["step"], step.NAME: fields})
    return out


# -- evidence ----------------------------------------------------------------------------


def evidence(history: Sequence[ProducerEvent]) -> list[str]:
    """What the consumer sent and what it was sent, one line each, in order (times from
    the first event): connections, DCP opens, stream requests and their answers, stream
    ends, noops, acknowledgements (summed between other lines), items written (their
    last seqno per vbucket, summed likewise), violations."""
    from mockdcp.producer import events as ev

    if not history:
        return []
    t0 = history[0].time
    lines: list[str] = []
    written: dict[int, int] = {}
    acked = 0

    def flush() -> None:
        nonlocal acked
        if written:
            shown = ", ".join(f"vb {vb} to {s}" for vb, s in sorted(written.items())[:8])
            more = " ..." if len(written) > 8 else ""
            lines.append(f"{'':>9} -> items written: {shown}{more}")
            written.clear()
        if acked:
            lines.append(f"{'':>9} <- buffer acknowledgements: {acked} bytes")
            acked = 0

    for e in history:
        if isinstance(e, ev.SeqnoWritten | ev.StreamWritten):
            written[e.vbucket] = max(written.get(e.vbucket, 0), e.seqno)
            continue
        if isinstance(e, ev.BytesAcked):
            acked += e.nbytes
            continue
        text = _event_line(e)
        if text is None:
            continue
        flush()
        lines.append(f"{e.time - t0:8.3f}s {text} [conn {e.conn_id}{_named(e)}]")
    flush()
    if len(lines) > EVIDENCE_LINES:
        cut = len(lines) - EVIDENCE_LINES
        lines = [
            *lines[: EVIDENCE_LINES // 2],
            f"... {cut} lines ...",
            *lines[-EVIDENCE_LINES // 2 :],
        ]
    return lines


def _named(e: ProducerEvent) -> str:
    return f" {e.name!r}" if e.name else ""


def _event_line(e: ProducerEvent) -> str | None:
    """``<-`` what the consumer sent, ``->`` what it was sent, ``!!`` the checker."""
    from mockdcp.producer import events as ev

    if isinstance(e, ev.ConnectionOpened):
        return f"<- connected from {e.peer}"
    if isinstance(e, ev.DcpOpened):
        return f"<- DCP_OPEN (flags {e.flags:#x})"
    if isinstance(e, ev.StreamRequested):
        answer = e.status + ("" if e.rollback_seqno is None else f" to {e.rollback_seqno}")
        return (
            f"<- stream request vb {e.vbucket} from {e.start_seqno} (snapshot "
            f"{e.snap_start_seqno}-{e.snap_end_seqno}, uuid {e.vbucket_uuid:#x}) -> {answer}"
        )
    if isinstance(e, ev.StreamEnded):
        return f"-> STREAM_END vb {e.vbucket} {e.reason}"
    if isinstance(e, ev.NoopSent):
        return "-> DCP_NOOP"
    if isinstance(e, ev.NoopAnswered):
        return "<- DCP_NOOP answered"
    if isinstance(e, ev.ConnectionClosed):
        return f"-- connection closed: {e.reason}"
    if isinstance(e, ev.ProtocolViolation):
        return f"!! {e.rule}: {e.message} [{e.summary}]"
    return None


# -- the whole run ------------------------------------------------------------------------


def fixed_seconds(scenario: Scenario) -> float:
    """About how long ``scenario`` takes whatever the consumer does: its ``wait``
    seconds and a noop interval for each noop it waits to see answered (one comes an
    interval after the connection went quiet; 1 s where the scenario sets none). Its
    ``conformant`` windows are not counted: one ends once the consumer owes nothing
    (``StepRunner._at_rest``)."""
    from mockdcp.scenario.steps import Wait

    interval = scenario.consumer.noop_interval or 1.0
    seconds = 0.0
    for step in scenario.steps:
        if isinstance(step, Wait):
            seconds += step.seconds or 0.0
            if step.consumer is not None:
                seconds += interval * (step.consumer.noops_answered or 0)
    return seconds


def longest_first(scenarios: Sequence[Scenario]) -> list[int]:
    """The order ``check_all`` starts ``scenarios`` in (indexes): the longest fixed
    waits first (``fixed_seconds``), the library's order among equals. With ``jobs``
    scenarios at once, one that waits seconds started last would run alone at the end
    (longest-processing-time-first scheduling)."""
    waits = [fixed_seconds(s) for s in scenarios]
    return sorted(range(len(scenarios)), key=lambda i: -waits[i])


async def check_all(
    scenarios: Sequence[Scenario],
    options: CheckOptions,
    on_result: Callable[[ScenarioResult], None] | None = None,
) -> CheckReport:
    """Every scenario, ``options.jobs`` at once (started ``longest_first``);
    ``on_result`` as each finishes. The report lists them in the given order."""
    started = time.perf_counter()
    results: list[ScenarioResult | None] = [None] * len(scenarios)
    pending = iter(longest_first(scenarios))

    async def worker() -> None:
        # each job takes the next scenario when its last one is done: the order holds
        # (tasks started together run in an order trio picks)
        for index in pending:
            result = await check_scenario(scenarios[index], options)
            results[index] = result
            if on_result is not None:
                on_result(result)

    async with trio.open_nursery() as nursery:
        for _ in range(max(1, min(options.jobs, len(scenarios)))):
            nursery.start_soon(worker)
    done = [r for r in results if r is not None]
    capabilities = None if options.capabilities is None else sorted(options.capabilities)
    return CheckReport(
        options.command, done, time.perf_counter() - started, options.jobs, capabilities
    )


__all__ = [
    "CheckOptions",
    "CheckReport",
    "ScenarioResult",
    "Verdict",
    "applicable",
    "check_all",
    "check_scenario",
    "evidence",
]
