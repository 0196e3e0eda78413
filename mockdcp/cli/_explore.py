"""``mockdcp explore``: random schedules against a consumer, judged into named anomalies,
each failure shrunk to a scenario in the library's format (issue 39).

Each schedule (``mockdcp.explore.generate``) runs as ``mockdcp check`` runs a library
scenario (``check_scenario``: a fresh server on free ports, the consumer command with the
``MOCKDCP_*`` variables and ``MOCKDCP_OUTPUT``, the schedule's time limit, the consumer
stopped after), ``jobs`` at once, and its result is judged into anomalies
(``mockdcp.explore.anomalies``). After the schedules, the first failing schedule of each
anomaly is shrunk (``mockdcp.explore.shrink``; each candidate run ``shrink_runs`` times)
within ``shrink_time`` seconds in all, and written to ``--out DIR`` as
``explore-SEED-INDEX-ANOMALY.yaml``, which ``mockdcp check FILE -- CMD`` and ``mockdcp
run FILE -- CMD`` replay. A consumer given as one ``module:callable`` word (the
reference consumer: ``mockdcp.explore:reference_consumer``) runs in-process instead
(``_explore_inprocess``). Ctrl-C stops the run: what was found so far is shrunk no
further, written and reported.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import attrs
import trio

from mockdcp.cli._check import CheckOptions, CheckReport, ScenarioResult, Verdict, check_scenario
from mockdcp.cli._explore_parser import DEFAULT_LIMIT
from mockdcp.explore import (
    Anomaly,
    Finding,
    GenerateOptions,
    OptionError,
    ShrinkResult,
    anomalies,
    generate,
    is_spec,
    load_factory,
    scenario_yaml,
    shrink,
    size,
)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Iterator

    from mockdcp.explore import ConsumerFactory
    from mockdcp.scenario import Scenario


class ExploreError(ValueError):
    """Bad input, found before any schedule runs."""


@attrs.frozen(kw_only=True)
class ExploreOptions:
    """How ``explore`` runs (the generator's options apart)."""

    command: list[str]
    generate: GenerateOptions
    #: schedules to run, or (``runs`` None) seconds to keep drawing them
    runs: int | None = 100
    seconds: float | None = None
    jobs: int = 1
    limit: float = DEFAULT_LIMIT
    connect_within: float = 15.0
    shrink_time: float = 120.0
    shrink_runs: int = 2
    out: Path | None = None
    #: a Python consumer run in-process (``-- module:callable``), instead of the command
    factory: ConsumerFactory | None = None


@attrs.define
class Found:
    """A failing schedule: its index, the schedule, the result, the anomalies."""

    index: int
    scenario: Scenario
    result: ScenarioResult
    findings: list[Finding]

    @property
    def anomaly(self) -> Anomaly:
        return self.findings[0].anomaly

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "seed": self.scenario.seed,
            "steps": size(self.scenario),
            "anomaly": str(self.anomaly),
            "findings": [f.as_dict() for f in self.findings],
            "reason": self.result.reason,
        }


@attrs.define
class Shrunk:
    """Where shrinking one anomaly's first failure got, and the file written."""

    found: Found
    result: ShrinkResult
    path: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "anomaly": str(self.found.anomaly),
            "index": self.found.index,
            "from_steps": size(self.found.scenario),
            **self.result.as_dict(),
            "file": None if self.path is None else str(self.path),
        }


