"""The 7.x bucket with real clients (issue 28, item 6): change history on a Magma bucket,
and durable writes.

Change history. A Magma bucket (history retained, 7.6.2 reported) with ``inventory.hotel``
keeping history and ``inventory.airline`` not; every key of both is written several
times, before the client connects (persisted: the stream backfills from disk) and while
it streams. A connection that enabled ``change_streams`` gets every revision of hotel's
keys, in markers flagged History (Disk|Checkpoint|History|MayDuplicateKeys for a disk
backfill); airline's keys may be de-duplicated.

- gocbcore v10.9.3 asks for it with ``DCPConfig.UseChangeStreams`` (``--change-streams``):
  DCP_CONTROL ``change_streams=true`` during its DCP bootstrap
  (memdclientdialer_component.go ``dcpBootstrap``), an error there failing the
  connection, so on a couchstore bucket (NOT_SUPPORTED, as a node answers) it never
  becomes ready. It reads the marker flags (dcp.go ``SnapshotState.HasHistory``,
  ``HasMayDuplicateKeys``), which gocbcore-consumer records.
- go-dcp v1.3.6 switches it on by itself (dcp.go ``newDcp``: ``bucketInfo.IsMagma()`` and
  ``GET /pools`` implementationVersion >= 7.2.0 → ``DcpConnect(.., useChangeStreams)``)
  and hands every revision to its listener; it is not given the markers, so their
  flags are read from the capture of what the mock sent.
- java-dcp-client 0.56.0 with the Kafka connector's settings (``--profile kafka``;
  kafka-connect-couchbase ``CouchbaseReader``: ``optionalControlParam("change_streams",
  true)``, ``optionalStreamFlags(IGNORE_PURGED_TOMBSTONES)``, collections aware, rollback
  mitigation, flow control) always asks, and reads V1 marker flags
  (``DcpSnapshotMarkerRequest.flagsAsInt``, ``SnapshotMarkerFlag.HISTORY``,
  ``MAY_CONTAIN_DUPLICATE_KEYS``).

Durable writes. None of the three enables ``enable_sync_writes`` (no such control in
gocbcore, go-dcp or java-dcp-client), so prepares and aborts are never sent to them
and commits come as mutations; a snapshot whose tail is a prepare or an abort ends at
the last visible item (legacy) or is extended with SEQNO_ADVANCED (collection aware).
Each case checks the client against the oracle and against what the mock sent (the
server-to-client side of the packet capture, ``_wire.py``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from mockdcp.model import Bucket
from mockdcp.protocol import (
    Abort,
    Commit,
    Deletion,
    Mutation,
    Prepare,
    SeqnoAdvanced,
    SnapshotFlag,
    SnapshotMarker,
    Status,
    SystemEvent,
    resolve_server_version,
)
from mockdcp.server import MockDcpServer, serve

from ._wire import ClientConnection, dcp_connections
from .test_clients import oracle_docs

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from mockdcp.protocol import Message

    from .conftest import ClientRun

pytestmark = pytest.mark.interop

Start = Callable[..., Any]

VBUCKETS = 16
HOTEL, AIRLINE = 8, 9
#: a 7.6 and a 7.0 node's version strings (go-dcp parses their X.Y.Z)
V76, V70 = "7.6.2-3721-enterprise", "7.0.0-5302-enterprise"
HISTORY = SnapshotFlag.HISTORY
DISK_HISTORY = (
    SnapshotFlag.DISK
    | SnapshotFlag.CHECKPOINT
    | SnapshotFlag.HISTORY
    | SnapshotFlag.MAY_CONTAIN_DUPLICATE_KEYS
)
DATA = ("mutation", "deletion", "expiration")

# ------------------------------------------------------------------ shared helpers


@contextlib.asynccontextmanager
async def node_7x(
    tmp_path: Path, *, storage: str = "magma", version: str | None = None
) -> AsyncIterator[MockDcpServer]:
    """A node with ``inventory.hotel`` (history on a Magma bucket) and
    ``inventory.airline`` (no history), recording every KV connection; on a Magma
    bucket ``_default`` keeps history too (ns_server gives it the bucket's
    ``historyRetentionCollectionDefault``, true by default). A node before 7.2 has no
    history retention: its Magma bucket keeps none (``history_unsupported``)."""
    magma = storage == "magma"
    before_72 = version is not None and not resolve_server_version(version).history
    bucket = Bucket(
        "default",
        VBUCKETS,
        seed=28,
        clock=time.time,
        storage=storage,
        collections={
            "_default": [{"name": "_default", "history": magma}],
            "inventory": [
                {"name": "hotel", "history": magma},
                {"name": "airline", "history": False},
            ],
        },
        history_retention_bytes=0 if magma and before_72 else None,
    )
    async with serve(
        port=0, http_port=0, bucket_obj=bucket, pcap=tmp_path / "kv.pcap", server_version=version
    ) as node:
        yield node


@attrs.define
class Revisions:
    """Every revision the test wrote: (collection, key) → [(vbucket, seqno)], in order."""

    by_key: dict[tuple[int, str], list[tuple[int, int]]] = attrs.Factory(dict)

    def write(self, node: MockDcpServer, rounds: range, keys: int = 24) -> None:
        """``rounds`` revisions of ``keys`` keys in hotel and in airline."""
        for r in rounds:
            for cid, prefix in ((HOTEL, "h"), (AIRLINE, "a")):
                for i in range(keys):
                    key = f"{prefix}::{i:03d}"
                    item = node.bucket.set(key, f'{{"k":{i},"r":{r}}}', collection_id=cid)
                    self.by_key.setdefault((cid, key), []).append((item.vbucket, item.seqno))

    def of(self, cid: int, from_seqno: Callable[[int], int] | None = None) -> Counter[Any]:
        """(key, vbucket, seqno) of every revision of ``cid`` (at or above the vbucket's
        ``from_seqno`` when given), each once."""
        return Counter(
            (key, vb, seqno)
            for (c, key), revs in self.by_key.items()
            if c == cid
            for vb, seqno in revs
            if from_seqno is None or seqno >= from_seqno(vb)
        )


def delivered(run: ClientRun, cid: int) -> Counter[Any]:
    """(key, vbucket, seqno) of each mutation of ``cid`` the client received, counted."""
    return Counter(
        (ev["key"], ev["vb"], ev["seqno"])
        for ev in run.events()
        if ev["event"] == "mutation" and ev.get("collection", 0) == cid
    )


def docs_of(docs: dict[str, bytes], cids: set[int]) -> dict[str, bytes]:
    return {k: v for k, v in docs.items() if int(k.split(":", 1)[0]) in cids}


def seen(run: ClientRun) -> dict[str, bytes]:
    return {k: v.get("value", "").encode() for k, v in run.docs_seen().items()}


async def converge(run: ClientRun, node: MockDcpServer, cids: set[int]) -> None:
    await run.wait_for(
        lambda: docs_of(seen(run), cids) == docs_of(oracle_docs(node), cids),
        90,
        f"the oracle's documents of {sorted(cids)}",
    )


@attrs.frozen
class Sent:
    """What the mock sent a client: the stream messages of each of its DCP connections
    (a reconnection opens another), in the order of the capture."""

    conns: list[ClientConnection]
    #: each connection's stream messages
    streams: list[list[Message]]

    @classmethod
    def read(cls, path: Path, kv_port: int) -> Sent:
        conns = dcp_connections(path, kv_port)
        assert conns, "the client opened a DCP connection"
        return cls(conns, [c.stream_messages() for c in conns])

    @property
    def messages(self) -> list[Message]:
        return [m for stream in self.streams for m in stream]

    def control(self, key: str) -> set[tuple[str | None, int | None]]:
        """(value asked, status answered) of control ``key`` on each connection."""
        return {(c.controls.get(key), c.control_statuses().get(key)) for c in self.conns}


def mock_markers(sent: Sent) -> dict[int, list[tuple[int, int, int]]]:
    """Each vbucket's snapshot markers the mock sent: (start, end, flags), in order."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    for m in sent.messages:
        if isinstance(m, SnapshotMarker):
            out.setdefault(m.vbucket, []).append((m.start_seqno, m.end_seqno, m.flags))
    return out


