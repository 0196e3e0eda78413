"""Running a mock node: the listeners, the bucket, and the handle tests hold.

``serve(...)`` is the async context manager of docs/python.md: inside a
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
from typing import TYPE_CHECKING, Any, Unpack

import attrs
import trio

from mockdcp.model import DEFAULT_FLUSH_INTERVAL, Bucket, Users, as_users, ephemeral_settings
from mockdcp.producer import Node
from mockdcp.protocol import (
    DEFAULT_PROFILE,
    ServerProfile,
    UnknownServerVersion,
    history_unsupported,
    resolve_server_version,
)
from mockdcp.server._flusher import run_flusher
from mockdcp.server._http import HttpService
from mockdcp.server._kv import (
    DEFAULT_AUTH_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    KvService,
    MemoryTrim,
    Wakeups,
)
from mockdcp.server._network import NetworkOptions, TlsArguments, node_network
from mockdcp.server._nodes import NodeShell
from mockdcp.server._timers import WallClockTimers
from mockdcp.util import ModelError, ServerError, collector_paused, raise_unwrapped, tune_process

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from mockdcp.model import BucketSpec, Oracle
    from mockdcp.producer import Buckets, ConnectionStatistics, Topology
    from mockdcp.protocol import StreamEndReason
    from mockdcp.scenario import (
        ConsumerProgress,
        ConsumerStart,
        ExpectationResult,
        Scenario,
        Step,
        StepRunner,
    )
    from mockdcp.server._corpus import Fingerprint
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
    #: the runners of the other buckets (``runner_for``)
    _runners: dict[str, StepRunner] = attrs.field(factory=dict)
    #: set when the scenario's steps have all run (at once without a scenario)
    scenario_done: trio.Event = attrs.field(factory=trio.Event)
    #: every node's listeners, in join order (``nodes``)
    shells: list[NodeShell] = attrs.field(factory=list)
    #: the corpus served (``mockdcp serve --corpus``): path, whether on disk, its cache,
    #: and what changed in it since start (``GET /mock/state``'s ``corpus``); None: none
    corpus: dict[str, object] | None = None

    @property
    def topology(self) -> Topology:
        """The cluster the nodes make: the map, its revision, the topology steps."""
        return self.node.topology

    def hold(self) -> None:
        """Until ``release``, connections accepted on any node wait before bootstrap
        (the initial data is loading)."""
        for shell in self.shells:
            shell.kv.hold()

    def release(self) -> None:
        for shell in self.shells:
            shell.kv.release()

    @property
    def nodes(self) -> list[NodeInfo]:
        """Every node, numbered from 0 in join order, with its ports and status."""
        return [NodeInfo.of(i, shell) for i, shell in enumerate(self.shells)]

    async def run_rest(
        self,
        steps: list[Step],
        source: str,
        first: int,
        consumer_starts_within: float | ConsumerStart | None = None,
    ) -> None:
        """Run a scenario's steps after its initial ones; a failure is recorded in the
        progress (``state()``), never raised into the server."""
        from mockdcp.scenario import StepFailed

        try:
            await self.runner.apply(
                steps, source, first=first, consumer_starts_within=consumer_starts_within
            )
        except StepFailed as exc:
            log.warning("scenario stopped: %s", exc)
        finally:
            self.runner.progress.finished = True
            self.scenario_done.set()

    @property
    def bucket(self) -> Bucket:
        return self.node.bucket

    @property
    def buckets(self) -> Buckets:
        """The cluster's buckets (``Buckets``: names, create, delete)."""
        return self.node.buckets

    def bucket_node(self, bucket: str | None = None) -> Node:
        """The first node of ``bucket`` (None: the first bucket's, ``node``);
        ``ModelError`` for a bucket there is not."""
        if bucket is None:
            return self.node
        return self.buckets.first_node(bucket)

    def runner_for(self, bucket: str | None = None) -> StepRunner:
        """The step runner of ``bucket`` (None: the first bucket's, ``runner``): each
        bucket's steps, waits and expectations are its own."""
        node = self.bucket_node(bucket)
        if node is self.node:
            return self.runner
        from mockdcp.scenario import StepRunner

        runner = self._runners.get(node.bucket.name)
        if runner is None or runner.node is not node:
            runner = self._runners[node.bucket.name] = StepRunner(node, seed=self.seed)
        return runner

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

    async def apply(self, *steps: Step | Mapping[str, object], bucket: str | None = None) -> None:
        """Apply steps (objects, or ``{name: {fields}}`` mappings as in YAML/JSON) in
        order, to ``bucket`` (None: the first bucket). The whole list is checked first:
        ``ScenarioProblems`` changes nothing. ``wait``/``expect`` steps suspend until
        met; ``StepFailed`` if a step cannot be applied or a wait times out (the server
        keeps running); ``ModelError`` for a bucket there is not."""
        from mockdcp.scenario import parse_steps

        runner = self.runner_for(bucket)
        try:
            await runner.apply(parse_steps(list(steps), source="<apply>"), "<apply>")
        finally:
            for shell in self.shells:  # a node taken down refuses once this returns
                with trio.fail_after(10):
                    await shell.settled()

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

    def oracle(self, bucket: str | None = None) -> Oracle:
        """What a correct consumer of ``bucket`` (None: the first) holds: (collection,
        key) -> the newest live item, and ``.rows()``, the rows ``GET /mock/oracle``
        and the pipeline use."""
        return self.bucket_node(bucket).bucket.oracle()

    def expectations(self, bucket: str | None = None) -> list[ExpectationResult]:
        """The outcomes of the ``expect`` steps applied so far (to ``bucket``)."""
        if bucket is not None:
            return list(self.runner_for(bucket).progress.expectations)
        return [] if self._runner is None else list(self._runner.progress.expectations)

    def state(self, bucket: str | None = None) -> dict[str, object]:
        """A JSON-ready snapshot of ``bucket`` (None: the first): connections and their
        streams, per-vbucket seqnos, the scenario's progress."""
        return server_state(self, bucket)

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
        self.node.cut_branch(
            vbucket, lose_after=lose_after, lose_unpersisted=lose_unpersisted, disconnect=disconnect
        )

    def disconnect_all(self, reason: str = "disconnect step") -> None:
        """Drop every client connection (the ``disconnect`` fault)."""
        self.node.disconnect(reason)

    def drop_cursor(
        self, vbucket: int | None = None, connection: str | None = None
    ) -> list[tuple[int, str]]:
        """The memory-to-disk switch for chosen streams, now (``Node.drop_cursor``)."""
        return self.node.steps.drop_cursor(None if vbucket is None else [vbucket], connection)

    def end_stream(self, vbucket: int, reason: StreamEndReason) -> int:
        """End the live streams of ``vbucket`` on every connection with ``reason``."""
        return self.node.steps.end_streams([vbucket], reason)

    def connections(self) -> list[ConnectionStatistics]:
        return [c.statistics() for c in self.node.matching()]


