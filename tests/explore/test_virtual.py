"""In-process schedules under a virtual clock (issue 39 item 4): a consumer whose factory
takes ``connect`` reaches the nodes over in-memory streams, and its schedule's waits and
timers cost no real time; any other consumer keeps sockets and the real clock."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar

import pytest
import trio
import trio.testing

from mockdcp.cli._explore_inprocess import (
    MemoryNetwork,
    consumer_exit,
    run_in_process,
    seeded_scheduler,
    virtual_clock,
)
from mockdcp.client import ConsumerState
from mockdcp.explore import Anomaly, anomalies, reference_consumer, takes_connect
from mockdcp.scenario import Scenario, parse_scenario
from mockdcp.server import serve
from tests.explore import wrong

if TYPE_CHECKING:
    from mockdcp.cli._check import ScenarioResult
    from mockdcp.explore import ConsumerFactory

#: writes around a 30 s pause, a node down and up on a cluster: 35 s of the schedule's
#: own time, and a consumer that must reconnect to the node that came back
LONG = """
name: long-waits
bucket: {vbuckets: 8, nodes: 3, replicas: 1}
steps:
  - generate: {docs: 12}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - wait: {seconds: 30}
  - node_down: {node: 1}
  - wait: {seconds: 5}
  - node_up: {node: 1}
  - set: {key: k1, value: {after: pause}}
  - wait: {consumer: {seqno: high}, timeout: 20s}
"""


def _long() -> Scenario:
    return parse_scenario(LONG)


def _run_virtual(scenario: Scenario) -> tuple[ScenarioResult, float]:
    clock = virtual_clock(reference_consumer)
    assert isinstance(clock, trio.testing.MockClock)
    started = time.perf_counter()
    result = trio.run(lambda: run_in_process(scenario, reference_consumer, limit=120), clock=clock)
    return result, time.perf_counter() - started


def test_a_schedules_waits_cost_no_real_time_under_the_virtual_clock() -> None:
    result, seconds = _run_virtual(_long())
    assert result.verdict == "pass", (result.reason, result.evidence)
    assert seconds < 20  # the steps alone wait 35 s on a real clock


def test_only_a_factory_that_takes_connect_gets_the_virtual_clock() -> None:
    assert takes_connect(reference_consumer)
    assert isinstance(virtual_clock(reference_consumer), trio.testing.MockClock)
    assert not takes_connect(wrong.drop_deletions)
    assert virtual_clock(wrong.drop_deletions) is None
    assert virtual_clock(None) is None


async def test_the_memory_network_refuses_a_port_no_node_listens_on() -> None:
    async with serve(port=0, http_port=0, vbuckets=4, nodes=2) as server:
        network = MemoryNetwork(server)
        with pytest.raises(ConnectionRefusedError):  # not up yet
            await network.connect(server.host, server.kv_port)
        async with trio.open_nursery() as nursery:
            network.nursery = nursery
            stream = await network.connect(server.host, server.nodes[1].kv_port)
            await stream.aclose()
            await server.apply({"node_down": {"node": 1}})
            with pytest.raises(ConnectionRefusedError):
                await network.connect(server.host, server.nodes[1].kv_port)
            with pytest.raises(ConnectionRefusedError):
                await network.connect(server.host, 1)
            nursery.cancel_scope.cancel()


#: every stream ends (a failover) and the consumer pauses 50 ms before re-opening each;
#: the first re-open is answered ROLLBACK during the others' pauses, then the connection
#: drops (found by explore: seed 1, schedule 72)
REOPENS = """
name: rollback-during-reopen-pauses
bucket: {vbuckets: 4}
steps:
  - generate: {docs: 6}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - persistence: {paused: true}
  - set: {key: k3, value: {n: 3}}
  - wait: {seconds: 0.06}
  - failover: {}
  - wait: {seconds: 0.1}
  - disconnect: {}
  - wait: {consumer: {streams: true}, timeout: 8s}
  - wait: {consumer: {seqno: high}, timeout: 10s}
  - expect: {conformant: true, within: 0.2}
