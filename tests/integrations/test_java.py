"""The Java test helpers (integrations/java, Maven artifact mockdcp-junit): their own test
suite, run by Maven with this checkout's ``mockdcp`` first on PATH.

The suite starts local servers (``mockdcp serve``) and streams from them with
java-dcp-client: the bundled rollback scenario, steps from the typed builders, TLS with the
server's CA, the client checked against ``/mock/openapi.json``; its container tests run only
when a Docker engine has the ``mockdcp`` image (``MOCKDCP_IMAGE``), and skip otherwise. A
failing Maven test fails this test, with Maven's output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.interop

PROJECT = Path(__file__).resolve().parents[2] / "integrations" / "java"
#: the first run downloads the module's dependencies into ~/.m2
MAVEN_TIMEOUT = 1500


def test_maven_suite_passes() -> None:
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        tools = " and ".join(missing)
        pytest.skip(f"the Java helpers are built by Maven on a JDK: {tools} not on PATH")
    scripts = Path(sys.executable).parent  # this interpreter's venv: its `mockdcp` command
    assert (scripts / "mockdcp").exists(), f"mockdcp is not installed in {scripts}"
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("MOCKDCP_COMMAND", None)  # the helpers take `mockdcp` from PATH: this checkout's
    result = subprocess.run(
        ["mvn", "-q", "-B", "-Dstyle.color=never", "test"],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=MAVEN_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, (
        f"mvn test in {PROJECT} exited {result.returncode}\n"
        f"stdout:\n{result.stdout[-8000:]}\nstderr:\n{result.stderr[-4000:]}"
    )