def server_state(server: MockDcpServer, bucket: str | None = None) -> dict[str, object]:
    """See ``MockDcpServer.state`` (the shape of ``GET /mock/state``)."""
    from mockdcp.server._control_state import server_state as state

    return state(server, bucket)


@attrs.frozen(kw_only=True)
class NodeInfo:
    """One node of a running server: its number, name, status and ports."""

    number: int
    name: str
    status: str
    host: str
    kv_port: int
    http_port: int
    tls_port: int | None = None
    https_port: int | None = None

    @classmethod
    def of(cls, number: int, shell: NodeShell) -> NodeInfo:
        node = shell.node
        return cls(
            number=number,
            name=node.name,
            status=node.topology.status(node).value,
            host=node.host,
            kv_port=node.kv_port,
            http_port=node.http_port,
            tls_port=node.network.kv_ssl,
            https_port=node.network.mgmt_ssl,
        )

    @property
    def connection_string(self) -> str:
        return f"couchbase://{self.host}:{self.kv_port}"

    def as_json(self) -> dict[str, object]:
        return attrs.asdict(self)


@contextlib.asynccontextmanager
async def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 11210,
    http_port: int = 8091,
    bucket: str = "default",
    vbuckets: int = 1024,
    users: Mapping[str, str] | Users | None = None,
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
    backfills_per_connection: int = 1,
    bucket_type: str = "couchbase",
    eviction_policy: str | None = None,
    memory_quota: int | None = None,
    ephemeral_purge_age: int | None = None,
    server_version: str | None = None,
    external_host: str | None = None,
    external_kv_port: int | None = None,
    external_http_port: int | None = None,
    external_kv_tls_port: int | None = None,
    external_https_port: int | None = None,
    nodes: int = 1,
    replicas: int = 0,
    buckets: Sequence[BucketSpec | str] = (),
    corpus: str | os.PathLike[str] | None = None,
    on_disk: bool = False,
    clock: str = "wall",
    clock_start: str | float | None = None,
    consumer_starts_within: float | ConsumerStart | None = None,
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
    not a loopback address. ``users``: the cluster's users (a ``Users`` with their
    roles, or name -> password, each an admin; default ``Administrator``/``password``);
    a scenario's consumer user is added to them.

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
    ``backfills_per_connection``: backfills one connection reads at once (kv_engine
    ``dcp_backfill_in_progress_per_connection_limit``, 1; more stages a node before
    MB-57304), as ``Bucket(backfills_per_connection=...)``.
    ``bucket_type`` ``ephemeral`` (``mockdcp.model._ephemeral``): no disk and no
    flusher, backfills from memory, tombstones purged by age (``ephemeral_purge_age``
    seconds, a day by default), OBSERVE_SEQNO's persisted seqno 0, a restart losing
    everything; ``eviction_policy`` (``noEviction``: writes refused with TMPFAIL when
    full, ``nruEviction``: the oldest documents deleted) with ``memory_quota`` bytes.
    ``server_version``: the Couchbase Server release the nodes behave as: ``7.0``,
    ``7.2``, ``7.6`` or ``8.0`` (the default, the newest), or a full version string such
    as ``7.2.4-7070-enterprise`` reported as given (``mockdcp.protocol.PROFILES``: what
    HELLO grants, which DCP controls and stream flags are taken, what ``/pools`` and the
    cluster map report); a scenario's ``bucket: {server_version: ...}`` when not given.
    An unknown version, or a bucket retaining history on a version before 7.2, is a
    ``ServerError``.
    ``consumer_starts_within``: a consumer is started with the scenario (``mockdcp run
    -- CMD``, ``mockdcp check``): a ``wait`` on the consumer counts its timeout from the
    consumer's first connection, which must come within these seconds (a JVM, or an
    interpreter on a loaded machine, takes seconds to start); None: from the wait's start;
    a ``ConsumerStart``: its seconds, and with ``on_stream`` (``mockdcp explore``'s) the
    schedule, timed waits too, counts from the consumer's first stream instead.
    ``clock``: ``wall`` (the default: the bucket's time is the wall clock, and the server
    runs the node's timers as they fall due: ``mockdcp/server/_timers.py``) or
    ``virtual``: the bucket's clock starts at ``clock_start`` (an ISO 8601 time or
    seconds since the epoch; default now) and moves only by the ``advance_clock`` step,
    which runs the node's timers meanwhile (the expiry pager, compaction purging old
    tombstones, Magma's retention by age). Connection timers (noops, flow control) keep
    real time. A scenario's bucket clock is always virtual (its ``bucket:`` block says
    ``clock_start``).
    ``corpus``: a Parquet corpus directory (``mockdcp corpus``) loaded before the block
    runs instead of Faker documents, as ``mockdcp serve --corpus`` loads it; with
    ``on_disk``, served as the bucket's disk from its import's files (imported once into
    ``$MOCKDCP_CACHE``). It is checked first (``PipelineError`` naming the file and
    column) and watched while served (``server.corpus``, ``GET /mock/state``).

    ``nodes``: data nodes in this process, each with its own KV and HTTP ports
    (consecutive from ``port`` and ``http_port``, or each free with 0), serving one
    cluster map in which each vbucket has an active and ``replicas`` replica copies
    (0..min(3, nodes - 1)), placed as ns_server balances them; ``server.nodes`` lists
    them. The topology steps (``add_node``, ``rebalance``, ``failover_node``,
    ``node_down``...) change it.

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
    specs = _bucket_specs(buckets)
    if specs:
        bucket = specs[0].name
    if docs < 0 or (docs and (scenario is not None or bucket_obj is not None)):
        raise ServerError(
            "docs is a count >= 0, for the default bucket only: a scenario seeds its own data"
        )
    fingerprint = _check_corpus(corpus, on_disk, scenario=scenario is not None, docs=docs)
    model_clock = bucket_clock(clock, clock_start, given=scenario is not None or bucket_obj)
    if max_connections < 1 or (output_limit is not None and output_limit < 1):
        raise ServerError("max_connections and output_limit must be positive")
    if auth_timeout is not None and not auth_timeout > 0:
        raise ServerError(f"auth_timeout must be positive (or None), not {auth_timeout}")
    _check_nodes(
        nodes,
        replicas,
        external_ports=(
            external_kv_port,
            external_http_port,
            external_kv_tls_port,
            external_https_port,
        ),
    )
    tune_process()  # the producer's allocator and numpy settings, once per process
    plan = _load_scenario(scenario)
    cluster_users = as_users(dict(DEFAULT_USERS) if users is None else users)
    if plan is not None:
        from mockdcp.scenario import scenario_users

        try:
            scenario_users(plan, cluster_users)
        except ModelError as exc:
            raise ServerError(f"{plan.source}: consumer user: {exc}") from exc
        seed = plan.seed
        from mockdcp.scenario import scenario_bucket

        model = bucket_obj or scenario_bucket(plan)
        nodes, replicas = plan.bucket.nodes, plan.bucket.replicas  # the scenario's cluster
    else:
        try:
            # the collector paused: nothing made here is garbage, and its passes over
            # the new vbuckets' parts (and every module's objects) cost as much as
            # making them (a fixture's server: 0.04 s of its 0.06 s of CPU)
            with collector_paused():
                model = bucket_obj or Bucket(
                    bucket,
                    vbuckets,
                    seed=seed,
                    clock=model_clock,
                    collections=collections or {},
                    storage=storage,
                    history_retention_bytes=history_retention_bytes,
                    history_retention_seconds=history_retention_seconds,
                    backfills_per_connection=backfills_per_connection,
                    bucket_type=bucket_type,
                    ephemeral=ephemeral_settings(
                        bucket_type, eviction_policy, memory_quota, ephemeral_purge_age
                    ),
                )
        except ModelError as exc:
            raise ServerError(str(exc)) from exc
    profile = _server_profile(server_version or (plan.bucket.server_version if plan else None))
    problem = history_unsupported(profile, retains_history=model.retains_history)
    if problem is not None:
        raise ServerError(problem)
    if flush_interval is not None and not flush_interval > 0:
        raise ServerError(f"flush_interval must be > 0 seconds or None, not {flush_interval!r}")
    # an ephemeral bucket has no flusher (kv_engine ``ephemeral_bucket.cc``: no disk)
    model.flusher.interval = flush_interval if model.ephemeral is None else None
    model.pause_collector = collector_paused
    network = NetworkOptions.build(
        host,
        external_host=external_host,
        external_kv_port=external_kv_port,
        external_http_port=external_http_port,
        external_kv_tls_port=external_kv_tls_port,
        external_https_port=external_https_port,
        kv_port=port,
        http_port=http_port,
        nodes=nodes,
        **tls,
    )
    with contextlib.ExitStack() as files:
        capture = _open_capture(pcap, host, files) if pcap is not None else None
        tls_setup = network.prepare_tls()
        http = HttpService(host, http_port, control_open=control_open, tls=tls_setup)
        files.callback(http.close)
        limits = _Limits(max_connections, output_limit, auth_timeout)
        options = _Options(
            host,
            port,
            http_port,
            cluster_users,
            idle_timeout,
            seed,
            plan,
            limits,
            network,
            control_open,
            profile,
            consumer_starts_within,
        )
        if plan is not None and len(specs) > 1:
            raise ServerError("a scenario serves its own bucket: give no more --bucket")
        async with _serve(options, model, capture, http, nodes, replicas, specs[1:]) as server:
            if docs:
                await _load_documents(server, docs)
            if corpus is None or fingerprint is None:
                yield server
                return
            from mockdcp.server._corpus import load_corpus_into, watch_corpus

            await load_corpus_into(server, corpus, on_disk=on_disk)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch_corpus, server, corpus, fingerprint)
                try:
                    yield server
                finally:
                    nursery.cancel_scope.cancel()


