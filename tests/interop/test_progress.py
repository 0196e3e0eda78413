"""The real clients' programs say how far their output goes (``--progress``, from
``MOCKDCP_PROGRESS`` under ``--env``: per vbucket the failover-log uuid their position is
on and the seqno their documents hold through), written after the output and never
ahead of it, so that ``mockdcp check`` takes a matching output as final at once
(``_check._reported_all``) instead of ``SETTLE`` seconds after it last changed."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from .test_clients import load

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from mockdcp.server import MockDcpServer

pytestmark = pytest.mark.interop


def _read(path: Path) -> Any:  # noqa: ANN401 - JSON
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _reported_all(server: MockDcpServer, progress: Path) -> bool:
    """The report says every vbucket written to is held through its high seqno, on the
    newest entry of its failover log (what ``mockdcp check`` asks of it)."""
    report = _read(progress)
    if report is None:
        return False
    held = report["vbuckets"]
    for vb in server.bucket.vbuckets:
        if vb.high_seqno == 0:
            continue
        got = held.get(str(vb.vbid))
        if got is None or (got["uuid"], got["seqno"]) != (vb.failover.newest_uuid, vb.high_seqno):
            return False
    return True


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
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    keys = {key.decode() for (_, key), _item in mock.bucket.oracle().items()}
    assert {row["key"] for row in rows} == keys
    assert "gone" not in keys
    await run.stop()
