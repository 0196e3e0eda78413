"""Bugs explore found with the reference consumer (the scenarios it shrank them to): a
seqno wait after a reconnect, on every node of a cluster, a wait after a stream ended
and its vbucket got a write (the runner's), a cluster map change missed while the
cluster consumer's connections were down and a map reply whose length was broken (the
consumer's), and a wait for a seqno the next write de-duplicated away (the node's); and
items written with a STREAM_END behind them, unseen by the checker (a false violation);
and a wait for a seqno a stream is never sent (the runner's: a system event last); a
first map read given up while the login was still under way (the consumer's); a
STREAM_END torn by a corrupted length, noticed only at a noop the in-process consumer
was never told the interval of (explore's).
Each timed out before its fix."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mockdcp.client import ClusterConsumer, DcpConsumer
from tests.scenarios._harness import run_scenario

if TYPE_CHECKING:
    from pathlib import Path

    from mockdcp.explore._consumers import Connect

#: generated on every vbucket, caught up, every connection dropped, one more write on
#: one vbucket: the others' targets were all sent on the connections before
RECONNECT = """
name: reconnect-then-one-write
bucket: {{vbuckets: {vbuckets}, nodes: {nodes}, replicas: {replicas}}}
steps:
  - generate: {{docs: 16}}
  - wait: {{consumer: {{seqno: high}}, timeout: 8s}}
  - disconnect: {{}}
  - set: {{key: k0, value: {{after: disconnect}}}}
  - wait: {{consumer: {{seqno: high}}, timeout: 8s}}
"""

#: caught up (the streams held there), a stream ended, a write on its vbucket: the
#: held STREAM_END must go out for the consumer to re-open and reach the write
ENDED = """
name: end-stream-then-write
bucket: {vbuckets: 4}
steps:
  - generate: {docs: 12}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - end_stream: {vbuckets: 0, reason: closed}
  - set: {key: doc::000002, value: {after: end}}  # vbucket 0
  - wait: {consumer: {seqno: high}, timeout: 8s}
"""


#: explore --seed 39 --nodes 3 --replicas 1 --vbuckets 8, schedule 23: a node failed over
#: and rebalanced out while every connection is down and refused; the surviving nodes'
#: pushes of the new map went out while nobody listened, and the removed node's vbuckets
#: (6 and 7) were asked of it for ever
MISSED_PUSH = """
name: map-changed-while-away
bucket: {vbuckets: 8, nodes: 3, replicas: 1}
steps:
  - generate: {docs: 19}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - failover_node: {node: 2}
  - rebalance: {}
  - refuse_connections: {}
  - disconnect: {}
  - wait: {seconds: 0.37}
  - refuse_connections: {enabled: false}
  - generate: {docs: 8, prefix: g2}
  - wait: {consumer: {seqno: high}, timeout: 8s}
"""

#: explore --seed 7 --nodes 3 --replicas 1 --vbuckets 8, schedule 10 (shrunk): the next
#: frame's length broken on every connection; the map connection's next frame is the
#: reply to the map read after the rebalance, one byte short, and the consumer waited
#: for the byte for ever, never learning where vbuckets 3-5 went
CORRUPT_MAP = """
name: corrupt-map-reply
bucket: {vbuckets: 8, nodes: 3, replicas: 1}
steps:
  - generate: {docs: 16}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - corrupt: {}
  - remove_node: {node: 1}
  - rebalance: {}
  - generate: {docs: 16, prefix: g2}
  - wait: {consumer: {seqno: high}, timeout: 8s}
"""

#: explore --seed 8 --nodes 3 --replicas 1 --vbuckets 8, schedule 390: the map read after
#: the failover's STREAM_END STATE_CHANGED waited out a corrupted reply before the
#: streams were asked for again, later than check's 2 s (a 2.5 s map timeout)
CORRUPT_THEN_FAILOVER = """
name: corrupt-then-failover
seed: 1
bucket: {vbuckets: 8, nodes: 3, replicas: 1}
steps:
  - generate: {docs: 20}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - failover_node: {node: 1}
  - rebalance: {}
  - wait: {seconds: 0.16}
  - corrupt: {}
  - set: {key: k2, value: {n: 2, v: 864}}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - persistence: {paused: true}
  - set: {key: k2, value: {n: 2, v: 545}}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - failover: {}
  - wait: {consumer: {seqno: high}, timeout: 10s}
  - expect: {conformant: true, within: 0.2}
