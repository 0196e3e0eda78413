"""Consumers that get DCP wrong, for the scenario library's tests.

Run as ``python tests/scenarios/wrong_consumer.py --mode MODE`` (as ``mockdcp run``'s
consumer command: the ``MOCKDCP_*`` variables say where the node is):

* ``ignore-rollbacks``: on ROLLBACK it keeps what it has and asks again from its old
  position (the bug a rollback scenario must catch);
* ``never-ack``: opens a flow-control window and never sends a buffer acknowledgement
  (the producer stops once the window is full);
* ``complete-snapshot``: resumes as if every item ended its snapshot (start = snapshot
  start = snapshot end), the mistake kv_engine's ``discussion.md`` shows losing a
  document;
* ``no-reopen``: takes every STREAM_END as the end of the stream, even STATE_CHANGED;
* ``reopen-ended``: re-opens every stream that ends, even after FILTER_EMPTY;
* ``ignore-noops``: enables noops (every 0.5 s) and never answers one;
* ``no-backoff``: reconnects 10 ms after every dropped connection, however often;
* ``dedup-snapshots``: asks for change streams but takes a snapshot's keys as unique,
  as a pre-7.2 consumer does: a key seen already in the snapshot is a retransmission and
  dropped (it keeps the first revision of a history snapshot, not the newest);
* ``drop-deletions``: ignores deletions and expirations (it keeps the documents);
* ``contiguous-seqnos``: takes seqnos as contiguous: a snapshot is complete once the
  item at its end arrives, and SEQNO_ADVANCED (a seqno with no item: a prepare, an
  abort, a filtered-out write) is nothing to it; it stays at its last item, inside a
  snapshot it waits to complete, and resumes from there;
* ``last-item-is-snapshot-end``: ignores SEQNO_ADVANCED too, and records the last
  item's seqno as the end of its snapshot: it resumes with a snapshot range no marker
  had when the snapshot ended with a seqno it never got an item for;
* ``apply-prepares``: enables sync writes and applies each DCP_PREPARE as it comes, as
  if it were committed: an aborted write, or one a failover dropped, stays;
* ``keep-rolled-back``: on ROLLBACK it moves its position back and asks again from the
  rollback seqno as it must, but keeps every document it received above it: the writes
  the branch lost stay in its output (phantom documents, stale values);
* ``require-change-streams``: asks for change streams and takes a refusal as fatal, as
  gocbcore's DCP bootstrap does with ``UseChangeStreams``: on a node before 7.2 (or a
  couchstore bucket) it never opens a stream;
* ``fatal-refusals``: re-opens a stream that ended LOST_PRIVILEGES at once (as
  java-dcp-client, gocbcore and go-dcp do) and takes the EACCESS that answers it while
  the privilege is still gone as fatal (go-dcp panics on any first stream request
  error but ROLLBACK): it dies instead of waiting for the privilege;
* ``give-up-on-auth``: exits when a reconnect is refused AUTH_ERROR (its password was
  changed): it stops streaming for good where the node dropped nothing;
* ``first-listed-bucket``: streams the first bucket ``GET /pools/default/buckets``
  lists (by name, as ns_server sorts them), as a tool not told its bucket does, not the
  one ``$MOCKDCP_BUCKET`` names: on a node with one bucket that is its own;
* ``reopen-on-replica``: asks for a stream that ended STATE_CHANGED again at once on
  the node that ended it, without ACTIVE_VB_ONLY, and keeps an open stream where it is
  whatever a new map says (as the gocbcore program did: gocbcore's ``DCPAgent`` routes
  a re-open by the map it has, and the program passed no stream flag): after a move
  that left that node a replica, it streams the replica;
* ``restart-from-zero``: not wrong: after any STREAM_END or lost connection it drops
  what it holds and streams again from 0 (no ROLLBACK needed: a rollback scenario's
  other route).

Each keeps the documents it holds in ``$MOCKDCP_OUTPUT`` when set, as ``mockdcp tail``
does, so ``mockdcp check`` verifies them. On a cluster (``$MOCKDCP_NODES`` above 1) each
follows the map with a connection per node, as ``mockdcp tail`` does, its one rule
broken on every connection (``no-backoff`` is then the plain cluster consumer).

Each is the reference consumer's core (or driver) with one rule broken, driven as it is.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

import attrs
import trio

from mockdcp.client import (
    Action,
    ClusterConsumer,
    ConsumerCore,
    DcpConsumer,
    Reopen,
    StreamKey,
    write_documents,
)
from mockdcp.protocol import (
    Abort,
    Commit,
    DcpBufferAck,
    Deletion,
    Expiration,
    Frame,
    Magic,
    Mutation,
    Opcode,
    Prepare,
    RemoteProtocolError,
    Status,
    StreamEnd,
    StreamEndReason,
    StreamFlag,
    decode_server_message,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mockdcp.protocol import DcpStreamRequest

#: the flow-control window the never-ack consumer opens
NEVER_ACK_BUFFER = 64 * 1024
#: the noop interval the ignore-noops consumer asks for
NOOP_INTERVAL = 0.5
#: the no-backoff consumer's wait before every reconnect
NO_BACKOFF_DELAY = 0.01


class IgnoresRollbacks(ConsumerCore):
    """Treats ROLLBACK as "try again": same start seqno, same uuid, nothing undone."""

    def on_stream_response(self, key: StreamKey, frame: Frame) -> list[Action]:
        if frame.status == Status.ROLLBACK:
            # do not spin: ask again as a naive retry loop would
            return [Reopen(key, 0.05)]
        return super().on_stream_response(key, frame)


class KeepsRolledBackDocuments(ConsumerCore):
    """Rolls its position back on ROLLBACK (the stream resumes where the producer said)
    but undoes none of the versions it received above the rollback point."""

    def on_stream_response(self, key: StreamKey, frame: Frame) -> list[Action]:
        if frame.status != Status.ROLLBACK:
            return super().on_stream_response(key, frame)
        kept = {doc: list(versions) for doc, versions in self.state.versions.items()}
        actions = super().on_stream_response(key, frame)
        self.state.versions.update(kept)
        return actions


class NeverAcks(ConsumerCore):
    """Sets a connection buffer size but never acknowledges a byte."""

    def buffer_ack(self) -> DcpBufferAck | None:
        return None


class ClaimsCompleteSnapshots(ConsumerCore):
    """Keeps only the last seqno of each stream: it resumes from (seqno, seqno, seqno),
    claiming a complete snapshot in the middle of one."""

    def receive(self, frame: Frame) -> list[Action]:
        actions = super().receive(frame)
        for pos in self.state.positions.values():
            pos.snap_start = pos.snap_end = pos.seqno
        return actions


class NeverReopens(ConsumerCore):
    """Takes every STREAM_END as final: it never asks for the stream again."""

    def receive(self, frame: Frame) -> list[Action]:
        actions = super().receive(frame)
        if frame.magic is Magic.REQUEST and frame.opcode == Opcode.DCP_STREAM_END:
            return [a for a in actions if not isinstance(a, Reopen)]
        return actions


class ReopensEverything(ConsumerCore):
    """Asks again for every stream that ends, whatever the reason (as java-dcp-client
    does after FILTER_EMPTY)."""

    def receive(self, frame: Frame) -> list[Action]:
        actions = super().receive(frame)
        if frame.magic is Magic.REQUEST and frame.opcode == Opcode.DCP_STREAM_END:
            msg = decode_server_message(frame, collections=self.collections)
            assert isinstance(msg, StreamEnd)
            if msg.reason != StreamEndReason.CLOSED and not any(
                isinstance(a, Reopen) for a in actions
            ):
                key = self.stream_of(frame)
                self.state.position(*key).ended = False
                self.finished = False
                actions.append(Reopen(key, 0.05))
        return actions


class RefusalIsFatal(ConsumerCore):
    """Re-opens a stream that ended LOST_PRIVILEGES at once; the core raises on the
    EACCESS that answers it."""

    def receive(self, frame: Frame) -> list[Action]:
        actions = super().receive(frame)
        if frame.magic is Magic.REQUEST and frame.opcode == Opcode.DCP_STREAM_END:
            msg = decode_server_message(frame, collections=self.collections)
            assert isinstance(msg, StreamEnd)
            if msg.reason == StreamEndReason.LOST_PRIVILEGES:
                key = self.stream_of(frame)
                self.state.position(*key).ended = False
                self.finished = False
                actions.append(Reopen(key, 0.05))
        return actions


class IgnoresNoops(ConsumerCore):
    """Enables noops and never answers one."""

    def receive(self, frame: Frame) -> list[Action]:
        if frame.magic is Magic.REQUEST and frame.opcode == Opcode.DCP_NOOP:
            return []
        return super().receive(frame)


class AssumesUniqueKeys(ConsumerCore):
    """Drops a key's second revision in one snapshot (history snapshots repeat keys)."""

    def __init__(self, **options: object) -> None:
        super().__init__(controls=[("change_streams", "true")], **options)  # type: ignore[arg-type]
        self._seen: dict[tuple[int, int | None], set[tuple[int | None, bytes]]] = {}

    def receive(self, frame: Frame) -> list[Action]:
        if frame.magic is Magic.REQUEST and frame.opcode in (
            Opcode.DCP_SNAPSHOT_MARKER,
            Opcode.DCP_MUTATION,
        ):
            msg = decode_server_message(frame, collections=self.collections)
            key = self.stream_of(frame)
            if isinstance(msg, Mutation):
                seen = self._seen.setdefault(key, set())
                if (msg.collection_id, msg.key) in seen:
                    return []
                seen.add((msg.collection_id, msg.key))
            else:
                self._seen[key] = set()
        return super().receive(frame)