@attrs.define
class ExploreState:
    """What a run has done so far (kept outside ``trio.run``: Ctrl-C keeps it)."""

    options: ExploreOptions
    results: list[tuple[int, ScenarioResult]] = attrs.field(factory=list)
    found: list[Found] = attrs.field(factory=list)
    shrunk: dict[Anomaly, Shrunk] = attrs.field(factory=dict)
    started: float = attrs.field(factory=time.perf_counter)
    explore_seconds: float = 0.0
    interrupted: bool = False

    @property
    def schedules(self) -> int:
        return len(self.results)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in sorted(self.found, key=lambda f: f.index):
            counts[str(f.anomaly)] = counts.get(str(f.anomaly), 0) + 1
        return counts

    def first_of_each(self) -> list[Found]:
        first: dict[Anomaly, Found] = {}
        for f in sorted(self.found, key=lambda f: f.index):
            first.setdefault(f.anomaly, f)
        return list(first.values())

    def as_dict(self) -> dict[str, Any]:
        g = self.options.generate
        per_minute = 60 * self.schedules / self.explore_seconds if self.explore_seconds else 0.0
        return {
            "passed": not self.found,
            "interrupted": self.interrupted,
            "command": self.options.command,
            "options": {
                "seed": g.seed,
                "nodes": g.nodes,
                "replicas": g.replicas,
                "vbuckets": g.vbuckets,
                "steps": g.steps,
                "tags": sorted(g.tags),
                "exclude": sorted(g.exclude),
                "jobs": self.options.jobs,
            },
            "schedules": self.schedules,
            "seconds": round(time.perf_counter() - self.started, 3),
            "schedules_per_minute": round(per_minute, 1),
            "anomalies": self.counts(),
            "phases": self.phases(),
            "found": [f.as_dict() for f in sorted(self.found, key=lambda f: f.index)],
            "shrunk": [s.as_dict() for s in self.shrunk.values()],
        }

    def phases(self) -> dict[str, float]:
        """Where a schedule's time went, as a mean over the schedules run as processes
        (``check``'s ``PHASES``), and ``overhead``: all of it but the schedule's own
        steps, waits and faults (empty in-process: no consumer process to start)."""
        from mockdcp.cli._check import PHASES

        ran = [r for _, r in self.results if r.phases]
        if not ran:
            return {}
        mean = {p: sum(r.phases.get(p, 0.0) for r in ran) / len(ran) for p in PHASES}
        mean["overhead"] = sum(r.overhead for r in ran) / len(ran)
        return {p: round(v, 4) for p, v in mean.items()}

    def check_report(self) -> CheckReport:
        """Every schedule's result as ``check``'s report (for its JUnit and HTML)."""
        results = [r for _, r in sorted(self.results, key=lambda x: x[0])]
        seconds = time.perf_counter() - self.started
        return CheckReport(self.options.command, results, seconds, self.options.jobs, None)


# -- one schedule -----------------------------------------------------------------------


def _check_options(options: ExploreOptions, *, replay: bool = False) -> CheckOptions:
    return CheckOptions(
        command=options.command,
        jobs=1,
        limit=options.limit,
        connect_within=options.connect_within,
        # a JVM's first connection may close before it streams, its next come seconds
        # later: the schedule counts from the first stream (``ConsumerStart``); a replay
        # counts from the first connection, as ``mockdcp check FILE`` does
        start_on_stream=not replay,
    )


async def run_schedule(
    scenario: Scenario, options: ExploreOptions, *, replay: bool = False
) -> ScenarioResult:
    """One run of ``scenario`` as ``check`` runs it (written and read back in the library
    format, so what runs is what ``--out`` replays); an exception of the server's is a
    ``mockdcp error`` result (``server error``), never the consumer's fault. ``replay``
    (what shrinking runs): a consumer command's schedule run as the file ``--out`` writes
    for it and ``mockdcp check FILE`` runs it (``_from_first_streams``, counted from the
    consumer's first connection), so that the failure shrinking keeps is the file's."""
    from mockdcp.scenario import load_scenario

    if options.factory is not None:
        from mockdcp.cli._explore_inprocess import run_in_process

        return await run_in_process(scenario, options.factory, limit=options.limit)
    ran = _from_first_streams(scenario, options.connect_within) if replay else scenario
    with tempfile.TemporaryDirectory(prefix="mockdcp-explore-") as folder:
        path = Path(folder) / f"{scenario.name}.yaml"
        path.write_text(scenario_yaml(ran), encoding="utf-8")
        loaded = load_scenario(str(path))
        try:
            result = await check_scenario(loaded, _check_options(options, replay=replay))
        except Exception as exc:
            text = f"mockdcp error: {type(exc).__name__}: {exc}"
            result = ScenarioResult(scenario.name, str(path), Verdict.FAILED, text)
            result.evidence = traceback.format_exception(exc)[-20:]
    result.path = scenario.name
    return result


def judge(result: ScenarioResult) -> list[Finding]:
    return anomalies(result.as_dict())


# -- the whole run ------------------------------------------------------------------------