"""


@pytest.mark.parametrize(("nodes", "replicas"), [(1, 0), (3, 1)])
async def test_a_wait_after_a_reconnect_counts_what_the_consumer_resumed_from(
    tmp_path: Path, nodes: int, replicas: int
) -> None:
    path = tmp_path / "reconnect.yaml"
    path.write_text(RECONNECT.format(vbuckets=8, nodes=nodes, replicas=replicas))

    def consumer(host: str, port: int) -> DcpConsumer | ClusterConsumer:
        if nodes > 1:
            return ClusterConsumer(host, port)
        return DcpConsumer(host, port, vbuckets=None)

    outcome = await run_scenario(path, consumer, limit=30)
    assert outcome.passed, outcome.explain()
    assert outcome.converged, outcome.explain()


async def test_a_wait_after_an_ended_stream_and_a_write_is_met(tmp_path: Path) -> None:
    path = tmp_path / "ended.yaml"
    path.write_text(ENDED)
    outcome = await run_scenario(
        path, lambda host, port: DcpConsumer(host, port, vbuckets=None), limit=30
    )
    assert outcome.passed, outcome.explain()
    assert outcome.converged, outcome.explain()


async def test_the_cluster_consumer_reads_the_map_again_after_its_connections_were_down(
    tmp_path: Path,
) -> None:
    path = tmp_path / "missed-push.yaml"
    path.write_text(MISSED_PUSH)
    outcome = await run_scenario(path, ClusterConsumer, limit=30)
    assert outcome.passed, outcome.explain()
    assert outcome.converged, outcome.explain()


async def test_the_cluster_consumer_gives_up_a_map_reply_that_never_ends(tmp_path: Path) -> None:
    path = tmp_path / "corrupt-map.yaml"
    path.write_text(CORRUPT_MAP)
    outcome = await run_scenario(path, ClusterConsumer, limit=30)
    assert outcome.passed, outcome.explain()
    assert outcome.converged, outcome.explain()


def test_the_cluster_consumer_reopens_in_time_after_a_corrupted_map_reply() -> None:
    import trio

    from mockdcp.cli._explore_inprocess import run_in_process, virtual_clock
    from mockdcp.explore import reference_consumer
    from mockdcp.scenario import parse_scenario

    scenario = parse_scenario(CORRUPT_THEN_FAILOVER)
    result = trio.run(
        lambda: run_in_process(scenario, reference_consumer, limit=60),
        clock=virtual_clock(reference_consumer),
    )
    assert result.verdict == "pass", (result.reason, result.evidence)


#: explore --seed 8 --nodes 3 --replicas 1 --vbuckets 8, schedules 101 and 135 (as drawn
#: at the time, shrunk): a write the next one replaced in the checkpoint, and a wait for
#: its seqno: the hold was reached with nothing to write, and its report waited for a
#: frame that never came (about half the runs timed out)
DEDUPLICATED = """
name: wait-for-a-deduplicated-seqno
seed: 9093390
bucket: {vbuckets: 8, nodes: 3, replicas: 1}
steps:
  - generate: {docs: 5, prefix: g1}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - set: {key: g1::000004, value: {n: 1, v: 481}}  # vbucket 4, seqno 2
  - delete: {key: g1::000004}
  - wait: {consumer: {vbucket: 4, seqno: 2}, timeout: 8s}
"""


def test_a_wait_for_a_seqno_the_next_write_replaced_is_met() -> None:
    import trio

    from mockdcp.cli._explore_inprocess import run_in_process, virtual_clock
    from mockdcp.explore import reference_consumer
    from mockdcp.scenario import parse_scenario

    scenario = parse_scenario(DEDUPLICATED)
    for _ in range(8):  # it timed out in about half the runs
        result = trio.run(
            lambda: run_in_process(scenario, reference_consumer, limit=60),
            clock=virtual_clock(reference_consumer),
        )
        assert result.verdict == "pass", (result.reason, result.evidence)


#: explore --seed 8 --nodes 3 --replicas 1 --vbuckets 8, schedule 135 as drawn at the
#: time, shrunk: the stream ended with the delete still queued; the delete and the
#: STREAM_END went out together, the checker saw only the end, and called the
#: consumer's resume from the delete's seqno a resume above what it was sent
ENDED_WITH_ITEMS = """
name: ended-with-items-queued
seed: 9093390
bucket: {vbuckets: 8, nodes: 3, replicas: 1}
steps:
  - generate: {docs: 5, prefix: g1}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - set: {key: g1::000004, value: {n: 1, v: 481}}  # vbucket 4, seqno 2
  - delete: {key: g1::000004}
  - wait: {consumer: {vbucket: 4, seqno: 2}, timeout: 8s}
  - end_stream: {vbuckets: 4, reason: closed}
  - wait: {seconds: 0.05}
  - wait: {consumer: {seqno: high}, timeout: 8s}
