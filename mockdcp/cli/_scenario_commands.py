"""``mockdcp run``, ``mockdcp validate`` and ``mockdcp scenarios``: the scenario runner on
the command line.

``mockdcp run SCENARIO -- CMD...`` serves the scenario on free ports, starts the consumer
command with ``MOCKDCP_*`` variables in its environment (its standard output goes to
``mockdcp run``'s standard error, so standard output holds the report alone), waits for
the scenario's end, stops the consumer and reports each expectation; the exit status is 0
only if every expectation passed, no wait timed out and the consumer did not fail. On a
terminal the live view (mockdcp/cli/_live.py) is drawn while the scenario runs.
"""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from importlib import resources
from typing import TYPE_CHECKING

import attrs
import trio

from mockdcp.util import MockDcpError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable

    from mockdcp.scenario import Scenario
    from mockdcp.server import MockDcpServer

#: seconds a consumer gets to exit after SIGTERM before it is killed
STOP_GRACE = 5.0


@attrs.define
class RunReport:
    """What ``mockdcp run`` found."""

    scenario: str
    expectations: list[dict[str, object]] = attrs.field(factory=list)
    failure: str | None = None
    consumer_exit: int | None = None
    consumer_failed: bool = False

    @property
    def passed(self) -> bool:
        return (
            self.failure is None
            and not self.consumer_failed
            and all(e["passed"] for e in self.expectations)
        )

    def as_dict(self) -> dict[str, object]:
        return {"passed": self.passed, **attrs.asdict(self)}


#: seconds the consumer ``mockdcp run`` starts has to connect before the scenario's waits
#: on it start counting (``serve``'s ``consumer_starts_within``)
CONSUMER_STARTS_WITHIN = 60.0


def consumer_env(server: MockDcpServer) -> dict[str, str]:
    """The variables a consumer command gets (as ``mockdcp run --help`` documents them)."""
    user, password = next(iter(server.node.users.items()))
    return {
        "MOCKDCP_HOST": server.host,
        "MOCKDCP_KV_PORT": str(server.kv_port),
        "MOCKDCP_HTTP_PORT": str(server.http_port),
        "MOCKDCP_BUCKET": server.bucket.name,
        "MOCKDCP_USER": user,
        "MOCKDCP_PASSWORD": password,
        "MOCKDCP_CONNECTION_STRING": server.connection_string,
        # the nodes the cluster starts with: above 1, the consumer must follow the map
        # (``mockdcp tail`` then streams with a connection per node, as ``--cluster``)
        "MOCKDCP_NODES": str(len(server.nodes)),
    }


async def run_scenario(
    path: str, command: list[str], *, limit: float, host: str = "127.0.0.1", live: bool = False
) -> RunReport:
    """Serve ``path``, run ``command`` against it, and report (see the module doc);
    ``live``: draw the live view (mockdcp/cli/_live.py) meanwhile."""
    from mockdcp.cli import _live
    from mockdcp.cli._consumer_process import open_consumer
    from mockdcp.server import serve

    starts_within = CONSUMER_STARTS_WITHIN if command else None
    async with serve(
        host=host, port=0, http_port=0, scenario=path, consumer_starts_within=starts_within
    ) as server:
        report = RunReport(scenario=path)
        async with trio.open_nursery() as nursery:
            if live:
                nursery.start_soon(_live.run_live_view, server.state)
            proc = None
            if command:
                env = {**os.environ, **consumer_env(server), **_settings(path)}
                # the consumer's output goes to stderr: stdout holds the report alone
                proc = await open_consumer(command, env=env, stdout=sys.stderr.fileno())
                nursery.start_soon(_watch, proc, report, server)
            try:
                with trio.move_on_after(limit) as scope:
                    async with trio.open_nursery() as either:
                        # the scenario ends, or the consumer fails before it does
                        either.start_soon(_first, server.scenario_done.wait, either)
                        if proc is not None:
                            either.start_soon(_first, partial(_failed, proc, server), either)
                if scope.cancelled_caught:
                    report.failure = f"the scenario did not finish within {limit:g}s"
            finally:
                # also when cancelled (Ctrl-C): the consumer is never left behind
                if proc is not None:
                    with trio.CancelScope(shield=True):
                        await _stop(proc)
            nursery.cancel_scope.cancel()
        progress = server.runner.progress
        report.expectations = [e.as_dict() for e in progress.expectations]
        report.failure = report.failure or progress.failure
        return report


def _settings(path: str) -> dict[str, str]:
    """The scenario's consumer settings as ``MOCKDCP_*`` variables (``serve`` has
    loaded it already: it is valid)."""
    from mockdcp.scenario import load_scenario

    scenario = load_scenario(path)
    return {
        "MOCKDCP_SCENARIO": scenario.name,
        **scenario.consumer.environment(),
        **collections_env(scenario),
    }


def collections_env(scenario: Scenario) -> dict[str, str]:
    """``MOCKDCP_COLLECTIONS`` (the collections the scenario writes documents to,
    ``scope.name`` separated by commas) and ``MOCKDCP_SCOPE`` (the one scope they are all
    in; empty if they span several): a consumer configured for named collections of one
    scope (go-dcp's ``scopeName`` and ``collectionNames``, Trendyol/go-dcp
    ``config/dcp.go``) learns from them what to stream (issue 46)."""
    return {
        "MOCKDCP_COLLECTIONS": ",".join(scenario.collections()),
        "MOCKDCP_SCOPE": scenario.scope(),
    }


async def _first(wait: Callable[[], Awaitable[object]], nursery: trio.Nursery) -> None:
    await wait()
    nursery.cancel_scope.cancel()


