"""Which library scenarios catch each wrong consumer (issue 45, item 2).

Each wrong consumer of ``wrong_consumer.py`` breaks one rule; a scenario *catches* it
when ``mockdcp check`` fails it there. ``MEANT`` says, per wrong consumer, the scenarios
made to catch it: a scenario that stops catching what it is meant to (its lost writes
became invisible, say) is found by ``tests/scenarios/test_catches.py``.

The recorded run is ``catches.json`` beside this file (per wrong consumer, per
scenario: ``fail`` or ``pass``, and the failure's reason), and the table of the docs,
``docs/checker/wrong-consumers.md``, is rendered from it. ``python -m
tests.scenarios.catches --write [MODE...]`` runs ``mockdcp check -j 2`` over the library
for each wrong consumer (or those named) and rewrites both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RECORDED = HERE / "catches.json"
TABLE = ROOT / "docs" / "checker" / "wrong-consumers.md"
WRONG = HERE / "wrong_consumer.py"
JOBS = 2
WRITE = "python -m tests.scenarios.catches --write"

#: the rollback scenarios: each must catch a consumer that keeps what a rollback undid
ROLLBACK = (
    "bucket-recreated",
    "double-failover",
    "ephemeral-backfill-purged-mid-stream",
    "ephemeral-restart",
    "failover-drops-prepares",
    "failover-while-a-write-awaits-persistence",
    "flush",
    "hard-failover-replica-behind",
    "node-down-and-up",
    "restart-with-lost-writes",
    "rollback-after-failover",
    "rollback-mid-snapshot",
    "offline-past-the-purge-age",
    "rollback-to-zero-after-purge",
    "rollback-while-a-vbucket-moves",
)

#: wrong consumer -> the scenarios made to catch it (each must fail it)
MEANT: dict[str, tuple[str, ...]] = {
    "ignore-rollbacks": ("rollback-after-failover",),
    "keep-rolled-back": ROLLBACK,
    "never-ack": ("slow-consumer-flow-control",),
    "complete-snapshot": ("resume-mid-snapshot",),
    "no-reopen": ("stream-end-state-changed", "ephemeral-backfill-purged-mid-stream"),
    "reopen-ended": ("stream-end-filter-empty",),
    "ignore-noops": ("noops-keep-idle-connection-alive",),
    "no-backoff": ("reconnect-storm",),
    "dedup-snapshots": ("history-snapshots-with-duplicates", "history-backfill-split"),
    "drop-deletions": (
        "purge-while-away",
        "ttl-passes-while-away",
        "ephemeral-auto-delete-eviction",
    ),
    "contiguous-seqnos": (
        "durable-write-aborted",
        "prepare-only-seqno-advanced",
        "failover-drops-prepares",
        "pending-prepare-at-snapshot-tail",
    ),
    "last-item-is-snapshot-end": (
        "durable-write-aborted",
        "prepare-only-seqno-advanced",
        "failover-drops-prepares",
    ),
    "apply-prepares": ("durable-write-aborted",),
    "require-change-streams": ("change-streams-refused-by-7-0",),
    "fatal-refusals": ("privileges-revoked-mid-stream",),
    "give-up-on-auth": ("password-changed",),
    "first-listed-bucket": ("another-bucket-beside",),
    "reopen-on-replica": ("stream-reopened-on-a-replica-after-a-move",),
    # not wrong: it passes the rollback scenarios by the other route
    "restart-from-zero": (),
}


#: wrong consumer -> (the tag of the only scenarios it applies to, why): the others are
#: not applicable to it
ONLY: dict[str, tuple[str, str]] = {
    "dedup-snapshots": (
        "history",
        "it asks for change streams, which only a bucket keeping history grants",
    ),
    "require-change-streams": (
        "versions",
        "it fails wherever change streams are refused (a couchstore bucket too): it is "
        "run on the version scenarios",
    ),
}


def modes() -> list[str]:
    from tests.scenarios.wrong_consumer import MODES

    return sorted(MODES)


def check(mode: str, names: tuple[str, ...] = (), jobs: int = JOBS) -> dict[str, Any]:
    """``mockdcp check --json -j JOBS`` over the library (or the scenarios ``names``)
    against the wrong consumer."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "mockdcp", "check", "--json", "-j", str(jobs), *names]
    if mode in ONLY and not names:
        command += ["--tag", ONLY[mode][0]]
    done = subprocess.run(
        [*command, "--", sys.executable, str(WRONG), "--mode", mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=3600,
        check=False,
    )
    if not done.stdout:
        raise RuntimeError(f"mockdcp check printed no report:\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def cells(report: dict[str, Any], mode: str = "") -> dict[str, dict[str, str]]:
    """Scenario -> {verdict, reason} of a check report (a failure's reason shortened to
    its first clause); for a wrong consumer of ``ONLY``, the scenarios it was not run on
    are not applicable."""
    out = {}
    if mode in ONLY:
        out = {name: {"verdict": "not applicable", "reason": ONLY[mode][1]} for name in library()}
    for s in report["scenarios"]:
        cell = {"verdict": s["verdict"]}
        if s["verdict"] != "pass":
            cell["reason"] = s["reason"].split(" (+")[0][:160]
        out[s["name"]] = cell
    return out


def load() -> dict[str, dict[str, dict[str, str]]]:
    recorded: dict[str, dict[str, dict[str, str]]] = json.loads(
        RECORDED.read_text(encoding="utf-8")
    )
    return recorded


def caught(recorded: dict[str, dict[str, dict[str, str]]], mode: str) -> list[str]:
    """The scenarios that caught ``mode`` in the recorded run."""
    return sorted(n for n, c in recorded.get(mode, {}).items() if c["verdict"] == "fail")


def missed(recorded: dict[str, dict[str, dict[str, str]]]) -> list[str]:
    """(wrong consumer, scenario) pairs meant to catch it that did not, one line each."""
    lines = []
    for mode, scenarios in MEANT.items():
        got = recorded.get(mode, {})
        for name in scenarios:
            verdict = got.get(name, {}).get("verdict", "not run")
            if verdict != "fail":
                lines.append(f"{name} is meant to catch {mode}, but: {verdict}")
    return lines


def table(recorded: dict[str, dict[str, dict[str, str]]], library: list[str]) -> str:
    """The docs page: a row per scenario, a column per wrong consumer; ``caught`` where
    the scenario fails it (bold where it is meant to), and the count per column."""
    names = sorted(recorded)
    lines = [
        "# Wrong consumers against the scenario library",
        "",
        "<!-- generated by `" + WRITE + "` from tests/scenarios/catches.json: do not edit -->",
        "",
        "Each column is a consumer of `tests/scenarios/wrong_consumer.py` that breaks one "
        "rule of the protocol (its docstring says which); each row a scenario of the "
        "library, run by `mockdcp check -j " + str(JOBS) + "`. **caught**: the scenario "
        "fails that consumer and is made to (`MEANT` in `tests/scenarios/catches.py`); "
        "caught: it fails it too; an empty cell: the consumer passes it. "
        "`restart-from-zero` is not wrong: it passes the rollback scenarios by the other "
        "route (it never holds a write a branch lost).",
        "",
        "| scenario | " + " | ".join(f"`{m}`" for m in names) + " |",
        "| --- |" + " --- |" * len(names),
    ]
    for scenario in library:
        row = []
        for mode in names:
            verdict = recorded[mode].get(scenario, {}).get("verdict")
            if verdict == "fail":
                row.append("**caught**" if scenario in MEANT.get(mode, ()) else "caught")
            elif verdict == "not applicable":
                row.append("n/a")
            else:
                row.append("")
        lines.append(f"| `{scenario}` | " + " | ".join(row) + " |")
    counts = [str(len(caught(recorded, m))) for m in names]
    lines.append("| scenarios that catch it | " + " | ".join(counts) + " |")
    lines.append("")
    return "\n".join(lines)


def _tagged(tag: str) -> set[str]:
    """The library's scenarios with ``tag``."""
    from mockdcp.scenario import load_scenario

    return {
        path.stem
        for path in (ROOT / "mockdcp" / "scenarios").glob("*.yaml")
        if tag in load_scenario(str(path)).tags
    }


def library() -> list[str]:
    from mockdcp.cli._scenario_commands import bundled_scenarios

    return [name for name, _, _ in bundled_scenarios()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.scenarios.catches", description=__doc__)
    parser.add_argument("modes", nargs="*", metavar="MODE")
    parser.add_argument("--write", action="store_true", help="run and rewrite the record")
    parser.add_argument(
        "--scenarios",
        metavar="NAME,...",
        help="run only these scenarios and merge their cells into the record (new ones)",
    )
    args = parser.parse_args(argv)
    recorded = load() if RECORDED.exists() else {}
    names = tuple(args.scenarios.split(",")) if args.scenarios else ()
    if args.write:
        for mode in args.modes or modes():
            if names and mode in ONLY:  # run on its tag's scenarios only
                tagged = _tagged(ONLY[mode][0])
                run = tuple(n for n in names if n in tagged)
                report = check(mode, run) if run else {"scenarios": [], "counts": {}, "seconds": 0}
                got = cells(report, mode)
                recorded[mode].update({n: got[n] for n in names})
            elif names:
                report = check(mode, names)
                recorded[mode].update(cells(report, mode))
            else:
                report = check(mode)
                recorded[mode] = cells(report, mode)
            print(f"{mode}: {report['counts']} in {report['seconds']:.0f}s", file=sys.stderr)
            RECORDED.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    TABLE.write_text(table(recorded, library()), encoding="utf-8")
    problems = missed(recorded)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
