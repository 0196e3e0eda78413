"""The bench harness's measure of a pass: the server's start kept out of it, and the
server's CPU of a pass the median over the passes."""

from __future__ import annotations

import pytest

from mockdcp.cli.bench._harness import management_ready, median_pass
from mockdcp.server import serve


async def test_the_bench_waits_until_every_node_answers_on_its_management_port() -> None:
    async with serve(port=0, http_port=0, nodes=2) as server:
        # at once after ready: the HTTP stack may not have started on any node
        status_lines = await management_ready(server)
    assert len(status_lines) == 2
    assert all(line.startswith(b"HTTP/1.1 ") for line in status_lines), status_lines


def test_a_pass_reports_the_median_server_cpu_of_the_passes_not_that_of_the_median_rate() -> None:
    reports = [
        {"events": 100, "seconds": 1.0, "server_cpu_s": 0.10},
        {"events": 100, "seconds": 2.0, "server_cpu_s": 0.40},  # the median rate
        {"events": 100, "seconds": 3.0, "server_cpu_s": 0.12},
    ]
    report = median_pass(reports)
    assert report["seconds"] == 2.0
    assert report["server_cpu_s"] == pytest.approx(0.12)
    assert reports[1]["server_cpu_s"] == 0.40  # the passes' own reports are left alone
