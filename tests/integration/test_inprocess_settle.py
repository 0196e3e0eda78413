"""``explore``'s in-process run (``_explore_inprocess``) judges what the consumer holds
once it has read what the server wrote, not at a moment it happens to match the oracle.
(Here rather than in ``tests/explore``: it is the judging that ``check`` shares.)"""

from __future__ import annotations

from functools import partial

import trio

from mockdcp.cli._check import Verdict
from mockdcp.cli._explore_inprocess import run_in_process, virtual_clock
from mockdcp.explore import reference_consumer
from mockdcp.scenario import parse_scenario

#: four documents read, then a write sent alone (``wait: 0``) and its deletion as the
#: schedule's last steps: the oracle is as it was, so a consumer that has read neither
#: matches it
WRITE_THEN_DELETE = """\
name: write-then-delete
description: a write and its deletion in flight when the schedule ends
seed: {seed}
bucket: {{name: default, vbuckets: 2}}
steps:
  - generate: {{docs: 4}}
  - wait: {{consumer: {{seqno: high}}, timeout: 10s}}
  - set: {{key: k0, value: {{n: 0}}}}
  - wait: {{seconds: 0}}
  - delete: {{key: k0}}
"""


def test_a_write_and_its_deletion_in_flight_at_the_end_are_read_before_judging() -> None:
    """The reference consumer matched the oracle before it read k0's mutation and
    deletion; the run took that as settled and cancelled it, which caught it between
    the two: "1 phantom of 4 documents (e.g. 'k0')", seeds 8 and 15 of these 24 (under
    the virtual clock a seed replays its schedule's order). It now judges once the
    server and the consumer have nothing left to do."""
    failed = {}
    for seed in range(24):
        scenario = parse_scenario(WRITE_THEN_DELETE.format(seed=seed), "<write-then-delete>")
        result = trio.run(
            partial(run_in_process, scenario, reference_consumer, limit=60),
            clock=virtual_clock(reference_consumer),
        )
        if result.verdict is not Verdict.PASSED:
            failed[seed] = result.reason
    assert failed == {}
