"""Running a mock node: the listeners, the bucket, and the handle tests hold.

``serve(...)`` is the async context manager of the README ("From Python"): inside a
trio program, ``async with mockdcp.serve(port=0) as server:`` starts both listeners on
free ports, and ``server.bucket`` is the model to write to; every open stream sees each
write as it happens.

With ``tls=True`` the node also listens with TLS (KV on ``tls_port``, HTTPS on
``https_port``: ``_tls.py``), and with ``external_host`` its cluster map carries the
alternate address clients outside its network use (``alternateAddresses.external``,
``_network.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from functools import partial
from typing import TYPE_CHECKING, Unpack

import attrs
import trio

from mockdcp.model import DEFAULT_FLUSH_INTERVAL, Bucket
from mockdcp.producer import Node
from mockdcp.server._flusher import run_flusher
from mockdcp.server._http import HttpService
from mockdcp.server._kv import (
    DEFAULT_AUTH_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    KvService,
    Wakeups,
)
from mockdcp.server._network import NetworkOptions, TlsArguments, node_network
from mockdcp.util import ModelError, ServerError, collector_paused, raise_unwrapped, tune_process

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    from mockdcp.model import Oracle
    from mockdcp.producer import ConnectionStatistics
    from mockdcp.protocol import StreamEndReason
    from mockdcp.scenario import ConsumerProgress, ExpectationResult, Scenario, Step, StepRunner
    from mockdcp.server._pcap import PcapWriter
    from mockdcp.server._tls import TlsSetup

log = logging.getLogger("mockdcp.server")

DEFAULT_USERS: Mapping[str, str] = {"Administrator": "password"}


@attrs.define(kw_only=True, eq=False)
class MockDcpServer:
    """A running mock node: its ports, its bucket, and the steps (the Python API of
    ``apply``, ``wait``, ``oracle``, ``state``)."""

    node: Node
    kv: KvService
    host: str
    kv_port: int
    http_port: int
    #: the scenario seed (generated data)
    seed: int = 0
    #: the TLS ports (None without TLS)
    tls_port: int | None = None
    https_port: int | None = None
    #: the TLS contexts and CA (None without TLS)
    tls: TlsSetup | None = None
    _runner: StepRunner | None = None
    #: set when the scenario's steps have all run (at once without a scenario)
    scenario_done: trio.Event = attrs.field(factory=trio.Event)

    async def run_rest(self, steps: list[Step], source: str, first: int) -> None:
        """Run a scenario's steps after its initial ones; a failure is recorded in the
        progress (``state()``), never raised into the server."""
        from mockdcp.scenario import StepFailed

        try:
            await self.runner.apply(steps, source, first=first)
        except StepFailed as exc:
            log.warning("scenario stopped: %s", exc)
        finally:
            self.runner.progress.finished = True
            self.scenario_done.set()

    @property
    def bucket(self) -> Bucket:
        return self.node.bucket

    @property
    def runner(self) -> StepRunner:
        """The step runner (made on first use: the scenario machinery loads after
        "ready"; it reads the node's event log, so nothing observed before is lost)."""
        if self._runner is None:
            from mockdcp.scenario import StepRunner

            self._runner = StepRunner(self.node, seed=self.seed)
        return self._runner

    @property
    def connection_string(self) -> str:
        """What a Couchbase SDK or java-dcp-client takes: ``couchbase://host:kv_port``."""
        return f"couchbase://{self.host}:{self.kv_port}"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def ca_pem(self) -> bytes | None:
        """The CA that signs the node's TLS certificate (PEM), for clients to trust."""
        return None if self.tls is None else self.tls.ca_pem

    @property
    def tls_connection_string(self) -> str | None:
        """``couchbases://host:tls_port`` (None without TLS)."""
        if self.tls_port is None:
            return None
        return f"couchbases://{self.host}:{self.tls_port}"

    @property
    def https_url(self) -> str | None:
        return None if self.https_port is None else f"https://{self.host}:{self.https_port}"

    # -- the step API -------------------------------------------------------------------

    async def apply(self, *steps: Step | Mapping[str, object]) -> None:
        """Apply steps (objects, or ``{name: {fields}}`` mappings as in YAML/JSON) in
        order. The whole list is checked first: ``ScenarioProblems`` changes nothing.
        ``wait``/``expect`` steps suspend until met; ``StepFailed`` if a step cannot
        be applied or a wait times out (the server keeps running)."""
        from mockdcp.scenario import parse_steps

        await self.runner.apply(parse_steps(list(steps), source="<apply>"), "<apply>")

    async def wait(self, trigger: ConsumerProgress | float, *, limit: float = 60.0) -> None:
        """Wait for consumer progress (or ``trigger`` seconds); ``StepFailed`` after
        ``limit`` seconds."""
        from mockdcp.scenario import Wait

        if isinstance(trigger, int | float):
            await self.apply(Wait(seconds=float(trigger)))
        else:
            await self.apply(Wait(consumer=trigger, timeout=limit))

    @property
    def persistence_paused(self) -> bool:
        """True while the background flusher is held (``bucket.flusher``)."""
        return self.bucket.flusher.paused

    def set_persistence_paused(self, paused: bool) -> None:
        """Hold (True) or release the background flusher (the ``persistence`` step);
        ``persist`` works either way."""
        if paused:
            self.bucket.flusher.pause()
        else:
            self.bucket.flusher.resume()

    def oracle(self) -> Oracle:
        """What a correct consumer holds: (collection, key) -> the newest live item, and
        ``.rows()``, the rows ``GET /mock/oracle`` and the pipeline use."""
        return self.bucket.oracle()

    def expectations(self) -> list[ExpectationResult]:
        """The outcomes of the ``expect`` steps applied so far."""
        return [] if self._runner is None else list(self._runner.progress.expectations)

    def state(self) -> dict[str, object]:
        """A JSON-ready snapshot: connections and their streams, per-vbucket seqnos,
        the scenario's progress."""
        return server_state(self)

    # -- direct steps (kept for tests written against them) ------------------------------

    def restart(self, vbucket: int | None = None) -> None:
        """A node restart: unpersisted items are lost and every connection drops."""
        self.node.restart(None if vbucket is None else [vbucket])

    def failover(
        self,
        vbucket: int | None = None,
        *,
        lose_after: int | None = None,
        lose_unpersisted: bool = True,
        disconnect: bool = False,
    ) -> None:
        """A failover (``Node.failover``): the affected streams end with STATE_CHANGED
        before anything can observe the new branch, or with ``disconnect`` every
        connection drops."""
        self.node.failover(
            vbucket, lose_after=lose_after, lose_unpersisted=lose_unpersisted, disconnect=disconnect
        )

    def disconnect_all(self, reason: str = "disconnect step") -> None:
        """Drop every client connection (the ``disconnect`` fault)."""
        self.node.disconnect(reason)

    def drop_cursor(
        self, vbucket: int | None = None, connection: str | None = None
    ) -> list[tuple[int, str]]:
        """The memory-to-disk switch for chosen streams, now (``Node.drop_cursor``)."""
        return self.node.drop_cursor(None if vbucket is None else [vbucket], connection)

    def end_stream(self, vbucket: int, reason: StreamEndReason) -> int:
        """End the live streams of ``vbucket`` on every connection with ``reason``."""
        return self.node.end_streams([vbucket], reason)

    def connections(self) -> list[ConnectionStatistics]:
        return [c.statistics() for c in self.node.matching()]


def server_state(server: MockDcpServer) -> dict[str, object]:
    """See ``MockDcpServer.state`` (the shape of ``GET /mock/state``)."""
    from mockdcp.server._control_state import server_state as state

    return state(server)


async def _listen(host: str, port: int) -> list[trio.SocketListener]:
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise ServerError(f"cannot listen on {host}:{port}: {exc}") from exc


def _port_of(listeners: list[trio.SocketListener]) -> int:
    return int(listeners[0].socket.getsockname()[1])


@contextlib.asynccontextmanager
async def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 11210,
    http_port: int = 8091,
    bucket: str = "default",
    vbuckets: int = 1024,
    users: Mapping[str, str] | None = None,
    seed: int = 0,
    idle_timeout: float | None = None,
    bucket_obj: Bucket | None = None,
    pcap: str | os.PathLike[str] | None = None,
    scenario: Scenario | str | os.PathLike[str] | None = None,
    control_open: bool = False,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    output_limit: int | None = None,
    auth_timeout: float | None = DEFAULT_AUTH_TIMEOUT,
    flush_interval: float | None = DEFAULT_FLUSH_INTERVAL,
    collections: Mapping[str, Sequence[str]] | None = None,
    docs: int = 0,
    storage: str = "couchstore",
    history_retention_bytes: int | None = None,
    history_retention_seconds: int | None = None,
    server_version: str | None = None,
    external_host: str | None = None,
    external_kv_port: int | None = None,
    external_http_port: int | None = None,
    external_kv_tls_port: int | None = None,
    external_https_port: int | None = None,
    **tls: Unpack[TlsArguments],
) -> AsyncIterator[MockDcpServer]:
    """Run a mock node until the block exits.

    Raises ``ServerError`` if a port is taken, ``ScenarioProblems`` for a bad scenario.
    ``scenario`` (a ``Scenario`` or a file): its bucket (name, vbuckets), seed and a
    fixed bucket clock are used, its steps up to the first ``wait``/``expect`` are
    applied before any client can connect, and the rest run in the background
    (``server.scenario_done`` is set when they end). ``pcap``: a file to record every
    KV connection into, as TCP flows (``tshark -r FILE -d tcp.port==KV_PORT,couchbase``).
    ``control_open``: the HTTP control API needs no credentials even when ``host`` is
    not a loopback address.

    Limits a data node has: ``max_connections`` at once (one more is closed at once);
    ``output_limit`` bytes of unsent output per connection before it is no longer read
    (None: 8 MiB); ``auth_timeout`` seconds to authenticate (None: no limit).
    ``flush_interval``: the bucket persists each write about this many seconds after it
    (a node's flusher); None = never by itself (only ``bucket.persist()``).
    ``bucket.flusher.pause()`` / ``resume()`` (the ``persistence`` step) hold and release it.
    ``collections``: scope name -> collection names the bucket has from the start (as
    ``Bucket(collections=...)``; a scenario's ``bucket:`` block declares its own).
    ``docs``: that many seeded Faker documents loaded (and persisted) before the block
    runs, as ``mockdcp serve --docs`` loads them; clients that connect meanwhile wait.
    ``storage`` (``couchstore`` or ``magma``) with ``history_retention_bytes`` /
    ``_seconds`` (Magma retains history by default): the bucket's backend, as
    ``Bucket(storage=...)``; a scenario's ``bucket:`` block declares its own.
    ``server_version``: what ``/pools`` and VERSION report (default 7.6.2).

    ``external_host`` (and the ``external_*_port`` keywords): the address clients
    outside the node's network reach it at, put in every cluster map as
    ``alternateAddresses.external`` (a port not given is the node's own).

    TLS (``TlsArguments``): ``tls=True`` serves KV over TLS on ``tls_port`` (11207)
    and HTTPS on ``https_port`` (18091; 0 = a free port) with a certificate signed by
    the CA kept in ``tls_dir`` (default ``$XDG_DATA_HOME/mockdcp``), or by
    ``tls_cert``/``tls_key``/``tls_ca`` files; ``tls_names``: more names the node
    certificate is for; ``client_cert_auth`` (``disable``, ``enable``, ``mandatory``)
    with ``client_cert_path``/``client_cert_prefix``/``client_cert_delimiter``: client
    certificate authentication; ``tls_handshake_timeout``: seconds. Raises
    ``ServerError`` for certificate files that cannot serve and options that need
    ``tls=True`` without it.
    """
    if docs < 0 or (docs and (scenario is not None or bucket_obj is not None)):
        raise ServerError(
            "docs is a count >= 0, for the default bucket only: a scenario seeds its own data"
        )
    if max_connections < 1 or (output_limit is not None and output_limit < 1):
        raise ServerError("max_connections and output_limit must be positive")
    if auth_timeout is not None and not auth_timeout > 0:
        raise ServerError(f"auth_timeout must be positive (or None), not {auth_timeout}")
    tune_process()  # the producer's allocator and numpy settings, once per process
    plan = _load_scenario(scenario)
    if plan is not None:
        seed = plan.seed
        from mockdcp.scenario import scenario_bucket

        model = bucket_obj or scenario_bucket(plan)
    else:
        try:
            model = bucket_obj or Bucket(
                bucket,
                vbuckets,
                seed=seed,
                clock=time.time,
                collections=collections or {},
                storage=storage,
                history_retention_bytes=history_retention_bytes,
                history_retention_seconds=history_retention_seconds,
            )
        except ModelError as exc:
            raise ServerError(str(exc)) from exc
    if flush_interval is not None and not flush_interval > 0:
        raise ServerError(f"flush_interval must be > 0 seconds or None, not {flush_interval!r}")
    model.flusher.interval = flush_interval
    model.pause_collector = collector_paused
    network = NetworkOptions.build(
        host,
        external_host=external_host,
        external_kv_port=external_kv_port,
        external_http_port=external_http_port,
        external_kv_tls_port=external_kv_tls_port,
        external_https_port=external_https_port,
        **tls,
    )
    with contextlib.ExitStack() as files:
        capture = _open_capture(pcap, host, files) if pcap is not None else None
        tls_setup = network.prepare_tls()
        http = HttpService(host, http_port, control_open=control_open, tls=tls_setup)
        files.callback(http.close)
        limits = _Limits(max_connections, output_limit, auth_timeout)
        options = _Options(
            host, port, http_port, users, idle_timeout, seed, plan, limits, network, server_version
        )
        async with _serve(options, model, capture, http) as server:
            if docs:
                await _load_documents(server, docs)
            yield server


