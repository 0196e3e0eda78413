"""Collections on DCP with real clients: filtered streams, drops mid-stream, stream ids.

The bucket has a scope ``inventory`` with ``hotel`` (id 8), ``airline`` (9) and ``route``
(10), created before any client connects (their creation events take the first seqnos of
every vbucket), and documents in ``_default`` and all three over every vbucket. Each test
also reads the server's packet capture (``_wire.py``) and pins what the client sent.

What each client sends for collections (read from such captures; the wire checks below
assert the stream-request values and the controls that matter):

java-dcp-client 0.56.0, ``collectionsAware(true)`` with ``collectionNames("s.c", ...)``
or ``scopeName("s")``:
  HELLO DATATYPE, XATTR, XERROR, SELECT_BUCKET, SNAPPY, DUPLEX,
  CLUSTERMAP_CHANGE_NOTIFICATION, COLLECTIONS. DCP_CONTROL enable_noop=true and
  set_noop_interval=120 only: no enable_stream_id (the library has no stream ids), no
  flatbuffers_system_events. It sends
  GET_COLLECTIONS_MANIFEST before every DCP_STREAM_REQ and resolves names itself; the
  request has flags 0x10 (ACTIVE_VB_ONLY) and the value ``{"uid":"0","collections":["8",
  "9"]}`` or ``{"uid":"0","scope":"8"}`` (hex ids; ``uid`` is the manifest uid the stream
  has seen, "0" on a fresh start, e.g. "3" on a resume). It re-opens every stream that
  ends with a reason other than OK, FILTER_EMPTY included, and then without a filter
  (see the FILTER_EMPTY test).

gocbcore v10.9.3, ``DCPAgent`` with ``IoConfig.UseCollections`` and ``OpenStreamOptions``:
  HELLO ... COLLECTIONS among its usual features. DCP_CONTROL enable_noop, set_noop_interval
  180, set_priority low, [enable_stream_id=true with ``DCPConfig.UseStreamID``],
  connection_buffer_size, send_stream_end_on_client_close_stream. No
  flatbuffers_system_events. The DCP_STREAM_REQ value is sent only when an option is set:
  ``{"collections":["8","9"]}`` or ``{"scope":"8"}`` (no ``uid`` unless ManifestOptions),
  with stream ids ``{"collections":["8"],"sid":1}``: **the sid travels in the JSON value,
  never in a frame info** of the request (and sid 0 cannot be asked for: ``omitempty``).
  Stream messages are routed by the STREAM_REQ's opaque; the stream id of the server's
  messages is read from their frame info into each event's ``StreamID``.
  Names are resolved on a regular agent: GET_COLLECTION_ID, and GET_COLLECTIONS_MANIFEST
  for a scope (gocbcore-consumer's doing: gocbcore takes ids only).

go-dcp v1.3.6, ``scopeName`` + ``collectionNames``:
  GET_COLLECTION_ID per name on its regular agent; the DCP connection sends DCP_CONTROL
  enable_noop, set_noop_interval 180, set_priority low, enable_expiry_opcode,
  connection_buffer_size, send_stream_end_on_client_close_stream; DCP_STREAM_REQ flags
  0x80 (IGNORE_PURGED_TOMBSTONES) with ``{"uid":"0","collections":[...]}`` (ids in its map
  order; uid "0" on resumes too; without collection names ``["0"]``, ``_default``). No
  scope filter (collections of one scope only), no stream ids, no FlatBuffers; its
  listener is given no system event (couchbase/observer.go keeps them for offsets).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from mockdcp.model import Bucket
from mockdcp.protocol import HelloFeature
from mockdcp.server import MockDcpServer, serve

from ._wire import ClientConnection, dcp_connections
from .test_clients import oracle_docs

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from .conftest import ClientRun

pytestmark = pytest.mark.interop

Start = Callable[..., Any]

VBUCKETS = 32
HOTEL, AIRLINE, ROUTE = 8, 9, 10
INVENTORY = 8  # the scope's id
CLIENTS = ["java", "gocbcore", "godcp"]
#: clients whose program records system events (go-dcp's listener is given none)
SEES_SYSTEM_EVENTS = {"java", "gocbcore"}
DATA = ("mutation", "deletion", "expiration")
CREATED = ("collection_created", "create_collection")
DROPPED = ("collection_dropped", "delete_collection")


@contextlib.asynccontextmanager
async def collections_node(tmp_path: Path) -> AsyncIterator[MockDcpServer]:
    bucket = Bucket(
        "default",
        VBUCKETS,
        seed=16,
        clock=time.time,
        collections={"inventory": ["hotel", "airline", "route"]},
    )
    async with serve(port=0, http_port=0, bucket_obj=bucket, pcap=tmp_path / "kv.pcap") as node:
        yield node


def load(node: MockDcpServer, n: int, prefix: str, cids: tuple[int, ...]) -> None:
    for cid in cids:
        for i in range(n):
            node.bucket.set(f"{prefix}::{i:04d}", f'{{"n":{i},"c":{cid}}}', collection_id=cid)


def expected(node: MockDcpServer, cids: set[int]) -> dict[str, bytes]:
    """The oracle's documents of these collections (a dropped one has none)."""
    return {k: v for k, v in oracle_docs(node).items() if int(k.split(":", 1)[0]) in cids}


