"""The real clients' programs say how far their output goes (``--progress``, from
``MOCKDCP_PROGRESS`` under ``--env``: per vbucket the failover-log uuid their position is
on and the seqno their documents hold through), written after the output and never
ahead of it, so that ``mockdcp check`` takes a matching output as final at once (its
``_check._reported_all``, asked here too) instead of ``SETTLE`` seconds after it last
changed."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from mockdcp.cli._check import _reported_all

from .test_clients import load

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from mockdcp.server import MockDcpServer

pytestmark = pytest.mark.interop


@pytest.mark.parametrize(
    ("name", "extra"),
    [("java", ()), ("gocbcore", ("--collections",)), ("godcp", ())],
    ids=["java-dcp-client", "gocbcore", "go-dcp"],
)
async def test_the_progress_report_reaches_the_high_seqnos_never_ahead_of_the_output(
    name: str,
    extra: tuple[str, ...],
    mock: MockDcpServer,
    start_client: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """Documents, then a write and its deletion last: once the report says every
    vbucket's high seqno on its newest branch, the output read after it holds every
    live document and not the deleted one."""
    output, progress = tmp_path / "output.jsonl", tmp_path / "output.progress"
    load(mock, 300, "p")
    mock.bucket.set("gone", '{"n": 0}')
    mock.bucket.checkpoint()
    mock.bucket.delete("gone")
    run = await start_client(
        name, mock, "--output", str(output), "--progress", str(progress), *extra
    )
    await run.wait_for(lambda: _reported_all(mock, progress), 60, "a report of every high seqno")
    held = json.loads(progress.read_bytes())["vbuckets"]
    for vb in mock.bucket.vbuckets:  # no further than the high seqno either
        if vb.high_seqno:
            assert held[str(vb.vbid)] == {"uuid": vb.failover.newest_uuid, "seqno": vb.high_seqno}
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    keys = {key.decode() for (_, key), _item in mock.bucket.oracle().items()}
    assert {row["key"] for row in rows} == keys
    assert "gone" not in keys
    await run.stop()