class DropsDeletions(ConsumerCore):
    """Never applies a deletion or an expiration: the documents stay."""

    def receive(self, frame: Frame) -> list[Action]:
        if frame.magic is Magic.REQUEST and frame.opcode in (
            Opcode.DCP_DELETION,
            Opcode.DCP_EXPIRATION,
        ):
            return []  # not even its position moves: it resumes before them, and drops them again
        return super().receive(frame)


class ExpectsContiguousSeqnos(ConsumerCore):
    """Moves only on items (and system events): SEQNO_ADVANCED does not complete a
    snapshot whose end is a prepare or an abort it never gets."""

    _advancing = False

    def receive(self, frame: Frame) -> list[Action]:
        self._advancing = frame.magic is Magic.REQUEST and frame.opcode == Opcode.DCP_SEQNO_ADVANCED
        return super().receive(frame)

    def _advance(self, key: StreamKey, seqno: int) -> None:
        if not self._advancing:
            super()._advance(key, seqno)


class TakesLastItemAsSnapshotEnd(ExpectsContiguousSeqnos):
    """Keeps (last item's seqno, marker start, last item's seqno) as its position: the
    snapshot it resumes with ends where its items did."""

    def _on_item(self, key: StreamKey, msg: Mutation | Deletion | Expiration) -> None:
        super()._on_item(key, msg)
        pos = self.state.position(*key)
        pos.snap_end = pos.seqno


