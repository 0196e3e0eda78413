"""``mockdcp bench cluster --count instructions``: the server's instructions per event
counted by callgrind from one node and from a cluster (``_instructions``)."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest

from mockdcp.cli.bench import _instructions
from tests.bench._run import bench_report

if TYPE_CHECKING:
    from pathlib import Path


def test_a_dumps_totals_are_read_by_event_name(tmp_path: Path) -> None:
    dump = tmp_path / "callgrind.out.1"
    dump.write_text(
        "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\n"
        "events: Ir sysCount sysTime\nfn=(1) main\n3 120 2 7\ntotals: 1234567 89 40\nsummary: 0\n"
    )
    assert _instructions.dump_totals(dump) == {"Ir": 1234567, "sysCount": 89, "sysTime": 40}
    older = tmp_path / "callgrind.out.2"
    older.write_text("events: Ir\nfn=(1) main\n3 120\nsummary: 120\n")
    assert _instructions.dump_totals(older) == {"Ir": 120}


def test_a_file_without_totals_is_refused_by_name(tmp_path: Path) -> None:
    empty = tmp_path / "callgrind.out.3"
    empty.write_text("events: Ir\n")  # a dump cut short
    with pytest.raises(ValueError, match=r"callgrind\.out\.3: not a callgrind dump with totals"):
        _instructions.dump_totals(empty)


def test_counting_is_refused_without_valgrind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda tool: None)
    assert _instructions.refusal() == (
        "--count instructions runs the server under valgrind's callgrind: "
        "valgrind, callgrind_control not found"
    )


@pytest.mark.full
@pytest.mark.skipif(shutil.which("callgrind_control") is None, reason="needs valgrind")
def test_bench_cluster_counts_instructions_per_event_of_one_node_and_of_three() -> None:
    report = bench_report(
        "cluster", "--nodes", "3", "--replicas", "1", "--count", "instructions",
        "--items", "3000", "--vbuckets", "8",
    )  # fmt: skip
    assert report["complete"] is True
    assert report["params"]["count"] == "instructions"
    figures = report["figures"]
    assert figures["instructions_per_event"] > 0
    assert figures["cluster_instructions_per_event"] > 0
    assert figures["cluster_instructions_ratio"] == pytest.approx(
        figures["instructions_per_event"] / figures["cluster_instructions_per_event"]
    )
    assert figures["syscalls_per_event"] > 0
    passes = report["samples"]["pass_instructions_per_event"]
    assert len(passes["one_node"]) == len(passes["nodes"]) == _instructions.CLUSTER_PASSES