def client_markers(run: ClientRun) -> dict[int, list[tuple[int, int, int]]]:
    out: dict[int, list[tuple[int, int, int]]] = {}
    for ev in run.events():
        if ev["event"] == "snapshot":
            out.setdefault(ev["vb"], []).append((ev["start"], ev["end"], ev["flags"]))
    return out


def mock_items(sent: Sent) -> Counter[Any]:
    """(event, key, collection, vbucket, seqno) of every document message the mock sent."""
    return Counter(
        (
            "mutation" if isinstance(m, Mutation) else "deletion",
            m.key.decode(),
            m.collection_id or 0,
            m.vbucket,
            m.by_seqno,
        )
        for m in sent.messages
        if isinstance(m, (Mutation, Deletion))
    )


def client_items(run: ClientRun) -> Counter[Any]:
    return Counter(
        (ev["event"], ev["key"], ev.get("collection", 0), ev["vb"], ev["seqno"])
        for ev in run.events()
        if ev["event"] in ("mutation", "deletion")
    )


def markers_of_items(messages: list[Message], cid: int) -> list[tuple[int, int, int]]:
    """The marker (start, end, flags) each document message of ``cid`` came under."""
    last: dict[int, tuple[int, int, int]] = {}
    out = []
    for m in messages:
        if isinstance(m, SnapshotMarker):
            last[m.vbucket] = (m.start_seqno, m.end_seqno, m.flags)
        elif isinstance(m, (Mutation, Deletion)) and (m.collection_id or 0) == cid:
            out.append(last[m.vbucket])
    return out


