from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from mockdcp.protocol import StreamEndReason

if TYPE_CHECKING:
    from pathlib import Path

    from mockdcp.server import MockDcpServer

    from .conftest import ClientRun

pytestmark = pytest.mark.interop

CLIENTS = ["java", "gocbcore", "godcp"]
#: Clients whose program undoes rolled-back versions (go-dcp's listener is not told).
ROLLBACK_AWARE = {"java", "gocbcore"}

Start = Callable[..., Any]


def oracle_docs(server: MockDcpServer) -> dict[str, bytes]:
    return {
        f"{cid}:{key.decode()}": item.value for (cid, key), item in server.bucket.oracle().items()
    }


def seen_docs(run: ClientRun) -> dict[str, bytes]:
    return {k: v.get("value", "").encode() for k, v in run.docs_seen().items()}


def load(server: MockDcpServer, n: int, prefix: str, value: str = "1") -> None:
    for i in range(n):
        server.bucket.set(f"{prefix}::{i:05d}", f'{{"n":{i},"v":"{value}"}}')


async def converge(run: ClientRun, server: MockDcpServer, seconds: float = 60) -> None:
    await run.wait_for(
        lambda: seen_docs(run) == oracle_docs(server), seconds, "the oracle's documents"
    )


def assert_markers_cover_items(run: ClientRun) -> None:
    """Every item lies inside the last snapshot marker of its vbucket (go-dcp panics otherwise)."""
    snap: dict[int, tuple[int, int]] = {}
    for ev in run.events():
        if ev["event"] == "snapshot":
            snap[ev["vb"]] = (ev["start"], ev["end"])
        elif ev["event"] in ("mutation", "deletion", "expiration") and ev["vb"] in snap:
            lo, hi = snap[ev["vb"]]
            assert lo <= ev["seqno"] <= hi, f"{run.name}: {ev} outside marker {snap[ev['vb']]}"


@pytest.mark.parametrize("client", CLIENTS)
async def test_streams_all_vbuckets_from_zero(
    client: str, mock: MockDcpServer, start_client: Start
) -> None:
    load(mock, 2000, "plain")
    run = await start_client(client, mock)
    await converge(run, mock)
    state = await run.stop()
    assert_markers_cover_items(run)
    if client != "godcp":
        assert {k: v["value"].encode() for k, v in state["docs"].items()} == oracle_docs(mock)


@pytest.mark.parametrize("client", CLIENTS)
async def test_live_writes_and_deduplication(
    client: str, mock: MockDcpServer, start_client: Start
) -> None:
    load(mock, 500, "dedup", "old")
    run = await start_client(client, mock)
    await converge(run, mock)
    for _ in range(3):
        load(mock, 500, "dedup", "new")  # rewrites inside the open checkpoint dedupe
    for i in range(0, 500, 5):
        mock.bucket.delete(f"dedup::{i:05d}")
    await converge(run, mock)
    await run.stop()
    assert_markers_cover_items(run)


@pytest.mark.parametrize("client", CLIENTS)
async def test_resumes_after_the_server_drops_the_connection(
    client: str, mock: MockDcpServer, start_client: Start
) -> None:
    load(mock, 1000, "before")
    mock.bucket.persist()
    run = await start_client(client, mock)
    await converge(run, mock)
    mock.disconnect_all("interop: disconnect step")
    load(mock, 500, "after")
    await converge(run, mock, seconds=90)
    await run.stop()
    assert_markers_cover_items(run)


@pytest.mark.parametrize("client", CLIENTS)
async def test_rollback_after_failover(
    client: str, mock: MockDcpServer, start_client: Start
) -> None:
    mock.bucket.flusher.pause()  # the "lost" writes stay unpersisted until the failover
    load(mock, 600, "kept")
    mock.bucket.persist()
    load(mock, 300, "lost")
    run = await start_client(client, mock)
    await converge(run, mock)
    mock.bucket.failover()  # unpersisted "lost" keys disappear; a new branch starts
    load(mock, 400, "branch")
    if client in ROLLBACK_AWARE:
        await converge(run, mock, seconds=90)
        assert any(ev["event"] == "rollback" for ev in run.events())
        await run.stop()
        return
    # go-dcp re-opens at the rollback seqno but then skips every item up to the seqno it
    # had before ("catchup", couchbase/observer.go needCatchup): it assumes the new
    # branch replays what it already had. A real server does not: those seqnos now hold
    # other writes, which go-dcp never delivers. Items above that seqno do arrive.
    await run.wait_for(
        lambda: sum(ev["event"] == "rollback" for ev in run.events()) >= mock.bucket.num_vbuckets,
        60,
        "a rollback on every vbucket",
    )
    failed = {ev["vb"]: ev["failed_seqno"] for ev in run.events() if ev["event"] == "rollback"}
    oracle = mock.bucket.oracle()
    after = {
        f"0:{k.decode()}": it.value
        for (_, k), it in oracle.items()
        if it.seqno > failed[it.vbucket]
    }
    skipped = {
        f"0:{k.decode()}"
        for (_, k), it in oracle.items()
        if k.startswith(b"branch") and it.seqno <= failed[it.vbucket]
    }
    await run.wait_for(
        lambda: after.items() <= seen_docs(run).items(), 90, "items above the old seqno"
    )
    assert skipped
    assert not skipped & seen_docs(run).keys()
    await run.stop()


