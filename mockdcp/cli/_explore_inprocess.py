"""One schedule against a Python consumer in the same process (``explore -- module:
callable``): no consumer process to start, so a schedule takes what its steps take.

The server and the consumer run in one trio run, the server on free ports; the
schedule is judged as ``mockdcp check`` judges a scenario (``_check``'s checker limits,
settle time and reasons), with what the consumer holds (``state.documents()``) compared
with the oracle in place of its ``$MOCKDCP_OUTPUT``: the same ``ScenarioResult``, so the
same anomalies. An exception of the consumer's is its crash; one of the server's is a
``mockdcp error``. The consumer's task ending ends the schedule at once, whatever ends
it (``run()`` returning, an exception, ``SystemExit`` or a group of them; only Ctrl-C
and trio's cancellation pass through): a consumer exit, its exception and traceback in
the evidence, never a wait left to time out nor the whole explore run taken down.

A consumer whose factory takes ``connect`` (``takes_connect``: the reference consumer)
reaches the nodes over in-memory streams (``MemoryNetwork``: each connection handed to
the node's KV service as an accepted one, refused while the node's ports are closed), so
that ``mockdcp explore`` can run it under trio's ``MockClock`` with
``autojump_threshold=0`` (``VIRTUAL``): with no socket in the way, every task blocked
means only a timer can wake one, and the clock jumps to it, so a schedule's waits,
faults' timers, noops and back-offs cost no real time. The schedule's time limit is
then also kept in real time (``RealTimeGuard``): a task that never blocks (a writer
woken for a deadline already passed, a consumer polling without waiting) holds the
virtual clock still, and its virtual limit would never come.

Under the virtual clock a schedule replays bit for bit (``seeded_scheduler``): trio runs
the tasks woken at one instant in an order it draws at random, on purpose (python-trio/
trio issue 32), so that a step and the consumer's reading that meet at one virtual
instant (a write, ``wait: 0``, a failover: was the write sent before the failover?)
went one way or the other from run to run; seeded with the scenario's seed, trio's
deterministic scheduling (the mode its Hypothesis plugin turns on) takes the same order
on every run. That holds for one schedule at a time (``-j 1``; schedules run at once
share the scheduler).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import random
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any, cast

import trio
import trio.testing

from mockdcp.cli._check import (
    CHECK_ACK_STALL,
    CHECK_REOPEN_WITHIN,
    SETTLE,
    ScenarioResult,
    Verdict,
    evidence,
)
from mockdcp.explore import held, settings_for, takes_connect, takes_credentials

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from mockdcp.explore import ConsumerFactory, InProcessConsumer
    from mockdcp.scenario import Scenario
    from mockdcp.server import MockDcpServer

#: examples kept per kind of difference
EXAMPLES = 5


def virtual_clock(factory: ConsumerFactory | None) -> trio.abc.Clock | None:
    """The clock to run in-process schedules of ``factory``'s consumers under: a
    ``MockClock`` that jumps to the next timer as soon as every task is blocked, for a
    consumer reached over in-memory streams (module docstring); None (the real clock)
    for any other."""
    if factory is None or not takes_connect(factory):
        return None
    return trio.testing.MockClock(autojump_threshold=0)


#: schedules inside ``seeded_scheduler`` now, and trio's scheduling mode before the first
_seeded: list[tuple[bool, Any]] = []


@contextlib.contextmanager
def seeded_scheduler(seed: int) -> Iterator[bool]:
    """trio's scheduler in its deterministic mode, its random generator seeded with
    ``seed``, for the time of one schedule (module docstring); as it was once the last
    schedule inside ends. Yields False (nothing changed) on a trio without that mode:
    its ``_core._run`` module's ``_ALLOW_DETERMINISTIC_SCHEDULING`` and ``_r``, which
    trio's Hypothesis plugin and its own test of the mode
    (``trio/_tests/test_scheduler_determinism.py``) set, are not public."""
    run: Any = getattr(trio._core, "_run", None)
    rng = getattr(run, "_r", None)
    if not isinstance(rng, random.Random) or not hasattr(run, "_ALLOW_DETERMINISTIC_SCHEDULING"):
        yield False
        return
    if not _seeded:
        _seeded.append((bool(run._ALLOW_DETERMINISTIC_SCHEDULING), rng.getstate()))
    else:
        _seeded.append(_seeded[0])
    setattr(run, "_ALLOW_DETERMINISTIC_SCHEDULING", True)  # noqa: B010 - a Final of trio's
    rng.seed(seed)
    try:
        yield True
    finally:
        before = _seeded.pop()
        if not _seeded:
            setattr(run, "_ALLOW_DETERMINISTIC_SCHEDULING", before[0])  # noqa: B010
            rng.setstate(before[1])


class MemoryNetwork:
    """The server's nodes reached over in-memory streams (module docstring):
    ``connect(host, port)`` hands one end of a stream pair to the KV service of the node
    whose KV port is ``port`` (its task in ``nursery``, set before the consumer runs)
    and returns the other; a port no node listens on refuses
    (``ConnectionRefusedError``), as TCP does."""

    def __init__(self, server: MockDcpServer) -> None:
        self.server = server
        self.nursery: trio.Nursery | None = None

    async def connect(self, host: str, port: int) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        if self.nursery is None:
            raise ConnectionRefusedError(errno.ECONNREFUSED, "the network is not up")
        for shell in self.server.shells:
            if shell.node.kv_port == port and shell.listening:
                client, accepted = trio.testing.memory_stream_pair()
                self.nursery.start_soon(shell.kv.handle, accepted)
                return client
        raise ConnectionRefusedError(errno.ECONNREFUSED, f"connection refused: {host}:{port}")


class RealTimeGuard:
    """Cancels a schedule's scope after ``seconds`` of real time (module docstring),
    timed in a worker thread, which the virtual clock does not hold; ``done()`` ends
    the thread's wait when the schedule ends first."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self._done = threading.Event()

    async def watch(self, scope: trio.CancelScope) -> None:
        ended = await trio.to_thread.run_sync(self._done.wait, self.seconds, abandon_on_cancel=True)
        if not ended:
            self.fired = True
            scope.cancel()

    def done(self) -> None:
        self._done.set()