"""


def test_items_sent_with_a_stream_end_count_as_sent() -> None:
    import trio

    from mockdcp.cli._explore_inprocess import run_in_process, virtual_clock
    from mockdcp.explore import reference_consumer
    from mockdcp.scenario import parse_scenario

    scenario = parse_scenario(ENDED_WITH_ITEMS)
    result = trio.run(
        lambda: run_in_process(scenario, reference_consumer, limit=60),
        clock=virtual_clock(reference_consumer),
    )
    assert result.verdict == "pass", (result.reason, result.evidence)


#: the vbuckets' last writes are a collection's creation, which a legacy stream is never
#: sent (kv_engine ``ActiveStream::shouldProcessItem``) and a stream filtered to another
#: collection neither (``processItemsInner``: the filter drops it; no SEQNO_ADVANCED,
#: which goes only at a snapshot's end the stream was sent, MB-47009's first snapshot or
#: MB-48368's non-visible tail): nothing is sent, the stream has read past it. The
#: wait's target is met there, with nothing written
SYSTEM_EVENT_LAST = """
name: system-event-last
bucket: {vbuckets: 4}
steps:
  - generate: {docs: 8}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - create_collection: {collection: _default.c1}
  - wait: {consumer: {seqno: high}, timeout: 5s}
"""


@pytest.mark.parametrize("stream", ["legacy", "filtered"])
async def test_a_wait_for_a_system_event_a_stream_is_never_sent_is_met(
    tmp_path: Path, stream: str
) -> None:
    from mockdcp.client import StreamFilter

    path = tmp_path / "system-event-last.yaml"
    path.write_text(SYSTEM_EVENT_LAST)

    def consumer(host: str, port: int) -> DcpConsumer:
        if stream == "legacy":
            return DcpConsumer(host, port, vbuckets=None, collections=False)
        return DcpConsumer(host, port, vbuckets=None, streams=[StreamFilter(collections=(0,))])

    outcome = await run_scenario(path, consumer, limit=30)
    assert outcome.passed, outcome.explain()


SLOW_LOGIN = """
name: slow-login
bucket: {vbuckets: 8, nodes: 3, replicas: 1}
steps:
  - generate: {docs: 16}
  - wait: {consumer: {seqno: high}, timeout: 8s}
"""


def test_the_cluster_consumer_gives_a_slow_login_time_before_its_first_map() -> None:
    """The library's graceful-failover failed on a busy machine ("no node answered with a
    cluster map"): the map read's 0.5 s (for a reply that never ends) also bounded the
    connection's SCRAM login, which a loaded machine takes longer than that to do."""
    import trio

    from mockdcp.cli._explore_inprocess import run_in_process, virtual_clock
    from mockdcp.scenario import parse_scenario

    def slow_logins(
        host: str, port: int, nodes: int, *, connect: Connect | None = None
    ) -> ClusterConsumer:
        assert connect is not None  # explore gives it (the virtual clock needs it)

        async def slow(h: str, p: int) -> trio.abc.Stream:
            stream = await connect(h, p)
            await trio.sleep(0.8)  # the login's key derivation on a busy machine
            return stream

        return ClusterConsumer(host, port, connect=slow)

    result = trio.run(
        lambda: run_in_process(parse_scenario(SLOW_LOGIN), slow_logins, limit=60),
        clock=virtual_clock(slow_logins),
    )
    assert result.verdict == "pass", (result.reason, result.evidence)


#: explore --seed 39 --nodes 3 --replicas 1 --vbuckets 8, schedule 8536, shrunk: the
#: STREAM_END of a failover torn by `corrupt: length` (its body one byte past it), on a
#: connection that then falls silent: only the producer's next DCP_NOOP breaks the
#: consumer's framing, so the schedule asks for noops every 0.5 s (explore's generator
#: does for a torn frame); in-process, the consumer was never told and asked for 120 s
TORN_STREAM_END = """
name: torn-stream-end
seed: 106621002
bucket: {vbuckets: 1}
consumer: {noop_interval: 0.5}
steps:
  - generate: {docs: 1, prefix: g1}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - failover: {vbuckets: 0}
  - corrupt: {kind: length}
  - wait: {consumer: {seqno: high}, timeout: 10s}
  - expect: {conformant: true, within: 0.2}
"""


def test_a_torn_stream_end_is_noticed_at_the_noop_the_scenario_asks_for() -> None:
    import trio

    from mockdcp.cli._explore_inprocess import run_in_process, virtual_clock
    from mockdcp.explore import reference_consumer
    from mockdcp.scenario import parse_scenario

    scenario = parse_scenario(TORN_STREAM_END)
    result = trio.run(
        lambda: run_in_process(scenario, reference_consumer, limit=60),
        clock=virtual_clock(reference_consumer),
    )
    assert result.verdict == "pass", (result.reason, result.evidence)