def assert_history_markers(sent: Sent) -> None:
    """Every revision of hotel came under a marker flagged History, a disk one flagged
    Disk|Checkpoint|History|MayDuplicateKeys; the mock sent at least one of each."""
    under = [mk for stream in sent.streams for mk in markers_of_items(stream, HOTEL)]
    assert under
    for start, end, flags in under:
        assert flags & HISTORY, f"hotel revision under marker {start}..{end} flags {flags:#x}"
        if flags & SnapshotFlag.DISK:
            assert flags & DISK_HISTORY == DISK_HISTORY, f"disk marker flags {flags:#x}"
    assert any(f & SnapshotFlag.DISK for _, _, f in under), "a disk history snapshot"
    assert any(f & SnapshotFlag.MEMORY for _, _, f in under), "a memory history snapshot"


def assert_snapshots_complete(sent: Sent) -> None:
    """Each snapshot the mock sent reaches its end: its last item, system event or
    SEQNO_ADVANCED has the marker's end seqno (a client records that position)."""
    for stream in sent.streams:
        open_: dict[int, tuple[int, int | None]] = {}  # vb -> (end, last seqno)

        def close(vb: int, open_: dict[int, tuple[int, int | None]] = open_) -> None:
            if vb in open_:
                end, last = open_.pop(vb)
                assert last == end, f"vb {vb}: snapshot to {end} ended at {last}"

        for m in stream:
            if isinstance(m, SnapshotMarker):
                close(m.vbucket)
                open_[m.vbucket] = (m.end_seqno, None)
            elif (
                isinstance(m, (Mutation, Deletion, SystemEvent, SeqnoAdvanced))
                and m.vbucket in open_
            ):
                open_[m.vbucket] = (open_[m.vbucket][0], m.by_seqno)
        for vb in list(open_):
            close(vb)


# ------------------------------------------------------------------ change history


