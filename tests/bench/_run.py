"""``mockdcp bench`` run as its users run it, for the tests that check its reports."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

#: the keys of every mode's report (``mockdcp.cli.bench._harness.emit``)
REPORT_KEYS = {"mode", "runs", "params", "figures", "samples", "complete"}


def bench_report(*options: str) -> dict[str, Any]:
    """The JSON report of ``mockdcp bench OPTIONS --runs 1 --json`` (which must succeed),
    checked for the shape every mode shares."""
    result = subprocess.run(
        [sys.executable, "-m", "mockdcp", "bench", *options, "--runs", "1", "--json"],
        capture_output=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, (
        f"mockdcp bench {' '.join(options)} exited {result.returncode}; its stderr ends:\n"
        + result.stderr.decode(errors="replace")[-4000:]
    )
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    assert set(report) == REPORT_KEYS, report
    assert report["runs"] == 1
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
