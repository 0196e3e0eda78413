"""One version: the one pyproject.toml gives the distribution is ``mockdcp.__version__``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import mockdcp

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_says_the_distributions_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert mockdcp.__version__ == project["version"]