def compare(consumer: InProcessConsumer, server: MockDcpServer) -> dict[str, Any]:
    """What the consumer holds against the oracle, in the shape of the pipeline's
    ``VerifyReport.as_json()`` (the counts and examples the judges read)."""
    from mockdcp.model import vbucket_of

    mine = held(consumer)
    oracle = dict(server.oracle().items())
    vbuckets = server.bucket.num_vbuckets
    kinds: dict[str, list[dict[str, Any]]] = {
        "missing": [],
        "phantom": [],
        "stale": [],
        "wrong_value": [],
        "duplicates": [],
    }

    def example(key: Any, seqno: int) -> dict[str, Any]:  # noqa: ANN401
        raw = key[1] if isinstance(key, tuple) else key
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        return {"key": text, "vbucket": vbucket_of(text.encode(), vbuckets), "seqno": seqno}

    for key, item in oracle.items():
        version = mine.get(key)
        if version is None:
            kinds["missing"].append(example(key, item.seqno))
        elif version.seqno < item.seqno:
            kinds["stale"].append(example(key, item.seqno))
        elif version.seqno != item.seqno or bytes(version.value) != bytes(item.value):
            kinds["wrong_value"].append(example(key, item.seqno))
    for key, version in mine.items():
        if key not in oracle:
            kinds["phantom"].append(example(key, version.seqno))
    counts = {k: len(v) for k, v in kinds.items()}
    differences = sum(counts.values())
    return {
        **counts,
        "unparseable": 0,
        "expected": len(oracle),
        "actual_rows": len(mine),
        "actual_documents": len(mine),
        "matched": len(oracle) - counts["missing"] - counts["stale"] - counts["wrong_value"],
        "mode": "in-process",
        "examples": {k: v[:EXAMPLES] for k, v in kinds.items()},
        "differences": differences,
    }


