"""The matrix's explanations against the code they cite (issue 45, item 3): a note that
names a file of mockdcp says what it relies on there, and that is checked whenever the
table is validated. No client runs here (the default tier)."""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

from . import matrix

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

#: the note ``stream-end-lost-privileges`` / gocbcore carried until issue 45 (git
#: f355b3e): it said the checker treats LOST_PRIVILEGES as final, which ``FINAL_REASONS``
#: had stopped saying
STALE = (
    "a race (the consumer program re-opens 100 ms after the end; the scenario may be over "
    "by then): the protocol checker counts LOST_PRIVILEGES as final (`FINAL_REASONS` in "
    "`mockdcp/producer/_checker_rules.py`: `stream_end.reopened`), while the scenario's "
    "own description lets a collection-aware consumer re-open vbucket 0"
)


def with_cell(cell: dict[str, Any]) -> dict[str, Any]:
    expected = copy.deepcopy(matrix.load())
    expected["scenarios"]["stream-end-lost-privileges"]["gocbcore"] = cell
    return expected


def test_the_checked_in_table_holds_against_the_code_it_cites() -> None:
    assert matrix.validate(matrix.load()) == []


def test_a_note_naming_mockdcp_code_without_a_cite_is_refused() -> None:
    cell = {"verdict": "pass or fail", "fault": "mockdcp", "why": STALE}
    assert matrix.validate(with_cell(cell)) == [
        "stream-end-lost-privileges / gocbcore: names mockdcp/producer/_checker_rules.py but "
        "cites nothing of it (add a cite: file, name, shows)"
    ]


def test_a_note_whose_cited_definition_no_longer_holds_its_claim_is_refused() -> None:
    cite = {
        "file": "mockdcp/producer/_checker_rules.py",
        "name": "FINAL_REASONS",
        "shows": ["StreamEndReason.OK", "LOST_PRIVILEGES"],
    }
    cell = {"verdict": "pass or fail", "fault": "mockdcp", "why": STALE, "cites": [cite]}
    assert matrix.validate(with_cell(cell)) == [
        "stream-end-lost-privileges / gocbcore: cites FINAL_REASONS in "
        "mockdcp/producer/_checker_rules.py as holding 'LOST_PRIVILEGES': it does not "
        "(rewrite the explanation against the code)"
    ]
    # what the code does say passes; a name it does not define is refused
    cite["shows"] = ["FILTER_EMPTY"]
    assert matrix.validate(with_cell(cell)) == []
    cite["name"] = "NO_SUCH_RULE"
    assert matrix.validate(with_cell(cell)) == [
        "stream-end-lost-privileges / gocbcore: cites NO_SUCH_RULE in "
        "mockdcp/producer/_checker_rules.py: not defined there"
    ]


def test_the_lost_privileges_cell_no_longer_claims_it_is_final() -> None:
    # the checker lets a consumer ask again after LOST_PRIVILEGES (git 81bd38f), and
    # the regenerated run (git f355b3e) had gocbcore pass the scenario
    from mockdcp.producer._checker_rules import FINAL_REASONS
    from mockdcp.protocol import StreamEndReason

    assert StreamEndReason.LOST_PRIVILEGES not in FINAL_REASONS
    row = matrix.load()["scenarios"]["stream-end-lost-privileges"]
    assert all("LOST_PRIVILEGES as final" not in cell.get("why", "") for cell in row.values())


def test_the_generator_fails_on_a_table_whose_notes_do_not_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "matrix.json"
    cell = {"verdict": "pass or fail", "fault": "mockdcp", "why": STALE}
    stale.write_text(json.dumps(with_cell(cell)), encoding="utf-8")
    monkeypatch.setattr(matrix, "EXPECTED", stale)
    assert matrix.main([]) == 1
    assert "cites nothing of it" in capsys.readouterr().err
    monkeypatch.setattr(matrix, "EXPECTED", matrix.HERE / "matrix.json")
    assert matrix.main([]) == 0