async def test_gocbcore_change_streams_deliver_every_revision(
    tmp_path: Path, start_client: Start
) -> None:
    """gocbcore with ``UseChangeStreams``: a backfill from disk of three revisions per key,
    live revisions from memory, then (its cursor dropped) a backfill again from above
    the history start, then a dropped connection (it reconnects and resumes each
    stream where it was): every hotel revision arrives exactly once, under History
    markers; the client's markers and items are exactly those the mock sent."""
    revs = Revisions()
    async with node_7x(tmp_path) as node:
        revs.write(node, range(3))
        node.bucket.checkpoint()
        node.bucket.persist()  # the closed checkpoints go: the stream starts on disk
        run = await start_client("gocbcore", node, "--collections", "--change-streams")
        await converge(run, node, {HOTEL, AIRLINE})
        revs.write(node, range(3, 5))
        await converge(run, node, {HOTEL, AIRLINE})
        node.bucket.persist()
        node.bucket.checkpoint()
        assert node.drop_cursor()
        revs.write(node, range(5, 7))  # before the stream runs again: it backfills them
        node.bucket.persist()
        await converge(run, node, {HOTEL, AIRLINE})
        node.disconnect_all("interop: disconnect step")
        revs.write(node, range(7, 9))
        await converge(run, node, {HOTEL, AIRLINE})
        await run.wait_for(
            lambda: delivered(run, HOTEL) == revs.of(HOTEL), 30, "every hotel revision"
        )
        state = await run.stop()
        kv_port = node.kv_port
        oracle = oracle_docs(node)
    assert {k: v["value"].encode() for k, v in state["docs"].items()} == docs_of(
        oracle, {HOTEL, AIRLINE}
    )
    assert delivered(run, HOTEL) == revs.of(HOTEL), "each hotel revision exactly once"
    assert delivered(run, AIRLINE).keys() <= revs.of(AIRLINE).keys()
    assert len(delivered(run, AIRLINE)) < len(revs.of(AIRLINE)), "airline de-duplicated"
    sent = Sent.read(tmp_path / "kv.pcap", kv_port)
    assert len(sent.conns) == 2, "it reconnected"
    assert sent.control("change_streams") == {("true", Status.SUCCESS)}
    assert_history_markers(sent)
    assert client_markers(run) == mock_markers(sent)
    assert client_items(run) == mock_items(sent)
    assert not [ev for ev in run.events() if ev["event"] in ("error", "rollback")]
    # the cursor drop: a second disk snapshot per vbucket, from above the history start
    first = [m for ms in mock_markers(Sent(sent.conns[:1], sent.streams[:1])).values() for m in ms]
    disk = [m for m in first if m[2] & SnapshotFlag.DISK]
    assert len(disk) == 2 * VBUCKETS
    assert all(f == DISK_HISTORY for _, _, f in disk)


async def test_gocbcore_backfill_split_at_the_history_start(
    tmp_path: Path, start_client: Start
) -> None:
    """History purged up to the first two rounds: a backfill from 0 is a de-duplicated
    snapshot below the history start (Disk|Checkpoint), then the history snapshot, both
    markers ending at the same seqno; gocbcore gets each hotel key's newest revision
    below the start and every revision from it."""
    revs = Revisions()
    async with node_7x(tmp_path) as node:
        revs.write(node, range(2), keys=32)  # keys 24..31 get no later revision
        node.bucket.persist()
        for vbucket in node.bucket.vbuckets:
            node.bucket.purge_history(vbucket=vbucket.vbid, upto=vbucket.high_seqno)
        starts = {v.vbid: v.history_start_seqno for v in node.bucket.vbuckets}
        revs.write(node, range(2, 4))
        node.bucket.checkpoint()
        node.bucket.persist()
        run = await start_client("gocbcore", node, "--collections", "--change-streams")
        expected = revs.of(HOTEL, lambda vb: starts[vb])
        await converge(run, node, {HOTEL, AIRLINE})
        await run.wait_for(
            lambda: expected.keys() <= delivered(run, HOTEL).keys(), 30, "the hotel history"
        )
        await run.stop()
        kv_port = node.kv_port
    got = delivered(run, HOTEL)
    assert max(got.values()) == 1
    below = {(k, vb, s) for k, vb, s in got if s < starts[vb]}
    assert below, "the de-duplicated part has data"
    # below the start: only keys with no revision from it on, each once (their newest)
    assert {k for k, _, _ in below}.isdisjoint(k for k, _, _ in expected)
    assert got.keys() - below == expected.keys()
    sent = Sent.read(tmp_path / "kv.pcap", kv_port)
    for vb, markers in mock_markers(sent).items():
        first, second = markers[0], markers[1]
        assert first[2] == SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT, markers
        assert second == (starts[vb], first[1], DISK_HISTORY), markers
    assert client_markers(run) == mock_markers(sent)
    assert client_items(run) == mock_items(sent)


