"""The Java test helpers (integrations/java, Maven artifact mockdcp-junit): their own test
suite, run by Maven with this checkout's ``mockdcp`` first on PATH.

The suite starts local servers (``mockdcp serve``) and streams from them with
java-dcp-client: the bundled rollback scenario, steps from the typed builders, TLS with the
server's CA, the client checked against ``/mock/openapi.json``. Its container tests run on
the image of this checkout that the Docker tests build (``MOCKDCP_IMAGE``); with it, a
skipped container test fails this test (where the Docker tests skip, they skip too). A
failing Maven test fails this test, with Maven's output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.integrations.conftest import ContainerMode

pytestmark = pytest.mark.interop

PROJECT = Path(__file__).resolve().parents[2] / "integrations" / "java"
#: the first run downloads the module's dependencies into ~/.m2
MAVEN_TIMEOUT = 1500
#: the suites that run containers (surefire's report of each names the tests it skipped)
CONTAINER_SUITES = ("io.mockdcp.ContainerTest",)


def skipped_tests(report: Path) -> list[str]:
    """The test cases a surefire XML report lists as skipped."""
    root = ET.parse(report).getroot()
    return [
        f"{case.get('classname')}.{case.get('name')}: {skip.get('message', '')}"
        for case in root.iter("testcase")
        for skip in case.findall("skipped")
    ]


def test_skipped_tests_are_read_from_a_surefire_report(tmp_path: Path) -> None:
    report = tmp_path / "TEST-x.xml"
    report.write_text(
        '<testsuite name="x" tests="2" skipped="1">'
        '<testcase classname="x.C" name="runs"/>'
        '<testcase classname="x.C" name="waits"><skipped message="no engine"/></testcase>'
        "</testsuite>"
    )
    assert skipped_tests(report) == ["x.C.waits: no engine"]


def test_maven_suite_passes(container_mode: ContainerMode) -> None:
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        tools = " and ".join(missing)
        pytest.skip(f"the Java helpers are built by Maven on a JDK: {tools} not on PATH")
    scripts = Path(sys.executable).parent  # this interpreter's venv: its `mockdcp` command
    assert (scripts / "mockdcp").exists(), f"mockdcp is not installed in {scripts}"
    env = {
        **os.environ,
        "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
        **container_mode.env,
    }
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
    if container_mode.unavailable is None:
        reports = PROJECT / "target" / "surefire-reports"
        for suite in CONTAINER_SUITES:
            skipped = skipped_tests(reports / f"TEST-{suite}.xml")
            assert not skipped, f"container tests skipped with the image at hand: {skipped}"