async def _failed(proc: trio.Process, server: MockDcpServer) -> None:
    """Returns once the consumer has exited with an error before the scenario ended
    (there is nothing left to wait for); never if it exits cleanly, or after."""
    code = await proc.wait()
    if code == 0 or server.scenario_done.is_set():
        await trio.sleep_forever()


async def _watch(proc: trio.Process, report: RunReport, server: MockDcpServer) -> None:
    """A consumer that exits with an error before the scenario ends fails the run."""
    code = await proc.wait()
    if not server.scenario_done.is_set():
        report.consumer_exit = code
        report.consumer_failed = code != 0


async def _stop(proc: trio.Process) -> None:
    """SIGTERM to the consumer's process group, SIGKILL after ``STOP_GRACE`` seconds
    (``_consumer_process``: also what it started, also once it has exited)."""
    from mockdcp.cli._consumer_process import stop_consumer

    await stop_consumer(proc, STOP_GRACE)


def print_report(report: RunReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.as_dict()), flush=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"mockdcp run {report.scenario}")
    table.add_column("step", justify="right")
    table.add_column("expectation")
    table.add_column("result")
    table.add_column("detail")
    for e in report.expectations:
        ok = "[green]passed[/green]" if e["passed"] else "[red]FAILED[/red]"
        table.add_row(str(e["step"]), str(e["name"]), ok, str(e["detail"]))
    console = Console()
    console.print(table)
    if report.failure:
        console.print(f"[red]scenario failed:[/red] {report.failure}", highlight=False)
    if report.consumer_failed:
        console.print(f"[red]the consumer exited with {report.consumer_exit}[/red]")
    console.print("[green]PASSED[/green]" if report.passed else "[red]FAILED[/red]")


def run_run(args: argparse.Namespace) -> int:
    command = list(args.consumer)
    from mockdcp.cli import _live

    if args.json:
        _live.use_json_logs()
    live = _live.wanted(sys.stdout, json_logs=args.json)
    from mockdcp.cli._signals import Interrupted, until_signalled

    try:
        report = trio.run(
            until_signalled,
            lambda: run_scenario(args.scenario, command, limit=args.timeout, live=live),
        )
    except Interrupted as exc:  # the consumer was stopped (run_scenario's finally)
        print(f"mockdcp run: stopped by {exc}", file=sys.stderr)
        return exc.exit_code
    except MockDcpError as exc:
        print(f"mockdcp run: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the consumer command could not start
        print(f"mockdcp run: cannot start the consumer: {exc}", file=sys.stderr)
        return 2
    print_report(report, args.json)
    return 0 if report.passed else 1


def validate_file(path: str) -> list[str]:
    """The problems of one scenario file (empty when it is valid)."""
    from mockdcp.scenario import (
        ScenarioProblems,
        check_steps,
        load_scenario,
        scenario_bucket,
        scenario_users,
    )

    try:
        scenario = load_scenario(path)
        spec = scenario.bucket
        check_steps(
            scenario.steps,
            scenario_bucket(scenario),
            path,
            nodes=spec.nodes,
            replicas=spec.replicas,
            users=scenario_users(scenario),
        )
    except ScenarioProblems as exc:
        return [str(p) for p in exc.problems]
    except MockDcpError as exc:
        return [f"{path}: {exc}"]
    return []


def run_validate(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.files:
        problems = validate_file(path)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            bad += 1
        else:
            print(f"{path}: ok")
    return 1 if bad else 0


def bundled_scenarios() -> list[tuple[str, str, str]]:
    """(name, first line of the description, path) of every bundled scenario."""
    return [(name, line, path) for name, line, path, _ in _library()]


def _library() -> list[tuple[str, str, str, Scenario | None]]:
    """(name, first line, path, the scenario or None if it is invalid) of each."""
    from mockdcp.scenario import load_scenario
    from mockdcp.util import ScenarioError

    out: list[tuple[str, str, str, Scenario | None]] = []
    folder = resources.files("mockdcp") / "scenarios"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        path = str(entry)
        try:
            scenario = load_scenario(path)
        except ScenarioError as exc:
            out.append((entry.name.removesuffix(".yaml"), f"INVALID: {exc}", path, None))
            continue
        line = scenario.description.strip().split("\n")[0]
        out.append((scenario.name, line, path, scenario))
    return out


def _metadata(scenario: Scenario | None) -> dict[str, object]:
    if scenario is None:
        return {"tags": [], "needs": [], "reproduces": None, "consumer": {}}
    rep = scenario.reproduces
    return {
        "tags": list(scenario.tags),
        "needs": [str(n) for n in scenario.needs],
        "reproduces": None if rep is None else {"summary": rep.summary, "source": rep.source},
        "consumer": scenario.consumer.environment(),
    }


def run_scenarios(args: argparse.Namespace) -> int:
    rows = _library()
    if args.json:
        for name, description, path, scenario in rows:
            row = {"name": name, "description": description, "path": path}
            print(json.dumps({**row, **_metadata(scenario)}))
        return 0
    width = max((len(name) for name, *_ in rows), default=0)
    for name, description, _, scenario in rows:
        print(f"{name:<{width}}  {description}")
        meta = _metadata(scenario)
        needs = f"  needs: {', '.join(meta['needs'])}" if meta["needs"] else ""  # type: ignore[arg-type]
        tags = ", ".join(meta["tags"])  # type: ignore[arg-type]
        print(f"{'':<{width}}  tags: {tags}{needs}")
        if scenario is not None and scenario.reproduces is not None:
            print(f"{'':<{width}}  source: {scenario.reproduces.source}")
    return 0


__all__ = ["RunReport", "collections_env", "consumer_env", "run_scenario"]
