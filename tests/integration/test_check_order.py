"""The order ``mockdcp check`` starts scenarios in: the longest fixed waits first, so that
with ``-j N`` the one that waits seconds whatever the consumer does (answered noops,
timed waits) does not run alone at the end (issue 44: ``check -j 2`` over
the library in 30 s)."""

from __future__ import annotations

import functools
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import trio

from mockdcp.cli import _check
from mockdcp.cli._check import CheckOptions, check_all, fixed_seconds, longest_first
from mockdcp.cli._scenario_commands import bundled_scenarios
from mockdcp.scenario import Scenario, load_scenario, parse_scenario

if TYPE_CHECKING:
    import pytest


@functools.cache
def library() -> dict[str, Scenario]:
    return {name: load_scenario(path) for name, _, path in bundled_scenarios()}


def test_a_scenarios_fixed_waits_are_its_wait_seconds_and_noops() -> None:
    scenarios = library()
    # three noops answered at a 2 s interval (its 500 ms conformant window ends once the
    # consumer owes nothing: not a fixed wait)
    assert fixed_seconds(scenarios["noops-keep-idle-connection-alive"]) == 6.0
    plain = parse_scenario(
        """
name: plain
steps:
  - generate: {docs: 3}
  - wait: {seconds: 1.5}
  - wait: {consumer: {noops_answered: 2}}   # 1 s noops where the scenario sets none
  - expect: {resume: {vbucket: 0, seqno: 1}, within: 5s}   # ends when met
  - expect: {conformant: true, within: 2s}   # ends once the consumer owes nothing
"""
    )
    assert fixed_seconds(plain) == 3.5


def test_the_library_starts_with_its_longest_fixed_wait_and_keeps_its_order_otherwise() -> None:
    scenarios = list(library().values())
    order = longest_first(scenarios)
    assert sorted(order) == list(range(len(scenarios)))
    # the longest (disconnect-while-a-write-awaits-persistence's 11.5 s, then the noops'
    # 6 s), the first listed of equals
    assert scenarios[order[0]] is max(scenarios, key=fixed_seconds)
    assert fixed_seconds(scenarios[order[0]]) >= 6.0
    waits = [fixed_seconds(scenarios[i]) for i in order]
    assert waits == sorted(waits, reverse=True)
    for (wait_a, a), (wait_b, b) in pairwise(zip(waits, order, strict=True)):
        assert wait_a > wait_b or a < b


def test_check_all_starts_scenarios_longest_first_and_reports_them_in_the_given_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenarios = list(library().values())[:12]
    started: list[str] = []

    async def fake(scenario: Scenario, options: CheckOptions) -> Any:  # noqa: ANN401
        started.append(scenario.name)
        await trio.sleep(0.001)
        return scenario.name

    monkeypatch.setattr(_check, "check_scenario", fake)
    report = trio.run(check_all, scenarios, CheckOptions(command=["true"], jobs=2))
    assert started == [scenarios[i].name for i in longest_first(scenarios)]
    results: list[Any] = report.results  # the fake's names
    assert results == [s.name for s in scenarios]