def _leaves(exc: BaseException) -> str:
    """An exception as one line: a group's first few leaf exceptions."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_leaves(e) for e in exc.exceptions[:3])
    return f"{type(exc).__name__}: {exc}"


def _passes_through(exc: BaseException) -> bool:
    """Ctrl-C and trio's cancellation, which a consumer's exit must not swallow."""
    return isinstance(exc, (KeyboardInterrupt, trio.Cancelled))


def consumer_exit(exc: BaseException) -> BaseException | None:
    """What of the consumer's exception ``exc`` passes through (``_passes_through``:
    Ctrl-C first, else trio's cancellation alone), None when all of it is the
    consumer's own exit (module docstring)."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc if _passes_through(exc) else None
    interrupt = exc.subgroup(lambda e: isinstance(e, KeyboardInterrupt))
    if interrupt is not None:
        return interrupt
    own = exc.subgroup(lambda e: not isinstance(e, BaseExceptionGroup) and not _passes_through(e))
    return exc if own is None else None


async def settled(matches: Callable[[], bool], failed: Callable[[], bool], poll: float) -> None:
    """Return once ``matches()``, and still so when every task of the run (the server's,
    the consumer's) has nothing left to do (``wait_all_tasks_blocked``: each waits on a
    timer or on data that has not come), or once ``failed()``; ``matches`` is asked
    every ``poll`` seconds. A match alone is not enough: a write and its deletion leave
    the oracle as it was, so the consumer matches it before it has read either, and the
    cancellation that follows could catch it between the two (seed 8 of a schedule
    ending ``set k0; wait 0; delete k0``: k0 a phantom of a consumer that did nothing
    wrong). Nor is every task blocked enough: one may wait on a stall's timer with a
    write and its deletion held (``run_in_process`` asks for nothing held too:
    ``_check._nothing_queued``). The tests' in-process harnesses settle with it too."""
    while not failed():
        if matches():
            await trio.testing.wait_all_tasks_blocked()
            if matches():
                return
        else:
            await trio.sleep(poll)


async def run_in_process(
    scenario: Scenario, make: ConsumerFactory, *, limit: float, host: str = "127.0.0.1"
) -> ScenarioResult:
    """One run of ``scenario`` against a consumer ``make`` makes (module docstring)."""
    started = time.perf_counter()
    result = ScenarioResult(scenario.name, scenario.name, Verdict.PASSED, "")
    virtual = isinstance(trio.lowlevel.current_clock(), trio.testing.MockClock)
    seeded = seeded_scheduler(scenario.seed) if virtual else contextlib.nullcontext(False)
    try:
        with seeded:
            await _run(scenario, make, limit, host, result)
    except Exception as exc:
        result.verdict = Verdict.FAILED
        result.reason = f"mockdcp error: {type(exc).__name__}: {exc}"
        result.evidence = traceback.format_exception(exc)[-20:]
    result.seconds = time.perf_counter() - started
    return result


@functools.cache
def process_users() -> Mapping[str, str]:
    """The users of every schedule this process runs in-process: ``_check.run_users``,
    made once. A password this process made is as unknown to another process's clients
    as one a schedule made, and a schedule's consumer ends with its schedule, so none
    logs in to the next one's server; made once, a user's SCRAM keys are too (a salted
    password is 4,096 rounds of PBKDF2 on the server and as many on the client: a
    twentieth of a schedule's CPU when each schedule had passwords of its own)."""
    from mockdcp.cli._check import run_users

    return run_users()


