"""What a user installs: ``python -m build`` makes an sdist and a wheel that pass ``twine
check``; the wheel, installed without extras into a clean virtual environment, runs
``mockdcp serve``, ``mockdcp check SCENARIO -- mockdcp tail`` and the pytest plugin, and
carries the scenario library and the scenario JSON Schema. The full tier: the build and
the install take a minute or more (the wheels of the dependencies come from the package
index, or pip's cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import venv
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import mockdcp

if TYPE_CHECKING:
    from collections.abc import Sequence

pytestmark = pytest.mark.full

ROOT = Path(__file__).resolve().parents[2]
#: a scenario of the library that the reference consumer passes quickly
SCENARIO = "rollback-after-failover"
#: what the test extra and the pipeline extra add, and the bench's extra: none of it in a
#: plain install
NOT_IN_A_PLAIN_INSTALL = {"pyarrow", "pyspark", "pytest", "hypothesis", "couchbase", "psutil"}


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Run a command; a failure fails the test with its output. Its standard output."""
    result = subprocess.run(
        [os.fspath(a) for a in args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=cwd,
        env=env,
    )
    assert result.returncode == 0, (
        f"{args} exited {result.returncode}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return result.stdout


def outside() -> dict[str, str]:
    """The environment of a command run from outside the checkout, with nothing of it on
    the path: what runs is the installed wheel."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel of this checkout (the wheel built from the sdist, as
    ``python -m build`` does: a file the sdist left out fails here)."""
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", out, ROOT])
    (sdist,) = out.glob("mockdcp-*.tar.gz")
    (wheel,) = out.glob("mockdcp-*.whl")
    return {"sdist": sdist, "wheel": wheel}


@pytest.fixture(scope="module")
def installed(dists: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean virtual environment (no system site packages) with the wheel, no extras:
    the directory of its scripts."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=True, clear=True)
    scripts = env_dir / "bin"
    run([scripts / "python", "-m", "pip", "install", "--quiet", dists["wheel"]])
    return scripts


def test_the_distributions_pass_twine_check(dists: dict[str, Path]) -> None:
    out = run([sys.executable, "-m", "twine", "check", "--strict", *dists.values()])
    assert out.count("PASSED") == 2, out


def test_the_wheel_is_this_version_and_carries_the_library_and_the_schema(
    dists: dict[str, Path],
) -> None:
    assert dists["wheel"].name.startswith(f"mockdcp-{mockdcp.__version__}-")
    names = set(zipfile.ZipFile(dists["wheel"]).namelist())
    library = sorted(p.name for p in (ROOT / "mockdcp" / "scenarios").glob("*.yaml"))
    assert library
    assert {f"mockdcp/scenarios/{name}" for name in library} <= names
    assert "mockdcp/scenario/scenario.schema.json" in names
    assert not any(name.startswith("tests/") for name in names)


def test_a_plain_install_pulls_no_extra(installed: Path) -> None:
    listed = json.loads(run([installed / "python", "-m", "pip", "list", "--format", "json"]))
    names = {p["name"].lower() for p in listed}
    assert "mockdcp" in names
    assert names.isdisjoint(NOT_IN_A_PLAIN_INSTALL)


def test_the_installed_serve_answers(installed: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            installed / "mockdcp",
            "serve",
            "--port",
            "0",
            "--http-port",
            "0",
            "--docs",
            "5",
            "--json",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=outside(),
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        with urllib.request.urlopen(ready["http"] + "/mock/health", timeout=30) as answer:
            assert answer.status == 200
        where = run(
            [installed / "python", "-c", "import mockdcp; print(mockdcp.__file__)"],
            cwd=tmp_path,
            env=outside(),
        )
        assert Path(where.strip()).is_relative_to(installed.parent)
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_the_installed_check_runs_a_bundled_scenario_with_the_installed_tail(
    installed: Path, tmp_path: Path
) -> None:
    out = run(
        [
            installed / "mockdcp",
            "check",
            "--json",
            SCENARIO,
            "--",
            installed / "mockdcp",
            "tail",
            "--json",
        ],
        cwd=tmp_path,
        env=outside(),
    )
    report = json.loads(out)
    assert [(r["name"], r["verdict"]) for r in report["scenarios"]] == [(SCENARIO, "pass")]
    assert report["passed"] is True, report
    (scenario,) = report["scenarios"]
    assert Path(scenario["path"]).is_relative_to(installed.parent), scenario["path"]


PLUGIN_TEST = """
import pytest


@pytest.mark.mockdcp(vbuckets=4, docs=20)
def test_the_plugin_serves(mockdcp):
    assert len(mockdcp.state()["vbuckets"]) == 4
    assert len(mockdcp.oracle()) == 20
"""


def test_the_installed_pytest_plugin_serves_a_test(installed: Path, tmp_path: Path) -> None:
    # pytest is the user's: installed beside the wheel, as a project's tests would have it
    run([installed / "python", "-m", "pip", "install", "--quiet", "pytest"])
    (tmp_path / "test_consumer.py").write_text(PLUGIN_TEST)
    out = run(
        [installed / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=outside(),
    )
    assert "1 passed" in out, out