def _server_profile(version: str | None) -> ServerProfile:
    """The profile ``server_version`` names (the newest when None); ``ServerError``
    naming an unknown one."""
    if version is None:
        return DEFAULT_PROFILE
    try:
        return resolve_server_version(version)
    except UnknownServerVersion as exc:
        raise ServerError(str(exc)) from None


def bucket_clock(clock: str, start: str | float | None, *, given: object) -> Callable[[], float]:
    """The bucket clock ``serve``'s ``clock`` and ``clock_start`` ask for
    (``mockdcp.model.make_clock``); ``ServerError`` for a bad one, or either with a
    scenario or a bucket given (they bring their own clock)."""
    from mockdcp.model import make_clock

    if given and (clock != "wall" or start is not None):
        raise ServerError(
            "clock and clock_start are for the default bucket: a scenario's bucket clock "
            "is virtual (its bucket block says clock_start), a bucket given has its own"
        )
    try:
        return make_clock(clock, start, time.time)
    except ModelError as exc:
        raise ServerError(str(exc)) from None


def _check_corpus(
    corpus: str | os.PathLike[str] | None, on_disk: bool, *, scenario: bool, docs: int
) -> Fingerprint | None:
    """``serve``'s corpus options checked, and the corpus itself (before anything starts:
    a bad corpus is an error, not a half-loaded server); its fingerprint."""
    if corpus is None:
        if on_disk:
            raise ServerError("--on-disk serves a --corpus DIR (on_disk needs corpus=)")
        return None
    if scenario:
        raise ServerError(
            "--corpus and --scenario: a scenario's bucket block and steps make its bucket "
            "(serve the corpus without --scenario)"
        )
    if docs:
        raise ServerError("docs and corpus: the corpus is the bucket's data (give one)")
    from mockdcp.server._corpus import check_corpus_files

    return check_corpus_files(corpus)


