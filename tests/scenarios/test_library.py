from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from mockdcp.cli._scenario_commands import bundled_scenarios, validate_file
from mockdcp.client import ClusterConsumer, ConsumerCore, DcpConsumer
from mockdcp.producer import CheckerLimits
from mockdcp.scenario import load_scenario
from tests.scenarios._harness import (
    HURRY,
    LIBRARY,
    hurried,
    hurried_file,
    library,
    run_scenario,
)
from tests.scenarios.wrong_consumer import MODES, make_consumer

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.protocol import DcpStreamRequest

REPO = LIBRARY.parents[1]
SCENARIOS = library()
#: what a scenario needs of the reference consumer beyond its defaults
CONSUMER_OPTIONS: dict[str, dict[str, Any]] = {
    "slow-consumer-flow-control": {"buffer_size": 64 * 1024},
    "noops-keep-idle-connection-alive": {"noop_interval": 2.0},
    "history-snapshots-with-duplicates": {"controls": [("change_streams", "true")]},
    "history-backfill-split": {"controls": [("change_streams", "true")]},
    "change-streams-refused-by-7-0": {"change_streams": True},
    "config-pushed-during-rebalance": {"clustermap_notification": True, "buffer_size": 65536},
    # with sync writes here; `mockdcp check` runs them with plain `tail` too
    "durable-write-aborted": {"sync_writes": True},
    "failover-drops-prepares": {"sync_writes": True},
}
#: the same as `mockdcp tail` flags
TAIL_FLAGS: dict[str, list[str]] = {
    "slow-consumer-flow-control": ["--buffer-size", str(64 * 1024)],
    "noops-keep-idle-connection-alive": ["--noop-interval", "2"],
    "history-snapshots-with-duplicates": ["--change-streams"],
    "history-backfill-split": ["--change-streams"],
    "change-streams-refused-by-7-0": ["--change-streams"],
    "durable-write-aborted": ["--sync-writes"],
    "failover-drops-prepares": ["--sync-writes"],
}


#: the scenarios run on several nodes: the reference consumer follows the map there
CLUSTER = sorted(p.stem for p in SCENARIOS if load_scenario(str(p)).bucket.nodes > 1)
for _name in CLUSTER:
    TAIL_FLAGS.setdefault(_name, []).append("--cluster")


def reference_consumer(name: str) -> Callable[[str, int], DcpConsumer | ClusterConsumer]:
    options = CONSUMER_OPTIONS.get(name, {})
    user = load_scenario(str(LIBRARY / f"{name}.yaml")).consumer.user
    if user is not None:  # it runs as the scenario's user, as `mockdcp run` runs one
        options = {**options, "user": user.name, "password": user.password}
    if name in CLUSTER:
        return lambda host, port: ClusterConsumer(host, port, **options)
    return lambda host, port: DcpConsumer(host, port, vbuckets=None, **options)


def by_name(path: Path) -> str:
    return path.stem


def test_library_holds_at_least_twenty_scenarios() -> None:
    assert len(SCENARIOS) >= 20


def test_library_is_what_mockdcp_scenarios_lists() -> None:
    listed = {name for name, _, _ in bundled_scenarios()}
    assert listed == {path.stem for path in SCENARIOS}


@pytest.mark.parametrize("path", SCENARIOS, ids=by_name)
def test_library_scenario_validates_against_its_bucket(path: Path) -> None:
    assert validate_file(str(path)) == []
    scenario = load_scenario(str(path))
    assert scenario.name == path.stem
    summary, _, detail = scenario.description.partition("\n")
    assert 0 < len(summary) <= 80  # the line `mockdcp scenarios` shows
    assert len(detail.split()) >= 20  # which failure it reproduces, and how