def seen(run: ClientRun, sid: int | None = None) -> dict[str, bytes]:
    return {k: v.get("value", "").encode() for k, v in run.docs_seen(sid).items()}


async def converge(
    run: ClientRun, node: MockDcpServer, cids: set[int], sid: int | None = None
) -> None:
    await run.wait_for(
        lambda: seen(run, sid) == expected(node, cids), 60, f"the documents of {sorted(cids)}"
    )


def collection_of(ev: dict[str, Any]) -> int:
    """A system event's collection id (java-dcp-client's field, then gocbcore-consumer's)."""
    return int(ev.get("collection_id", ev.get("collection", -1)))


def system_events(run: ClientRun, types: tuple[str, ...], sid: int | None = None) -> list[Any]:
    return [
        ev
        for ev in run.events()
        if ev["event"] == "system_event"
        and ev.get("type") in types
        and (sid is None or ev.get("sid") == sid)
    ]


def in_every_vbucket(events: list[dict[str, Any]], cid: int) -> bool:
    return {ev["vb"] for ev in events if collection_of(ev) == cid} == set(range(VBUCKETS))


def data_collections(run: ClientRun, sid: int | None = None) -> set[int]:
    return {
        ev["collection"]
        for ev in run.events()
        if ev["event"] in DATA and (sid is None or ev.get("sid") == sid)
    }


def snapshots_completed(run: ClientRun, sid: int | None = None) -> bool:
    """Every vbucket's position reached the end of its last snapshot marker: a filtered
    stream whose snapshot ends on a seqno it does not send gets SEQNO_ADVANCED to it
    (kv_engine docs/dcp/documentation/commands/seqno-advanced.md)."""
    end: dict[int, int] = {}
    position: dict[int, int] = {}
    for ev in run.events():
        if sid is not None and ev.get("sid") != sid:
            continue
        if ev["event"] == "snapshot":
            end[ev["vb"]] = ev["end"]
        elif ev["event"] in (*DATA, "system_event", "seqno_advanced"):
            position[ev["vb"]] = ev["seqno"]
    return len(end) == VBUCKETS and all(position.get(vb) == e for vb, e in end.items())


def the_dcp_connection(path: Path, kv_port: int) -> ClientConnection:
    conns = dcp_connections(path, kv_port)
    assert conns, "a DCP connection in the capture"
    conn = conns[0]
    assert HelloFeature.COLLECTIONS in conn.hello_features
    assert len(conn.stream_requests()) >= VBUCKETS
    return conn


def stream_values(conn: ClientConnection) -> set[str]:
    """The distinct stream-request values, collection lists sorted (go-dcp's map order)."""
    out = set()
    for req in conn.stream_requests():
        assert req.frame_sid is None, "no client puts the stream id in a request frame info"
        value = dict(req.value or {})
        if "collections" in value:
            value["collections"] = sorted(value["collections"])
        out.add(repr(sorted(value.items())))
    return out


def value_of(**fields: object) -> str:
    return repr(sorted(fields.items()))


FILTER_HOTEL_AIRLINE = ("--collection", "inventory.hotel", "--collection", "inventory.airline")
#: what each client puts in DCP_STREAM_REQ for that filter
HOTEL_AIRLINE_VALUE = {
    "java": value_of(uid="0", collections=["8", "9"]),
    "gocbcore": value_of(collections=["8", "9"]),
    "godcp": value_of(uid="0", collections=["8", "9"]),
}


