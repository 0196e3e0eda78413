"""What the reference consumer writes for ``mockdcp check``: its documents and how far
they go (``MOCKDCP_PROGRESS``), and how ``check`` reads the latter (``_reported_all``)."""

from __future__ import annotations

import json
import types
from typing import TYPE_CHECKING

from mockdcp.cli._check import _reported_all
from mockdcp.client import ConsumerState, stream_progress, write_progress
from mockdcp.model import Bucket

if TYPE_CHECKING:
    from pathlib import Path


def _state(**positions: tuple[int, int]) -> ConsumerState:
    """A state whose streams ``vb`` or ``vb_sid`` stand at (uuid, seqno)."""
    state = ConsumerState()
    for name, (uuid, seqno) in positions.items():
        vb, _, sid = name.removeprefix("vb").partition("_")
        pos = state.position(int(vb), int(sid) if sid else None)
        pos.uuid, pos.seqno = uuid, seqno
    return state


def test_progress_is_each_vbuckets_branch_and_seqno() -> None:
    assert stream_progress(_state(vb0=(11, 5), vb3=(12, 0))) == {0: (11, 5), 3: (12, 0)}


def test_progress_of_a_vbucket_with_several_streams_is_the_least_far_one() -> None:
    """Two filtered streams of vbucket 2 (stream ids): the vbucket is read only as far
    as the one behind."""
    assert stream_progress(_state(vb2_1=(7, 9), vb2_2=(7, 4))) == {2: (7, 4)}


def test_progress_is_written_whole_as_json(tmp_path: Path) -> None:
    path = tmp_path / "out.progress"
    write_progress(_state(vb1=(99, 3), vb0=(98, 8)), path)
    assert json.loads(path.read_text()) == {
        "vbuckets": {"0": {"uuid": 98, "seqno": 8}, "1": {"uuid": 99, "seqno": 3}}
    }
    assert [p.name for p in tmp_path.iterdir()] == ["out.progress"]  # no temporary left


def _server() -> types.SimpleNamespace:
    """What ``_reported_all`` reads of a server: its bucket, a few of its vbuckets written."""
    bucket = Bucket("default", 16, seed=7, clock=lambda: 1_700_000_000.0)
    for key in ("a", "b", "c"):
        bucket.set(key, "{}")
    return types.SimpleNamespace(bucket=bucket)


def _report(server: types.SimpleNamespace, **changed: tuple[int, int]) -> dict[str, object]:
    """The report of a consumer that read every written vbucket, but for ``changed``."""
    vbuckets = {}
    for vb in server.bucket.vbuckets:
        if vb.high_seqno:
            uuid, seqno = changed.get(f"vb{vb.vbid}", (vb.failover.newest_uuid, vb.high_seqno))
            vbuckets[str(vb.vbid)] = {"uuid": uuid, "seqno": seqno}
    return {"vbuckets": vbuckets}


def test_check_takes_a_report_of_every_written_seqno_as_read_all(tmp_path: Path) -> None:
    server = _server()
    written = [vb for vb in server.bucket.vbuckets if vb.high_seqno]
    assert 1 < len(written) < 16  # some vbuckets written, some not (and not reported)
    path = tmp_path / "out.progress"
    path.write_text(json.dumps(_report(server)))
    assert _reported_all(server, path)  # type: ignore[arg-type]


def test_check_does_not_take_a_report_short_of_a_high_seqno_or_on_another_branch(
    tmp_path: Path,
) -> None:
    """A vbucket reported one seqno short (a deletion still to read), on a branch the
    active copy no longer has (a rollback still to come), or not at all."""
    server = _server()
    vb = next(v for v in server.bucket.vbuckets if v.high_seqno)
    path = tmp_path / "out.progress"
    uuid, high = vb.failover.newest_uuid, vb.high_seqno
    for report in (
        _report(server, **{f"vb{vb.vbid}": (uuid, high - 1)}),
        _report(server, **{f"vb{vb.vbid}": (uuid + 1, high)}),
        {"vbuckets": {k: v for k, v in _report(server)["vbuckets"].items() if k != str(vb.vbid)}},  # type: ignore[attr-defined]
    ):
        path.write_text(json.dumps(report))
        assert not _reported_all(server, path)  # type: ignore[arg-type]


def test_check_takes_a_missing_or_unreadable_report_as_none(tmp_path: Path) -> None:
    server = _server()
    path = tmp_path / "out.progress"
    assert not _reported_all(server, path)  # type: ignore[arg-type]
    for text in (
        "",
        "{",
        "[]",
        '{"vbuckets": []}',
        '{"vbuckets": {"0": 5}}',
        '{"vbuckets": {"x": {}}}',
    ):
        path.write_text(text)
        assert not _reported_all(server, path), text  # type: ignore[arg-type]
