"""``mockdcp check`` on the command line: choosing the scenarios, the report card as it
goes (a rich progress bar on a terminal), and the report as JUnit XML, JSON and HTML.

JUnit XML follows the format CI systems read (Jenkins' JUnit plugin, GitLab, GitHub
test reporters; Apache Ant's ``XMLJUnitResultFormatter`` wrote it first): one
``testsuite`` of one ``testcase`` per scenario, a ``failure`` with the reason as its
message and the evidence as its text, ``skipped`` for a scenario that does not apply,
the consumer's last lines in ``system-out``.
"""

from __future__ import annotations

import html
import json
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mockdcp.cli._check import CheckOptions, CheckReport, ScenarioResult, Verdict, check_all

if TYPE_CHECKING:
    import argparse

    from mockdcp.scenario import Scenario

#: the card's mark for each verdict
MARKS = {Verdict.PASSED: "PASS", Verdict.FAILED: "FAIL", Verdict.NOT_APPLICABLE: "N/A "}
STYLES = {Verdict.PASSED: "green", Verdict.FAILED: "red", Verdict.NOT_APPLICABLE: "yellow"}


class SelectionError(ValueError):
    """The scenarios asked for are not there (an unknown name, no match)."""


def _words(text: str | None) -> set[str]:
    return {w.strip() for w in (text or "").split(",") if w.strip()}


def select(names: list[str], tags: str | None, exclude: str | None) -> list[Scenario]:
    """The library scenarios named (or files given), else all; those with any of
    ``tags``; without those ``exclude`` names or tags. ``SelectionError`` for a name
    the library does not have, or when nothing is left."""
    from mockdcp.cli._scenario_commands import _library
    from mockdcp.scenario import load_scenario

    # the library as read once (an invalid one is read again, for its error)
    library = {name: (path, scenario) for name, _, path, scenario in _library()}
    chosen: list[Scenario] = []
    for name in names or sorted(library):
        if name in library:
            path, scenario = library[name]
            chosen.append(scenario if scenario is not None else load_scenario(path))
        elif Path(name).is_file():
            chosen.append(load_scenario(name))
        else:
            raise SelectionError(
                f"no scenario {name!r} in the library (mockdcp scenarios lists them) "
                "and no such file"
            )
    wanted, unwanted = _words(tags), _words(exclude)
    if wanted:
        chosen = [s for s in chosen if wanted & set(s.tags)]
    chosen = [s for s in chosen if not unwanted & {s.name, *s.tags}]
    if not chosen:
        raise SelectionError("no scenario matches the names, --tag and --exclude given")
    return chosen


# -- the card ----------------------------------------------------------------------------


def card_line(result: ScenarioResult) -> str:
    """One scenario's line of the report card (plain text)."""
    took = f"{result.seconds:5.1f}s" if result.verdict is not Verdict.NOT_APPLICABLE else " " * 6
    return f"{MARKS[result.verdict]}  {result.name:<36} {took}  {result.reason}"


def _print_result(result: ScenarioResult, console: Any) -> None:  # noqa: ANN401
    style = STYLES[result.verdict]
    console.print(f"[{style}]{card_line(result)}[/{style}]", highlight=False, markup=True,
                  soft_wrap=True)  # fmt: skip
    if result.verdict is Verdict.FAILED and result.consumer_output:
        for line in result.consumer_output[-5:]:
            console.print(f"        | {line}", highlight=False, markup=False, style="dim")


def summary(report: CheckReport) -> str:
    counts = report.counts()
    verdict = "PASSED" if report.passed else "FAILED"
    return (
        f"{verdict}: {counts['pass']} passed, {counts['fail']} failed, "
        f"{counts['not applicable']} not applicable in {report.seconds:.1f}s"
    )


def overhead(report: CheckReport) -> str | None:
    """Where the scenarios' time went, as a mean per scenario run: each phase
    (``PHASES``) and ``check``'s own overhead (all but the scenario's own time)."""
    from mockdcp.cli._check import PHASES

    ran = [r for r in report.results if r.phases]
    if not ran:
        return None
    mean = {p: sum(r.phases.get(p, 0.0) for r in ran) / len(ran) for p in PHASES}
    shown = ", ".join(f"{p} {mean[p]:.2f}" for p in PHASES if mean[p] >= 0.005)
    own = sum(r.overhead for r in ran) / len(ran)
    return f"per scenario (mean s): {shown}; check's own overhead {own:.2f}"