@pytest.mark.parametrize("client", CLIENTS)
async def test_filtered_stream_sees_exactly_its_collections(
    client: str, tmp_path: Path, start_client: Start
) -> None:
    """A collection filter of two: their documents and creation events, nothing of
    ``_default``, ``route`` or the scope, before and after the client caught up."""
    want = {HOTEL, AIRLINE}
    async with collections_node(tmp_path) as node:
        load(node, 100, "before", (0, HOTEL, AIRLINE, ROUTE))
        run = await start_client(client, node, *FILTER_HOTEL_AIRLINE)
        await converge(run, node, want)
        load(node, 50, "live", (0, HOTEL, AIRLINE, ROUTE))
        await converge(run, node, want)
        if client in SEES_SYSTEM_EVENTS:
            await run.wait_for(
                lambda: all(in_every_vbucket(system_events(run, CREATED), c) for c in want),
                30,
                "the filtered collections' creation events",
            )
            await run.wait_for(
                lambda: snapshots_completed(run), 30, "every snapshot completed (SEQNO_ADVANCED)"
            )
        await run.stop()
        kv_port = node.kv_port
    assert data_collections(run) == want
    if client in SEES_SYSTEM_EVENTS:
        system = [ev for ev in run.events() if ev["event"] == "system_event"]
        assert {collection_of(ev) for ev in system} == want, "no scope or other collection"
        assert all(ev["name"] in ("hotel", "airline") for ev in system)
    conn = the_dcp_connection(tmp_path / "kv.pcap", kv_port)
    assert stream_values(conn) == {HOTEL_AIRLINE_VALUE[client]}
    assert "enable_stream_id" not in conn.controls
    assert "flatbuffers_system_events" not in conn.controls


@pytest.mark.parametrize("client", CLIENTS)
async def test_filtered_stream_resumes_after_the_server_drops_the_connection(
    client: str, tmp_path: Path, start_client: Start
) -> None:
    """The connection drops; while the client is away ``route`` is dropped and a
    collection created (manifest changes the filter does not see) and every collection
    written. The client re-opens its filtered streams from its positions (java-dcp-client
    with the manifest uid its stream last saw) and ends with exactly its collections."""
    want = {HOTEL, AIRLINE}
    async with collections_node(tmp_path) as node:
        load(node, 80, "before", (0, HOTEL, AIRLINE, ROUTE))
        node.bucket.persist()
        run = await start_client(client, node, *FILTER_HOTEL_AIRLINE)
        await converge(run, node, want)
        node.node.refusing = True
        node.disconnect_all("interop: disconnect step")
        node.bucket.drop_collection("inventory", "route")
        landmark = node.bucket.create_collection("inventory", "landmark")
        load(node, 40, "away", (0, HOTEL, AIRLINE, landmark))
        node.node.refusing = False
        await run.wait_for(
            lambda: seen(run) == expected(node, want), 90, "the documents written while away"
        )
        await run.stop()
        kv_port = node.kv_port
    assert data_collections(run) == want
    assert not [ev for ev in run.events() if ev["event"] == "rollback"]
    # go-dcp logs (and the program records) its first re-open attempts on the closed
    # connection as errors before it reconnects
    if client != "godcp":
        assert not [ev for ev in run.events() if ev["event"] == "error"]
    conns = dcp_connections(tmp_path / "kv.pcap", kv_port)
    assert len(conns) >= 2, "it reconnected"
    again = [r.value or {} for c in conns[1:] for r in c.stream_requests()]
    assert again
    assert all(sorted(v["collections"]) == ["8", "9"] for v in again)
    if client == "java":
        assert {v["uid"] for v in again} <= {"2", "3", "4"}, "the uid its stream saw"


