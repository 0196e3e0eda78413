"""``check``'s settle window (``_check._settle``): after the scenario's last step the
output is waited for while the consumer catches up, and no longer once it stops; an
output that matches only because the consumer has not read the last items yet is
waited on too, unless the consumer reports it has read them (``MOCKDCP_PROGRESS``)."""

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
#: as it goes, as ``mockdcp tail`` does, after its pause with ``sys.argv[3]``
#: ``pause-first`` (else before it), and what it holds when told to stop (SIGTERM, at
#: once); with ``sys.argv[4]`` ``report`` it also writes how far its output goes
#: (``MOCKDCP_PROGRESS``) after each item it records, deletions too
SLOW = """\
import os, signal, sys, time
import trio
from mockdcp.client import DcpConsumer, write_documents, write_progress
from mockdcp.protocol import Deletion, Mutation

env = os.environ
per_item, reads = float(sys.argv[1]), int(sys.argv[2])
pause_first = sys.argv[3] == "pause-first"
report = sys.argv[4] == "report"
seen = 0

def record():
    write_documents(consumer.state, env["MOCKDCP_OUTPUT"])
    if report:
        write_progress(consumer.state, env["MOCKDCP_PROGRESS"])

def on_event(vb, event):
    global seen
    if isinstance(event, Mutation):
        seen += 1
        pause = per_item if seen < reads else 3600
        if pause_first:
            time.sleep(pause)
        record()
        if not pause_first:
            time.sleep(pause)
    elif report and isinstance(event, Deletion):
        record()

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


def _slow(
    per_item: float, reads: int = 1000, *, pause_first: bool = False, report: bool = False
) -> CheckOptions:
    order = "pause-first" if pause_first else "record-first"
    says = "report" if report else "silent"
    return CheckOptions(
        command=[sys.executable, "-c", SLOW, str(per_item), str(reads), order, says]
    )


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


#: four documents, then a write and its deletion (a checkpoint between keeps both in the
#: stream) as the last steps: the oracle is as it was before them
WRITE_THEN_DELETE = """\
name: write-then-delete
description: a write and its deletion the consumer has not read when the scenario ends
seed: 1
bucket: {name: default, vbuckets: 1}
steps:
  - generate: {docs: 4}
  - wait: {consumer: {seqno: high}}
  - set: {key: k0, value: {n: 0}}
  - checkpoint: {}
  - delete: {key: k0}
"""


async def test_an_output_that_matches_before_the_last_items_are_read_is_waited_on(
    tmp_path: Path,
) -> None:
    """The consumer's output matched once it recorded the fourth document, while k0's
    mutation and deletion were still to read: the settle ended there and the stop
    caught the consumer holding k0 ("1 phantom of 4 documents (e.g. 'k0')", every
    run). Items were written past the newest live document, so the match is waited on
    as a standing output is: the consumer reads both, and passes."""
    path = tmp_path / "write-then-delete.yaml"
    path.write_text(WRITE_THEN_DELETE)
    # the pause before each record: stopped at the match, it held k0 unrecorded
    result = await check_scenario(load_scenario(str(path)), _slow(0.3, pause_first=True))
    assert result.verdict is Verdict.PASSED, result.reason


async def test_an_output_that_matches_with_every_item_read_ends_the_settle_at_once(
    tmp_path: Path,
) -> None:
    """Nothing was written past the newest live document: a matching output is final."""
    path = tmp_path / "eight.yaml"
    path.write_text(EIGHT_WRITTEN)
    result = await check_scenario(load_scenario(str(path)), _slow(0.05))
    assert result.verdict is Verdict.PASSED, result.reason
    assert result.phases["settle"] < _check.SETTLE


async def test_a_consumer_that_reports_its_progress_is_judged_once_it_read_everything(
    tmp_path: Path,
) -> None:
    """The same write and deletion, to a consumer that says how far its output goes
    (``MOCKDCP_PROGRESS``): its early match (k0 unread) is not taken, since it reports
    a seqno below the vbucket's high seqno, and once it reports the deletion's seqno
    the settle ends at once instead of ``SETTLE`` seconds after its last change."""
    path = tmp_path / "write-then-delete.yaml"
    path.write_text(WRITE_THEN_DELETE)
    result = await check_scenario(
        load_scenario(str(path)), _slow(0.3, pause_first=True, report=True)
    )
    assert result.verdict is Verdict.PASSED, result.reason
    assert result.phases["settle"] < _check.SETTLE


#: the same write and deletion made while the consumer's connection is stalled: when the
#: scenario ends both are still held in the producer, not written
WRITE_THEN_DELETE_STALLED = """\
name: write-then-delete-stalled
description: a write and its deletion still held by a stall when the scenario ends
seed: 1
bucket: {name: default, vbuckets: 1}
steps:
  - generate: {docs: 4}
  - wait: {consumer: {seqno: high}}
  - stall: {seconds: 1}
  - set: {key: k0, value: {n: 0}}
  - checkpoint: {}
  - delete: {key: k0}