async def run_with_card(
    scenarios: list[Scenario], options: CheckOptions, out: TextIO, live: bool
) -> CheckReport:
    """Run ``check_all``, printing each scenario's card line to ``out`` as it finishes,
    under a progress bar when ``live``."""
    from rich.console import Console

    console = Console(file=out, force_terminal=live or None, highlight=False)
    if not live:
        report = await check_all(scenarios, options, lambda r: _print_result(r, console))
        _print_summary(report, console)
        return report
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("mockdcp check", total=len(scenarios))

        def on_result(result: ScenarioResult) -> None:
            _print_result(result, progress.console)
            progress.advance(task)

        report = await check_all(scenarios, options, on_result)
    _print_summary(report, console)
    return report


def _print_summary(report: CheckReport, console: Any) -> None:  # noqa: ANN401
    console.print(summary(report), highlight=False)
    phases = overhead(report)
    if phases is not None:
        console.print(phases, highlight=False, style="dim")


# -- JUnit XML ---------------------------------------------------------------------------


def junit_xml(report: CheckReport) -> str:
    """The report as JUnit XML (see the module docstring)."""
    import xml.etree.ElementTree as ET

    counts = report.counts()
    attrs_ = {
        "name": "mockdcp check",
        "tests": str(len(report.results)),
        "failures": str(counts["fail"]),
        "errors": "0",
        "skipped": str(counts["not applicable"]),
        "time": f"{report.seconds:.3f}",
    }
    suites = ET.Element("testsuites", attrs_)
    suite = ET.SubElement(suites, "testsuite", attrs_)
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", {"name": "command", "value": " ".join(report.command)})
    for r in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            {"classname": "mockdcp.check", "name": r.name, "time": f"{r.seconds:.3f}"},
        )
        if r.verdict is Verdict.FAILED:
            failure = ET.SubElement(case, "failure", {"message": r.reason, "type": _kind(r)})
            failure.text = "\n".join(_failure_text(r))
        elif r.verdict is Verdict.NOT_APPLICABLE:
            ET.SubElement(case, "skipped", {"message": r.reason})
        if r.consumer_output:
            ET.SubElement(case, "system-out").text = "\n".join(r.consumer_output)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


def _kind(r: ScenarioResult) -> str:
    """The failure's type: the first rule broken, else what failed."""
    if r.violations:
        return str(r.violations[0]["rule"])
    if any(not e["passed"] for e in r.expectations):
        return "expectation"
    if r.verification is not None:
        return "output"
    return "scenario"


def _failure_text(r: ScenarioResult) -> list[str]:
    lines = [r.reason, ""]
    lines += [f"expectation {e['name']}: {e['detail']}" for e in r.expectations if not e["passed"]]
    lines += [f"violation {v['rule']}: {v['message']} [{v['summary']}]" for v in r.violations]
    if r.evidence:
        lines += ["", "evidence:", *r.evidence]
    return lines


