"""The test tiers (tests/conftest.py, tests/tiers.py): ``pytest`` runs the fast tier,
``pytest --full-only`` the rest, ``pytest --full`` both; a tier that selects nothing
exits 0, not 5."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from tests.tiers import FULL_MARKERS, Tier, split

ROOT = Path(__file__).resolve().parent.parent


@attrs.frozen
class _Item:
    name: str
    markers: frozenset[str] = frozenset()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


ITEMS = [
    _Item("unit"),
    _Item("interop", frozenset({"interop"})),
    _Item("property", frozenset({"parametrize"})),
    _Item("bench", frozenset({"full"})),
    _Item("docker", frozenset({"docker", "skipif"})),
    _Item("slow", frozenset({"slow"})),
]


def _names(items: list[object]) -> list[str]:
    return [item.name for item in items]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("tier", "kept"),
    [
        (Tier.FAST, ["unit", "property"]),
        (Tier.FULL, ["interop", "bench", "docker", "slow"]),
        (Tier.BOTH, ["unit", "interop", "property", "bench", "docker", "slow"]),
    ],
)
def test_a_tier_keeps_its_tests_in_collection_order(tier: Tier, kept: list[str]) -> None:
    runs, left_out = split(ITEMS, tier)  # type: ignore[arg-type]
    assert _names(runs) == kept  # type: ignore[arg-type]
    assert sorted(_names(left_out) + kept) == sorted(i.name for i in ITEMS)  # type: ignore[arg-type]


def test_every_full_marker_is_registered(pytestconfig: pytest.Config) -> None:
    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(FULL_MARKERS) <= registered


def _pytest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("options", "selected"),
    [
        ((), ["test_fuzzed_frames_never_hurt_the_server[quick]"]),
        # each is a fresh pytest (3.4 CPU seconds): the full tier runs the other spellings
        pytest.param(
            ("--full-only",),
            ["test_fuzzed_frames_never_hurt_the_server[thorough]"],
            marks=pytest.mark.full,
        ),
        pytest.param(
            ("--full",),
            [
                "test_fuzzed_frames_never_hurt_the_server[quick]",
                "test_fuzzed_frames_never_hurt_the_server[thorough]",
            ],
            marks=pytest.mark.full,
        ),
    ],
    ids=["default", "full-only", "full"],
)
def test_the_command_line_selects_a_tier(options: tuple[str, ...], selected: list[str]) -> None:
    result = _pytest("--collect-only", "-q", *options, "tests/fuzz/test_fuzz_server.py")
    assert result.returncode == 0, result.stdout + result.stderr
    listed = [line.split("::")[-1] for line in result.stdout.splitlines() if "::" in line]
    assert listed == selected


@pytest.mark.full  # a fresh pytest
def test_a_tier_without_selected_tests_exits_0_and_says_why() -> None:
    # every test of tests/bench is of the full tier: the fast tier selects none of them
    result = _pytest("-q", "tests/bench/test_bench_collections.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tests of the full tier left out" in result.stdout
    assert "--full-only" in result.stdout


@pytest.mark.full  # a fresh pytest
def test_both_options_at_once_are_refused() -> None:
    result = _pytest("--collect-only", "-q", "--full", "--full-only", "tests/test_tiers.py")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "give one" in result.stderr


def test_ci_runs_both_tiers_as_the_readme_spells_them() -> None:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    assert commands[-1] == (
        "pip install -e '.[test]' && python -m pytest && python -m pytest --full-only"
    )
