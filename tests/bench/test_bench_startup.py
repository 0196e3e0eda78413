"""``mockdcp bench startup`` and what it holds: ``import mockdcp`` pulls no heavy module
(numpy, pyarrow, hypercorn, cryptography) before it is used (issue 44)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mockdcp.cli.bench._startup import HEAVY_MODULES, import_time
from tests.bench._run import bench_report

pytestmark = pytest.mark.full


@pytest.mark.parametrize(
    "module", ["mockdcp", "mockdcp.cli", "mockdcp.pytest_plugin", "mockdcp.server"]
)
def test_importing_mockdcp_pulls_in_no_heavy_module(module: str) -> None:
    assert import_time(sys.executable, module)["heavy"] == []


def test_the_heavy_modules_are_the_ones_checked() -> None:
    assert set(HEAVY_MODULES) == {"numpy", "pyarrow", "hypercorn", "cryptography"}
    # the check sees a heavy module when one is imported
    assert import_time(sys.executable, "mockdcp.util._numpy, numpy")["heavy"] == ["numpy"]


def test_bench_startup_reports_import_listening_ready_and_fixture_times() -> None:
    report = bench_report("startup")
    assert report["mode"] == "startup"
    figures = report["figures"]
    for name in (
        "import_mockdcp_s",
        "import_cli_s",
        "import_server_s",
        "import_server_cpu_s",
        "serve_kv_listening_s",
        "serve_ready_s",
        "serve_ready_cpu_s",
        "import_mockdcp_cpu_s",
        "serve_default_docs_kv_listening_s",
        "serve_default_docs_ready_s",
        "fixture_first_up_s",
        "fixture_up_s",
        "fixture_up_and_closed_s",
        "thread_server_up_and_stopped_s",
    ):
        assert 0 < figures[name] < 60, name
    assert figures["serve_kv_listening_s"] <= figures["serve_ready_s"]
    assert figures["serve_default_docs_kv_listening_s"] < figures["serve_default_docs_ready_s"]
    assert figures["serve_http_up_at_ready"] is True
    assert len(report["samples"]["serve"]) == 5  # at least five spawns


def test_the_command_line_parser_imports_neither_explore_nor_the_scenario_package() -> None:
    """Every ``mockdcp`` command, ``serve`` first, builds the whole parser: building it
    must not import what only ``explore`` runs (the explorer, and through it the scenario
    package: about a quarter of ``serve``'s start)."""
    script = (
        "import sys, json; from mockdcp.cli._main import build_parser; build_parser(); "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith("
        "('mockdcp.explore', 'mockdcp.scenario', 'mockdcp.cli._explore.')) "
        "or m in ('mockdcp.cli._explore', 'mockdcp.cli._check'))))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True).stdout
    assert json.loads(out) == []