# -- HTML --------------------------------------------------------------------------------

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.3em;
text-align:left;vertical-align:top}.pass{color:#080}.fail{color:#b00}.na{color:#a80}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:85%}
section{border-top:2px solid #b00;margin-top:2em}
"""


def html_page(report: CheckReport) -> str:
    """The report as one self-contained HTML page: the card, then each failure with its
    evidence (the expectation, what the consumer sent, what it was sent, its output)."""
    e = html.escape
    rows = []
    for r in report.results:
        cls = {Verdict.PASSED: "pass", Verdict.FAILED: "fail"}.get(r.verdict, "na")
        name = (
            f'<a href="#{e(r.name)}">{e(r.name)}</a>' if r.verdict is Verdict.FAILED else e(r.name)
        )
        rows.append(
            f'<tr><td class="{cls}">{e(str(r.verdict))}</td><td>{name}</td>'
            f"<td>{e(', '.join(r.tags))}</td><td>{r.seconds:.1f}s</td><td>{e(r.reason)}</td></tr>"
        )
    sections = [_failure_section(r) for r in report.results if r.verdict is Verdict.FAILED]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>mockdcp check</title><style>{_STYLE}</style></head><body>"
        f"<h1>mockdcp check</h1><p>{e(summary(report))}</p>"
        f"<p>consumer: <code>{e(' '.join(report.command))}</code></p>"
        "<table><tr><th>result</th><th>scenario</th><th>tags</th><th>time</th><th>reason</th></tr>"
        + "".join(rows)
        + "</table>"
        + "".join(sections)
        + "</body></html>\n"
    )


def _pre(lines: list[str]) -> str:
    return "<pre>" + html.escape("\n".join(lines)) + "</pre>"


def _failure_section(r: ScenarioResult) -> str:
    e = html.escape
    parts = [f'<section id="{e(r.name)}"><h2>{e(r.name)}</h2><p>{e(r.reason)}</p>']
    if r.reproduces:
        src = r.reproduces["source"]
        parts.append(
            f'<p>Reproduces: {e(r.reproduces["summary"])} (<a href="{e(src)}">{e(src)}</a>)</p>'
        )
    if r.failed_steps:
        parts.append("<h3>The expectation</h3>" + _pre([json.dumps(s) for s in r.failed_steps]))
    if r.expectations:
        parts.append(
            "<h3>Expectations</h3>"
            + _pre(
                [
                    f"{'met ' if x['passed'] else 'MISSED'} {x['name']}: {x['detail']}"
                    for x in r.expectations
                ]
            )
        )
    if r.violations:
        parts.append(
            "<h3>Protocol violations</h3>"
            + _pre(
                [
                    f"{v['rule']}: {v['message']}\n  {v['summary']}\n  {v['frame']}"
                    for v in r.violations
                ]
            )
        )
    if r.verification is not None:
        parts.append("<h3>Output</h3>" + _pre([json.dumps(r.verification, indent=1)]))
    elif r.output:
        parts.append(f"<h3>Output</h3><p>{e(r.output)}</p>")
    if r.evidence:
        parts.append(
            "<h3>What the consumer sent (&lt;-) and was sent (-&gt;)</h3>" + _pre(r.evidence)
        )
    if r.consumer_output:
        parts.append("<h3>The consumer's last lines</h3>" + _pre(r.consumer_output))
    return "".join(parts) + "</section>"


# -- the command -------------------------------------------------------------------------


def _write(path: str, text: str, what: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SelectionError(f"cannot write the {what} to {path}: {exc}") from None


def _options(args: argparse.Namespace) -> CheckOptions:
    output_dir = None
    if args.output_dir is not None:
        output_dir = Path(args.output_dir)
        try:
            output_dir.mkdir(parents=True, exist_ok=True)
            probe = output_dir / ".mockdcp-check-probe"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            raise SelectionError(f"--output-dir {output_dir}: not writable ({exc})") from None
    capabilities = None
    if args.capabilities is not None:
        from mockdcp.scenario import Need

        capabilities = frozenset(_words(args.capabilities))
        unknown = capabilities - {str(n) for n in Need}
        if unknown:
            known = ", ".join(str(n) for n in Need)
            raise SelectionError(f"unknown capability {sorted(unknown)[0]!r} (known: {known})")
    return CheckOptions(
        command=list(args.consumer),
        jobs=args.jobs,
        limit=args.timeout,
        connect_within=args.connect_timeout,
        capabilities=capabilities,
        output_dir=output_dir,
    )


def run_check(args: argparse.Namespace) -> int:
    """``mockdcp check``: 0 when every scenario that applies passed, 1 otherwise, 2 for
    bad arguments."""
    import trio

    from mockdcp.util import MockDcpError

    if not args.consumer:
        print("mockdcp check: give the consumer command after --", file=sys.stderr)
        return 2
    try:
        scenarios = select(args.scenarios, args.tag, args.exclude)
        options = _options(args)
    except (SelectionError, MockDcpError) as exc:
        print(f"mockdcp check: {exc}", file=sys.stderr)
        return 2
    out = sys.stderr if args.json else sys.stdout
    live = out.isatty()
    from mockdcp.cli._signals import Interrupted, until_signalled

    try:
        report = trio.run(until_signalled, partial(run_with_card, scenarios, options, out, live))
    except Interrupted as exc:  # each running consumer was stopped (check_scenario's finally)
        print(f"mockdcp check: stopped by {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        if args.junit:
            _write(args.junit, junit_xml(report), "JUnit report")
        if args.html:
            _write(args.html, html_page(report), "HTML report")
    except SelectionError as exc:
        print(f"mockdcp check: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.as_dict()), flush=True)
    return 0 if report.passed else 1


__all__ = ["html_page", "junit_xml", "run_check", "select"]