async def test_gocbcore_change_streams_on_couchstore_fail_its_setup(
    tmp_path: Path, start_client: Start
) -> None:
    """A couchstore bucket answers ``change_streams`` NOT_SUPPORTED, as a node does;
    gocbcore's DCP bootstrap fails on it (``dcpBootstrap`` returns the error), so the
    agent never becomes ready."""
    async with node_7x(tmp_path, storage="couchstore") as node:
        run = await start_client(
            "gocbcore", node, "--collections", "--change-streams", "--connect-timeout", "4s"
        )
        await run.wait_for(lambda: run.process.returncode is not None, 40, "its exit")
        kv_port = node.kv_port
    assert run.process.returncode == 1
    assert [ev["event"] for ev in run.events()] == ["error"]
    # every attempt's answer (the last attempt may be cut before it asks)
    answers = [
        statuses["change_streams"]
        for c in dcp_connections(tmp_path / "kv.pcap", kv_port)
        if "change_streams" in (statuses := c.control_statuses())
    ]
    assert answers
    assert set(answers) == {Status.NOT_SUPPORTED}


@pytest.mark.parametrize(
    ("storage", "version", "asks"),
    [("magma", V76, True), ("magma", V70, False), ("couchstore", V76, False)],
    ids=["magma-7.6", "magma-7.0", "couchstore-7.6"],
)
async def test_godcp_switches_change_streams_on_by_itself(
    storage: str, version: str, asks: bool, tmp_path: Path, start_client: Start
) -> None:
    """go-dcp asks ``change_streams`` only of a Magma bucket of a node reporting 7.2 or
    later; then its listener is handed every hotel revision, which the mock sent under
    History markers. Otherwise it is not asked and revisions may be de-duplicated."""
    revs = Revisions()
    async with node_7x(tmp_path, storage=storage, version=version) as node:
        revs.write(node, range(3))
        node.bucket.checkpoint()
        node.bucket.persist()
        run = await start_client(
            "godcp", node, "--collection", "inventory.hotel", "--collection", "inventory.airline"
        )
        await converge(run, node, {HOTEL, AIRLINE})
        revs.write(node, range(3, 5))
        await converge(run, node, {HOTEL, AIRLINE})
        if asks:
            await run.wait_for(
                lambda: delivered(run, HOTEL) == revs.of(HOTEL), 30, "every hotel revision"
            )
        await run.stop()
        kv_port = node.kv_port
    sent = Sent.read(tmp_path / "kv.pcap", kv_port)
    assert client_items(run) == mock_items(sent)
    if not asks:
        assert sent.control("change_streams") == {(None, None)}
        assert len(delivered(run, HOTEL)) < len(revs.of(HOTEL)), "de-duplicated"
        return
    assert sent.control("change_streams") == {("true", Status.SUCCESS)}
    assert delivered(run, HOTEL) == revs.of(HOTEL)
    assert_history_markers(sent)


async def test_java_dcp_client_with_kafka_settings_on_magma(
    tmp_path: Path, start_client: Start
) -> None:
    """java-dcp-client as the Kafka connector sets it up: its optional ``change_streams``
    control is granted on Magma, so every hotel revision is delivered (once persisted:
    rollback mitigation) under markers it reads as History."""
    revs = Revisions()
    async with node_7x(tmp_path) as node:
        revs.write(node, range(3))
        node.bucket.checkpoint()
        node.bucket.persist()
        run = await start_client("java", node, "--profile", "kafka")
        await converge(run, node, {HOTEL, AIRLINE})
        revs.write(node, range(3, 5))
        await converge(run, node, {HOTEL, AIRLINE})
        await run.wait_for(
            lambda: delivered(run, HOTEL) == revs.of(HOTEL), 30, "every hotel revision"
        )
        state = await run.stop()
        kv_port = node.kv_port
        oracle = oracle_docs(node)
    assert {k: v["value"].encode() for k, v in state["docs"].items()} == oracle
    assert delivered(run, HOTEL) == revs.of(HOTEL)
    sent = Sent.read(tmp_path / "kv.pcap", kv_port)
    assert sent.control("change_streams") == {("true", Status.SUCCESS)}
    # ACTIVE_VB_ONLY | IGNORE_PURGED_TOMBSTONES, all collections
    assert {(r.flags, str(r.value)) for r in sent.conns[0].stream_requests()} == {
        (0x90, str({"uid": "0"}))
    }
    assert_history_markers(sent)
    assert client_markers(run) == mock_markers(sent)
    assert client_items(run) == mock_items(sent)


# ------------------------------------------------------------------ durable writes

