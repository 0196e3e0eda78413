"""The Go test helpers (``integrations/go``): their own ``go test`` suite, run against
this checkout's ``mockdcp``.

The suite starts servers through ``mockdcp.Start(t)`` in local mode (a ``mockdcp``
command on PATH: here a shim running this interpreter on this checkout), streams from
them with gocbcore and go-dcp, checks the control client's routes against the live
``/mock/openapi.json`` and times the start; its container tests skip unless a Docker
engine answers with the ``mockdcp`` image (``MOCKDCP_IMAGE``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.interop

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "integrations" / "go"
#: the first run downloads and builds the modules (gocbcore, go-dcp, testcontainers-go)
GO_TEST_TIMEOUT = 1500


def test_go_suite(tmp_path: Path) -> None:
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
    }
    result = subprocess.run(
        [go, "test", "-mod=readonly", "-count=1", "./..."],
        cwd=MODULE,
        env=env,
        capture_output=True,
        text=True,
        timeout=GO_TEST_TIMEOUT,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"go test failed in {MODULE}:\n{output[-12000:]}"
    assert "ok  \tgithub.com/mockdcp/mockdcp/integrations/go\t" in output, output[-4000:]
