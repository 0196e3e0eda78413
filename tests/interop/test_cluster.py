"""Real clients across a 3-node, 1-replica cluster (issue 27, item 7).

Each client streams (or writes) while the cluster moves under it: a rebalance in (a fourth
node joins, vbuckets move by takeover: streams end STATE_CHANGED and resume on the new
node without rollback), a rebalance out (node 2 leaves), a hard failover of node 1 with
its replicas behind (they are promoted with what they have: a consumer that received the
lost writes rolls back to the replica's seqno) and node 2 going down with unpersisted
writes and coming back (its ports refuse meanwhile; it warms up with what it persisted).
Writes go on during each change. The clients: java-dcp-client with the Kafka connector's
settings (its rollback mitigation polls OBSERVE_SEQNO on the active and every replica),
gocbcore, go-dcp with its README configuration, and the Couchbase Python SDK writing.
Every case ends with the client holding ``server.oracle()``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pytest
import trio

from mockdcp.cli.bench._ports import unclaimed_port
from mockdcp.client import ClusterConsumer, ConsumerState
from mockdcp.model import Bucket
from mockdcp.server import serve

from .test_clients import load
from .test_defaults import converge_user_docs, delivered_keys

if TYPE_CHECKING:
    from mockdcp.server import MockDcpServer

    from .conftest import ClientRun

pytestmark = pytest.mark.interop

Start = Callable[..., Any]

CHANGES = ["rebalance_in", "rebalance_out", "hard_failover", "node_down_up"]
#: the moves of a rebalance are spread out (seconds between two), writes go on meanwhile
MOVE_INTERVAL = 0.02
#: after the moves, the nodes leaving stay up this long answering NOT_MY_VBUCKET with the
#: new map before they go: ns_server's ``rebalance_out_delay_seconds`` default
#: (``ns_rebalancer.erl`` ``sleep_for_sdk_clients``). Without it the last vbuckets' old
#: node closed at their takeover, and a client that had not sent there since learnt the
#: map only from its next poll (gocbcore's CCCP poll, every 2.5 s): go-dcp's heartbeat
#: to a moved vbucket went unanswered past its tolerance and it panicked "cant find self
#: in cluster" (couchbase/membership.go:280): 7 runs in 60 under load, none in 60 with it
REBALANCE_OUT_DELAY = 10.0


@pytest.fixture
async def cluster() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 64, seed=11, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket, nodes=3, replicas=1) as server:
        yield server


async def trickle(server: MockDcpServer, prefix: str, count: int, every: float = 0.01) -> None:
    """``count`` writes, one each ``every`` seconds (while the cluster changes)."""
    for i in range(count):
        server.bucket.set(f"{prefix}::{i:05d}", f'{{"n":{i},"p":"{prefix}"}}')
        await trio.sleep(every)


async def while_writing(server: MockDcpServer, prefix: str, change: Awaitable[None]) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trickle, server, prefix, 100)
        await change


async def change_cluster(server: MockDcpServer, change: str) -> None:
    """Apply ``change`` to the running cluster, writing ``during::*`` meanwhile and
    ``after::*`` once it is done."""
    rebalance = {"rebalance": {"interval": MOVE_INTERVAL, "out_delay": REBALANCE_OUT_DELAY}}
    if change == "rebalance_in":
        await while_writing(server, "during", server.apply({"add_node": {}}, rebalance))
        assert [n.status for n in server.nodes] == ["active"] * 4
    elif change == "rebalance_out":
        await while_writing(server, "during", server.apply({"remove_node": {"node": 2}}, rebalance))
        assert [n.status for n in server.nodes if n.status == "active"] == ["active"] * 2
    elif change == "hard_failover":
        # the replicas fall behind: what node 1's actives take now is lost with it
        await server.apply({"replication": {"paused": True}})
        load(server, 64, "lost")
        await trio.sleep(0.5)
        await server.apply({"failover_node": {"node": 1, "graceful": False}})
        await server.apply({"replication": {"paused": False}})
        assert server.nodes[1].status == "failed_over"
    elif change == "node_down_up":
        # node 2 goes down with writes it had not persisted (nor replicated)
        await server.apply({"persistence": {"paused": True}}, {"replication": {"paused": True}})
        load(server, 64, "unpersisted")
        await trio.sleep(0.5)
        await server.apply({"node_down": {"node": 2}})
        await trio.sleep(1.5)  # the client meets refused connections meanwhile
        await server.apply({"node_up": {"node": 2}})
        await server.apply({"persistence": {"paused": False}}, {"replication": {"paused": False}})
    else:  # pragma: no cover - a parameter typo
        raise AssertionError(change)
    load(server, 200, "after")


def lost_keys(server: MockDcpServer, prefix: str) -> set[str]:
    """Keys written with ``prefix`` that the cluster no longer holds."""
    held = {key.decode() for (_, key) in server.oracle()}
    return {f"{prefix}::{i:05d}" for i in range(64)} - held


async def run_client_across(
    client: str,
    change: str,
    cluster: MockDcpServer,
    start_client: Start,
    *extra: str,
    seconds: float = 90,
) -> ClientRun:
    """Stream 600 documents, apply ``change`` (with writes), stream to the oracle."""
    load(cluster, 600, "before")
    cluster.bucket.persist()
    run: ClientRun = await start_client(client, cluster, *extra)
    try:
        await converge_user_docs(run, cluster, seconds=90)
        await change_cluster(cluster, change)
        await converge_user_docs(run, cluster, seconds=seconds)
    except BaseException:
        # end the client here, in the test's trio run (the start_client finalizer cannot
        # close a trio pipe outside of one)
        with trio.CancelScope(shield=True):
            if run.process.returncode is None:
                run.process.kill()
            if run.process.stdin is not None:
                await run.process.stdin.aclose()
            await run.process.wait()
        raise
    return run


#: java-dcp-client 0.56.0 loses buffered events when its rollback mitigation closes a channel
#: during a rebalance. Its PersistencePollingHandler closes a channel when DCP_GET_FAILOVER_LOG or
#: OBSERVE_SEQNO there answers NOT_MY_VBUCKET (PersistencePollingHandler.java:112-123,196-203): its
#: map lags the moves (one every 20 ms here) and names a copy the node has deleted
#: (GET_FAILOVER_LOG: kv_engine's getFailoverLog is NOT_MY_VBUCKET only for a vbucket the node
#: lacks; the old node keeps a moved copy until ns_server deletes it when the move is done) or
#: holds dead (OBSERVE_SEQNO: kv_engine's observe_seqno is NOT_MY_VBUCKET on a dead vbucket). The
#: close listener clears the StreamEventBuffer of every vbucket the channel flags open
#: (DcpChannel.java:232-237), and two things make that lose items. (1) The flag is cleared only by
#: a STREAM_END on that channel (DcpChannelControlHandler.java:65): the reconnect re-homes a
#: flagged vbucket that has moved (DcpChannel.java:276-279) and leaves it flagged, so the next
#: close of that channel clears the events the vbucket's live stream on its new node had buffered
#: awaiting persistence; that stream stays open (the re-request is answered KEY_EEXISTS, taken as
#: opened, DcpChannel.java:526-529), so they never come (pcap: vb 47's seqnos 11..13 sent by node
#: 1's stream, cleared when node 2's reconnected channel closed on OBSERVE_SEQNO NOT_MY_VBUCKET for
#: a dead copy, then 14.. delivered). (2) DCP items read in the same batch as the NOT_MY_VBUCKET
#: are still dispatched after the close (DcpMessageHandler.java:368-376), buffered and released by
#: the persistence poller, so the session state passes the cleared items and the stream resumes
#: after them (pcap, rebalance-in-while-streaming: seqnos 1..5 cleared, 6..10 of the same read
#: released, re-opened from 10). A real node answers those requests the same, so a rebalance whose
#: moves outrun the client's map does the same to it. A race: 4 failures in 11 runs with the dead
#: copies kept (issue 46 item 1).
JAVA_LOSES_BUFFERED_EVENTS = pytest.mark.xfail(
    reason="java-dcp-client closes a channel on NOT_MY_VBUCKET for a copy its stale map"
    " names, then clears the buffered events of a moved vbucket's live stream still flagged"
    " open on it (DcpChannel.java:232-237) or releases items read after the close past"
    " those it cleared (DcpMessageHandler.java:368-376)",
    strict=False,
)
#: go-dcp after a hard failover: its rollback mitigation releases the writes the failover
#: lost (it takes a persisted seqno from whatever branch the node reports,
#: couchbase/rollback_mitigation.go observe; test_defaults pins it on one node) and, re-opened
#: at the rollback seqno, it skips every item up to the seqno it had before
#: (couchbase/observer.go:90 needCatchup; test_clients pins it): the new branch's writes at
#: those seqnos never reach it. A real node numbers the new branch the same way.
GODCP_FAILOVER = pytest.mark.xfail(
    reason="go-dcp delivers the lost writes and skips the new branch's writes up to its old"
    " seqno (couchbase/observer.go:90 needCatchup)",
    strict=False,
)
#: go-dcp with couchbase membership panics "cant find self in cluster"
#: (couchbase/membership.go:278) once node 2 is down: its membership documents are kept in
#: the bucket, and while the node holding one of them refuses connections (or after it came
#: back without its unpersisted writes) the instance list it reads no longer holds itself,
#: and it panics instead of rejoining. A real node that goes down does the same to them.
GODCP_NODE_DOWN = pytest.mark.xfail(
    reason="go-dcp panics 'cant find self in cluster' (couchbase/membership.go:278) when a node"
    " holding its membership documents goes down",
    strict=False,
)
#: how long a case known to fail waits for the oracle (the others converge in seconds)
SHORT = 20.0


def changes(**marks: pytest.MarkDecorator) -> list[Any]:
    return [pytest.param(c, marks=marks[c]) if c in marks else c for c in CHANGES]


@pytest.mark.parametrize("change", changes(rebalance_out=JAVA_LOSES_BUFFERED_EVENTS))
async def test_java_dcp_client_with_kafka_connector_settings(
    change: str, cluster: MockDcpServer, start_client: Start
) -> None:
    timeout = SHORT if change == "rebalance_out" else 90
    run = await run_client_across(
        "java", change, cluster, start_client, "--profile", "kafka", seconds=timeout
    )
    await run.stop()
    if change == "hard_failover":
        # its mitigation releases an item only once the active and every replica persisted
        # it: the writes the failover lost were never delivered, nothing to roll back
        lost = lost_keys(cluster, "lost")
        assert lost
        assert not delivered_keys(run, "lost::") & lost


@pytest.mark.parametrize("change", CHANGES)
async def test_gocbcore(change: str, cluster: MockDcpServer, start_client: Start) -> None:
    run = await run_client_across("gocbcore", change, cluster, start_client)
    state = await run.stop()
    assert {k: v["value"].encode() for k, v in state["docs"].items()} == {
        f"{cid}:{key.decode()}": item.value for (cid, key), item in cluster.oracle().items()
    }
    if change == "hard_failover":
        assert lost_keys(cluster, "lost")
        assert any(ev["event"] == "rollback" for ev in run.events())


@pytest.mark.parametrize(
    "change", changes(hard_failover=GODCP_FAILOVER, node_down_up=GODCP_NODE_DOWN)
)
async def test_godcp_with_readme_configuration(
    change: str, cluster: MockDcpServer, start_client: Start
) -> None:
    run = await run_client_across(
        "godcp",
        change,
        cluster,
        start_client,
        "--readme-config",
        "--api-port",
        str(unclaimed_port()),
        "--name",
        f"cluster-{change}",
        seconds=SHORT if change in ("hard_failover", "node_down_up") else 90,
    )
    await run.stop()


#: The Couchbase Python SDK's writes: upserts one after another from a thread, each acked
#: one recorded (a write that fails, e.g. to a node that is down, is recorded as failed).
class SdkWriter:
    def __init__(self, server: MockDcpServer) -> None:
        self.server = server
        self.acked: list[str] = []
        self.failed: list[str] = []
        self.stop = threading.Event()

    def run(self, ready: Callable[[], None]) -> None:
        from datetime import timedelta

        from couchbase.auth import PasswordAuthenticator
        from couchbase.cluster import Cluster
        from couchbase.exceptions import CouchbaseException
        from couchbase.options import ClusterOptions, ClusterTimeoutOptions

        timeouts = ClusterTimeoutOptions(
            kv_timeout=timedelta(seconds=2.5), connect_timeout=timedelta(seconds=20)
        )
        auth = PasswordAuthenticator("Administrator", "password")
        sdk = Cluster(self.server.connection_string, ClusterOptions(auth, timeout_options=timeouts))
        try:
            sdk.wait_until_ready(timedelta(seconds=20))
            coll = sdk.bucket(self.server.bucket.name).default_collection()
            trio.from_thread.run_sync(ready)
            i = 0
            while not self.stop.is_set():
                key = f"sdk::{i:05d}"
                try:
                    coll.upsert(key, {"n": i, "by": "python-sdk"})
                    self.acked.append(key)
                except CouchbaseException:
                    self.failed.append(key)
                i += 1
                time.sleep(0.005)
        finally:
            sdk.close()


@pytest.mark.parametrize("change", CHANGES)
async def test_python_sdk_writes_across_the_change(change: str, cluster: MockDcpServer) -> None:
    """The SDK keeps writing while the cluster changes (it follows the map: NOT_MY_VBUCKET
    and the pushed configs); afterwards every write it made lands in the cluster, and a
    consumer following the cluster (the reference ClusterConsumer) holds the oracle."""
    load(cluster, 200, "before")
    state = ConsumerState()
    consumer = ClusterConsumer(cluster.host, cluster.kv_port, state=state)
    writer = SdkWriter(cluster)
    ready, written = trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)

        async def write() -> None:
            try:
                await trio.to_thread.run_sync(writer.run, ready.set)
            finally:
                written.set()

        nursery.start_soon(write)
        with trio.fail_after(30):
            await ready.wait()
        await trio.sleep(0.5)
        await change_cluster(cluster, change)
        # the writer writes one key at a time, in order: those below ``done`` completed
        # during the change, and key ``done`` may be in flight, sent to a node before the
        # change reached it (a hard failover may lose it, acknowledged); every key after
        # it was sent once the change was made
        done = len(writer.acked) + len(writer.failed)
        await trio.sleep(1.5)  # writes after the change, routed by the new map
        writer.stop.set()
        with trio.fail_after(30):
            await written.wait()
        expected = {k: (i.seqno, bytes(i.value)) for k, i in cluster.oracle().items()}
        with trio.move_on_after(30):
            while {k: (v.seqno, bytes(v.value)) for k, v in state.documents().items()} != expected:
                await trio.sleep(0.05)
                expected = {k: (i.seqno, bytes(i.value)) for k, i in cluster.oracle().items()}
        nursery.cancel_scope.cancel()
    held = {k: (v.seqno, bytes(v.value)) for k, v in state.documents().items()}
    assert held == expected
    in_cluster = {key.decode() for (_, key) in cluster.oracle()}
    after = [k for k in writer.acked if int(k.split("::")[1]) > done]
    assert after, "the SDK wrote after the change"
    assert set(after) <= in_cluster
    if change.startswith("rebalance"):  # a takeover loses nothing, and nothing fails
        assert set(writer.acked) <= in_cluster
        assert not writer.failed