async def _load_documents(server: MockDcpServer, docs: int) -> None:
    from mockdcp.data import load_documents

    server.hold()  # connections wait for the data: ready means ready
    try:
        await load_documents(server.bucket, docs, server.seed)
    finally:
        server.release()


def _load_scenario(scenario: Scenario | str | os.PathLike[str] | None) -> Scenario | None:
    if scenario is None:  # the scenario package (0.1 s of imports) only for a scenario
        return None
    from mockdcp.scenario import Scenario, load_scenario

    if isinstance(scenario, Scenario):
        return scenario
    return load_scenario(os.fspath(scenario))


@attrs.frozen
class _Options:
    host: str
    port: int
    http_port: int
    users: Users
    idle_timeout: float | None
    seed: int
    scenario: Scenario | None
    limits: _Limits
    network: NetworkOptions
    control_open: bool
    #: the server version the nodes behave as and report
    profile: ServerProfile = DEFAULT_PROFILE
    #: seconds a consumer started with the scenario has to connect (``serve``)
    consumer_starts_within: float | ConsumerStart | None = None


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


def _check_nodes(nodes: int, replicas: int, *, external_ports: Sequence[int | None]) -> None:
    """``serve``'s cluster shape: a clear error before anything listens."""
    from mockdcp.model import MAX_REPLICAS

    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise ServerError(f"nodes is a count >= 1, not {nodes!r}")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise ServerError(f"replicas is a count >= 0, not {replicas!r}")
    if replicas > min(MAX_REPLICAS, nodes - 1):
        raise ServerError(
            f"{replicas} replica(s) need {replicas + 1} nodes (and at most {MAX_REPLICAS}):"
            f" the cluster has {nodes}"
        )
    if nodes > 1 and any(p is not None for p in external_ports):
        raise ServerError(
            "external ports map one node's ports: with several nodes give only"
            " external_host (each node advertises its own ports there)"
        )