async def explore(
    state: ExploreState,
    on_result: Any = None,  # noqa: ANN401
    *,
    indices: Iterable[int] | None = None,
    shrinking: bool = True,
) -> None:
    """Run the schedules ``jobs`` at once (see the module docstring), then shrink (unless
    not ``shrinking``). ``indices``: only these schedules (a Spark task's share), else
    ``runs`` of them from 0, or as many as ``seconds`` allow."""
    options = state.options
    counter: Iterator[int] = itertools.count() if indices is None else iter(indices)
    # real seconds (the schedules may run under a virtual clock)
    deadline = None if options.seconds is None else time.perf_counter() + options.seconds

    async def worker() -> None:
        while True:
            index = next(counter, None)
            if index is None or (options.runs is not None and index >= options.runs):
                return
            if deadline is not None and time.perf_counter() >= deadline:
                return
            scenario = generate(options.generate, index)
            result = await run_schedule(scenario, options)
            state.results.append((index, result))
            findings = judge(result)
            found = Found(index, scenario, result, findings) if findings else None
            if found is not None:
                state.found.append(found)
            if on_result is not None:
                on_result(index, result, found)

    began = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(options.jobs):
            nursery.start_soon(worker)
    state.explore_seconds = time.perf_counter() - began
    if shrinking:
        await shrink_found(state)


async def shrink_found(state: ExploreState) -> None:
    """Shrink the first failure of each anomaly within the budget left, and write it."""
    options = state.options
    budget_end = time.monotonic() + options.shrink_time
    for found in state.first_of_each():
        target = found.anomaly

        async def fails(candidate: Scenario, target: Anomaly = target) -> bool:
            result = await run_schedule(candidate, options, replay=True)
            return target in {f.anomaly for f in judge(result)}

        def keep(result: ShrinkResult, found: Found = found) -> None:
            state.shrunk[found.anomaly] = Shrunk(found, attrs.evolve(result))

        state.shrunk[target] = Shrunk(
            found, ShrinkResult(found.scenario, 1, 1, exhausted=True)
        )  # until shrinking says more
        left = max(0.0, budget_end - time.monotonic())
        result = await shrink(
            found.scenario, fails, runs=options.shrink_runs, budget=left, on_accept=keep
        )
        state.shrunk[target] = Shrunk(found, result)
    write_shrunk(state)


def _slug(anomaly: Anomaly) -> str:
    return str(anomaly).replace(" ", "-")


def write_shrunk(state: ExploreState) -> None:
    """Each anomaly's smallest schedule so far, in the library format, to ``--out``."""
    out = state.options.out
    if out is None:
        return
    g = state.options.generate
    for anomaly, shrunk in state.shrunk.items():
        found, result = shrunk.found, shrunk.result
        name = f"explore-{g.seed}-{found.index}-{_slug(anomaly)}"
        scenario = attrs.evolve(result.scenario, name=name)
        if state.options.factory is None:
            scenario = _from_first_streams(scenario, state.options.connect_within)
        witness = found.findings[0]
        comments = [
            f"found by mockdcp explore --seed {g.seed} (schedule {found.index}, its seed "
            f"{found.scenario.seed}; {g.nodes} node(s), {g.replicas} replica(s), "
            f"{g.vbuckets} vbuckets, {g.steps} steps)",
            f"anomaly: {anomaly}: {witness.detail}",
            f"shrunk from {size(found.scenario)} to {size(result.scenario)} steps; fails "
            f"{result.failed} of {result.runs} runs; {result.tried} candidates in "
            f"{result.seconds:.1f}s{' (budget ran out)' if result.exhausted else ''}",
            _rerun(result),
            f"consumer: {' '.join(state.options.command)}",
            "replay: mockdcp check FILE -- CONSUMER CMD (or mockdcp run FILE -- ...)",
        ]
        description = (
            f"A schedule mockdcp explore drew (seed {g.seed}, schedule {found.index}) on which "
            f"the consumer showed {anomaly}. Expected: the consumer catches up with every "
            "write (the last wait), breaks no protocol rule (the last expect) and holds "
            "exactly the oracle's documents in $MOCKDCP_OUTPUT (mockdcp check)."
        )
        path = out / f"{name}.yaml"
        path.write_text(
            scenario_yaml(scenario, comments=comments, description=description), encoding="utf-8"
        )
        shrunk.path = path


