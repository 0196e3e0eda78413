"""``tests/bench/stream_cost.py``: the server alone, driven in memory by the bench
consumer's bytes, measures each form's CPU a stream; the script runs by path with any
install's interpreter (``measure``) and prints one JSON line."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tests.bench.stream_cost import _measured, measure

if TYPE_CHECKING:
    import pytest


def test_a_pass_streams_every_document_of_every_vbucket_in_both_forms() -> None:
    figures = measure(["aware", "legacy"], passes=1, docs=300, vbuckets=16)
    assert set(figures) == {"aware", "legacy", "first"}
    assert all(0 < us < 1e6 for us in figures.values()), figures


def test_measure_runs_by_path_from_anywhere_and_prints_one_json_line(tmp_path: Path) -> None:
    script = Path(__file__).with_name("stream_cost.py")
    out = subprocess.run(
        [
            sys.executable,
            str(script),
            "measure",
            *("--passes", "1", "--docs", "100", "--vbuckets", "8"),
        ],
        capture_output=True,
        check=True,
        cwd=tmp_path,  # not the checkout: it imports nothing of the tests
        timeout=120,
    ).stdout
    assert set(json.loads(out.splitlines()[-1])) == {"aware", "legacy", "first"}


def test_each_side_measures_without_the_callers_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compare``'s sides run ``measure`` with their own interpreters: under a
    ``PYTHONPATH`` naming a source tree, both would measure that tree's mockdcp."""
    seen = tmp_path / "seen"
    python = tmp_path / "python"  # a stand-in: its PYTHONPATH, then a measure's line
    python.write_text(
        f'#!/bin/sh\necho "${{PYTHONPATH-unset}}" > {seen}\n'
        """echo '{"aware": 1, "legacy": 1}'\n"""
    )
    python.chmod(0o755)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "a-source-tree"))
    args = argparse.Namespace(passes=1, docs=1, vbuckets=1)
    assert _measured(str(python), args) == {"aware": 1, "legacy": 1}
    assert seen.read_text().strip() == "unset"