class AppliesPrepares(ConsumerCore):
    """Enables sync writes and takes a prepare for its document at once (its commit
    only repeats it; its abort undoes nothing)."""

    def __init__(self, **options: object) -> None:
        super().__init__(sync_writes=True, **options)  # type: ignore[arg-type]

    def _on_sync_write(
        self, key: StreamKey, msg: Prepare | Commit | Abort
    ) -> Mutation | Deletion | None:
        if not isinstance(msg, Prepare):
            return super()._on_sync_write(key, msg)
        fields: dict[str, Any] = {
            "opaque": msg.opaque,
            "vbucket": msg.vbucket,
            "cas": msg.cas,
            "by_seqno": msg.by_seqno,
            "rev_seqno": msg.rev_seqno,
            "key": msg.key,
            "collection_id": msg.collection_id,
            "value": msg.value,
            "datatype": msg.datatype,
        }
        document: Mutation | Deletion
        if msg.deleted:
            document = Deletion(**fields)
        else:
            document = Mutation(flags=msg.flags, expiration=msg.expiration, **fields)
        self._on_item(key, document)
        self.state.prepares[(key[0], key[1], msg.collection_id or 0, msg.key)] = msg
        return document


class RequiresChangeStreams(ConsumerCore):
    """Asks for change streams and fails its bootstrap when the node refuses them."""

    def __init__(self, **options: object) -> None:
        super().__init__(change_streams=True, **options)  # type: ignore[arg-type]

    def control_refused(self, key: str, status: int) -> bool:
        return False