def _rerun(result: ShrinkResult) -> str:
    """The written file's line for its fresh runs after shrinking (``confirm``)."""
    if result.rerun_failed is None:
        return "not re-run after shrinking: no smaller schedule kept"
    times = "once" if result.runs == 1 else f"{result.runs} times"
    return f"re-run {times} after shrinking: fails {result.rerun_failed} of {result.runs}"


def _from_first_streams(scenario: Scenario, within: float) -> Scenario:
    """``scenario`` as a file ``mockdcp check`` replays as explore ran it: a consumer
    process's schedule counts from its first stream (``_check_options``), ``check``'s
    from its first connection, so the file begins by waiting for the consumer's streams
    (else its first writes can land before any stream and reach a consumer only as a
    backfill, de-duplicated: a consumer that drops deletions then shows nothing)."""
    from mockdcp.scenario import ConsumerProgress, Wait

    first = Wait(consumer=ConsumerProgress(streams=True), timeout=within)
    return attrs.evolve(scenario, steps=(first, *scenario.steps))


# -- the command line -------------------------------------------------------------------


def _set(text: str | None) -> frozenset[str]:
    return frozenset(w.strip() for w in (text or "").split(",") if w.strip())


def _can_start(command: list[str]) -> None:
    """``ExploreError`` if the consumer command cannot be started at all."""
    if not command:
        raise ExploreError("give the consumer command after --")
    program = command[0]
    if os.sep in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise ExploreError(f"the consumer command cannot start: {program}: not an executable")
    elif shutil.which(program) is None:
        raise ExploreError(f"the consumer command cannot start: {program}: not found on PATH")


def _writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".mockdcp-explore-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ExploreError(f"--out {folder}: not writable ({exc})") from None


def options_from(args: argparse.Namespace) -> ExploreOptions:
    """``ExploreError``/``OptionError`` for bad input, before anything runs."""
    command = list(args.consumer)
    factory = None
    if is_spec(command):
        try:
            factory = load_factory(command[0])
        except ValueError as exc:
            raise ExploreError(str(exc)) from None
    else:
        _can_start(command)
    gen = GenerateOptions(
        seed=args.seed,
        nodes=args.nodes,
        replicas=args.replicas,
        vbuckets=args.vbuckets,
        steps=args.steps,
        tags=_set(args.tag),
        exclude=_set(args.exclude),
    )
    if args.runs is not None and args.time is not None:
        raise ExploreError("--runs and --time: give one")
    runs = args.runs if args.runs is not None or args.time is not None else 100
    if runs is not None and runs < 1:
        raise ExploreError(f"--runs is at least 1, not {runs}")
    if args.time is not None and args.time <= 0:
        raise ExploreError("--time must be positive")
    if args.master is not None and args.time is not None:
        raise ExploreError("--master runs a number of schedules: give --runs, not --time")
    if args.partitions is not None and (args.master is None or args.partitions < 1):
        raise ExploreError("--partitions is at least 1, with --master")
    if not 1 <= args.shrink_runs <= 20:
        raise ExploreError(f"--shrink-runs is 1..20, not {args.shrink_runs}")
    out = None if args.out is None else Path(args.out)
    if out is not None:
        _writable(out)
    return ExploreOptions(
        command=list(args.consumer),
        generate=gen,
        runs=runs,
        seconds=args.time,
        jobs=args.jobs,
        limit=args.timeout,
        connect_within=args.connect_timeout,
        shrink_time=args.shrink_time,
        shrink_runs=args.shrink_runs,
        out=out,
        factory=factory,
    )


def _line(index: int, result: ScenarioResult, found: Found | None) -> str:
    if found is None:
        return f"  ok    schedule {index}"
    return f"  FOUND schedule {index}: {found.anomaly}: {found.findings[0].detail}"