async def _load_documents(server: MockDcpServer, docs: int) -> None:
    from mockdcp.data import load_documents

    server.kv.hold()  # connections wait for the data: ready means ready
    try:
        await load_documents(server.bucket, docs, server.seed)
    finally:
        server.kv.release()


def _load_scenario(scenario: Scenario | str | os.PathLike[str] | None) -> Scenario | None:
    from mockdcp.scenario import Scenario, load_scenario

    if scenario is None or isinstance(scenario, Scenario):
        return scenario
    return load_scenario(os.fspath(scenario))


@attrs.frozen
class _Options:
    host: str
    port: int
    http_port: int
    users: Mapping[str, str] | None
    idle_timeout: float | None
    seed: int
    scenario: Scenario | None
    limits: _Limits
    network: NetworkOptions
    #: what ``/pools`` and VERSION report (None: the node's default)
    version: str | None = None


@attrs.frozen
class _Limits:
    """What a data node bounds per connection and in all (``serve``'s docstring)."""

    max_connections: int
    output_limit: int | None
    auth_timeout: float | None


def _open_capture(
    path: str | os.PathLike[str], host: str, files: contextlib.ExitStack
) -> PcapWriter:
    from mockdcp.server._pcap import PcapWriter

    try:
        out = files.enter_context(open(path, "wb"))  # noqa: SIM115 - closed by the stack
        return PcapWriter(out, ipv6=":" in host)
    except OSError as exc:
        raise ServerError(f"cannot write the packet capture {path}: {exc}") from exc


