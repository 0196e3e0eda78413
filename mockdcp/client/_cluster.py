"""The reference consumer across a cluster: a connection per node, each vbucket streamed
from its active node, followed when it moves.

``ClusterConsumer`` bootstraps from a seed node's cluster map (GET_CLUSTER_CONFIG), opens
a DCP connection to each node of ``serverList`` that is active for a vbucket it streams,
and keeps one ``ConsumerState`` for all of them. Its HELLO asks for cluster map pushes
(``clustermap_notification``, on by default; kv_engine ``docs/BinaryProtocol.md``, "0x01
Clustermap Change Notification"), and it reads the map again (on one connection kept for
it) when a node pushes a newer revision, and at once when a node tells it a vbucket is
not there any more: a stream request answered NOT_MY_VBUCKET, a stream ended
STATE_CHANGED (kv_engine ``DcpProducer::closeStreamDueToVbStateChange``), a connection
lost; and when a lost connection is back (a push sent meanwhile is not sent again). It
polls the map (every ``poll`` seconds, 0.1 by default) only while no node it
streams from has granted the pushes (``clustermap_notification=False``, or nodes whose
HELLO answer leaves the feature out). A vbucket whose active moved is then asked for on
its new node, from where the state says it is, as java-dcp-client's ``Conductor`` and
go-dcp do after a rebalance: a takeover keeps the vbucket uuid, so it resumes without a
rollback; a failover's new branch answers ROLLBACK, which the state takes. Nodes that
leave the map are let go.
"""

from __future__ import annotations