def _bucket_specs(buckets: Sequence[BucketSpec | str]) -> list[BucketSpec]:
    """``serve(buckets=...)``: each a ``BucketSpec`` or ``NAME[:TYPE]``; ``ServerError``
    naming a name a node refuses, an unknown type, or a name given twice."""
    from mockdcp.model import BucketSpec

    specs: list[BucketSpec] = []
    try:
        for item in buckets:
            spec = BucketSpec.parse(item) if isinstance(item, str) else item
            spec.check()
            specs.append(spec)
    except ModelError as exc:
        raise ServerError(f"bucket: {exc}") from exc
    names = [s.name for s in specs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ServerError(f"bucket {twice[0]!r} given twice")
    return specs


@attrs.define
class _Flushers:
    """The flusher task of each bucket (``_flusher.run_flusher``): started when a bucket
    is made, cancelled when it is deleted."""

    nursery: trio.Nursery | None = None
    pending: list[Bucket] = attrs.field(factory=list)
    scopes: dict[int, trio.CancelScope] = attrs.field(factory=dict)

    def run(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        for model in self.pending:
            self.start(model)
        self.pending.clear()

    def start(self, model: Bucket) -> None:
        model.pause_collector = collector_paused
        if not model.flusher.enabled:
            return
        if self.nursery is None:
            self.pending.append(model)
            return
        scope = self.scopes[id(model)] = trio.CancelScope()
        self.nursery.start_soon(self._flush, model, scope)

    def stop(self, model: Bucket) -> None:
        scope = self.scopes.pop(id(model), None)
        if scope is not None:
            scope.cancel()
        elif model in self.pending:
            self.pending.remove(model)

    @staticmethod
    async def _flush(model: Bucket, scope: trio.CancelScope) -> None:
        with scope:
            await run_flusher(model.flusher)


def _port(base: int, index: int) -> int:
    """Node ``index``'s port: consecutive from ``base``, or free (0) with 0."""
    return base + index if base else 0


@attrs.define
class _Cluster:
    """What ``_serve`` needs to make a node's shell (at start and for ``add_node``)."""

    options: _Options
    tls: TlsSetup | None
    wakeups: Wakeups
    capture: PcapWriter | None
    advertised: str
    topology: Topology
    first: Node | None = None
    #: the process's heap trimmer, shared by every node's KV service
    trim: MemoryTrim = attrs.field(factory=MemoryTrim)

    def shell(self, index: int, name: str, http: HttpService | None = None) -> NodeShell:
        """Bind node ``index``'s ports (KV, TLS KV, HTTP, HTTPS) and make its node and
        shell; ``http``: its management port, already bound (node 0's)."""
        from mockdcp.server._http import bind_sockets

        options, tls = self.options, self.tls
        host = options.host
        tls_base = None if tls is None else tls.options.port
        bound: list[Any] = []
        try:
            kv_sockets = bind_sockets(host, _port(options.port, index))
            bound += kv_sockets
            tls_sockets = [] if tls_base is None else bind_sockets(host, _port(tls_base, index))
            bound += tls_sockets
            if http is None:
                http = self._http(index, None)
        except BaseException:
            for sock in bound:
                sock.close()
            raise
        kv_port = int(kv_sockets[0].getsockname()[1])
        tls_port = int(tls_sockets[0].getsockname()[1]) if tls_sockets else None
        network = node_network(options.network, tls_port, http.https_port)
        if self.first is None:
            node = Node(
                bucket=self.topology.cluster.bucket,
                users=options.users,
                name=name,
                host=self.advertised,
                kv_port=kv_port,
                http_port=http.port,
                network=network,
                wake=self.wakeups.wake,
                topology=self.topology,
            )
            if options.idle_timeout is not None:
                node.idle_timeout = options.idle_timeout
            node.profile = options.profile
            self.first = node
        else:
            node = self.first.sibling(
                name, host=self.advertised, kv_port=kv_port, http_port=http.port, network=network
            )
        limits = options.limits
        kv = KvService(
            node,
            self.wakeups,
            pcap=self.capture,
            max_connections=limits.max_connections,
            auth_timeout=limits.auth_timeout,
            output_limit=limits.output_limit,
            tls=tls,
            trim=self.trim,
        )
        own_http = http

        def rebind(held: HttpService) -> HttpService:
            return self._http(index, own_http, held)

        listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(s)) for s in kv_sockets]
        tls_listeners = [
            trio.SocketListener(trio.socket.from_stdlib_socket(s)) for s in tls_sockets
        ]
        return NodeShell(node, kv, http, listeners, tls_listeners, rebind)

    def _http(
        self, index: int, old: HttpService | None, held: HttpService | None = None
    ) -> HttpService:
        """Node ``index``'s management port(s): the ports ``old`` had, or the next ones;
        ``held``'s sockets, listening again, when it holds them (a node back up)."""
        options, tls = self.options, self.tls
        if held is not None and held.sockets:
            return HttpService(
                options.host, held.port, control_open=options.control_open, tls=tls, held=held
            )
        if old is not None:
            port, https = old.port, old.https_port
        else:
            port = _port(options.http_port, index)
            https = None if tls is None else _port(tls.options.https_port, index)
        return HttpService(
            options.host, port, control_open=options.control_open, tls=tls, https_port=https
        )