def summary_table(state: ExploreState, out: TextIO) -> None:
    """The summary by anomaly (rich)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, highlight=False)
    g = state.options.generate
    head = f"mockdcp explore --seed {g.seed}: {state.schedules} schedules"
    if state.interrupted:
        head += " (interrupted)"
    if not state.found:
        console.print(f"{head}, no anomaly found")
        return
    table = Table(title=head)
    for column in ("anomaly", "schedules", "first", "shrunk to", "fails", "file"):
        table.add_column(column)
    counts = state.counts()
    for found in state.first_of_each():
        shrunk = state.shrunk.get(found.anomaly)
        steps = rate = file = "-"
        if shrunk is not None:
            steps = f"{size(shrunk.result.scenario)} steps"
            rate = f"{shrunk.result.failed}/{shrunk.result.runs}"
            if shrunk.result.rerun_failed is not None:
                rate += f", re-run {shrunk.result.rerun_failed}/{shrunk.result.runs}"
            file = "" if shrunk.path is None else str(shrunk.path)
        table.add_row(
            str(found.anomaly), str(counts[str(found.anomaly)]), str(found.index), steps, rate, file
        )
    console.print(table)


def run_explore(args: argparse.Namespace) -> int:
    """``mockdcp explore``: 0 if nothing was found, 1 if something was, 2 for bad input,
    130 when interrupted with nothing found."""
    try:
        options = options_from(args)
    except (ExploreError, OptionError) as exc:
        print(f"mockdcp explore: {exc}", file=sys.stderr)
        return 2
    out = sys.stderr if args.json else sys.stdout
    state = ExploreState(options)
    from mockdcp.cli._explore_inprocess import virtual_clock
    from mockdcp.cli._signals import Interrupted, until_signalled

    try:
        if args.master is not None:
            if not _on_spark(state, args.master, args.partitions, out):
                return 2
        elif (clock := virtual_clock(options.factory)) is not None:
            # in-process consumers in memory, replayed bit for bit: no task added
            trio.run(_with_progress, state, out, clock=clock)
        else:  # SIGTERM too stops a consumer process before explore exits (_signals)
            trio.run(until_signalled, partial(_with_progress, state, out))
    except (KeyboardInterrupt, Interrupted):
        _interrupted(state)
    except BaseExceptionGroup as group:  # from a nursery: Ctrl-C inside a schedule
        if group.subgroup(KeyboardInterrupt) is None:
            raise
        _interrupted(state)
    summary_table(state, out)
    try:
        if args.junit or args.html:
            from mockdcp.cli._check_report import html_page, junit_xml

            report = state.check_report()
            if args.junit:
                Path(args.junit).write_text(junit_xml(report), encoding="utf-8")
            if args.html:
                Path(args.html).write_text(html_page(report), encoding="utf-8")
    except OSError as exc:
        print(f"mockdcp explore: cannot write the report: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(state.as_dict()), flush=True)
    if state.found:
        return 1
    return 130 if state.interrupted else 0


def _on_spark(state: ExploreState, master: str, partitions: int | None, out: TextIO) -> bool:
    """``--master``: the schedules as Spark tasks (``_explore_spark``); False (said why)
    when Spark cannot run them."""
    from mockdcp.cli._explore_spark import explore_on_spark
    from mockdcp.data import PipelineError

    def show(index: int, result: ScenarioResult, found: Found | None) -> None:
        if found is not None:
            print(_line(index, result, found), file=out)

    try:
        explore_on_spark(state, master, partitions, show)
    except PipelineError as exc:
        print(f"mockdcp explore: {exc}", file=sys.stderr)
        return False
    return True


def _interrupted(state: ExploreState) -> None:
    """Ctrl-C: what was found so far (shrunk as far as it got, or not at all) is written."""
    state.interrupted = True
    for found in state.first_of_each():
        if found.anomaly not in state.shrunk:
            unshrunk = ShrinkResult(found.scenario, failed=1, runs=1, exhausted=True)
            state.shrunk[found.anomaly] = Shrunk(found, unshrunk)
    write_shrunk(state)


async def _with_progress(state: ExploreState, out: TextIO) -> None:
    from rich.console import Console

    console = Console(file=out, highlight=False)
    total = state.options.runs
    if not out.isatty():

        def show(index: int, result: ScenarioResult, found: Found | None) -> None:
            if found is not None:
                console.print(_line(index, result, found))

        await explore(state, show)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("explore: 0 anomalies", total=total)

        def advance(index: int, result: ScenarioResult, found: Found | None) -> None:
            if found is not None:
                progress.console.print(_line(index, result, found))
            n = len(state.found)
            progress.update(task, advance=1, description=f"explore: {n} anomalies")

        await explore(state, advance)


__all__ = ["ExploreOptions", "ExploreState", "explore", "run_explore"]
