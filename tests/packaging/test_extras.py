"""What ``pip install mockdcp`` leaves to extras: psutil is the bench's alone
(``mockdcp[bench]``), and the bench without it says what to install."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from mockdcp.cli._main import main
from mockdcp.cli.bench import NEEDS_PSUTIL, psutil_missing

ROOT = Path(__file__).resolve().parents[2]


def test_psutil_is_the_bench_extra_not_a_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("psutil") for d in project["dependencies"])
    assert project["optional-dependencies"]["bench"] == ["psutil>=5.9"]


def test_the_bench_without_psutil_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "psutil", None)  # `import psutil` raises ImportError
    assert psutil_missing()
    with pytest.raises(SystemExit) as exited:
        sys.exit(main(["bench", "--items", "10", "--runs", "1"]))
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip() == NEEDS_PSUTIL
    assert "pip install 'mockdcp[bench]'" in NEEDS_PSUTIL


def test_with_psutil_the_bench_goes_on() -> None:
    assert not psutil_missing()