@pytest.mark.parametrize("client", CLIENTS)
async def test_memory_to_disk_switch_mid_stream(
    client: str, mock: MockDcpServer, start_client: Start
) -> None:
    load(mock, 800, "mem")
    run = await start_client(client, mock)
    await converge(run, mock)
    load(mock, 800, "mem", "v2")
    mock.bucket.persist()
    mock.bucket.checkpoint()
    assert mock.drop_cursor()
    load(mock, 200, "post")
    await converge(run, mock)
    await run.stop()
    assert_markers_cover_items(run)
    assert (
        any(ev["event"] == "snapshot" and ev["flags"] & 0x02 for ev in run.events())
        or client == "godcp"
    )


@pytest.mark.parametrize("client", CLIENTS)
async def test_purge_below_the_consumers_position(
    client: str, mock: MockDcpServer, start_client: Start
) -> None:
    load(mock, 400, "purge")
    run = await start_client(client, mock)
    await converge(run, mock)
    mock.node.refusing = True  # the consumer is away while tombstones are purged
    mock.disconnect_all("interop: consumer away")
    for i in range(0, 400, 2):
        mock.bucket.delete(f"purge::{i:05d}")
    load(mock, 50, "later")
    mock.bucket.persist()
    mock.bucket.purge()
    mock.node.refusing = False
    if client in ROLLBACK_AWARE:
        # it resumes below the purge seqno: rollback to 0, then a full, correct stream
        await converge(run, mock, seconds=120)
        assert any(ev["event"] == "rollback" and ev["seqno"] == 0 for ev in run.events())
    else:
        # go-dcp always sets IGNORE_PURGED_TOMBSTONES: no rollback, so the purged
        # deletions never reach it; everything live does.
        expected = oracle_docs(mock)
        await run.wait_for(
            lambda: expected.items() <= seen_docs(run).items(), 120, "live documents"
        )
    await run.stop()


@pytest.mark.parametrize("client", CLIENTS)
async def test_flow_control_with_a_small_buffer(
    client: str, mock: MockDcpServer, start_client: Start
) -> None:
    load(mock, 3000, "flow", "x" * 200)
    run = await start_client(client, mock, "--flow-control", "16384")
    await converge(run, mock, seconds=90)
    stats = [s for s in mock.connections() if s.buffer_size]
    assert stats
    assert all(s.buffer_size == 16384 for s in stats)
    assert sum(s.acked_bytes for s in stats) > 16384
    await run.stop()


@pytest.mark.parametrize("client", CLIENTS)
async def test_stream_end_state_changed_is_reopened(
    client: str, mock: MockDcpServer, start_client: Start
) -> None:
    load(mock, 300, "end")
    run = await start_client(client, mock)
    await converge(run, mock)
    assert mock.end_stream(3, StreamEndReason.STATE_CHANGED) == 1
    load(mock, 300, "end2")
    await converge(run, mock)
    await run.stop()


@pytest.mark.parametrize("client", CLIENTS)
async def test_large_batches_from_disk_and_memory_arrive_whole(
    client: str, mock: MockDcpServer, start_client: Start
) -> None:
    # ~350 items of 1 KiB per vbucket: each disk snapshot and each checkpoint read is
    # larger than the producer's 256 KiB encoding piece, so both go out in several pieces
    pad = "p" * 1000
    load(mock, 22_000, "big", pad)
    mock.bucket.checkpoint()
    mock.bucket.persist()  # the closed checkpoints are expelled: streams backfill
    run = await start_client(client, mock)
    load(mock, 22_000, "live", pad)  # while the backfill runs: then from memory
    await converge(run, mock, seconds=120)
    await run.stop()
    assert_markers_cover_items(run)


#: a stream's re-open answered SUCCESS and its STREAM_END right behind it
END_RIGHT_AFTER_REOPEN = """
name: stream-end-right-after-reopen
description: a stream ends STATE_CHANGED just as its re-open after a disconnect succeeds
bucket: {vbuckets: 1}
steps:
  - generate: {docs: 8}
  - wait: {consumer: {seqno: high}, timeout: 10s}
  - disconnect: {}
  - wait: {consumer: {streams: true}, timeout: 10s}
  - end_stream: {reason: state_changed}
  - generate: {docs: 8, start: 8}
  - wait: {consumer: {seqno: high}, timeout: 10s}
  - expect: {conformant: true, within: 0.2}
"""


def test_gocbcore_program_reopens_a_stream_that_ends_as_its_reopen_succeeds(
    tmp_path: Path,
) -> None:
    """The gocbcore program's re-open skipped an end that came while a re-open was in
    flight; gocbcore runs the open's callback and dispatches the STREAM_END right behind
    its SUCCESS, before the re-open's goroutine returns, so the vbucket was abandoned
    (``mockdcp explore --seed 39 --nodes 2 --replicas 1 --vbuckets 8``, schedules 159
    and 164: ``stream_end.not_reopened``; this scenario failed one run in two)."""
    _gocbcore_passes(tmp_path, END_RIGHT_AFTER_REOPEN, runs=6)


