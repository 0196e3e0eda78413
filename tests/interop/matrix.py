"""The published matrix: ``mockdcp check`` over the scenario library against each real
client as its users configure it (issue 29, item 5).

Each client runs as the ``-- CONSUMER CMD`` of ``mockdcp check``: the interop programs
(tests/interop/java, tests/interop/go) take ``--env`` to read the ``MOCKDCP_*`` variables
check sets (host, ports, bucket, credentials, the scenario's buffer size and noop
interval) and write the documents they hold to ``$MOCKDCP_OUTPUT`` as the pipeline's
JSON lines, which check verifies against the scenario's oracle. ``--capabilities`` says
what each supports as configured: the scenarios needing anything else are not
applicable.

The expected matrix is ``matrix.json`` beside this file: per scenario, per client, the
verdict (``pass``, ``fail``, ``not applicable``, or ``pass or fail`` for a known race)
and, for each verdict but ``pass``, why: whose fault (``client``, with the source line;
``mockdcp``; ``setup``: how the consumer is configured here) and the explanation. The
documentation's matrix page (``docs/checker/matrix.md``) is rendered from it with
``table`` when the site is built.

``python -m tests.interop.matrix --write [CLIENT...]`` runs the clients (building their
programs) and rewrites ``matrix.json`` (keeping the explanations of verdicts that did
not change; a new failure gets ``"why": "UNEXPLAINED: <reason>"`` to be written by a
person). Either way the table is validated, each explanation's claims about
mockdcp's code against that code (``cited_code``), and the command fails if anything is
wrong.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXPECTED = HERE / "matrix.json"
JAR = HERE / "java" / "target" / "mockdcp-interop-java.jar"
GO_BIN = HERE / "go" / "bin"
#: scenarios at once (the CI machine has 2 cores)
JOBS = 2
#: what a cell may hold
VERDICTS = ("pass", "fail", "not applicable", "pass or fail")
FAULTS = ("client", "mockdcp", "setup")
REGENERATE = "python -m tests.interop.matrix --write"


@attrs.frozen
class Client:
    """A real client as ``mockdcp check`` runs it."""

    name: str
    #: how its users configure it, in a few words (the published matrix's column note)
    configured: str
    #: the ``-- CONSUMER CMD`` (paths resolved at run time)
    command: tuple[str, ...]
    #: ``--capabilities`` (None: everything)
    capabilities: tuple[str, ...] | None
    #: the build script of its program (None: nothing to build)
    build: Path | None = None

    def argv(self) -> list[str]:
        return [str(JAR) if a == "{jar}" else a.replace("{go}", str(GO_BIN)) for a in self.command]


CLIENTS = (
    Client(
        "java-dcp-client",
        "0.56.0 with the Kafka connector's settings (`--profile kafka`: collections, "
        "compression, `mitigateRollbacks` every 100 ms, 16 MiB flow control acked at 60 %)",
        ("java", "-jar", "{jar}", "--env", "--profile", "kafka", "--log-level", "warn"),
        ("collections", "flow_control", "noops", "change_streams", "several_nodes"),
        HERE / "java" / "build.sh",
    ),
    Client(
        "gocbcore",
        "v10.9.3 `DCPAgent`, collections on, the consumer program asking ACTIVE_VB_ONLY, "
        "re-opening ended streams and rolling back on `DCPRollbackError` to its last whole "
        "snapshot",
        ("{go}/gocbcore-consumer", "--env", "--collections"),
        # noops: gocbcore sets set_noop_interval 180 whatever it is given
        # (memdbootstrap_dcp_client.go ExecEnableDcpNoop); change streams only when
        # DCPConfig.UseChangeStreams is set, which a couchstore bucket refuses at bootstrap
        ("collections", "flow_control", "several_nodes"),
        HERE / "go" / "build.sh",
    ),
    Client(
        "go-dcp",
        "v1.3.6 with its README configuration (rollback mitigation, health check, API on); "
        "static membership and file checkpoints, so it writes nothing into the bucket",
        ("{go}/godcp-consumer", "--env", "--readme-config", "--outside-bucket"),
        # noops: no setting (gocbcore's 180 s); change streams: on by itself for magma
        ("collections", "flow_control", "change_streams", "several_nodes"),
        HERE / "go" / "build.sh",
    ),
    Client(
        "mockdcp tail",
        "the reference consumer (`mockdcp tail --json`)",
        (sys.executable, "-m", "mockdcp", "tail", "--json"),
        None,
    ),
)
BY_NAME = {c.name: c for c in CLIENTS}


def build(clients: list[Client]) -> None:
    """Build the programs of ``clients`` (each build script once)."""
    for script in sorted({c.build for c in clients if c.build is not None}):
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{script} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def check(
    client: Client, scenarios: list[str] | None = None, *, timeout: float = 900
) -> dict[str, Any]:
    """``mockdcp check --json -j JOBS`` over the library (or ``scenarios``) against
    ``client``: the report."""
    args = [sys.executable, "-m", "mockdcp", "check", "--json", "-j", str(JOBS)]
    args += scenarios or []  # library names
    if client.capabilities is not None:
        args += ["--capabilities", ",".join(client.capabilities)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [*args, "--", *client.argv()],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
    if not done.stdout:
        raise RuntimeError(f"mockdcp check printed no report:\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Scenario -> (verdict, reason) of a check report."""
    return {s["name"]: (s["verdict"], s["reason"]) for s in report["scenarios"]}


