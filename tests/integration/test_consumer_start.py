"""What a consumer process of ``check`` and ``explore`` costs (issues 39 and 44): the
reference consumer's imports, and ``check``'s report of where each scenario's time went."""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio

from mockdcp.cli import _check
from mockdcp.cli._check import PHASES, CheckOptions, Verdict, check_scenario
from mockdcp.cli._scenario_commands import bundled_scenarios
from mockdcp.scenario import load_scenario

if TYPE_CHECKING:
    from pathlib import Path

    from mockdcp.server import MockDcpServer

#: what ``mockdcp tail`` never uses, so never imports: the data stack, the server's
#: HTTP and TLS stacks, the server itself, SCRAM's library (ASCII credentials), rich
#: (output into a pipe), the KV document commands (a consumer never decodes them), the
#: other commands' options (explore's, the pipeline's, the benchmark's)
NEVER_IMPORTED = (
    "numpy",
    "pyarrow",
    "hypercorn",
    "cryptography",
    "scramp",
    "asn1crypto",
    "rich",
    "faker",
    "mockdcp.server",
    "mockdcp.model",
    "mockdcp.producer",
    "mockdcp.protocol._document_requests",
    "mockdcp.cli._explore_parser",
    "mockdcp.cli._pipeline_commands",
    "mockdcp.cli.bench",
)


def _imported(importtime: str) -> set[str]:
    """The modules ``python -X importtime`` reported."""
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", importtime, re.M))


async def test_tail_imports_nothing_it_does_not_use(server: MockDcpServer) -> None:
    """A run of ``mockdcp tail`` that logs in (SCRAM-SHA512), streams and writes its
    output loads none of ``NEVER_IMPORTED``: each of ``check``'s scenarios and
    ``explore``'s schedules starts one (scramp, rich and the document commands were
    about a third of its start)."""
    for i in range(20):
        server.bucket.set(f"k{i}", "{}")
    cmd = [sys.executable, "-X", "importtime", "-m", "mockdcp", "tail", "--port",
           str(server.kv_port), "--limit", "20"]  # fmt: skip
    env = {**os.environ, "MOCKDCP_OUTPUT": ""}
    with trio.fail_after(30):
        done = await trio.run_process(cmd, capture_stdout=True, capture_stderr=True, env=env)
    assert done.stdout.decode().count("\nMutation ") == 20  # plain lines, into a pipe
    modules = _imported(done.stderr.decode())
    assert "mockdcp.client._consumer" in modules  # the report is read as it should be
    loaded = sorted(m for m in modules for n in NEVER_IMPORTED if m == n or m.startswith(n + "."))
    assert not loaded


SCENARIO = "stream-end-ok"


def _library(name: str) -> Any:  # noqa: ANN401
    path = next(p for n, _, p in bundled_scenarios() if n == name)
    return load_scenario(path)


async def test_check_reports_each_scenarios_phases_and_its_own_overhead() -> None:
    """``check`` says where each scenario's time went (``PHASES``): its sum is the
    scenario's time, and ``overhead`` is all of it but the scenario's own."""
    options = CheckOptions(command=[sys.executable, "-m", "mockdcp", "tail", "--json"])
    result = await check_scenario(_library(SCENARIO), options)
    assert result.verdict is Verdict.PASSED, result.reason
    assert list(result.phases) == [p for p in PHASES if p in result.phases]
    assert {"server", "consumer start", "scenario", "settle", "stop", "judge"} <= set(result.phases)
    assert sum(result.phases.values()) == pytest.approx(result.seconds, abs=1e-6)
    assert result.overhead == pytest.approx(result.seconds - result.phases["scenario"])
    assert result.as_dict()["overhead"] == result.overhead


async def test_check_starts_the_server_in_process_and_only_the_consumer_as_a_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No interpreter per scenario but the consumer's: the server runs in ``check``."""
    started: list[list[str]] = []
    real = trio.lowlevel.open_process

    async def counting(command: list[str], **kwargs: Any) -> trio.Process:  # noqa: ANN401
        started.append(command)
        return await real(command, **kwargs)

    monkeypatch.setattr(trio.lowlevel, "open_process", counting)
    consumer = [sys.executable, "-m", "mockdcp", "tail", "--json"]
    result = await check_scenario(_library(SCENARIO), CheckOptions(command=consumer))
    assert result.verdict is Verdict.PASSED, result.reason
    assert started == [consumer]


async def test_settling_returns_once_the_output_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The output is awaited, not slept on: the settle window ends at the first poll
    that finds the oracle's documents."""
    polls: list[float] = []
    real = _check._standing

    def counting(rows: list[dict[str, Any]], output: Path) -> tuple[int, ...] | None:
        polls.append(trio.current_time())
        return real(rows, output)

    monkeypatch.setattr(_check, "_standing", counting)
    options = CheckOptions(command=[sys.executable, "-m", "mockdcp", "tail", "--json"])
    result = await check_scenario(_library(SCENARIO), options)
    assert result.verdict is Verdict.PASSED, result.reason
    assert 1 <= len(polls) < _check.SETTLE / 0.05
    assert result.phases["settle"] < _check.SETTLE


def test_tail_freezes_what_its_imports_made_before_it_streams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The collector never walks the imports' objects again (nor at exit): ``gc.freeze``
    before the consumer runs (a tenth of a short tail's CPU)."""
    import gc

    from mockdcp.cli import _commands
    from mockdcp.cli._main import build_parser

    calls: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(trio, "run", lambda *a: calls.append("run"))
    args = build_parser().parse_args(["tail", "--port", "1"])
    assert _commands.run_tail(args) == 0
    assert calls == ["freeze", "run"]


async def test_check_reads_each_scenario_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Choosing reads the library once; the server is given the scenario as read (it
    read each of them three times: the library, the choice, the server)."""
    from importlib import resources

    from mockdcp.cli._check_report import select
    from mockdcp.scenario import _convert

    read: list[str] = []
    real = _convert._read_yaml

    def counting(text: str) -> tuple[Any, Any]:
        read.append(text)
        return real(text)

    monkeypatch.setattr(_convert, "_read_yaml", counting)
    (scenario,) = select([SCENARIO], None, None)
    options = CheckOptions(command=[sys.executable, "-m", "mockdcp", "tail", "--json"])
    result = await check_scenario(scenario, options)
    assert result.verdict is Verdict.PASSED, result.reason
    folder = resources.files("mockdcp") / "scenarios"
    assert len(read) == sum(1 for e in folder.iterdir() if e.name.endswith(".yaml"))
