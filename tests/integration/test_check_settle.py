"""``check``'s settle window (``_check._settle``): after the scenario's last step the
output is waited for while the consumer catches up, and no longer once it stops."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from mockdcp.cli import _check
from mockdcp.cli._check import CheckOptions, Verdict, check_scenario
from mockdcp.scenario import load_scenario

if TYPE_CHECKING:
    from pathlib import Path

#: eight documents, and a wait met as soon as the server has written them all: the
#: scenario is over before the consumer has read them
EIGHT_WRITTEN = """\
name: eight-written
description: eight documents written to the consumer at once
seed: 1
bucket: {name: default, vbuckets: 1}
steps:
  - generate: {docs: 8}
  - wait: {consumer: {seqno: high}}
"""

#: a consumer that takes ``sys.argv[1]`` seconds over each mutation (and, past
#: ``sys.argv[2]`` of them, stops reading), writing its output from the start (empty)
#: as it goes, as ``mockdcp tail`` does, and what it holds when told to stop (SIGTERM,
#: at once)
SLOW = """\
import os, signal, sys, time
import trio
from mockdcp.client import DcpConsumer, write_documents
from mockdcp.protocol import Mutation

env = os.environ
per_item, reads = float(sys.argv[1]), int(sys.argv[2])
seen = 0

def on_event(vb, event):
    global seen
    if isinstance(event, Mutation):
        write_documents(consumer.state, env["MOCKDCP_OUTPUT"])
        seen += 1
        time.sleep(per_item if seen < reads else 3600)

consumer = DcpConsumer(
    env["MOCKDCP_HOST"], int(env["MOCKDCP_KV_PORT"]), user=env["MOCKDCP_USER"],
    password=env["MOCKDCP_PASSWORD"], bucket=env["MOCKDCP_BUCKET"], vbuckets=None,
    on_event=on_event,
)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
write_documents(consumer.state, env["MOCKDCP_OUTPUT"])
try:
    trio.run(consumer.run)
finally:
    write_documents(consumer.state, env["MOCKDCP_OUTPUT"])
"""


def _slow(per_item: float, reads: int = 1000) -> CheckOptions:
    return CheckOptions(command=[sys.executable, "-c", SLOW, str(per_item), str(reads)])


async def test_a_consumer_still_catching_up_when_the_scenario_ends_is_waited_for(
    tmp_path: Path,
) -> None:
    """Eight mutations at 0.5 s each: the consumer holds all eight some 4 s after the
    scenario ended, twice the settle window, and passes (a fixed window of ``SETTLE``
    seconds failed it: 3 missing of 8)."""
    path = tmp_path / "eight.yaml"
    path.write_text(EIGHT_WRITTEN)
    result = await check_scenario(load_scenario(str(path)), _slow(0.5))
    assert result.verdict is Verdict.PASSED, result.reason
    assert result.phases["settle"] > _check.SETTLE


async def test_a_consumer_that_stops_moving_is_judged_a_settle_window_later(
    tmp_path: Path,
) -> None:
    """A consumer that stops reading after three mutations changes nothing more: it
    fails with what it held, ``SETTLE`` seconds after its last change (not at
    ``SETTLE_LIMIT``)."""
    path = tmp_path / "eight.yaml"
    path.write_text(EIGHT_WRITTEN)
    result = await check_scenario(load_scenario(str(path)), _slow(0.05, reads=3))
    assert result.verdict is Verdict.FAILED
    assert "5 missing of 8 documents" in result.reason
    assert _check.SETTLE <= result.phases["settle"] < _check.SETTLE + 1.5
