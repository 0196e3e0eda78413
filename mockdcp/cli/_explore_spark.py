"""``mockdcp explore --master URL``: the schedules spread over a Spark cluster, as the
pipeline's jobs are (``mockdcp.pipeline``'s ``spark_session``; ``local[*]`` when the
URL is ``local[*]``), for consumers that take seconds to start (issue 39 item 8).

The driver cuts the run's schedule indices into ``partitions`` shares (partition ``p``
of ``P`` takes ``p, p + P, p + 2P, ...``); each Spark task runs its share on its
executor (``run_share``: its own servers and consumer processes, or the in-process
consumer under the virtual clock, ``jobs`` at once) and returns each schedule's result.
A schedule's seed depends only on the run's seed and its index (``schedule_seed``), so
the run finds what a local run with the same seed and options finds, whatever the
partitioning. The driver judges the results, then shrinks the first failure of each
anomaly itself (``shrink_found``), within ``--shrink-time``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import attrs
import trio

from mockdcp.cli._explore import ExploreState, Found, explore, judge, shrink_found
from mockdcp.cli._explore_inprocess import virtual_clock
from mockdcp.explore import generate, is_spec, load_factory

if TYPE_CHECKING:
    from mockdcp.cli._check import ScenarioResult
    from mockdcp.cli._explore import ExploreOptions


def share(runs: int, partitions: int, partition: int) -> range:
    """The schedule indices of ``partition`` (module docstring)."""
    return range(partition, runs, partitions)


def run_share(
    options: ExploreOptions, partitions: int, partition: int
) -> list[tuple[int, ScenarioResult]]:
    """On an executor: partition ``partition``'s schedules, each result by index. The
    in-process consumer is named by its ``module:callable`` and loaded here (the
    driver's function object need not pickle)."""
    if is_spec(options.command):
        options = attrs.evolve(options, factory=load_factory(options.command[0]))
    assert options.runs is not None
    state = ExploreState(attrs.evolve(options, out=None))
    indices = share(options.runs, partitions, partition)
    trio.run(
        lambda: explore(state, indices=indices, shrinking=False),
        clock=virtual_clock(options.factory),
    )
    return state.results


def explore_on_spark(
    state: ExploreState, master: str, partitions: int | None = None, on_result: object = None
) -> None:
    """Run ``state``'s schedules as Spark tasks on ``master`` (module docstring), judge
    them into ``state``, then shrink here. ``PipelineError`` when Spark cannot start or
    a task fails."""
    from mockdcp.pipeline import spark_errors, spark_session

    options = state.options
    assert options.runs is not None
    session = spark_session(master, "mockdcp explore")
    context = session.sparkContext
    count = partitions or max(1, context.defaultParallelism)
    count = min(count, options.runs)
    shipped = attrs.evolve(options, factory=None, out=None)
    began = time.perf_counter()
    with spark_errors("the explore job failed"):
        tasks = context.parallelize(range(count), count)
        shares = tasks.map(lambda p: run_share(shipped, count, p)).collect()
    state.explore_seconds = time.perf_counter() - began
    for index, result in sorted((r for part in shares for r in part), key=lambda r: r[0]):
        state.results.append((index, result))
        findings = judge(result)
        found = None
        if findings:
            found = Found(index, generate(options.generate, index), result, findings)
            state.found.append(found)
        if callable(on_result):
            on_result(index, result, found)
    trio.run(shrink_found, state, clock=virtual_clock(options.factory))


__all__ = ["explore_on_spark", "run_share", "share"]