#: client → (program, extra arguments, the collections it streams, collection aware,
#: asks for change streams on Magma)
DURABLE_CLIENTS: dict[str, tuple[str, tuple[str, ...], set[int], bool, bool]] = {
    "java-kafka": ("java", ("--profile", "kafka"), {0, HOTEL, AIRLINE}, True, True),
    "gocbcore": ("gocbcore", (), {0}, False, False),
    "gocbcore-collections": ("gocbcore", ("--collections",), {0, HOTEL, AIRLINE}, True, True),
    "godcp": ("godcp", (), {0}, True, True),
}


@attrs.define
class Durable:
    """The test's durable writes: values committed (each to reach the client once) and
    aborted (never), documents deleted durably. Every durable write has a key of its
    own (an earlier commit of the key could otherwise be de-duplicated away), but for
    the aborted overwrites of live documents."""

    committed: set[str] = attrs.Factory(set)
    aborted: set[str] = attrs.Factory(set)
    pending: dict[str, str] = attrs.Factory(dict)
    deleted: set[str] = attrs.Factory(set)

    @staticmethod
    def value(key: str, tag: str) -> dict[str, str]:
        return {"key": key, "tag": tag}

    @classmethod
    def body(cls, key: str, tag: str) -> str:
        """The value as stored (the steps' ``compact_json``)."""
        return json.dumps(cls.value(key, tag), separators=(",", ":"))

    def _record(self, value: str, outcome: str) -> None:
        {"commit": self.committed, "abort": self.aborted}[outcome].add(value)

    def write(self, node: MockDcpServer, key: str, tag: str, outcome: str) -> None:
        """Through the model's API."""
        value = self.body(key, tag)
        node.bucket.sync_write(key, value, outcome=outcome)
        if outcome == "pending":
            self.pending[key] = value
        else:
            self._record(value, outcome)

    def step(
        self, key: str, tag: str, outcome: str, collection: str = "_default._default"
    ) -> dict[str, object]:
        """A ``sync_write`` step (commit or abort)."""
        self._record(self.body(key, tag), outcome)
        value = self.value(key, tag)
        write = {"key": key, "value": value, "outcome": outcome, "collection": collection}
        return {"sync_write": write}

    def resolve(self, key: str, outcome: str) -> dict[str, object]:
        """A ``commit`` or ``abort`` step of a pending write."""
        self._record(self.pending.pop(key), outcome)
        return {outcome: {"key": key}}


def durable_values(run: ClientRun) -> Counter[str]:
    """How often each durable value (they carry ``"tag"``) reached the client."""
    return Counter(
        ev["value"] for ev in run.events() if ev["event"] == "mutation" and '"tag"' in ev["value"]
    )