class RestartsFromZero(ConsumerCore):
    """After a STREAM_END or a new connection, forgets the stream and asks from 0 with
    uuid 0: it can never hold a write a branch lost, and needs no ROLLBACK."""

    def _forget(self, vb: int) -> None:
        self.state.roll_back(vb, 0)
        self.state.rollbacks.pop()  # not a rollback the producer asked for

    def new_connection(self) -> None:
        super().new_connection()
        for vb, sid in list(self.state.positions):
            # its own vbuckets (on a cluster the state is every node connection's)
            if sid is None and vb in self.vbuckets and not self.state.position(vb).ended:
                self._forget(vb)

    def receive(self, frame: Frame) -> list[Action]:
        actions = super().receive(frame)
        ended = frame.magic is Magic.REQUEST and frame.opcode == Opcode.DCP_STREAM_END
        if ended and any(isinstance(a, Reopen) for a in actions):
            self._forget(self.stream_of(frame)[0])
        return actions


class ReopensWhereItWas(ConsumerCore):
    """Asks for a stream ended STATE_CHANGED again on the same connection, without
    ACTIVE_VB_ONLY: a node that is now a replica of the vbucket serves it a replica
    stream (kv_engine ``DcpProducer::checkConditionsForStreamRequest``)."""

    def stream_request(self, vb: int, sid: int | None = None) -> DcpStreamRequest:
        request = super().stream_request(vb, sid)
        return attrs.evolve(request, flags=request.flags & ~StreamFlag.ACTIVE_VB_ONLY)

    def _on_stream_end(self, key: StreamKey, msg: StreamEnd) -> list[Action]:
        if msg.reason == StreamEndReason.STATE_CHANGED:  # not handed back to the map
            return ConsumerCore._on_stream_end(self, key, msg)
        return super()._on_stream_end(key, msg)


class KeepsStreamsWhereTheyAre(ClusterConsumer):
    """Follows the map only for a vbucket whose stream is not open (nor its re-open
    pending) on the node it streams it from: gocbcore's ``DCPAgent`` leaves an open
    stream on its connection whatever a new map says."""

    async def _apply(self, config: dict[str, Any], nursery: trio.Nursery) -> None:
        server_map = config["vBucketServerMap"]
        servers = [s.replace("$HOST", self.seeds[0][0]) for s in server_map["serverList"]]
        chains = [list(chain) for chain in server_map["vBucketMap"]]
        for vb, address in self.owner.items():
            member = self.members.get(address)
            if member is None or address not in servers or vb >= len(chains):
                continue
            if any(member._asked((vb, spec.sid)) for spec in member.core.streams):
                chains[vb][0] = servers.index(address)
        kept = {**server_map, "vBucketMap": chains}
        await super()._apply({**config, "vBucketServerMap": kept}, nursery)


class NoBackoff(DcpConsumer):
    """The reference consumer, reconnecting ``NO_BACKOFF_DELAY`` after every dropped
    connection instead of backing off."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._task_status = task_status
        while True:
            try:
                await self._session()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError,
                    RemoteProtocolError):  # fmt: skip
                await trio.sleep(NO_BACKOFF_DELAY)


class GivesUpOnAuth(DcpConsumer):
    """The reference consumer, but a reconnect refused AUTH_ERROR ends it (the error
    propagates out of ``run``)."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._task_status = task_status
        delay = 0.05
        while True:
            try:
                await self._session()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError,
                    RemoteProtocolError):  # fmt: skip
                await trio.sleep(delay)
                delay = min(delay * 2, 1.0)


MODES: dict[str, type[ConsumerCore]] = {
    "ignore-rollbacks": IgnoresRollbacks,
    "keep-rolled-back": KeepsRolledBackDocuments,
    "never-ack": NeverAcks,
    "complete-snapshot": ClaimsCompleteSnapshots,
    "no-reopen": NeverReopens,
    "reopen-ended": ReopensEverything,
    "ignore-noops": IgnoresNoops,
    "no-backoff": ConsumerCore,
    "dedup-snapshots": AssumesUniqueKeys,
    "drop-deletions": DropsDeletions,
    "restart-from-zero": RestartsFromZero,
    "contiguous-seqnos": ExpectsContiguousSeqnos,
    "last-item-is-snapshot-end": TakesLastItemAsSnapshotEnd,
    "apply-prepares": AppliesPrepares,
    "require-change-streams": RequiresChangeStreams,
    "fatal-refusals": RefusalIsFatal,
    "give-up-on-auth": ConsumerCore,
    "first-listed-bucket": ConsumerCore,
    "reopen-on-replica": ReopensWhereItWas,
}
#: the modes whose rule is broken by the driver, not the core
DRIVERS: dict[str, type[DcpConsumer]] = {"no-backoff": NoBackoff, "give-up-on-auth": GivesUpOnAuth}
#: the modes whose rule is broken across the cluster by the map's follower too
CLUSTER_DRIVERS: dict[str, type[ClusterConsumer]] = {"reopen-on-replica": KeepsStreamsWhereTheyAre}