@pytest.mark.parametrize("path", SCENARIOS, ids=by_name)
def test_library_scenario_declares_its_tags_and_the_failure_it_reproduces(path: Path) -> None:
    scenario = load_scenario(str(path))
    assert scenario.tags
    assert scenario.reproduces is not None
    # a public page: a kv_engine document, or the issue a consumer's users reported
    assert scenario.reproduces.source.startswith(
        ("https://github.com/", "https://issues.couchbase.com/browse/")
    )
    assert 0 < len(scenario.reproduces.summary) <= 100


#: the longest a library scenario may watch for a protocol violation: an unanswered noop
#: shows within twice the checker's noop interval under ``check`` (0.5 s); a longer
#: window is a fixed wait
CONFORMANT_WINDOW = 2.0


@pytest.mark.parametrize("path", SCENARIOS, ids=by_name)
def test_library_scenario_watches_for_violations_no_longer_than_it_needs(path: Path) -> None:
    """``expect: {conformant: true}`` passes once its ``within`` is over (the default
    10 s), or once no violation can come in it: a consumer with a noop due in it (the
    wrong consumers' 0.5 s) waits that long under ``mockdcp check``."""
    from mockdcp.scenario import Expect

    scenario = load_scenario(str(path))
    windows = [s.within for s in scenario.steps if isinstance(s, Expect) and s.conformant]
    assert all(w <= CONFORMANT_WINDOW for w in windows), windows


@pytest.mark.parametrize("name", CONSUMER_OPTIONS)
def test_consumer_settings_are_the_scenarios_own(name: str) -> None:
    # what the tests give the reference consumer is what the scenario asks of any
    settings = load_scenario(str(LIBRARY / f"{name}.yaml")).consumer
    given = {k: v for k, v in attrs.asdict(settings).items() if v is not None}
    known = {k: v for k, v in CONSUMER_OPTIONS[name].items() if k in attrs.asdict(settings)}
    assert given == known  # (controls such as change_streams are the consumer's own)


@pytest.mark.parametrize("name", CONSUMER_OPTIONS)
def test_consumer_options_name_library_scenarios(name: str) -> None:
    assert (LIBRARY / f"{name}.yaml").is_file()


@pytest.mark.parametrize("path", SCENARIOS, ids=by_name)
async def test_library_scenario_passes_with_the_reference_consumer(path: Path) -> None:
    outcome = await run_scenario(path, reference_consumer(path.stem))
    assert outcome.passed, outcome.explain()
    assert outcome.converged, outcome.explain()
    assert outcome.violations == []
    # streaming, rolling back, re-opening and reconnecting as the protocol asks
    assert outcome.protocol_violations == []


def test_the_library_has_cluster_scenarios() -> None:
    assert len(CLUSTER) >= 9


def test_the_fast_tier_runs_library_scenarios_that_exist() -> None:
    assert RUN_IN_THE_FAST_TIER.issubset(p.stem for p in SCENARIOS)


#: the cluster scenarios a consumer that never follows the map fails in the fast tier
#: (each waits out a wait's timeout, ``HURRY`` in the hurried scenario): one of a move, of
#: a failover and of a re-open; the full tier runs every one
UNFOLLOWED_IN_THE_FAST_TIER = frozenset(
    {
        "rebalance-in-while-streaming",
        "hard-failover-replica-caught-up",
        "stream-reopened-on-a-replica-after-a-move",
    }
)


def test_the_fast_tier_fails_cluster_scenarios_that_exist() -> None:
    assert UNFOLLOWED_IN_THE_FAST_TIER.issubset(CLUSTER)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=() if n in UNFOLLOWED_IN_THE_FAST_TIER else pytest.mark.full)
        for n in CLUSTER
    ],
)
async def test_a_consumer_that_does_not_follow_moved_vbuckets_fails_each_cluster_scenario(
    name: str,
) -> None:
    # one connection to the seed node, never reading the map again: what it asks of
    # the other nodes' vbuckets is refused, and what moves away is lost
    outcome = await run_scenario(
        hurried(LIBRARY / f"{name}.yaml"), lambda host, port: DcpConsumer(host, port, vbuckets=None)
    )
    assert not (outcome.passed and outcome.converged), outcome.explain()


