"""``mockdcp explore`` against a real client (issue 39 item 7): the interop programs run
as ``mockdcp check``'s consumer does in the published matrix (``tests/interop/matrix``:
built by their scripts, ``--env`` for the ``MOCKDCP_*`` variables). A small budget; what
it finds is printed (``-s``) for triage: a client bug is reported with its source line, a
mockdcp bug fixed. What must hold whatever the client does: every schedule runs, none
ends in an error of mockdcp's own, and each anomaly's shrunk scenario is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.explore.test_explore_cli import explore
from tests.interop import matrix

pytestmark = [pytest.mark.interop, pytest.mark.full]

#: (client, explore options): one node for each client, and a cluster for gocbcore
BUDGETS = [
    ("gocbcore", ("--seed", "1", "--runs", "6")),
    ("gocbcore", ("--seed", "2", "--runs", "6", "--nodes", "3", "--replicas", "1")),
    ("go-dcp", ("--seed", "1", "--runs", "6")),
    ("java-dcp-client", ("--seed", "1", "--runs", "4")),
]


@pytest.mark.parametrize(
    ("name", "options"), BUDGETS, ids=lambda v: "-".join(v) if isinstance(v, tuple) else v
)
def test_explore_runs_a_real_client_for_a_small_budget(
    name: str, options: tuple[str, ...], tmp_path: Path
) -> None:
    client = matrix.BY_NAME[name]
    matrix.build([client])
    runs = int(options[options.index("--runs") + 1])
    code, report = explore(
        *options, "-j", "2", "--vbuckets", "8", "--shrink-time", "120", "--out", str(tmp_path),
        consumer=client.argv(),
    )  # fmt: skip
    print(json.dumps({"client": name, "anomalies": report["anomalies"], "found": report["found"]}))
    assert report["schedules"] == runs
    assert "server error" not in report["anomalies"], report["found"]
    assert code == (1 if report["found"] else 0)
    for shrunk in report["shrunk"]:
        assert Path(shrunk["file"]).exists(), shrunk