"""

#: a consumer that keeps every document it was ever sent (it ignores deletions, a bug
#: ``check`` must catch), writing them as its output after each event
KEEPS_DELETED = """\
import json, os, signal, sys
import trio
from mockdcp.client import DcpConsumer, document_rows

env = os.environ
kept = {}

def on_event(vb, event):
    for row in document_rows(consumer.state):
        kept[row["key"]] = row
    out = env["MOCKDCP_OUTPUT"]
    with open(out + ".writing", "w") as f:
        f.writelines(json.dumps(row) + "\\n" for row in kept.values())
    os.replace(out + ".writing", out)

consumer = DcpConsumer(
    env["MOCKDCP_HOST"], int(env["MOCKDCP_KV_PORT"]), user=env["MOCKDCP_USER"],
    password=env["MOCKDCP_PASSWORD"], bucket=env["MOCKDCP_BUCKET"], vbuckets=None,
    on_event=on_event,
)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
on_event(0, None)
trio.run(consumer.run)
"""


async def test_an_output_that_matches_while_the_last_items_are_held_is_waited_on(
    tmp_path: Path,
) -> None:
    """When the scenario ends, k0's write and deletion are held by the stall and the
    output matches: nothing was written past the newest live document, so the settle
    ended there and a consumer that ignores deletions passed without being sent either.
    Items still to write (``Node.holds_output``) now hold the match back too: the
    consumer is sent both, keeps k0, and fails for it."""
    path = tmp_path / "write-then-delete-stalled.yaml"
    path.write_text(WRITE_THEN_DELETE_STALLED)
    options = CheckOptions(command=[sys.executable, "-c", KEEPS_DELETED])
    result = await check_scenario(load_scenario(str(path)), options)
    assert result.verdict is Verdict.FAILED, result.reason
    assert "1 phantom of 4 documents" in result.reason, result.reason


#: a consumer that writes its output only ``sys.argv[1]`` seconds after its first event
#: (as one slow to start, or that writes once it has caught up, does), leaving out the
#: last document it read (a bug ``check`` must catch), and nothing when told to stop;
#: with ``sys.argv[1]`` ``never`` it writes no output at all
LATE_WRITER = """\
import os, signal, sys, threading, time
import trio
from mockdcp.client import DcpConsumer, document_rows, write_documents

env = os.environ
first = []

def write_late(delay):
    time.sleep(delay)
    import json
    rows = document_rows(consumer.state)[:-1]
    out = env["MOCKDCP_OUTPUT"]
    with open(out + ".writing", "w") as f:
        f.writelines(json.dumps(row) + "\\n" for row in rows)
    os.replace(out + ".writing", out)

def on_event(vb, event):
    if not first and sys.argv[1] != "never":
        first.append(threading.Thread(target=write_late, args=(float(sys.argv[1]),), daemon=True))
        first[0].start()

consumer = DcpConsumer(
    env["MOCKDCP_HOST"], int(env["MOCKDCP_KV_PORT"]), user=env["MOCKDCP_USER"],
    password=env["MOCKDCP_PASSWORD"], bucket=env["MOCKDCP_BUCKET"], vbuckets=None,
    on_event=on_event,
)
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
trio.run(consumer.run)
"""


async def test_an_output_written_after_the_scenario_ended_is_waited_for_and_judged(
    tmp_path: Path,
) -> None:
    """The consumer writes its output a second after its first event, one document
    short: the scenario is over by then, and the settle returned at once while no
    output existed, so the consumer was stopped before writing and passed unverified
    ("no output written"). The output is now waited for, and fails."""
    path = tmp_path / "eight.yaml"
    path.write_text(EIGHT_WRITTEN)
    options = CheckOptions(command=[sys.executable, "-c", LATE_WRITER, "1.0"])
    result = await check_scenario(load_scenario(str(path)), options)
    assert result.verdict is Verdict.FAILED, result.reason
    assert "1 missing of 8 documents" in result.reason, result.reason


async def test_a_consumer_that_writes_no_output_is_judged_a_settle_window_after_it_idles(
    tmp_path: Path,
) -> None:
    """A consumer that writes no output passes on what the server saw, once its
    connections have been idle for ``SETTLE`` seconds (not at ``SETTLE_LIMIT``)."""
    path = tmp_path / "eight.yaml"
    path.write_text(EIGHT_WRITTEN)
    options = CheckOptions(command=[sys.executable, "-c", LATE_WRITER, "never"])
    result = await check_scenario(load_scenario(str(path)), options)
    assert result.verdict is Verdict.PASSED, result.reason
    assert result.output == "no output written"
    assert _check.SETTLE <= result.phases["settle"] < _check.SETTLE + 1.5