async def _run(
    scenario: Scenario, make: ConsumerFactory, limit: float, host: str, result: ScenarioResult
) -> None:
    from mockdcp.cli._check import _nothing_queued, _persist_after, _reasons, _violation
    from mockdcp.producer import CheckerLimits, events as ev
    from mockdcp.server import serve

    # a password of the run's own for a consumer that can be told it: another process's
    # client on the server's free ports cannot log in (``_check.run_users``)
    users = process_users() if takes_credentials(make) else None
    login: dict[str, str] = {}
    if users is not None:
        login["user"], login["password"] = next(iter(users.items()))
    async with serve(host=host, port=0, http_port=0, scenario=scenario, users=users) as server:
        server.node.checker_limits = CheckerLimits(
            ack_stall=CHECK_ACK_STALL, reopen_within=CHECK_REOPEN_WITHIN
        )
        network = None
        given = cast("Callable[..., InProcessConsumer]", make)
        # the scenario's consumer settings, as check gives a command them (MOCKDCP_*)
        options: dict[str, Any] = {**login, **settings_for(make, scenario.consumer)}
        if takes_connect(make):
            network = MemoryNetwork(server)
            consumer = given(
                server.host, server.kv_port, len(server.nodes), connect=network.connect, **options
            )
        else:
            consumer = given(server.host, server.kv_port, len(server.nodes), **options)
        crash: list[str] = []
        trace: list[str] = []
        over = trio.Event()  # the scenario ended, or the consumer did (as check stops)

        async def consume() -> None:
            try:
                await consumer.run()
            except BaseException as exc:  # the consumer's exit, reported (docstring)
                passing = consumer_exit(exc)
                if passing is exc:
                    raise
                if passing is not None:
                    raise passing from None
                crash.append(_leaves(exc))
                trace.extend(traceback.format_exception(exc)[-20:])
            else:
                crash.append("run() returned")
            over.set()

        async def scenario_over() -> None:
            await server.scenario_done.wait()
            over.set()

        trouble = None
        virtual = isinstance(trio.lowlevel.current_clock(), trio.testing.MockClock)
        guard = RealTimeGuard(limit) if virtual else None
        try:
            async with trio.open_nursery() as nursery:
                if network is not None:
                    network.nursery = nursery  # its connections end with the consumer
                nursery.start_soon(consume)
                nursery.start_soon(scenario_over)
                with trio.move_on_after(limit) as scope:
                    if guard is not None:
                        nursery.start_soon(guard.watch, scope)
                    await over.wait()
                if crash:
                    pass  # judged below
                elif scope.cancelled_caught:
                    trouble = f"the scenario did not finish within {limit:g}s"
                    if guard is not None and guard.fired:
                        trouble += (
                            " of real time: the virtual clock stood still (a task never blocked)"
                        )
                elif server.runner.progress.failure is None:
                    _persist_after(server)
                    with trio.move_on_after(SETTLE):
                        await settled(
                            lambda: (
                                _nothing_queued(server)
                                and not compare(consumer, server)["differences"]
                            ),
                            lambda: bool(crash),
                            0.02,
                        )
                nursery.cancel_scope.cancel()
        finally:
            # once its task is cancelled (above): ended sooner, the guard's thread would
            # wake it at a moment of real time, among the tasks settling (a schedule
            # replays bit for bit: module docstring)
            if guard is not None:
                guard.done()
        if crash:
            trouble = f"the consumer exited before the scenario ended ({crash[0]})"
        history = server.runner.history
        result.expectations = [e.as_dict() for e in server.runner.progress.expectations]
        result.violations = [_violation(e) for e in history if isinstance(e, ev.ProtocolViolation)]
        result.verification = compare(consumer, server)
        result.output = "verified"
        reasons = _reasons(trouble, server.runner.progress.failure, result)
        if reasons:
            result.verdict = Verdict.FAILED
            more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
            result.reason = reasons[0] + more
            result.evidence = evidence(history) + trace
        else:
            result.reason = f"output verified ({result.verification['matched']} documents)"


__all__ = [
    "MemoryNetwork",
    "RealTimeGuard",
    "compare",
    "consumer_exit",
    "run_in_process",
    "seeded_scheduler",
    "virtual_clock",
]
