"""Issue 39's target for wrong consumers: "a consumer with a planted bug of each of the
kinds above (tests/scenarios' wrong consumers) is found within 200 schedules and shrunk
to at most 6 steps in at most 5 minutes; the shrunk scenario fails it on replay and
passes the reference consumer".

Each wrong consumer runs in-process over explore's in-memory network (``wrong.
over_memory``: under the virtual clock, as the reference consumer does), schedules drawn
with the default options (seed 1, one node, 4 vbuckets) until the first that shows the
kind; that one is shrunk alone and replayed. The figures are printed (``-s``): schedules
to find, steps after shrinking, shrinking's seconds and candidates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio

from mockdcp.cli._explore import ExploreOptions, ExploreState, explore, shrink_found
from mockdcp.cli._explore_inprocess import run_in_process, virtual_clock
from mockdcp.explore import Anomaly, GenerateOptions, anomalies, reference_consumer, size
from tests.explore import wrong

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mockdcp.explore import ConsumerFactory

pytestmark = pytest.mark.full

#: the issue's bounds
FIND_WITHIN = 200
SHRUNK_STEPS = 6
SHRINK_SECONDS = 300.0

KINDS = [
    ("ignore-rollbacks", Anomaly.ROLLBACK_IGNORED),
    ("drop-deletions", Anomaly.PHANTOM),
    ("keep-rolled-back", Anomaly.PHANTOM),
    ("keep-rolled-back", Anomaly.STALE_VALUE),
    ("apply-prepares", Anomaly.PHANTOM),
    ("never-ack", Anomaly.STUCK),
    ("complete-snapshot", Anomaly.BAD_RESUME),
    ("last-item-is-snapshot-end", Anomaly.BAD_RESUME),
    ("no-reopen", Anomaly.VBUCKET_ABANDONED),
    ("no-reopen", Anomaly.LOST_WRITE),
    ("exits-early", Anomaly.CONSUMER_EXIT),
]


def _factory(mode: str) -> ConsumerFactory:
    return wrong.exits_early if mode == "exits-early" else wrong.over_memory(mode)


@pytest.mark.parametrize(("mode", "kind"), KINDS)
def test_a_planted_bug_is_found_shrunk_and_replayed(mode: str, kind: Anomaly) -> None:
    factory = _factory(mode)
    options = ExploreOptions(
        command=[mode],
        generate=GenerateOptions(seed=1),
        runs=FIND_WITHIN,
        shrink_time=SHRINK_SECONDS,
        shrink_runs=2,
        factory=factory,
    )
    state = ExploreState(options)

    def until_found() -> Iterator[int]:
        for index in range(FIND_WITHIN):
            if any(f.anomaly is kind for f in state.found):
                return
            yield index

    async def find_and_shrink() -> None:
        await explore(state, indices=until_found(), shrinking=False)
        state.found = [f for f in state.found if f.anomaly is kind][:1]
        if state.found:
            await shrink_found(state)

    trio.run(find_and_shrink, clock=virtual_clock(factory))
    assert state.found, f"{mode}: no {kind} in {FIND_WITHIN} schedules: {state.counts()}"
    (found,) = state.found
    shrunk = state.shrunk[kind].result
    print(
        f"\n{mode}: {kind} at schedule {found.index} ({found.index + 1} run), shrunk "
        f"{size(found.scenario)} -> {size(shrunk.scenario)} steps in {shrunk.seconds:.1f}s "
        f"({shrunk.tried} candidates, fails {shrunk.failed}/{shrunk.runs})"
    )
    assert size(shrunk.scenario) <= SHRUNK_STEPS
    assert shrunk.seconds <= SHRINK_SECONDS

    async def replay(make: ConsumerFactory) -> set[Anomaly]:
        result = await run_in_process(shrunk.scenario, make, limit=options.limit)
        return {f.anomaly for f in anomalies(result.as_dict())}

    # a flaky failure (shrinking reports its rate) need not show on one run
    assert any(kind in trio.run(replay, factory, clock=virtual_clock(factory)) for _ in range(4))
    assert trio.run(replay, reference_consumer, clock=virtual_clock(reference_consumer)) == set()