def make_consumer(
    mode: str,
    host: str,
    port: int,
    *,
    user: str = "Administrator",
    password: str = "password",
    bucket: str = "default",
    nodes: int = 1,
    connect: Callable[[str, int], Awaitable[trio.abc.Stream]] | None = None,
) -> DcpConsumer | ClusterConsumer:
    """The wrong consumer of ``mode`` for the node at ``host:port`` (with ``nodes`` above
    1, for the cluster it is a node of); each connection opened with ``connect``
    (default: TCP; explore's in-memory network)."""
    options: dict[str, Any] = {
        "buffer_size": int(os.environ.get("MOCKDCP_BUFFER_SIZE", 20 * 1024 * 1024)),
        "noop_interval": float(os.environ.get("MOCKDCP_NOOP_INTERVAL", 120.0)),
        # as `mockdcp tail` takes the scenario's settings
        "clustermap_notification": os.environ.get("MOCKDCP_CLUSTERMAP_NOTIFICATION") == "1",
    }
    if mode == "never-ack":
        options["buffer_size"] = NEVER_ACK_BUFFER
    if mode == "ignore-noops":
        options["noop_interval"] = NOOP_INTERVAL
    if nodes > 1:

        class Wrong(CLUSTER_DRIVERS.get(mode, ClusterConsumer)):  # type: ignore[misc]
            rules = MODES[mode]

        return Wrong(
            host, port, user=user, password=password, bucket=bucket, name=f"wrong-{mode}",
            vbuckets=None, connect=connect, **options,
        )  # fmt: skip
    core = MODES[mode](vbuckets=None, name=f"wrong-{mode}", **options)
    driver = DRIVERS.get(mode, DcpConsumer)
    own = None if connect is None else functools.partial(connect, host, port)
    return driver(
        host, port, user=user, password=password, bucket=bucket, vbuckets=None, core=core,
        connect=own,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    args = parser.parse_args(argv)
    env = os.environ
    consumer = make_consumer(
        args.mode,
        env.get("MOCKDCP_HOST", "127.0.0.1"),
        int(env.get("MOCKDCP_KV_PORT", "11210")),
        user=env.get("MOCKDCP_USER", "Administrator"),
        password=env.get("MOCKDCP_PASSWORD", "password"),
        bucket=_first_listed(env)
        if args.mode == "first-listed-bucket"
        else env.get("MOCKDCP_BUCKET", "default"),
        nodes=int(env.get("MOCKDCP_NODES", "1")),
    )
    output = env.get("MOCKDCP_OUTPUT")
    try:
        trio.run(_run, consumer, output)
    except KeyboardInterrupt:
        return 0
    finally:
        if output:
            write_documents(consumer.state, output)
    return 0


def _first_listed(env: os._Environ[str]) -> str:
    """The first bucket the node's ``/pools/default/buckets`` lists (the
    ``first-listed-bucket`` mode's mistake)."""
    import base64
    import json
    import urllib.request

    host, port = env.get("MOCKDCP_HOST", "127.0.0.1"), env.get("MOCKDCP_HTTP_PORT", "8091")
    user, password = env.get("MOCKDCP_USER", "Administrator"), env.get("MOCKDCP_PASSWORD", "")
    request = urllib.request.Request(f"http://{host}:{port}/pools/default/buckets")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(json.load(answer)[0]["name"])


async def _run(consumer: DcpConsumer | ClusterConsumer, output: str | None) -> None:
    """Stream until SIGTERM, keeping ``output`` current (``mockdcp tail --output``)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer.run)
        if output:
            nursery.start_soon(_keep, consumer, output)
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                break
        nursery.cancel_scope.cancel()


async def _keep(consumer: DcpConsumer | ClusterConsumer, output: str) -> None:
    while True:
        write_documents(consumer.state, output)
        await trio.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