async def test_a_stream_reopened_where_it_was_is_a_replica_stream_unless_active_only() -> None:
    """Asked for again on the node that ended it STATE_CHANGED, a moved vbucket's stream
    is a replica stream there without ACTIVE_VB_ONLY (nothing comes while replication is
    held: the writes after the move are missing), and NOT_MY_VBUCKET with it, which sends
    the reference consumer to the new active: ``ClusterConsumer`` sets the flag (explore,
    seed 39, schedules 65 and 397 against the gocbcore program)."""
    from tests.scenarios.wrong_consumer import KeepsStreamsWhereTheyAre, ReopensWhereItWas

    class ActiveOnly(ReopensWhereItWas):  # the same re-open, the flag kept
        def stream_request(self, vb: int, sid: int | None = None) -> DcpStreamRequest:
            return ConsumerCore.stream_request(self, vb, sid)

    class Flagged(KeepsStreamsWhereTheyAre):
        rules = ActiveOnly

    path = LIBRARY / "stream-reopened-on-a-replica-after-a-move.yaml"
    wrong = await run_scenario(
        hurried(path), lambda h, p: make_consumer("reopen-on-replica", h, p, nodes=2)
    )
    assert not (wrong.passed and wrong.converged), wrong.explain()
    right = await run_scenario(path, lambda h, p: Flagged(h, p, vbuckets=None))
    assert right.passed, right.explain()
    assert right.converged, right.explain()


async def test_consumer_ignoring_rollbacks_fails_rollback_after_failover() -> None:
    outcome = await run_scenario(
        hurried(LIBRARY / "rollback-after-failover.yaml"),
        lambda host, port: make_consumer("ignore-rollbacks", host, port),
    )
    assert not outcome.passed
    failed = {e.name: e.detail for e in outcome.expectations if not e.passed}
    assert failed["rollback of vbucket 0 to 5"] == (
        "ROLLBACK to 5 sent, but the consumer re-requested from 10"
    )


#: the protocol checker's limits for the wrong consumers: short enough to fire within a
#: scenario
QUICK = CheckerLimits(ack_stall=1.0, reopen_within=1.0)


#: (wrong consumer, scenario, the rule the protocol checker reports, its message)
CAUGHT_BY_THE_CHECKER = [
    (
        "ignore-rollbacks",
        "rollback-after-failover",
        "rollback.ignored",
        "ROLLBACK to 5 answered, re-requested from 10",
    ),
    ("never-ack", "slow-consumer-flow-control", "flow.stall", "flow-control window full"),
    (
        "complete-snapshot",
        "resume-mid-snapshot",
        "resume.complete",
        "claims a complete snapshot at 14, inside snapshot [11, 20]",
    ),
    (
        "no-reopen",
        "stream-end-state-changed",
        "stream_end.not_reopened",
        "after STREAM_END STATE_CHANGED",
    ),
    (
        "reopen-ended",
        "stream-end-filter-empty",
        "stream_end.reopened",
        "re-opened after STREAM_END FILTER_EMPTY",
    ),
    (
        "ignore-noops",
        "noops-keep-idle-connection-alive",
        "noop.unanswered",
        "DCP_NOOP not answered within the noop interval (0.5s)",
    ),
    ("no-backoff", "reconnect-storm", "reconnect.storm", "5 reconnects in a row"),
    (
        "last-item-is-snapshot-end",
        "durable-write-aborted",
        "resume.snapshot",
        "snapshot [0, 2] was never sent on this stream",
    ),
]


