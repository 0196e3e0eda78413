"""``mockdcp bench`` run as its users run it, for the tests that check its reports."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def bench_report(*options: str) -> dict[str, Any]:
    """The JSON report of ``mockdcp bench --runs 1 --json OPTIONS`` (which must succeed)."""
    result = subprocess.run(
        [sys.executable, "-m", "mockdcp", "bench", "--runs", "1", "--json", *options],
        capture_output=True,
        timeout=300,
        check=True,
    )
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return report


def bench_refusal(*options: str) -> bytes:
    """What ``mockdcp bench OPTIONS`` says on stderr when it refuses them (exit 2)."""
    result = subprocess.run(
        [sys.executable, "-m", "mockdcp", "bench", *options],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    return result.stderr