import json
import logging
import math
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from mockdcp.client._consumer import DcpConsumer
from mockdcp.client._core import ConsumerCore
from mockdcp.client._state import ConsumerState
from mockdcp.protocol import (
    ClusterMapChangeNotification,
    FrameReader,
    GetClusterConfig,
    HelloFeature,
    RemoteProtocolError,
    Status,
    StreamEndReason,
    StreamFlag,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from mockdcp.client._core import Action
    from mockdcp.client._streams import StreamKey
    from mockdcp.protocol import Frame, Message, Response, StreamEnd

log = logging.getLogger("mockdcp.client")

#: seconds between two readings of the cluster map while no node pushes it, and between
#: two attempts to reach a node that is gone
DEFAULT_POLL = 0.1
#: seconds at least between two readings of the map
MIN_GAP = 0.01
#: seconds a reading of the map may take on its connection before it is given up and
#: the connection closed (a reply whose length is broken waits for bytes that never
#: come; a node answers in milliseconds): well under the 2 s in which ``mockdcp check``
#: wants a stream ended STATE_CHANGED asked for again, which may need the map first
MAP_TIMEOUT = 0.5
#: seconds a new map connection may take to connect and log in (SCRAM's key derivation
#: takes a busy machine well over ``MAP_TIMEOUT``: a first read given that long failed
#: and the consumer gave up before it started)
LOGIN_TIMEOUT = 10.0
#: seconds the first map may take to come, over as many attempts as fit: a node that is
#: starting, or a machine so loaded that one connect and login take longer than
#: ``LOGIN_TIMEOUT``, is asked again rather than given up at once
FIRST_MAP_WITHIN = 30.0
#: the HELLO features under which a node pushes the cluster map
_PUSH_FEATURES = frozenset(
    {HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION, HelloFeature.CLUSTERMAP_CHANGE_NOTIFICATION_BRIEF}
)
_LOST = (trio.BrokenResourceError, trio.ClosedResourceError, OSError, RemoteProtocolError)


def active_only(flags: int) -> int:
    """Stream request ``flags`` with ACTIVE_VB_ONLY: a node answers a request for a
    vbucket it holds as a replica NOT_MY_VBUCKET (with its map) instead of a replica
    stream, which kv_engine serves without the flag (``DcpProducer::
    checkConditionsForStreamRequest``, ``engines/ep/src/dcp/producer.cc``) and which
    carries only what replication brought it, until the copy's state changes.
    java-dcp-client always sets it since 0.51.0 (JDCP-245, ``Client.java``: "the Java
    DCP client is designed to stream only from active vbuckets"); a stream ended
    STATE_CHANGED by a move may be asked for again before the node's map says where the
    vbucket went (library scenario ``stream-reopened-on-a-replica-after-a-move``)."""
    return int(flags) | StreamFlag.ACTIVE_VB_ONLY


class _NodeCore(ConsumerCore):
    """One node's share of the streams: a vbucket that is not this node's any more is
    handed back (``lost``) instead of being asked for here again."""

    def __init__(
        self,
        lost: Callable[[int], None],
        pushed: Callable[[int], None],
        **options: Any,  # noqa: ANN401
    ) -> None:
        super().__init__(**options)
        self.lost = lost
        self.pushed = pushed

    def on_config_push(self, notice: ClusterMapChangeNotification) -> None:
        self.pushed(notice.revision)

    def on_stream_response(self, key: StreamKey, frame: Frame) -> list[Action]:
        if frame.status == Status.NOT_MY_VBUCKET:
            self.open.discard(key)
            self.lost(key[0])
            return []
        return super().on_stream_response(key, frame)

    def _on_stream_end(self, key: StreamKey, msg: StreamEnd) -> list[Action]:
        if msg.reason == StreamEndReason.STATE_CHANGED:
            self.open.discard(key)
            self.state.stream_ends.append((key[0], int(msg.reason)))
            self.lost(key[0])
            return []
        return super()._on_stream_end(key, msg)


class _Member(DcpConsumer):
    """The connection to one node (``DcpConsumer`` with a send lock: the router asks for
    streams on it from another task)."""

    live = False
    #: called when the connection is lost and when it is back after a loss: the map
    #: may have changed meanwhile, and a push sent while it was down is never sent again
    away: Callable[[], None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401
        super().__init__(*args, **kwargs)
        self._lock = trio.Lock()

    async def _send(self, message: Message | Response) -> None:
        async with self._lock:
            await super()._send(message)

    async def request_streams(self) -> None:
        self.live = True  # before the list is taken: a vbucket added later is sent
        if self.connects > 1 and self.away is not None:
            self.away()  # back after a loss
        await super().request_streams()

    async def _session(self) -> None:
        try:
            await super()._session()
        except _LOST:
            if self.away is not None:
                self.away()
            raise
        finally:
            self.live = False

    async def add(self, vb: int) -> None:
        """Stream ``vb`` here too (now if the connection is up, else when it is). A
        stream of ``vb`` this session already asked for (open, or its re-open pending)
        is not asked for again: kv_engine ``DcpProducer::streamRequest``
        (``engines/ep/src/dcp/producer.cc``) answers a second request for a live stream
        KEY_EEXISTS (issue 39: a map read after a reconnect routed ``vb`` back to the
        node it was already streamed from)."""
        if vb not in self.core.vbuckets:
            self.core.vbuckets.append(vb)
        if self.live:
            try:
                for spec in self.core.streams:
                    key = (vb, spec.sid)
                    if self._asked(key) or self.core.state.position(*key).ended:
                        continue
                    await self._send(self.core.stream_request(*key))
            except _LOST:
                pass  # the connection is going: its next session asks for every vbucket

    def _asked(self, key: StreamKey) -> bool:
        """This session asked for stream ``key`` and it is not over: open (answered or
        not yet) or waiting for its re-open (``DcpConsumer._reopens``)."""
        return key in self.core.open or (self._reopens is not None and key in self._reopens)

    def drop(self, vb: int) -> None:
        if vb in self.core.vbuckets:
            self.core.vbuckets.remove(vb)
        for key in [k for k in self.core.open if k[0] == vb]:
            self.core.open.discard(key)


class ClusterConsumer:
    """See the module docstring. Takes ``DcpConsumer``'s options (``vbuckets`` None:
    every vbucket of the map); ``state`` and ``on_event`` are shared by every node's
    connection. ``connect``: opens a connection to a node's (host, port) (default
    ``trio.open_tcp_stream``; explore's in-process runs pass an in-memory one)."""

    #: a ``ConsumerCore`` subclass whose rules every node's connection follows (put
    #: before the node's own: a test's consumer that breaks one rule, across the cluster)
    rules: type[ConsumerCore] = ConsumerCore

    def __init__(
        self,
        host: str,
        port: int,
        *,
        user: str = "Administrator",
        password: str = "password",
        bucket: str = "default",
        name: str = "mockdcp-consumer",
        vbuckets: Iterable[int] | None = None,
        mechanism: str = "SCRAM-SHA512",
        state: ConsumerState | None = None,
        on_event: Callable[[int, object], None] | None = None,
        poll: float | None = None,
        connect: Callable[[str, int], Awaitable[trio.abc.Stream]] | None = None,
        **core_options: Any,  # noqa: ANN401 - ConsumerCore's
    ) -> None:
        self.seeds = [(host, port)]
        self.connect = connect
        self.user, self.password, self.bucket, self.name = user, password, bucket, name
        self.mechanism = mechanism
        self.wanted = None if vbuckets is None else list(vbuckets)
        self.state = state or ConsumerState()
        self.on_event = on_event
        core_options.setdefault("clustermap_notification", True)
        core_options["stream_flags"] = active_only(core_options.get("stream_flags", 0))
        #: seconds between two readings of the map while no node pushes it (and
        #: between two attempts to reach a node that is gone)
        self.poll = DEFAULT_POLL if poll is None else poll
        self.core_options = core_options
        #: "host:port" -> that node's connection
        self.members: dict[str, _Member] = {}
        self._scopes: dict[str, trio.CancelScope] = {}
        #: vbucket -> the node it is streamed from
        self.owner: dict[int, str] = {}
        self.rev = 0
        self._poke = trio.Event()
        self._config_client: DcpConsumer | None = None

    @property
    def connects(self) -> int:
        """Connections made so far, to every node."""
        return sum(m.connects for m in self.members.values())

    # -- the map ------------------------------------------------------------------------

    async def _fetch(self) -> dict[str, Any] | None:
        """The cluster map, from the node kept for it or any other known one."""
        addresses = list(dict.fromkeys([*self._known(), *self.seeds]))
        for host, port in addresses:
            config = await self._fetch_from(host, port)
            if config is not None:
                return config
        return None

    async def _fetch_from(self, host: str, port: int) -> dict[str, Any] | None:
        """The cluster map from ``host``:``port`` (None: that node did not give it, or
        not within ``LOGIN_TIMEOUT`` to log in and ``MAP_TIMEOUT`` to answer)."""
        with trio.move_on_after(LOGIN_TIMEOUT):
            if await self._map_client(host, port):
                with trio.move_on_after(MAP_TIMEOUT):
                    return await self._read_map()
        log.info("no cluster map from %s:%d in time", host, port)
        await self._close_config_client()
        return None

    async def _map_client(self, host: str, port: int) -> bool:
        """The map connection to ``host``:``port``, logged in (False: not reached)."""
        client = self._config_client
        try:
            if client is None or (client.host, client.port) != (host, port):
                await self._close_config_client()
                client = DcpConsumer(
                    host,
                    port,
                    user=self.user,
                    password=self.password,
                    bucket=self.bucket,
                    mechanism=self.mechanism,
                    vbuckets=[],
                    collections=False,
                    connect=self._opener(host, port),
                )
                client._reader = FrameReader()
                client._stream = await client._connect()
                self._config_client = client
                await client._login()
        except (*_LOST, ValueError):
            await self._close_config_client()
            return False
        return True

    async def _read_map(self) -> dict[str, Any] | None:
        """GET_CLUSTER_CONFIG on the map connection (None: no answer but a closed one)."""
        client = self._config_client
        assert client is not None
        try:
            frame = await client._expect_ok(
                GetClusterConfig(opaque=client.core.next_opaque()), "GET_CLUSTER_CONFIG"
            )
            return json.loads(frame.value)  # type: ignore[no-any-return]
        except (*_LOST, ValueError):
            await self._close_config_client()
        return None

    async def _close_config_client(self) -> None:
        client, self._config_client = self._config_client, None
        if client is not None and client._stream is not None:
            with trio.CancelScope(shield=True):
                await client._stream.aclose()

    def _opener(self, host: str, port: int) -> Callable[[], Awaitable[trio.abc.Stream]] | None:
        """What opens a connection to ``host``:``port`` (None: TCP, ``DcpConsumer``'s)."""
        if self.connect is None:
            return None
        return partial(self.connect, host, port)

    def _known(self) -> list[tuple[str, int]]:
        out = []
        for address in self.members:
            host, _, port = address.rpartition(":")
            out.append((host, int(port)))
        return out

    @property
    def pushes(self) -> bool:
        """A node it streams from granted cluster map pushes (HELLO
        CLUSTERMAP_CHANGE_NOTIFICATION or its brief form, which a node grants alone
        when asked for both): the map is read when one comes, not polled."""
        return any(_PUSH_FEATURES & m.core.granted for m in self.members.values())

    def pushed(self, revision: int) -> None:
        """A node pushed config ``revision``: read the map now if it is newer."""
        if revision > self.rev:
            self._poke.set()

    def reread(self) -> None:
        """Read the map again now (a connection lost, or back after a loss)."""
        self._poke.set()

    def lost(self, vb: int, address: str) -> None:
        """The node at ``address`` said ``vb`` is not there: read the map again now. An
        answer to a request sent before the vbucket was routed elsewhere is stale: the
        stream is already asked for (or open) on its new node."""
        if self.owner.get(vb) == address:
            del self.owner[vb]
            self._poke.set()

    async def _apply(self, config: dict[str, Any], nursery: trio.Nursery) -> None:
        """Stream each vbucket from its active node as ``config`` maps it."""
        server_map = config["vBucketServerMap"]
        servers: list[str] = server_map["serverList"]
        chains: list[list[int]] = server_map["vBucketMap"]
        self.rev = int(config.get("rev", 0))
        wanted = range(len(chains)) if self.wanted is None else self.wanted
        for vb in wanted:
            index = chains[vb][0]
            active = servers[index].replace("$HOST", self.seeds[0][0]) if index >= 0 else None
            current = self.owner.get(vb)
            if active == current:
                continue
            for address, member in self.members.items():
                if address != active:  # the active node's streams of vb stay (``add``)
                    member.drop(vb)
            self.owner.pop(vb, None)
            if active is None:
                continue  # no copy anywhere: wait for a rebalance to make one
            member = self._member(active, nursery)
            self.owner[vb] = active
            await member.add(vb)
        for address in list(self.members):
            if not self.members[address].core.vbuckets:
                self._scopes.pop(address).cancel()
                del self.members[address]

    def _core_type(self) -> type[_NodeCore]:
        """The core of a node's connection: ``_NodeCore``, with ``rules`` first."""
        if self.rules is ConsumerCore:
            return _NodeCore
        return type(f"{self.rules.__name__}OnNode", (self.rules, _NodeCore), {})

    def _member(self, address: str, nursery: trio.Nursery) -> _Member:
        member = self.members.get(address)
        if member is None:
            host, _, port = address.rpartition(":")
            core = self._core_type()(
                lost=partial(self.lost, address=address),
                pushed=self.pushed,
                name=self.name,
                vbuckets=[],
                state=self.state,
                **self.core_options,
            )
            member = _Member(
                host,
                int(port),
                user=self.user,
                password=self.password,
                bucket=self.bucket,
                mechanism=self.mechanism,
                vbuckets=[],
                on_event=self.on_event,
                core=core,
                connect=self._opener(host, int(port)),
            )
            member.away = self.reread
            self.members[address] = member
            scope = trio.CancelScope()
            self._scopes[address] = scope
            nursery.start_soon(self._run_member, member, scope)
        return member

    async def _run_member(self, member: _Member, scope: trio.CancelScope) -> None:
        """A node's connection: run (reconnecting) until let go; a lost node's vbuckets
        are routed again from the next map."""
        with scope:
            while True:
                try:
                    await member.run()
                except _LOST as exc:  # never reached it: the map will say where to go
                    log.info("node %s:%d unreachable (%s)", member.host, member.port, exc)
                address = f"{member.host}:{member.port}"
                for vb in list(member.core.vbuckets):
                    self.lost(vb, address)
                await trio.sleep(self.poll)

    async def _next_change(self) -> None:
        """Wait for a reason to read the map again: a push of a newer revision, a lost
        stream or connection (``_poke``); without a node that pushes, ``poll`` seconds
        at most. Whether this wait is for a push or a poll is decided as it begins."""
        with trio.move_on_after(math.inf if self.pushes else self.poll):
            await self._poke.wait()
        self._poke = trio.Event()

    # -- running --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Stream until cancelled, following the map."""
        try:
            async with trio.open_nursery() as nursery:
                started = False
                began = trio.current_time()
                while True:
                    config = await self._fetch()
                    if config is not None:
                        await self._apply(config, nursery)
                        if not started:
                            started = True
                            task_status.started()
                    elif not started:
                        if trio.current_time() - began > FIRST_MAP_WITHIN:
                            raise OSError(
                                f"no node of {self.seeds} answered with a cluster map"
                                f" within {FIRST_MAP_WITHIN:g}s"
                            )
                        await trio.sleep(self.poll)
                        continue
                    await self._next_change()
                    await trio.sleep(MIN_GAP)  # a map read at most this often
        finally:
            await self._close_config_client()