@pytest.mark.parametrize(
    ("mode", "scenario", "rule", "message"),
    CAUGHT_BY_THE_CHECKER,
    ids=lambda value: value if value in MODES else None,
)
async def test_the_protocol_checker_reports_what_each_wrong_consumer_gets_wrong(
    mode: str, scenario: str, rule: str, message: str
) -> None:
    outcome = await run_scenario(
        hurried(LIBRARY / f"{scenario}.yaml"),
        lambda host, port: make_consumer(mode, host, port),
        checker_limits=QUICK,
    )
    assert not outcome.passed
    assert outcome.protocol_violations, outcome.explain()
    assert {v.split(":")[0] for v in outcome.protocol_violations} == {rule}
    assert message in outcome.protocol_violations[0]


#: the history scenarios a consumer taking a snapshot's keys as unique fails
HISTORY = ["history-snapshots-with-duplicates", "history-backfill-split"]


@pytest.mark.parametrize("scenario", HISTORY)
async def test_consumer_assuming_unique_keys_fails_history_scenarios(scenario: str) -> None:
    outcome = await run_scenario(
        hurried(LIBRARY / f"{scenario}.yaml"),
        lambda host, port: make_consumer("dedup-snapshots", host, port),
    )
    assert not outcome.passed, outcome.explain()
    failed = [e.detail for e in outcome.expectations if not e.passed]
    assert any("requested with start seqno" in detail for detail in failed)


@pytest.mark.full  # its failure is the first wait's timeout (30 s, for slow JVM starts)
async def test_a_consumer_requiring_change_streams_fails_on_a_70_node() -> None:
    """The reference consumer streams on when a 7.0 node refuses change_streams (EINVAL);
    one that takes the refusal as fatal (gocbcore's bootstrap) never gets a document."""
    outcome = await run_scenario(
        LIBRARY / "change-streams-refused-by-7-0.yaml",
        lambda host, port: make_consumer("require-change-streams", host, port),
    )
    assert not outcome.passed, outcome.explain()
    assert not outcome.converged


async def test_history_snapshots_reach_the_reference_consumer_with_every_revision() -> None:
    outcome = await run_scenario(
        LIBRARY / "history-snapshots-with-duplicates.yaml",
        reference_consumer("history-snapshots-with-duplicates"),
    )
    assert outcome.passed, outcome.explain()
    assert outcome.converged, outcome.explain()


async def test_a_consumer_that_never_asks_for_config_pushes_fails_the_push_scenario() -> None:
    # the reference consumer across the cluster, following the map, without the HELLO
    # feature: it ends right, but nothing was pushed to it
    outcome = await run_scenario(
        LIBRARY / "config-pushed-during-rebalance.yaml",
        lambda host, port: ClusterConsumer(
            host, port, buffer_size=65536, clustermap_notification=False
        ),
    )
    assert outcome.converged, outcome.explain()
    failed = {e.name: e.detail for e in outcome.expectations if not e.passed}
    assert failed == {
        "2 cluster configs pushed": "0 cluster configs pushed (pushes go to connections "
        "whose HELLO asked for clustermap change notification)"
    }


async def test_pushes_reach_every_connection_of_the_reference_consumer_that_asked() -> None:
    seen: list[ClusterConsumer] = []

    def consumer(host: str, port: int) -> ClusterConsumer:
        made = ClusterConsumer(host, port, clustermap_notification=True, buffer_size=65536)
        seen.append(made)
        return made

    outcome = await run_scenario(LIBRARY / "config-pushed-during-rebalance.yaml", consumer)
    assert outcome.passed, outcome.explain()
    # every move is a revision, pushed to each node's connection (brief: the consumer
    # reads the map on the push, not on its 2.5 s poll)
    assert seen[0].state.config_pushes >= 2


async def test_consumer_never_acking_fails_slow_consumer_flow_control() -> None:
    outcome = await run_scenario(
        hurried(LIBRARY / "slow-consumer-flow-control.yaml"),
        lambda host, port: make_consumer("never-ack", host, port),
    )
    assert not outcome.passed
    assert outcome.failure is not None
    assert "bytes acked 0" in outcome.failure