# -- the expectation ----------------------------------------------------------------------


def load() -> dict[str, Any]:
    expected: dict[str, Any] = json.loads(EXPECTED.read_text(encoding="utf-8"))
    return expected


def library() -> list[str]:
    """The names of the library's scenarios, in library order."""
    from mockdcp.cli._scenario_commands import bundled_scenarios

    return [name for name, _, _ in bundled_scenarios()]


def allowed(cell: dict[str, Any]) -> set[str]:
    """The check verdicts a cell accepts."""
    if cell["verdict"] == "pass or fail":
        return {"pass", "fail"}
    return {cell["verdict"]}


def differences(
    client: str, got: dict[str, tuple[str, str]], expected: dict[str, Any]
) -> list[str]:
    """Where ``client``'s run departs from the expectation, one line each (the library
    and the table must name the same scenarios)."""
    table = expected["scenarios"]
    where = "tests/interop/matrix.json"
    lines = [f"{n}: in the library, not in {where}" for n in got if n not in table]
    lines += [f"{n}: in {where}, not in the library" for n in table if n not in got]
    for name, (verdict, reason) in got.items():
        cell = table.get(name, {}).get(client)
        if cell is None:
            if name in table:
                lines.append(f"{name}: no cell for {client} in {where}")
            continue
        if verdict not in allowed(cell):
            lines.append(f"{name}: {verdict} ({reason}), expected {cell['verdict']}")
    return lines


def update(expected: dict[str, Any], client: Client, report: dict[str, Any]) -> None:
    """Put ``client``'s verdicts into the expectation, keeping each explanation whose
    verdict did not change (a known race stays ``pass or fail``)."""
    got = verdicts(report)
    table = expected.setdefault("scenarios", {})
    for name in list(table):
        if name not in got:
            del table[name]
    for name, (verdict, reason) in got.items():
        row = table.setdefault(name, {})
        old = row.get(client.name)
        if old is not None and verdict in allowed(old):
            continue
        if verdict == "pass":
            row[client.name] = {"verdict": "pass"}
        elif verdict == "not applicable":
            row[client.name] = {"verdict": verdict, "fault": "setup", "why": reason}
        else:
            row[client.name] = {"verdict": verdict, "fault": "", "why": f"UNEXPLAINED: {reason}"}
    expected["scenarios"] = {n: table[n] for n in got}
    expected.setdefault("clients", {})[client.name] = {
        "configured": client.configured,
        "command": list(client.command),
        "capabilities": None if client.capabilities is None else list(client.capabilities),
    }


def validate(expected: dict[str, Any]) -> list[str]:
    """What is wrong with the table itself: unknown verdicts or faults, a failure
    without its explanation, an explanation whose claims about mockdcp's code no longer
    hold (``cited_code``)."""
    problems = []
    for name, row in expected["scenarios"].items():
        for client, cell in row.items():
            where = f"{name} / {client}"
            if cell.get("verdict") not in VERDICTS:
                problems.append(f"{where}: verdict {cell.get('verdict')!r}")
            elif cell["verdict"] != "pass":
                why = str(cell.get("why", ""))
                if cell.get("fault") not in FAULTS:
                    problems.append(f"{where}: fault {cell.get('fault')!r}, not one of {FAULTS}")
                if not why or why.startswith("UNEXPLAINED"):
                    problems.append(f"{where}: no explanation ({why or 'empty'})")
                problems += [f"{where}: {p}" for p in cited_code(cell)]
    return problems