@contextlib.asynccontextmanager
async def _serve(
    options: _Options, model: Bucket, capture: PcapWriter | None, http: HttpService
) -> AsyncIterator[MockDcpServer]:
    host = options.host
    kv_listeners = await _listen(host, options.port)
    tls = http.tls
    tls_listeners = [] if tls is None else await _listen(host, tls.options.port)
    tls_port = _port_of(tls_listeners) if tls_listeners else None
    wakeups = Wakeups()
    node = Node(
        bucket=model,
        users=dict(options.users or DEFAULT_USERS),
        host=host if host not in ("0.0.0.0", "::") else "127.0.0.1",
        kv_port=_port_of(kv_listeners),
        http_port=http.port,
        network=node_network(options.network, tls_port, http.https_port),
        wake=wakeups.wake,
    )
    if options.version is not None:
        node.version = options.version
    if options.idle_timeout is not None:
        node.idle_timeout = options.idle_timeout
    limits = options.limits
    kv = KvService(
        node,
        wakeups,
        pcap=capture,
        max_connections=limits.max_connections,
        auth_timeout=limits.auth_timeout,
        output_limit=limits.output_limit,
        tls=tls,
    )
    server = MockDcpServer(
        node=node,
        kv=kv,
        host=node.host,
        kv_port=node.kv_port,
        http_port=node.http_port,
        seed=options.seed,
        tls_port=tls_port,
        https_port=http.https_port,
        tls=tls,
    )
    plan = options.scenario
    later: list[Step] = []
    first_wait = 0
    if plan is not None:
        runner = server.runner
        runner.check(plan.steps, plan.source)
        first_wait = next(
            (i for i, s in enumerate(plan.steps) if s.GROUP == "control" and s.NAME != "label"),
            len(plan.steps),
        )
        runner.apply_now(plan.steps[:first_wait], plan.source)
        later = list(plan.steps[first_wait:])
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(trio.serve_listeners, kv.handle, kv_listeners))
            if tls_listeners:
                nursery.start_soon(partial(trio.serve_listeners, kv.handle_tls, tls_listeners))
            nursery.start_soon(partial(http.run, server))
            if plan is not None:
                nursery.start_soon(server.run_rest, later, plan.source, first_wait)
            else:
                server.scenario_done.set()
            if model.flusher.enabled:  # the bucket persists by itself (model/_flusher.py)
                nursery.start_soon(run_flusher, model.flusher)
            try:
                yield server
            finally:
                node.close_all("server shutting down")
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise_unwrapped(group)  # the block's own exception, not a group around it
