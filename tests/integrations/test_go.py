"""The Go test helpers (``integrations/go``): their own ``go test`` suites, run against
this checkout's ``mockdcp``.

Two modules: the helpers' own (local and container mode, the control client's routes
against the live ``/mock/openapi.json``, the start time) and ``clients/``, which streams
with gocbcore and go-dcp (a module of its own, so that the helpers require only what
their code imports). Local mode runs a ``mockdcp`` command on PATH: here a shim running
this interpreter on this checkout. Container mode runs the image of this checkout that the
Docker tests build (``MOCKDCP_IMAGE``); with it, a skipped container test fails this test.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.integrations.conftest import ContainerMode

pytestmark = pytest.mark.interop

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "integrations" / "go"
#: the module path of each module, as `go test` reports it
MODULES = {
    MODULE: "github.com/mockdcp/mockdcp/integrations/go",
    MODULE / "clients": "github.com/mockdcp/mockdcp/integrations/go/clients",
}
#: the first run downloads and builds the modules (gocbcore, go-dcp, testcontainers-go)
GO_TEST_TIMEOUT = 1500


def skipped_container_tests(output: str) -> list[str]:
    """The container tests ``go test -v`` reports as skipped."""
    return [
        line.strip()
        for line in output.splitlines()
        if line.strip().startswith("--- SKIP: ") and "Container" in line
    ]


def test_a_skipped_container_test_is_found_in_go_test_output() -> None:
    output = (
        "=== RUN   TestContainerScenario\n"
        "    container_test.go:33: container mode: no Docker engine\n"
        "--- SKIP: TestContainerScenario (0.01s)\n"
        "--- PASS: TestStartLocal (0.31s)\n"
        "--- SKIP: TestAutoRunsAContainerWithoutTheCommand (0.00s)\n"
    )
    assert skipped_container_tests(output) == [
        "--- SKIP: TestContainerScenario (0.01s)",
        "--- SKIP: TestAutoRunsAContainerWithoutTheCommand (0.00s)",
    ]


@pytest.mark.parametrize("module", sorted(MODULES), ids=lambda m: m.name)
def test_go_suite(tmp_path: Path, module: Path, container_mode: ContainerMode) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not on PATH: the Go helpers' suite needs Go 1.24 or later")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "mockdcp"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m mockdcp "$@"\n')
    shim.chmod(0o755)
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {
        **os.environ,
        "PATH": os.pathsep.join((str(bin_dir), os.environ.get("PATH", ""))),
        "PYTHONPATH": pythonpath,
        **container_mode.env,
    }
    result = subprocess.run(
        [go, "test", "-v", "-mod=readonly", "-count=1", "./..."],
        cwd=module,
        env=env,
        capture_output=True,
        text=True,
        timeout=GO_TEST_TIMEOUT,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"go test failed in {module}:\n{output[-12000:]}"
    assert f"ok  \t{MODULES[module]}\t" in output, output[-4000:]
    if container_mode.unavailable is None:
        skipped = skipped_container_tests(output)
        assert not skipped, f"container tests skipped with the image at hand:\n{output[-12000:]}"