@pytest.mark.parametrize("client", ["java", "gocbcore"])
async def test_scope_filter_follows_collections_created_later(
    client: str, tmp_path: Path, start_client: Start
) -> None:
    """A scope filter: the scope's collections, also one created while streaming;
    nothing of ``_default`` or of another scope. (go-dcp has no scope filter.)"""
    async with collections_node(tmp_path) as node:
        load(node, 60, "before", (0, HOTEL, AIRLINE, ROUTE))
        run = await start_client(client, node, "--scope", "inventory")
        await converge(run, node, {HOTEL, AIRLINE, ROUTE})
        landmark = node.bucket.create_collection("inventory", "landmark")
        node.bucket.create_scope("other")
        elsewhere = node.bucket.create_collection("other", "landmark")
        load(node, 60, "later", (0, HOTEL, landmark, elsewhere))
        want = {HOTEL, AIRLINE, ROUTE, landmark}
        await converge(run, node, want)
        await run.wait_for(
            lambda: in_every_vbucket(system_events(run, CREATED), landmark),
            30,
            "the new collection's creation event",
        )
        await run.stop()
        kv_port = node.kv_port
    assert data_collections(run) == want
    system = [ev for ev in run.events() if ev["event"] == "system_event"]
    assert elsewhere not in {collection_of(ev) for ev in system}
    assert all(ev.get("scope_id", ev.get("scope", INVENTORY)) == INVENTORY for ev in system)
    conn = the_dcp_connection(tmp_path / "kv.pcap", kv_port)
    scope_value = {
        "java": value_of(uid="0", scope="8"),
        "gocbcore": value_of(scope="8"),
    }
    assert stream_values(conn) == {scope_value[client]}


@pytest.mark.parametrize("client", CLIENTS)
async def test_collection_dropped_mid_stream(
    client: str, tmp_path: Path, start_client: Start
) -> None:
    """``airline`` is dropped while the client streams hotel and airline: every vbucket
    sends the drop, the stream goes on with hotel (no STREAM_END), and a client that
    forgets a dropped collection's documents holds exactly the oracle's."""
    async with collections_node(tmp_path) as node:
        load(node, 80, "before", (0, HOTEL, AIRLINE, ROUTE))
        run = await start_client(client, node, *FILTER_HOTEL_AIRLINE)
        await converge(run, node, {HOTEL, AIRLINE})
        node.bucket.drop_collection("inventory", "airline")
        load(node, 40, "after", (0, HOTEL, ROUTE))
        if client in SEES_SYSTEM_EVENTS:
            await run.wait_for(
                lambda: in_every_vbucket(system_events(run, DROPPED), AIRLINE),
                30,
                "airline's drop in every vbucket",
            )
            await converge(run, node, {HOTEL, AIRLINE})  # airline's documents forgotten
        else:
            # go-dcp's listener is not told of the drop: hotel's writes keep coming
            hotel = expected(node, {HOTEL})
            await run.wait_for(
                lambda: hotel.items() <= seen(run).items(), 60, "hotel's later documents"
            )
        await run.stop()
    assert not [ev for ev in run.events() if ev["event"] == "stream_end"]
    assert data_collections(run) == {HOTEL, AIRLINE}
    drops = {ev["vb"]: ev["seqno"] for ev in system_events(run, DROPPED)}
    for ev in run.events():
        if ev["event"] in DATA and ev["collection"] == AIRLINE and ev["vb"] in drops:
            assert ev["seqno"] < drops[ev["vb"]], f"{ev} after airline's drop"


