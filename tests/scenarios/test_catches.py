"""Which scenarios catch each wrong consumer (issue 45, item 2): the recorded run
(``catches.json``) has every scenario meant to catch a wrong consumer failing it, and the
docs' table is rendered from it; the rollback scenarios whose lost writes were invisible
catch a consumer that keeps what a rollback undid, run here; the full tier runs the
whole library against every wrong consumer again and compares it with the record."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scenarios import catches
from tests.scenarios._harness import LIBRARY, run_scenario
from tests.scenarios.wrong_consumer import make_consumer

REGENERATE = f"regenerate with `{catches.WRITE}` and commit catches.json and the docs page"


def test_the_record_covers_every_wrong_consumer_and_scenario() -> None:
    recorded = catches.load()
    assert sorted(recorded) == catches.modes(), REGENERATE
    assert set(catches.MEANT) == set(catches.modes())
    library = catches.library()
    for mode, row in recorded.items():
        assert sorted(row) == sorted(library), f"{mode}: {REGENERATE}"


def test_every_scenario_catches_the_wrong_consumers_it_is_meant_to() -> None:
    assert catches.missed(catches.load()) == []


def test_every_rollback_scenario_is_meant_to_catch_a_consumer_keeping_rolled_back_writes() -> None:
    from mockdcp.scenario import load_scenario

    tagged = sorted(
        path.stem for path in LIBRARY.glob("*.yaml") if "rollback" in load_scenario(str(path)).tags
    )
    assert tagged == sorted(catches.MEANT["keep-rolled-back"])


def test_the_docs_table_is_the_recorded_run() -> None:
    shown = catches.TABLE.read_text(encoding="utf-8")
    assert shown == catches.table(catches.load(), catches.library()), REGENERATE


@pytest.mark.parametrize(
    "scenario", ["rollback-mid-snapshot", "rollback-to-zero-after-purge", "failover-drops-prepares"]
)
async def test_a_consumer_keeping_what_a_rollback_undid_ends_with_the_lost_writes(
    scenario: str,
) -> None:
    # these three could not see it before issue 45: their lost writes rewrote identical
    # values, were sent again from memory, or were a prepare only
    outcome = await run_scenario(
        LIBRARY / f"{scenario}.yaml",
        lambda host, port: make_consumer("keep-rolled-back", host, port),
    )
    assert outcome.failure is None, outcome.explain()
    assert any(e.route == "rolled back" for e in outcome.expectations), outcome.explain()
    assert not outcome.converged, outcome.explain()


def _verdicts(report: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["verdict"] for s in report["scenarios"]}


@pytest.mark.full
@pytest.mark.parametrize(
    # keep-rolled-back: the test of -j 1 against -j 2 below runs its scenarios
    "mode",
    sorted(m for m, names in catches.MEANT.items() if names and m != "keep-rolled-back"),
)
def test_the_scenarios_meant_for_each_wrong_consumer_catch_it_as_recorded(mode: str) -> None:
    # the scenarios meant to catch it, run live (the whole library against every wrong
    # consumer is the recording's job, `python -m tests.scenarios.catches --write`: an
    # hour of CI; its table is checked against the record above)
    recorded = catches.load()[mode]
    got = _verdicts(catches.check(mode, catches.MEANT[mode]))
    differ = {n for n in got if got[n] != recorded.get(n, {}).get("verdict")}
    assert differ == set(), f"{mode}: {sorted(differ)}; {REGENERATE}"


@pytest.mark.full
def test_check_gives_the_same_verdicts_at_one_and_two_jobs() -> None:
    # issue 45: a verdict must not depend on what runs beside it (the rollback scenarios,
    # three of them on a cluster, against the consumer that keeps what a rollback undid)
    names = catches.MEANT["keep-rolled-back"]
    recorded = catches.load()["keep-rolled-back"]
    one = _verdicts(catches.check("keep-rolled-back", names, jobs=1))
    two = _verdicts(catches.check("keep-rolled-back", names, jobs=2))
    assert one == two
    assert one == {n: recorded[n]["verdict"] for n in names}
    assert set(one.values()) == {"fail"}