def mockdcp_run(scenario: str | Path, *consumer: str) -> tuple[int, dict[str, Any]]:
    """``mockdcp run --json`` of a library scenario (by name) or a scenario file: exit
    status and report."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "mockdcp", "run", "--json", "--timeout", "60"]
    path = LIBRARY / f"{scenario}.yaml" if isinstance(scenario, str) else scenario
    done = subprocess.run(
        [*command, str(path), "--", *consumer],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    report = json.loads(done.stdout)  # the consumer writes to stderr
    return done.returncode, report


#: the scenarios `mockdcp run ... -- mockdcp tail` runs in the fast tier: one of each kind
#: of bucket, server and consumer flag (the fast tier runs every scenario in-process with
#: the reference consumer above; the full tier runs the rest here and the whole library
#: through `mockdcp check` in tests/integration/test_check.py)
RUN_IN_THE_FAST_TIER = frozenset(
    {
        "rollback-after-failover",  # a fault and a rollback, one node
        "corrupt-frame",  # a connection fault
        "slow-consumer-flow-control",  # --buffer-size
        "history-snapshots-with-duplicates",  # Magma history, --change-streams
        "durable-write-aborted",  # --sync-writes
        "rebalance-in-while-streaming",  # a cluster, --cluster
        "password-changed",  # the scenario's user
        "another-bucket-beside",  # several buckets
        "ephemeral-restart",  # an ephemeral bucket
        "ttl-passes-while-away",  # the virtual clock
    }
)


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=() if p.stem in RUN_IN_THE_FAST_TIER else pytest.mark.full)
        for p in SCENARIOS
    ],
    ids=by_name,
)
def test_mockdcp_run_passes_every_library_scenario_with_tail(path: Path) -> None:
    flags = TAIL_FLAGS.get(path.stem, [])
    code, report = mockdcp_run(path.stem, sys.executable, "-m", "mockdcp", "tail", "--json", *flags)
    assert report["passed"], report
    assert code == 0


#: (wrong consumer, library scenario, what `mockdcp run` reports of it)
RUN_WRONG = [
    ("ignore-rollbacks", "rollback-after-failover", "re-requested from 10"),
    ("never-ack", "slow-consumer-flow-control", "bytes acked 0"),
    # only `conformant` catches it
    ("reopen-ended", "stream-end-filter-empty", "stream_end.reopened"),
    # a prepare and its abort end snapshots with seqnos it never gets an item for
    (
        "last-item-is-snapshot-end",
        "durable-write-aborted",
        "resume.snapshot: snapshot [0, 2] was never sent",
    ),
    (
        "contiguous-seqnos",
        "durable-write-aborted",
        "resume of vbucket 0 from 4: requested with start seqno 2 (expected 4)",
    ),
    (
        "contiguous-seqnos",
        "prepare-only-seqno-advanced",
        "resume of vbucket 0 from 3: requested with start seqno 2 (expected 3)",
    ),
    (
        "last-item-is-snapshot-end",
        "prepare-only-seqno-advanced",
        "resume of vbucket 0 from 3: requested with start seqno 2 (expected 3)",
    ),
    (
        "contiguous-seqnos",
        "failover-drops-prepares",
        "resume of vbucket 0 from 3: requested with start seqno 2 (expected 3)",
    ),
    (
        "last-item-is-snapshot-end",
        "failover-drops-prepares",
        "resume.snapshot: snapshot [0, 2] was never sent",
    ),
    (
        "contiguous-seqnos",
        "pending-prepare-at-snapshot-tail",
        "resume of vbucket 0 from 3: requested with start seqno 2 (expected 3)",
    ),
]


@pytest.mark.parametrize(("mode", "scenario", "reason"), RUN_WRONG)
def test_mockdcp_run_fails_the_wrong_consumer(
    mode: str, scenario: str, reason: str, tmp_path: Path
) -> None:
    wrong = str(Path(__file__).with_name("wrong_consumer.py"))
    path = hurried_file(LIBRARY / f"{scenario}.yaml", tmp_path)
    code, report = mockdcp_run(path, sys.executable, wrong, "--mode", mode)
    assert not report["passed"], report
    assert code == 1
    failed = [f"{e['name']}: {e['detail']}" for e in report["expectations"] if not e["passed"]]
    assert any(reason in line for line in [*failed, report["failure"] or ""]), report


#: every scenario the tests here run ``hurried`` for a wrong consumer, but the noops one:
#: the reference consumer answers a noop every 2 s there (three take longer than
#: ``HURRY``), and the ignore-noops consumer fails it by the checker's rule, which a
#: consumer that answers its noops never breaks
HURRIED = sorted(
    (
        {scenario for _, scenario, _, _ in CAUGHT_BY_THE_CHECKER}
        | {"rollback-after-failover", "slow-consumer-flow-control", *HISTORY, *CLUSTER}
        | {scenario for _, scenario, _ in RUN_WRONG}
    )
    - {"noops-keep-idle-connection-alive"}
)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            n,
            marks=pytest.mark.full if n in CLUSTER and n not in UNFOLLOWED_IN_THE_FAST_TIER else (),
        )
        for n in HURRIED
    ],
)
async def test_the_reference_consumer_passes_each_hurried_scenario(name: str) -> None:
    """The wrong consumers fail the hurried scenarios for what they do wrong, not for the
    shorter windows: a consumer that does it right passes them as it passes the library's."""
    outcome = await run_scenario(hurried(LIBRARY / f"{name}.yaml"), reference_consumer(name))
    assert outcome.passed, outcome.explain()
    assert outcome.converged, outcome.explain()
    assert outcome.protocol_violations == []


