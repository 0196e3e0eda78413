"""An ``expect: {conformant: true}`` window ends once no violation can come in what is
left of it (issue 44: ``check -j 2`` over the library in 30 s): a consumer that owes
nothing and has no noop interval that fits in the window ends it at once; one whose
noop interval fits in it is watched all of it, and caught if it leaves one unanswered."""

from __future__ import annotations

import trio

from mockdcp.client import DcpConsumer
from mockdcp.producer import CheckerLimits
from mockdcp.scenario import parse_scenario
from tests.scenarios._harness import run_scenario
from tests.scenarios.wrong_consumer import make_consumer

WINDOW = 8.0


def scenario(within: float) -> str:
    return f"""
name: window
bucket: {{name: default, vbuckets: 4}}
steps:
  - generate: {{docs: 8}}
  - wait: {{consumer: {{seqno: high}}, timeout: 10s}}
  - expect: {{conformant: true, within: {within}s}}
"""


async def test_a_window_ends_at_once_when_the_consumer_owes_nothing() -> None:
    started = trio.current_time()
    outcome = await run_scenario(
        parse_scenario(scenario(WINDOW)), lambda host, port: DcpConsumer(host, port, vbuckets=None)
    )
    assert outcome.passed, outcome.explain()
    assert outcome.protocol_violations == []
    # the whole window before (and the run around it): well under it now
    assert trio.current_time() - started < WINDOW / 2


async def test_a_consumer_whose_noop_interval_fits_in_the_window_is_watched_all_of_it() -> None:
    started = trio.current_time()
    outcome = await run_scenario(
        parse_scenario(scenario(2.0)),
        lambda host, port: DcpConsumer(host, port, vbuckets=None, noop_interval=1.0),
    )
    assert outcome.passed, outcome.explain()
    # a noop sent in the window could go unanswered in it
    assert trio.current_time() - started >= 2.0


async def test_a_consumer_ignoring_noops_is_still_caught_by_a_two_second_window() -> None:
    outcome = await run_scenario(
        parse_scenario(scenario(2.0)),
        lambda host, port: make_consumer("ignore-noops", host, port),  # noops every 0.5 s
        checker_limits=CheckerLimits(ack_stall=2.0, reopen_within=2.0),  # check's
    )
    [window] = outcome.expectations
    assert not window.passed
    assert window.detail.startswith("noop.unanswered"), window.detail
