"""``explore``'s in-process run (``_explore_inprocess``) judges what the consumer holds
once it has read what the server wrote, not at a moment it happens to match the oracle.
(Here rather than in ``tests/explore``: it is the judging that ``check`` shares.)"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import trio

from mockdcp.cli._check import Verdict
from mockdcp.cli._explore_inprocess import run_in_process, virtual_clock
from mockdcp.client import DcpConsumer
from mockdcp.explore import reference_consumer
from mockdcp.scenario import parse_scenario

if TYPE_CHECKING:
    from mockdcp.client import Version

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


#: the same write and deletion made while the connection is stalled (a checkpoint between
#: keeps both in the stream): when the schedule ends both are held in the producer, the
#: stall's timer the only thing left to wait on
WRITE_THEN_DELETE_STALLED = """\
name: write-then-delete-stalled
description: a write and its deletion held by a stall when the schedule ends
seed: 1
bucket: {name: default, vbuckets: 2}
steps:
  - generate: {docs: 4}
  - wait: {consumer: {seqno: high}, timeout: 10s}
  - stall: {seconds: 1}
  - set: {key: k0, value: {n: 0}}
  - checkpoint: {}
  - delete: {key: k0}
"""


class _KeepsDeleted:
    """The reference consumer with a bug: it keeps every document it was ever sent (its
    deletions are ignored)."""

    def __init__(self, host: str, port: int, nodes: int) -> None:
        assert nodes == 1
        self._inner = DcpConsumer(host, port, vbuckets=None, on_event=self._saw)
        self._kept: dict[tuple[int, bytes], Version] = {}

    def _saw(self, vb: int, event: object) -> None:
        self._kept.update(self._inner.state.documents())

    async def run(self) -> None:
        await self._inner.run()

    @property
    def state(self) -> _KeepsDeleted:
        return self

    def documents(self) -> dict[tuple[int, bytes], Version]:
        return dict(self._kept)


def test_a_write_and_its_deletion_held_by_a_stall_are_sent_before_judging() -> None:
    """When the schedule ends, k0's write and deletion are held by the stall: every
    task waits (the writer on the stall's timer) and the consumer matches the oracle,
    so a consumer that ignores deletions passed without being sent either. Nothing may
    be held for the consumer either (``_check._nothing_queued``): it is sent both, keeps
    k0, and fails for it."""
    scenario = parse_scenario(WRITE_THEN_DELETE_STALLED, "<write-then-delete-stalled>")
    result = trio.run(
        partial(run_in_process, scenario, _KeepsDeleted, limit=60),
        clock=virtual_clock(_KeepsDeleted),
    )
    assert result.verdict is Verdict.FAILED, result.reason
    assert "phantom" in result.reason, result.reason