#: a path of mockdcp's own code named in an explanation (``mockdcp/producer/x.py``)
_OWN_CODE = re.compile(r"\bmockdcp/[\w/]+\.py\b")


def cited_code(cell: dict[str, Any]) -> list[str]:
    """Where an explanation's claims about mockdcp's code no longer hold (issue 45: a
    note said the checker treats LOST_PRIVILEGES as final long after ``FINAL_REASONS``
    stopped holding it). An explanation that names a file of mockdcp states what it
    relies on in ``cites``: ``{"file": PATH, "name": NAME, "shows": [TEXT...]}``, the
    definition of ``NAME`` at the top level of ``PATH`` holding each ``TEXT``; each is
    checked against the code whenever the table is validated (when it is rewritten, and
    by the tests)."""
    cites = cell.get("cites", [])
    named = set(_OWN_CODE.findall(str(cell.get("why", ""))))
    problems = [
        f"names {path} but cites nothing of it (add a cite: file, name, shows)"
        for path in sorted(named - {c.get("file") for c in cites})
    ]
    for cite in cites:
        source = _definition(ROOT / str(cite.get("file")), str(cite.get("name")))
        if source is None:
            problems.append(f"cites {cite.get('name')} in {cite.get('file')}: not defined there")
            continue
        problems += [
            f"cites {cite['name']} in {cite['file']} as holding {text!r}: it does not "
            "(rewrite the explanation against the code)"
            for text in cite.get("shows", [])
            if text not in source
        ]
    return problems


def _definition(path: Path, name: str) -> str | None:
    """The source of ``name``'s top-level definition (a function, a class, an
    assignment) in ``path``; None if there is none."""
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined = [node.name]
        elif isinstance(node, ast.Assign):
            defined = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined = [node.target.id]
        else:
            continue
        if name in defined:
            return ast.get_source_segment(text, node)
    return None


# -- the published table ------------------------------------------------------------------

_MARK = {"pass": "pass", "fail": "**fail**", "not applicable": "n/a", "pass or fail": "race"}


def table(expected: dict[str, Any]) -> str:
    """The published matrix: a row per scenario, a column per client; every verdict but
    ``pass`` is numbered and explained below the table."""
    clients = [c.name for c in CLIENTS if c.name in expected["clients"]]
    notes: list[str] = []
    seen: dict[str, int] = {}
    lines = [
        "| scenario | " + " | ".join(clients) + " |",
        "| --- |" + " --- |" * len(clients),
    ]
    for name, row in expected["scenarios"].items():
        cells = []
        for client in clients:
            cell = row.get(client, {"verdict": "?"})
            mark = _MARK.get(cell["verdict"], cell["verdict"])
            if cell["verdict"] != "pass":
                text = f"{cell['fault']}: {cell['why']}"
                if text not in seen:
                    notes.append(text)
                    seen[text] = len(notes)
                mark += f" [{seen[text]}]"
            cells.append(mark)
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"{i}. {text}" for i, text in enumerate(notes, 1)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.interop.matrix", description=__doc__)
    parser.add_argument("clients", nargs="*", metavar="CLIENT", help=", ".join(BY_NAME))
    parser.add_argument("--write", action="store_true", help="run and rewrite matrix.json")
    args = parser.parse_args(argv)
    unknown = [c for c in args.clients if c not in BY_NAME]
    if unknown:
        parser.error(f"unknown client(s) {unknown}; one of {list(BY_NAME)}")
    expected = load() if EXPECTED.exists() else {"clients": {}, "scenarios": {}}
    if args.write:
        clients = [BY_NAME[c] for c in args.clients] or list(CLIENTS)
        build(clients)
        for client in clients:
            report = check(client)
            print(f"{client.name}: {report['counts']} in {report['seconds']:.0f}s", file=sys.stderr)
            update(expected, client, report)
        EXPECTED.write_text(json.dumps(expected, indent=1) + "\n", encoding="utf-8")
    problems = validate(expected)
    for problem in problems:
        print(f"matrix.json: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