@contextlib.asynccontextmanager
async def _serve(
    options: _Options,
    model: Bucket,
    capture: PcapWriter | None,
    http: HttpService,
    num_nodes: int = 1,
    replicas: int = 0,
    more_buckets: Sequence[BucketSpec] = (),
) -> AsyncIterator[MockDcpServer]:
    from mockdcp.model import Cluster
    from mockdcp.producer import Topology

    host = options.host
    tls = http.tls
    names = [f"node{i}" for i in range(num_nodes)]
    with collector_paused():  # as for the bucket (``serve``): its map and copies
        cluster = Cluster(model, names, replicas, seed=options.seed)
    cluster.auto_replicate = True
    advertised = host if host not in ("0.0.0.0", "::") else "127.0.0.1"
    maker = _Cluster(options, tls, Wakeups(), capture, advertised, Topology(cluster))
    shells: list[NodeShell] = []
    try:
        for i in range(num_nodes):
            shells.append(maker.shell(i, f"node{i}", http if i == 0 else None))  # noqa: PERF401
    except BaseException:
        for shell in shells[1:]:
            shell.http.close()
        raise
    node = shells[0].node
    topology = node.topology
    flushers = _Flushers()
    node.buckets.seed = options.seed
    node.buckets.on_create.append(flushers.start)
    node.buckets.on_delete.append(flushers.stop)
    flushers.start(model)
    timers = WallClockTimers()  # the pager, compaction, the purger on the wall clock
    node.buckets.on_create.append(timers.add)
    node.buckets.on_delete.append(timers.remove)
    timers.add(model)
    for shell in shells:
        topology.join(shell.node)
    first = node.buckets.spec(model.name)
    if first is not None:  # its replicas as the cluster places them, as it reports them
        node.buckets.declare(attrs.evolve(first, replicas=replicas, storage=model.storage))
    for spec in more_buckets:  # checked by ``_bucket_specs``: names new and valid
        node.buckets.create(spec)
    server = MockDcpServer(
        node=node,
        kv=shells[0].kv,
        host=node.host,
        kv_port=node.kv_port,
        http_port=node.http_port,
        seed=options.seed,
        tls_port=node.network.kv_ssl,
        https_port=http.https_port,
        tls=tls,
        shells=shells,
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

            def spawn(name: str) -> Node:
                shell = maker.shell(len(server.shells), name)
                server.shells.append(shell)
                nursery.start_soon(shell.supervise, server)
                return shell.node

            def poke() -> None:
                for shell in server.shells:
                    shell.poke()

            topology.spawn = spawn
            topology.on_change.append(poke)
            for shell in shells:
                nursery.start_soon(shell.supervise, server)
            if plan is not None:
                nursery.start_soon(
                    server.run_rest, later, plan.source, first_wait, options.consumer_starts_within
                )
            else:
                server.scenario_done.set()
            flushers.run(nursery)  # each bucket persists by itself (model/_flusher.py)
            nursery.start_soon(timers.run)  # and runs its timers (model/_timers.py)
            try:
                yield server
            finally:
                for each in node.buckets.every_node():
                    each.close_own("server shutting down")
                topology.on_change.remove(poke)
                topology.spawn = None
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise_unwrapped(group)  # the block's own exception, not a group around it
    finally:
        for shell in server.shells:  # a shell whose task never ran still holds sockets
            shell.close()