@pytest.mark.parametrize("client", ["java", "gocbcore"])
async def test_dropping_the_filters_last_collection_ends_its_streams(
    client: str, tmp_path: Path, start_client: Start
) -> None:
    """A filter of ``route`` alone: its drop reaches every vbucket, then STREAM_END
    FILTER_EMPTY, once per vbucket.

    gocbcore-consumer leaves those streams ended. java-dcp-client re-opens every stream
    that ends with a reason other than OK (``DcpChannelControlHandler`` →
    ``Conductor.maybeMovePartition``, 50 ms later) and resolves its collection names in
    the new manifest; the dropped name is reported (``sink.error``) but the ``return``
    only leaves the lambda, so the request goes out as ``{"uid":"<new uid>"}`` with no
    filter (``DcpChannel.openStream``, 0.56.0 to 0.58.0), which a real node serves as an
    unfiltered stream: from then on the consumer gets every collection. Pinned here.
    (go-dcp re-opens with the dropped id and panics after five refusals,
    ``stream/stream.go`` reopenStream: not run.)"""
    async with collections_node(tmp_path) as node:
        load(node, 60, "before", (0, HOTEL, ROUTE))
        run = await start_client(client, node, "--collection", "inventory.route")
        await converge(run, node, {ROUTE})
        node.bucket.drop_collection("inventory", "route")
        load(node, 20, "after", (0, HOTEL))

        def ended() -> set[int]:
            return {
                ev["vb"]
                for ev in run.events()
                if ev["event"] == "stream_end"
                and (ev.get("reason_name") == "FILTER_EMPTY" or ev.get("reason") == "filter empty")
            }

        await run.wait_for(
            lambda: ended() == set(range(VBUCKETS)), 30, "STREAM_END FILTER_EMPTY everywhere"
        )
        if client == "java":
            await run.wait_for(
                lambda: bool(data_collections(run) - {ROUTE}), 30, "the unfiltered re-opens"
            )
        await run.stop()
        kv_port = node.kv_port
    events = run.events()
    assert in_every_vbucket(system_events(run, DROPPED), ROUTE)
    end_at: dict[int, int] = {}
    for i, ev in enumerate(events):
        if ev["event"] == "stream_end":
            end_at.setdefault(ev["vb"], i)
    drop_at = {ev["vb"]: i for i, ev in enumerate(events) if ev.get("type") in DROPPED}
    assert sum(ev["event"] == "stream_end" for ev in events) == VBUCKETS, "one end each"
    assert all(drop_at[vb] < end_at[vb] for vb in range(VBUCKETS)), "the drop, then the end"
    assert not [k for k in seen(run) if k.startswith(f"{ROUTE}:")], "route forgotten"
    requests = the_dcp_connection(tmp_path / "kv.pcap", kv_port).stream_requests()
    first, again = requests[:VBUCKETS], requests[VBUCKETS:]
    route_only = {"java": {"uid": "0", "collections": ["a"]}, "gocbcore": {"collections": ["a"]}}
    assert all(r.value == route_only[client] for r in first)
    if client == "gocbcore":
        assert not again
        assert seen(run) == {}
        assert data_collections(run) == {ROUTE}
        return
    assert again
    assert all(r.value is not None and r.value.keys() == {"uid"} for r in again), "no filter"
    reopened = {r.vbucket for r in again}
    for i, ev in enumerate(events):
        if ev["event"] in DATA and ev["collection"] != ROUTE:
            assert ev["vb"] in reopened, ev
            assert i > end_at[ev["vb"]], ev


async def test_gocbcore_two_stream_ids_on_one_vbucket(tmp_path: Path, start_client: Start) -> None:
    """gocbcore with ``UseStreamID``: stream 1 filters hotel, stream 2 airline and route,
    on every vbucket of one connection; each gets exactly its own, and airline's drop
    reaches stream 2 only, which goes on with route. (java-dcp-client and go-dcp have no
    stream ids.)"""
    async with collections_node(tmp_path) as node:
        load(node, 60, "before", (0, HOTEL, AIRLINE, ROUTE))
        run = await start_client(
            "gocbcore",
            node,
            "--stream",
            "inventory.hotel",
            "--stream",
            "inventory.airline,inventory.route",
        )
        await converge(run, node, {HOTEL}, sid=1)
        await converge(run, node, {AIRLINE, ROUTE}, sid=2)
        node.bucket.drop_collection("inventory", "airline")
        load(node, 30, "after", (0, HOTEL, ROUTE))
        await converge(run, node, {HOTEL}, sid=1)
        await converge(run, node, {AIRLINE, ROUTE}, sid=2)
        await run.wait_for(
            lambda: in_every_vbucket(system_events(run, DROPPED, sid=2), AIRLINE),
            30,
            "airline's drop on stream 2",
        )
        await run.stop()
        kv_port = node.kv_port
    events = run.events()
    assert not [ev for ev in events if ev["event"] in ("error", "stream_end")]
    for sid in (1, 2):
        opened = {ev["vb"] for ev in events if ev["event"] == "stream_open" and ev["sid"] == sid}
        assert opened == set(range(VBUCKETS))
    assert data_collections(run, sid=1) == {HOTEL}
    assert data_collections(run, sid=2) == {AIRLINE, ROUTE}
    assert {collection_of(ev) for ev in system_events(run, DROPPED + CREATED, sid=1)} == {HOTEL}
    conn = the_dcp_connection(tmp_path / "kv.pcap", kv_port)
    assert conn.controls.get("enable_stream_id") == "true"
    assert stream_values(conn) == {
        value_of(collections=["8"], sid=1),
        value_of(collections=["9", "a"], sid=2),
    }


