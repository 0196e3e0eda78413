"""The style guide's strict tooling, as tests: a type error or a lint finding fails CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# mypy over the whole tree takes minutes: the full tier (python -m pytest --full-only)
pytestmark = pytest.mark.full

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [
        ["mypy", "mockdcp", "tests"],
        ["ruff", "check", "mockdcp", "tests"],
        ["ruff", "format", "--check", "mockdcp", "tests"],
    ],
    ids=["mypy-strict", "ruff-check", "ruff-format"],
)
def test_code_passes(command: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
