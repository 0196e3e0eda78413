"""The explore reliability bench (issue 39 item 6): ``mockdcp explore`` with the
reference consumer in-process, for a fixed seed and budget, as ``mockdcp explore SEED
--runs N --nodes 3 --replicas 1 --vbuckets 8 -- mockdcp.explore:reference_consumer``
runs it (the same ``explore`` over the same ``ExploreState``, under the virtual clock),
with what the command line does not report: the process's resident memory and CPU
seconds every ``--every`` schedules, the schedules of each anomaly, and the errors of
mockdcp's own (a result whose reason starts ``mockdcp error``: a server exception).

Run: ``python -m tests.bench.explore_bench --runs 10000 --out DIR`` (one line of JSON
at the end with ``--json``; a line a checkpoint on stderr as it goes). The target: no
anomaly, no mockdcp error, the resident memory flat once warm (``grew_mib``: the last
checkpoint's RSS less the first's). ``tests/bench/test_explore_bench.py`` runs it at a
smaller budget in the full tier.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import trio

from mockdcp.cli._explore import ExploreOptions, ExploreState, Found, explore
from mockdcp.cli._explore_inprocess import virtual_clock
from mockdcp.explore import GenerateOptions, reference_consumer

if TYPE_CHECKING:
    from mockdcp.cli._check import ScenarioResult

MiB = 1024 * 1024
SPEC = "mockdcp.explore:reference_consumer"


def cpu_seconds() -> float:
    """User and system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(
    runs: int,
    *,
    seed: int = 39,
    nodes: int = 3,
    replicas: int = 1,
    vbuckets: int = 8,
    every: int = 1000,
    first: int = 0,
    shrink_time: float = 0.0,
    out: Path | None = None,
    progress: Any = None,  # noqa: ANN401 - called with each checkpoint's dict
) -> dict[str, Any]:
    """``runs`` schedules from schedule ``first`` on (the module docstring: a share
    of a longer run, as ``--master`` hands out); the report as a dict."""
    options = ExploreOptions(
        command=[SPEC],
        generate=GenerateOptions(
            seed=seed, nodes=nodes, replicas=replicas, vbuckets=vbuckets, steps=12
        ),
        runs=first + runs,
        shrink_time=shrink_time,
        out=out,
        factory=reference_consumer,
    )
    state = ExploreState(options)
    me = psutil.Process()
    checkpoints: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    started, cpu_started = time.perf_counter(), cpu_seconds()

    def on_result(index: int, result: ScenarioResult, found: Found | None) -> None:
        if result.reason.startswith("mockdcp error"):
            errors.append({"index": index, "reason": result.reason, "evidence": result.evidence})
        if found is not None and progress is not None:
            progress({"index": index, "anomaly": str(found.anomaly), "reason": result.reason})
        done = state.schedules
        if done % every == 0 or done == runs:  # schedules this process ran
            point = {
                "schedules": done,
                "rss_mib": round(me.memory_info().rss / MiB, 1),
                "cpu_s": round(cpu_seconds() - cpu_started, 1),
                "seconds": round(time.perf_counter() - started, 1),
                "anomalies": len(state.found),
            }
            checkpoints.append(point)
            if progress is not None:
                progress(point)

    indices = range(first, first + runs)
    trio.run(
        lambda: explore(state, on_result, indices=iter(indices)),
        clock=virtual_clock(reference_consumer),
    )
    cpu = cpu_seconds() - cpu_started
    seconds = time.perf_counter() - started
    return {
        "seed": seed,
        "first": first,
        "nodes": nodes,
        "replicas": replicas,
        "vbuckets": vbuckets,
        "schedules": state.schedules,
        "seconds": round(seconds, 1),
        "cpu_s": round(cpu, 1),
        "cpu_ms_per_schedule": round(1000 * cpu / max(1, state.schedules), 1),
        "schedules_per_cpu_minute": round(60 * state.schedules / cpu, 1) if cpu else 0.0,
        "anomalies": state.counts(),
        "found": [f.as_dict() for f in sorted(state.found, key=lambda f: f.index)],
        "shrunk": [s.as_dict() for s in state.shrunk.values()],
        "mockdcp_errors": errors,
        "checkpoints": checkpoints,
        "grew_mib": round(checkpoints[-1]["rss_mib"] - checkpoints[0]["rss_mib"], 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.explore_bench")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--vbuckets", type=int, default=8)
    parser.add_argument("--every", type=int, default=1000, help="schedules between checkpoints")
    parser.add_argument("--first", type=int, default=0, help="the first schedule's index")
    parser.add_argument("--shrink-time", type=float, default=120.0)
    parser.add_argument("--out", metavar="DIR", help="the shrunk failures (YAML)")
    parser.add_argument("--json", action="store_true", help="the report as one JSON line")
    args = parser.parse_args(argv)
    out = None if args.out is None else Path(args.out)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    report = run(
        args.runs,
        seed=args.seed,
        nodes=args.nodes,
        replicas=args.replicas,
        vbuckets=args.vbuckets,
        every=args.every,
        first=args.first,
        shrink_time=args.shrink_time,
        out=out,
        progress=lambda point: print(json.dumps(point), file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(report))
    else:
        for key in ("schedules", "seconds", "cpu_s", "cpu_ms_per_schedule", "anomalies"):
            print(f"{key}: {report[key]}")
        print(f"mockdcp errors: {len(report['mockdcp_errors'])}")
        print(
            "RSS MiB: "
            + ", ".join(f"{p['schedules']}: {p['rss_mib']}" for p in report["checkpoints"])
        )
    clean = not report["found"] and not report["mockdcp_errors"]
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
