"""The arguments of ``mockdcp explore`` (``_explore.py`` runs it): apart, so that building
the command line parser, which every ``mockdcp`` command does, imports neither the
explorer nor the scenario package (``mockdcp serve`` starts without them)."""

from __future__ import annotations

from typing import Any

#: seconds a schedule may take by default (its waits time out well before)
DEFAULT_LIMIT = 60.0


def add_parser(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers action
    """The ``explore`` subcommand's arguments."""
    from mockdcp.cli._main import _int_in, _seconds

    p = sub.add_parser(
        "explore",
        help="random schedules against a consumer: named anomalies, each shrunk to a scenario",
        usage="mockdcp explore [options] -- CONSUMER CMD...",
        description="Draws schedules from the step vocabulary (valid by construction, "
        "weighted towards failures), runs each against the consumer command as `mockdcp "
        "check` runs a scenario, judges it (oracle, protocol checker, liveness) into named "
        "anomalies and shrinks the first failure of each to a scenario in --out. The same "
        "seed and options give the same schedules. Exit 0 only if nothing was found.",
    )
    p.add_argument("--seed", type=int, default=0, help="the run's seed (0)")
    p.add_argument("--runs", type=int, default=None, help="schedules to run (100)")
    p.add_argument("--time", type=_seconds, default=None, help="or: draw schedules this long")
    p.add_argument("--nodes", type=int, default=1, help="data nodes (1)")
    p.add_argument("--replicas", type=int, default=0, help="replicas of each vbucket (0)")
    p.add_argument("--vbuckets", type=int, default=4, help="vbuckets (4)")
    p.add_argument("--steps", type=int, default=12, help="steps per schedule at most (12)")
    p.add_argument("--tag", metavar="GROUP,...", help="only steps of these groups")
    p.add_argument(
        "--exclude",
        metavar="GROUP,...",
        help="no steps of these groups (ephemeral, versions: no such buckets or nodes)",
    )
    p.add_argument("-j", "--jobs", type=_int_in(1, 64), default=1, help="schedules at once")
    p.add_argument(
        "--timeout", type=_seconds, default=DEFAULT_LIMIT, help="seconds per schedule (60)"
    )
    p.add_argument("--connect-timeout", type=_seconds, default=15.0, help="seconds to connect (15)")
    p.add_argument(
        "--shrink-time", type=_seconds, default=120.0, help="seconds for shrinking, in all (120)"
    )
    p.add_argument("--shrink-runs", type=int, default=2, help="runs per shrink candidate (2)")
    p.add_argument("--out", metavar="DIR", help="write each shrunk failure here (YAML)")
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    p.add_argument("--junit", metavar="FILE", help="JUnit XML, a test per schedule")
    p.add_argument("--html", metavar="FILE", help="an HTML page with each failure")
    p.add_argument(
        "--master",
        metavar="URL",
        help="run the schedules as Spark tasks on this master (local[2], spark://HOST:PORT)",
    )
    p.add_argument(
        "--partitions", type=int, default=None, help="Spark tasks (the master's parallelism)"
    )


__all__ = ["DEFAULT_LIMIT", "add_parser"]