@pytest.mark.parametrize("path", SCENARIOS, ids=by_name)
def test_a_hurried_scenario_is_the_library_one_with_only_its_waits_on_the_consumer_cut(
    path: Path, tmp_path: Path
) -> None:
    from mockdcp.scenario import Expect, Wait, load_scenario

    library, fast = load_scenario(str(path)), hurried(path)
    assert attrs.evolve(fast, steps=library.steps) == library
    assert [type(s) for s in fast.steps] == [type(s) for s in library.steps]
    for was, now in zip(library.steps, fast.steps, strict=True):
        if isinstance(was, Wait) and was.consumer is not None:
            assert now == attrs.evolve(was, timeout=min(was.timeout, HURRY))
        elif isinstance(was, Expect):
            assert now == attrs.evolve(was, within=min(was.within, HURRY))
        else:  # a wait: {seconds} among them
            assert now == was
    assert load_scenario(str(hurried_file(path, tmp_path))) == attrs.evolve(
        fast, source=str(tmp_path / path.name)
    )


@pytest.mark.parametrize(
    ("mode", "scenario", "error"),
    [
        ("fatal-refusals", "privileges-revoked-mid-stream", "status 0x24"),
        ("give-up-on-auth", "password-changed", "AuthenticationFailed"),
    ],
)
async def test_the_user_scenarios_fail_a_consumer_that_dies_of_a_refusal(
    mode: str, scenario: str, error: str
) -> None:
    """Each scenario's windows without the privilege (an ``expect`` with ``within``)
    are stretched to 5 s: on a loaded machine the wrong consumer's re-open could come
    after ``privileges-revoked-mid-stream``'s second, find the role granted back and
    pass. Its death on the refusal ends the run at once."""
    from mockdcp.scenario import Expect

    loaded = load_scenario(str(LIBRARY / f"{scenario}.yaml"))
    user = loaded.consumer.user
    assert user is not None
    steps = tuple(
        attrs.evolve(step, within=max(step.within, 5.0)) if isinstance(step, Expect) else step
        for step in loaded.steps
    )
    outcome = await run_scenario(
        attrs.evolve(loaded, steps=steps),
        lambda host, port: make_consumer(mode, host, port, user=user.name, password=user.password),
    )
    assert not outcome.passed
    assert error in (outcome.consumer_error or ""), outcome.explain()