async def test_gocbcore_stream_ids_with_overlapping_scope_and_collection_filters(
    tmp_path: Path, start_client: Start
) -> None:
    """Stream 1 filters hotel, stream 2 the whole scope: hotel's documents reach both,
    and a collection created while streaming joins stream 2 only. Then hotel is
    dropped: stream 1 ends FILTER_EMPTY on every vbucket (the end carries its stream
    id), stream 2 gets the drop and goes on."""
    async with collections_node(tmp_path) as node:
        load(node, 60, "before", (0, HOTEL, AIRLINE, ROUTE))
        run = await start_client(
            "gocbcore", node, "--stream", "inventory.hotel", "--stream", "scope:inventory"
        )
        await converge(run, node, {HOTEL}, sid=1)
        await converge(run, node, {HOTEL, AIRLINE, ROUTE}, sid=2)
        landmark = node.bucket.create_collection("inventory", "landmark")
        load(node, 30, "after", (0, HOTEL, landmark))
        await converge(run, node, {HOTEL}, sid=1)
        await converge(run, node, {HOTEL, AIRLINE, ROUTE, landmark}, sid=2)
        node.bucket.drop_collection("inventory", "hotel")
        load(node, 20, "last", (0, ROUTE))
        await converge(run, node, {AIRLINE, ROUTE, landmark}, sid=2)
        await run.wait_for(
            lambda: (
                {ev["vb"] for ev in run.events() if ev["event"] == "stream_end"}
                == set(range(VBUCKETS))
            ),
            30,
            "stream 1's ends",
        )
        await run.stop()
        kv_port = node.kv_port
    ends = [ev for ev in run.events() if ev["event"] == "stream_end"]
    assert len(ends) == VBUCKETS
    assert all(ev["sid"] == 1 and ev["reason"] == "filter empty" for ev in ends)
    assert in_every_vbucket(system_events(run, DROPPED, sid=2), HOTEL)
    assert in_every_vbucket(system_events(run, DROPPED, sid=1), HOTEL)
    assert not [ev for ev in run.events() if ev["event"] == "error"]
    assert data_collections(run, sid=1) == {HOTEL}
    assert data_collections(run, sid=2) == {HOTEL, AIRLINE, ROUTE, landmark}
    assert in_every_vbucket(system_events(run, CREATED, sid=2), landmark)
    assert {collection_of(ev) for ev in system_events(run, CREATED, sid=1)} == {HOTEL}
    conn = the_dcp_connection(tmp_path / "kv.pcap", kv_port)
    assert stream_values(conn) == {value_of(collections=["8"], sid=1), value_of(scope="8", sid=2)}


@pytest.mark.parametrize("client", CLIENTS)
async def test_client_without_a_filter_sees_only_the_default_collection(
    client: str, tmp_path: Path, start_client: Start
) -> None:
    """No filter on a bucket with collections. java-dcp-client and gocbcore-consumer
    connect collection-unaware (no HELLO COLLECTIONS, no stream-request value): a
    legacy stream, ``_default`` only, no system event, keys without a collection
    prefix. go-dcp is always collection-aware and, without collection names, asks for
    ``_default`` (its config default) by id: ``{"uid":"0","collections":["0"]}``."""
    async with collections_node(tmp_path) as node:
        load(node, 60, "before", (0, HOTEL, AIRLINE, ROUTE))
        run = await start_client(client, node)
        await converge(run, node, {0})
        load(node, 30, "after", (0, HOTEL))
        await converge(run, node, {0})
        await run.stop()
        kv_port = node.kv_port
    assert data_collections(run) == {0}
    assert not [ev for ev in run.events() if ev["event"] == "system_event"]
    conn = dcp_connections(tmp_path / "kv.pcap", kv_port)[0]
    if client == "godcp":
        assert HelloFeature.COLLECTIONS in conn.hello_features
        assert stream_values(conn) == {value_of(uid="0", collections=["0"])}
    else:
        assert HelloFeature.COLLECTIONS not in conn.hello_features
        assert all(r.value is None for r in conn.stream_requests())