@pytest.mark.parametrize("storage", ["couchstore", "magma"])
@pytest.mark.parametrize("client", list(DURABLE_CLIENTS))
async def test_durable_writes_commits_once_aborts_never(
    client: str, storage: str, tmp_path: Path, start_client: Start
) -> None:
    """Durable writes committed, aborted and left pending before the client connects
    (persisted: read from disk, pending prepares at the tail of vbuckets); while it
    streams, through the ``sync_write``/``commit``/``abort`` steps, more of each, durable
    deletions and aborted overwrites of live documents; then prepares left pending at
    the tail of the snapshots the client is in, the connection dropped (the client
    resumes from there) and the prepares committed. Each committed value reaches the
    client once, at its commit's seqno; no aborted value, prepare or abort ever does;
    the client ends with the oracle's documents and received exactly the mutations and
    deletions the mock sent, which sent no DCP_PREPARE, DCP_COMMIT or DCP_ABORT and whose
    every snapshot reached its end (SEQNO_ADVANCED over a prepare or abort tail for a
    collection-aware client, a legacy one's marker ending at its last visible item).

    On a Magma bucket the durable writes are in collections that keep history, and
    the clients that can ask for change streams do (gocbcore with ``--change-streams``):
    the same, with every commit under a History marker."""
    program, extra, cids, aware, asks = DURABLE_CLIENTS[client]
    changes = storage == "magma" and asks
    if changes and program == "gocbcore":
        extra = (*extra, "--change-streams")
    dur = Durable()
    keys = [f"{i:03d}" for i in range(24)]
    async with node_7x(tmp_path, storage=storage) as node:
        for k in keys:
            node.bucket.set(f"base::{k}", f'{{"base":"{k}"}}')
            node.bucket.set(f"hotel::{k}", f'{{"hotel":"{k}"}}', collection_id=HOTEL)
            dur.write(node, f"dc::{k}", "first-commit", "commit")
            dur.write(node, f"da::{k}", "first-abort", "abort")
            dur.write(node, f"base::{k}", "overwrite-abort", "abort")
            dur.write(node, f"dp::{k}", "first-pending", "pending")
        node.bucket.checkpoint()
        node.bucket.persist()  # the stream starts on disk, prepares at its tail
        run = await start_client(program, node, *extra)
        await converge(run, node, cids)
        steps: list[dict[str, object]] = []
        for n, k in enumerate(keys):
            steps.append(dur.resolve(f"dp::{k}", "commit" if n % 2 else "abort"))
            steps.append(dur.step(f"lc::{k}", "live-commit", "commit"))
            steps.append(dur.step(f"la::{k}", "live-abort", "abort"))
            steps.append(dur.step(f"hotel::{k}", "overwrite-abort", "abort", "inventory.hotel"))
        await node.apply(*steps)
        for k in keys[:4]:  # durable deletions of documents committed before
            node.bucket.sync_write(f"dc::{k}", deleted=True, outcome="commit")
            dur.deleted.add(f"dc::{k}")
        await converge(run, node, cids)
        for k in keys:  # prepares at the tail of the snapshots the client is in
            node.bucket.set(f"tail::{k}", f'{{"tail":"{k}"}}')
            dur.write(node, f"dt::{k}", "tail-pending", "pending")
        await converge(run, node, cids)
        node.disconnect_all("interop: disconnect step")
        await node.apply(*(dur.resolve(f"dt::{k}", "commit") for k in keys))
        await converge(run, node, cids)
        await run.wait_for(
            lambda: set(durable_values(run)) >= dur.committed, 60, "every committed value"
        )
        await run.stop()
        kv_port = node.kv_port
        oracle = node.bucket.oracle()
    assert not dur.pending
    expected = {f"{c}:{k.decode()}": it.value for (c, k), it in oracle.items()}
    assert docs_of(seen(run), cids) == docs_of(expected, cids)
    values = durable_values(run)
    assert values == Counter(dur.committed), "each commit exactly once"
    assert not dur.aborted & set(values), "no aborted value"
    # each document's last event is at its seqno in the oracle (a commit's own)
    last = run.docs_seen()
    for (c, key), it in oracle.items():
        if c in cids:
            assert last[f"{c}:{key.decode()}"]["seqno"] == it.seqno, key
    deletions = Counter(ev["key"] for ev in run.events() if ev["event"] == "deletion")
    assert deletions == Counter(dur.deleted)
    sent = Sent.read(tmp_path / "kv.pcap", kv_port)
    assert len(sent.conns) >= 2, "it reconnected"
    assert sent.control("enable_sync_writes") == {(None, None)}
    asked = sent.control("change_streams")
    if changes:
        assert asked == {("true", Status.SUCCESS)}
        for cid in cids - {AIRLINE}:
            for start, end, flags in markers_of_items(sent.messages, cid):
                assert flags & HISTORY, f"{cid}: marker {start}..{end} flags {flags:#x}"
    elif program == "java":  # an optional control, refused by couchstore as by a node
        assert asked == {("true", Status.NOT_SUPPORTED)}
    else:
        assert asked == {(None, None)}
    assert not [m for m in sent.messages if isinstance(m, (Prepare, Commit, Abort))]
    assert client_items(run) == mock_items(sent)
    assert_snapshots_complete(sent)
    advanced = [m for m in sent.messages if isinstance(m, SeqnoAdvanced)]
    if aware:
        assert advanced, "SEQNO_ADVANCED over prepare and abort tails"
        if program != "godcp":  # go-dcp's listener is not given them
            got = Counter(
                (ev["vb"], ev["seqno"]) for ev in run.events() if ev["event"] == "seqno_advanced"
            )
            assert got == Counter((m.vbucket, m.by_seqno) for m in advanced)
    else:
        assert not advanced
    if program != "godcp":  # go-dcp's listener is not given markers
        assert client_markers(run) == mock_markers(sent)
    assert not [ev for ev in run.events() if ev["event"] == "rollback"]
    if program != "godcp":  # go-dcp logs its first re-opens on the closed connection
        assert not [ev for ev in run.events() if ev["event"] == "error"]