#: a whole snapshot received de-duplicated (a key's first version left out, its update
#: sent), then rolled back past that update by a hard failover with replication held
ROLLBACK_INSIDE_A_WHOLE_SNAPSHOT = """
name: rollback-inside-a-whole-snapshot
description: a hard failover rolls back a snapshot the consumer received whole and de-duplicated
seed: 40315215
needs: [several_nodes]
bucket: {vbuckets: 8, nodes: 2, replicas: 1}
steps:
  - wait: {consumer: {streams: true}}
  - generate: {docs: 16, prefix: g3}
  - replication: {paused: true}
  - set: {key: "g3::000009", value: {n: 3, v: 18}}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - failover_node: {node: 0}
  - wait: {consumer: {seqno: high}, timeout: 10s}
  - expect: {conformant: true, within: 0.2}
"""


def test_gocbcore_program_rolls_back_to_a_snapshot_it_holds_whole(tmp_path: Path) -> None:
    """The gocbcore program rolled back to the server's rollback seqno itself, keeping
    the versions up to it; that seqno can fall inside a snapshot received whole
    (kv_engine's ``failover-table.cc`` ``needsRollback``), whose de-duplication left out a
    key's version at or below it, so the key's only version received (its update, above
    the seqno) was dropped and the key lost. It now returns to its last whole snapshot at
    or below the seqno, as the reference consumer does (``mockdcp explore --seed 39
    --nodes 2 --replicas 1 --vbuckets 8``, schedule 163: a lost write, 2 runs in 2; this
    scenario, its reduction, failed every run)."""
    _gocbcore_passes(tmp_path, ROLLBACK_INSIDE_A_WHOLE_SNAPSHOT, runs=2)


#: explore seed 39's schedule 397 as drawn (2 nodes with a replica): the rebalance ends
#: streams STATE_CHANGED while the map the program has still names the old node (with
#: `wait: {consumer: {streams: true}}` first it passed without the fix)
REOPENED_AFTER_A_MOVE = """
name: explore-39-397
description: a move's STATE_CHANGED re-opened on the old node, a replica, replication held
seed: 42168261
needs: [several_nodes]
bucket: {vbuckets: 8, type: ephemeral, eviction_policy: nruEviction, memory_quota: 16384,
         ephemeral_purge_age: 3600, nodes: 2, replicas: 1}
steps:
  - generate: {docs: 14, prefix: g1}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - create_collection: {collection: _default.c2}
  - set: {key: k3, value: {n: 3, v: 375}}
  - wait: {seconds: 0.12}
  - add_node: {}
  - rebalance: {}
  - drop_collection: {collection: _default.c2}
  - generate: {docs: 23, prefix: g4}
  - wait: {consumer: {seqno: high}, timeout: 8s}
  - replication: {paused: true}
  - set: {key: k5, value: {n: 5, v: 830}}
  - wait: {consumer: {seqno: high}, timeout: 10s}
  - expect: {conformant: true, within: 0.2}
"""


def test_gocbcore_program_reopens_a_moved_vbucket_on_its_new_active(tmp_path: Path) -> None:
    """The gocbcore program re-opened a stream a move ended STATE_CHANGED without
    ACTIVE_VB_ONLY; gocbcore routes it by the map it has, which may still name the old
    node, now a replica, and kv_engine serves a replica stream there, carrying nothing
    while replication is held (``mockdcp explore --seed 39 --nodes 2 --replicas 1
    --vbuckets 8``, schedules 65 and 397: vbucket abandoned; this one failed 3 runs in 3,
    the library's ``stream-reopened-on-a-replica-after-a-move`` 1 in 3). With the flag
    the old node answers NOT_MY_VBUCKET and gocbcore retries on the map it carries."""
    # without the flag: 1 or 2 of the 2 failed each round here
    _gocbcore_passes(
        tmp_path, REOPENED_AFTER_A_MOVE, "stream-reopened-on-a-replica-after-a-move", runs=3
    )


def _gocbcore_passes(tmp_path: Path, scenario: str, *library: str, runs: int) -> None:
    """The gocbcore program passes ``scenario`` (YAML text) and the ``library``
    scenarios named, under ``mockdcp check``, in each of ``runs`` rounds."""
    from tests.explore.test_explore_cli import mockdcp
    from tests.interop import matrix

    client = matrix.BY_NAME["gocbcore"]
    matrix.build([client])
    path = tmp_path / "scenario.yaml"
    path.write_text(scenario)
    for _ in range(runs):
        code, out, _ = mockdcp("check", "--json", str(path), *library, "--", *client.argv())
        results = json.loads(out)["scenarios"]
        assert code == 0, [r["reason"] for r in results]
        assert [r["verdict"] for r in results] == ["pass"] * (1 + len(library))