"""


def test_the_reference_consumer_reads_on_while_its_reopens_pause() -> None:
    """A re-open's pause is waited for while reading (java-dcp-client schedules it): the
    ROLLBACK answered meanwhile is taken at once, so after the disconnect the consumer
    asks from the rollback point, not again from where it was (``rollback.ignored``).
    Slept where it came, each pause held the frames behind it, one after another."""
    result, _seconds = _run_virtual(parse_scenario(REOPENS))
    assert result.verdict == "pass", (result.reason, result.evidence)


def test_explore_over_ephemeral_buckets_and_older_releases_finds_nothing() -> None:
    """Issue 41 item 4: schedules on an ephemeral bucket (evicting or not) and on nodes
    of an older release, run in-process with the reference consumer: no anomaly."""
    from mockdcp.explore import GenerateOptions, generate

    opts = GenerateOptions(seed=1, steps=16)
    picked: dict[str, list[Scenario]] = {"evicting": [], "ephemeral": [], "older": []}
    for i in range(200):
        s = generate(opts, i)
        kind = (
            "evicting"
            if s.bucket.eviction_policy == "nruEviction"
            else "ephemeral"
            if s.bucket.type == "ephemeral"
            else "older"
            if s.bucket.server_version
            else None
        )
        if kind is not None and len(picked[kind]) < 3:
            picked[kind].append(s)
        if all(len(found) == 3 for found in picked.values()):
            break
    for kind, schedules in picked.items():
        assert len(schedules) == 3, kind
        for scenario in schedules:
            result, _seconds = _run_virtual(scenario)
            assert result.verdict == "pass", (scenario.name, result.reason, result.evidence)


@pytest.mark.parametrize(
    ("factory", "said"),
    [(wrong.exits_early, "run() returned"), (wrong.exits_process, "SystemExit: 3")],
)
def test_a_consumer_that_exits_early_is_a_consumer_exit_at_once(
    factory: ConsumerFactory, said: str
) -> None:
    """The schedule ends as the consumer's task does (issue 39 item 4): judged a
    consumer exit with its exception, in virtual time well under the first wait's 8 s
    (the schedule's steps take 35 s), and a ``sys.exit`` of the consumer's takes down
    neither the schedule nor explore."""
    clock = virtual_clock(factory)
    assert isinstance(clock, trio.testing.MockClock)

    async def timed() -> tuple[ScenarioResult, float]:
        result = await run_in_process(_long(), factory, limit=120)
        return result, trio.current_time()

    result, seconds = trio.run(timed, clock=clock)
    assert result.verdict == "fail"
    assert result.reason.startswith("the consumer exited before the scenario ended"), result.reason
    assert said in result.reason
    assert anomalies(result.as_dict())[0].anomaly == Anomaly.CONSUMER_EXIT
    assert seconds < wrong.EXITS_AFTER + 2
    if factory is wrong.exits_process:
        assert any("sys.exit" in line for line in result.evidence)  # its traceback


def test_only_ctrl_c_and_cancellation_pass_through_a_consumer_exit() -> None:
    cancelled = trio.Cancelled._create()
    interrupt = KeyboardInterrupt()
    assert consumer_exit(ValueError("x")) is None
    assert consumer_exit(SystemExit(3)) is None
    assert consumer_exit(interrupt) is interrupt
    assert consumer_exit(cancelled) is cancelled
    assert consumer_exit(BaseExceptionGroup("g", [SystemExit(3), cancelled])) is None
    alone = BaseExceptionGroup("g", [cancelled])
    assert consumer_exit(alone) is alone
    passed = consumer_exit(BaseExceptionGroup("g", [ValueError("x"), interrupt]))
    assert isinstance(passed, BaseExceptionGroup)
    assert passed.exceptions == (interrupt,)


def test_a_task_that_never_blocks_is_stopped_at_the_limit_in_real_time() -> None:
    """Under the virtual clock a task that only yields holds the clock still: the
    schedule's limit is kept in real time too, and the run goes on."""
    clock = virtual_clock(wrong.spins)
    assert isinstance(clock, trio.testing.MockClock)
    started = time.perf_counter()
    result = trio.run(lambda: run_in_process(_long(), wrong.spins, limit=1.5), clock=clock)
    assert time.perf_counter() - started < 15
    assert result.verdict == "fail"
    assert "the virtual clock stood still" in result.reason
    assert anomalies(result.as_dict())[0].anomaly == Anomaly.STUCK


#: explore --seed 39 --nodes 3 --replicas 1 --vbuckets 8, schedule 335: a stream
#: request's reply delayed into a stall; the node's writer spun on its passed deadline
#: and the in-process run hung (``tests/producer/test_faults.py``)
DELAYED_INTO_A_STALL = """
name: explore-39-335
bucket: {vbuckets: 8, nodes: 3, replicas: 1}
seed: 41677283
steps:
  - {generate: {docs: 18, prefix: "g1"}}
  - {wait: {consumer: {seqno: "high"}, timeout: 8.0}}
  - {delay: {seconds: 0.19, request: "dcp_stream_req", count: 2}}
  - {generate: {docs: 4, prefix: "g2"}}
  - {wait: {seconds: 0.13}}
  - {drop_cursor: {vbuckets: 3}}
  - {wait: {seconds: 0.13}}
  - {end_stream: {vbuckets: 7, reason: "closed"}}
  - {wait: {seconds: 0.22}}
  - {stall: {seconds: 0.52}}
  - {wait: {seconds: 0.16}}
  - {drop_cursor: {vbuckets: 7}}
  - {wait: {consumer: {seqno: "high"}, timeout: 10.0}}
  - {expect: {conformant: true, within: 0.2}}
"""


def test_a_reply_delayed_into_a_stall_does_not_hang_the_schedule() -> None:
    result, _ = _run_virtual(parse_scenario(DELAYED_INTO_A_STALL))
    assert result.verdict == "pass", (result.reason, result.evidence)


async def _scheduler_trace() -> tuple[tuple[int, int], ...]:
    """An order only trio's scheduler decides: five tasks that take turns."""
    trace: list[tuple[int, int]] = []

    async def tracer(name: int) -> None:
        for i in range(20):
            trace.append((name, i))
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        for name in range(5):
            nursery.start_soon(tracer, name)
    return tuple(trace)


def test_a_seeded_scheduler_takes_the_same_order_on_every_run() -> None:
    """trio draws the order of the tasks woken at one instant at random (python-trio/
    trio issue 32); seeded (``seeded_scheduler``), every run takes the same, and the
    mode is as it was afterwards."""
    run = trio._core._run
    before = run._ALLOW_DETERMINISTIC_SCHEDULING
    seeded = []
    for _ in range(3):
        with seeded_scheduler(7) as done:
            assert done
            seeded.append(trio.run(_scheduler_trace))
    assert len(set(seeded)) == 1
    assert before == run._ALLOW_DETERMINISTIC_SCHEDULING
    free = {trio.run(_scheduler_trace) for _ in range(3)}
    assert len(free) == 3  # unseeded: a new order each run


class _Tracer:
    """A consumer that records the order the scheduler runs its tasks in, then waits."""

    traces: ClassVar[list[tuple[tuple[int, int], ...]]] = []

    def __init__(self) -> None:
        self.state = ConsumerState()

    async def run(self) -> None:
        self.traces.append(await _scheduler_trace())
        await trio.sleep_forever()


def _tracer(host: str, port: int, nodes: int, *, connect: object = None) -> _Tracer:
    return _Tracer()


#: a few seconds of a schedule: the consumer has nothing to catch up with
SHORT = """
name: short
steps:
  - wait: {seconds: 1}
"""


def test_a_schedule_replays_bit_for_bit_under_the_virtual_clock() -> None:
    """Each in-process run under the virtual clock seeds the scheduler with the
    scenario's seed: the same order of tasks on every run (issue 39: the stale value of
    ``keep-rolled-back`` showed one run in two, a write and a failover at one virtual
    instant taking either order)."""
    _Tracer.traces.clear()
    scenario = parse_scenario(SHORT)
    for _ in range(3):
        result = trio.run(
            lambda: run_in_process(scenario, _tracer, limit=30), clock=virtual_clock(_tracer)
        )
        assert result.verdict == "pass", result.reason
    assert len(_Tracer.traces) == 3
    assert len(set(_Tracer.traces)) == 1
