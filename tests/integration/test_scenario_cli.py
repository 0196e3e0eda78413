"""``mockdcp run``, ``mockdcp validate`` and ``mockdcp scenarios`` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathlib

PASSING = """\
name: rollback
description: the consumer read writes a failover loses
seed: 7
bucket: {vbuckets: 4}
steps:
  - persistence: {paused: true}
  - generate: {docs: 40}
  - persist: {}
  - generate: {docs: 8, start: 40}
  - wait: {consumer: {seqno: high}, timeout: 20s}
  - failover: {}
  - expect: {rollback: {vbucket: 0}, within: 10s}
"""


def mockdcp(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mockdcp", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


TAIL = [sys.executable, "-m", "mockdcp", "tail", "--json"]


def test_run_passes_a_scenario_the_reference_consumer_copes_with(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(PASSING)
    result = mockdcp("run", str(path), "--json", "--", *TAIL)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, result.stderr
    assert report["passed"] is True
    assert report["expectations"][0]["name"] == "rollback of vbucket 0"


def test_a_consumer_slower_to_start_than_a_waits_timeout_still_gets_the_whole_wait(
    tmp_path: pathlib.Path,
) -> None:
    """The wait's 1 s counts from the consumer's first connection, not from the start of
    the scenario: a consumer that takes 4 s to start (a JVM, a loaded machine) passes."""
    path = tmp_path / "s.yaml"
    path.write_text(PASSING.replace("timeout: 20s", "timeout: 1s"))
    late = "import os, sys, time; time.sleep(4); os.execv(sys.executable, sys.argv[1:])"
    result = mockdcp("run", str(path), "--json", "--", sys.executable, "-c", late, *TAIL)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["passed"] is True, report
    assert result.returncode == 0


def test_run_fails_when_an_expectation_fails(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        PASSING.replace("within: 10s", "within: 10s}\n  - expect: {acked: 1, within: 0.5")
    )
    result = mockdcp("run", str(path), "--json", "--", *TAIL)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 1
    assert [e["passed"] for e in report["expectations"]] == [True, False]


def test_run_fails_when_a_wait_times_out_without_a_consumer(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(PASSING.replace("timeout: 20s", "timeout: 0.5s"))
    result = mockdcp("run", str(path), "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 1
    assert "wait timed out" in report["failure"]


def test_run_fails_when_the_consumer_fails(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(PASSING)
    result = mockdcp("run", str(path), "--json", "--", sys.executable, "-c", "raise SystemExit(3)")
    report = json.loads(result.stdout)
    assert result.returncode == 1
    assert report["consumer_exit"] == 3


def test_validate_names_file_line_step_and_field(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.yaml"
    steps = "steps:\n  - generate: {docs: 2}\n  - persist: {upto: x}\n"
    path.write_text(f"name: bad\nbucket: {{vbuckets: 4}}\n{steps}")
    result = mockdcp("validate", str(path))
    assert result.returncode == 1
    assert f"{path}:5: step 2 (persist.upto): expected an integer" in result.stderr
    path.write_text("name: bad\nbucket: {vbuckets: 4}\nsteps:\n  - checkpoint: {vbuckets: 9}\n")
    result = mockdcp("validate", str(path))
    assert result.returncode == 1
    assert "step 1 (checkpoint): no vbucket 9" in result.stderr


def test_scenarios_lists_the_bundled_library() -> None:
    result = mockdcp("scenarios", "--json")
    assert result.returncode == 0
    for line in result.stdout.splitlines():
        row = json.loads(line)
        assert row["name"]
        assert not row["description"].startswith("INVALID")


def test_run_tells_the_consumer_the_scenarios_collections_and_scope(
    tmp_path: pathlib.Path,
) -> None:
    # as `mockdcp check` does (issue 46): a consumer of named collections learns them
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: told\ndescription: one write to a collection\nseed: 1\n"
        "bucket: {vbuckets: 1, collections: {inventory: [hotel]}}\n"
        "steps:\n  - set: {key: a, value: {n: 1}, collection: inventory.hotel}\n"
        "  - wait: {seconds: 5}\n"
    )
    told = tmp_path / "told.json"
    keep = (
        "import json, os, sys; json.dump({k: os.environ.get(k) for k in "
        "('MOCKDCP_COLLECTIONS', 'MOCKDCP_SCOPE')}, open(sys.argv[1], 'w'))"
    )
    result = mockdcp("run", str(path), "--json", "--", sys.executable, "-c", keep, str(told))
    assert result.returncode == 0, result.stderr
    assert json.loads(told.read_text()) == {
        "MOCKDCP_COLLECTIONS": "inventory.hotel",
        "MOCKDCP_SCOPE": "inventory",
    }
