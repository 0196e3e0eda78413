"""``mockdcp serve``, ``mockdcp tail`` and ``mockdcp ca``: the programs behind the CLI."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

import trio

from mockdcp.util import raise_unwrapped

#: the cyclic collector's thresholds while ``mockdcp serve`` serves (``gc.set_threshold``:
#: a young collection every that many allocations, and an older generation's every that
#: many of the one below). What a stream makes lives until its connection closes; at
#: CPython's (700, 10, 10) it was walked again by every tenth young collection, and by a
#: full one every hundredth (the start, frozen, is left out of the count that would space
#: them: ``gc.freeze``): about 8 of a short stream's 90 CPU µs over the default 1,024
#: vbuckets. These take 3 µs off (``tests/bench/stream_cost.py``'s server, five
#: alternations: 84.7 against 87.7 µs a collection-aware stream, 94.2 against 98.2 a
#: first pass; a young generation of 20,000 gained no more, 700 with these older ones
#: little). A stream of many items is unmoved (``mockdcp bench --items 100000
#: --vbuckets 64``, five alternations: 637k against 636k events per server CPU second).
#: Full runs this rare leave cyclic garbage long: a closed connection is released from
#: its cycles by the shell (``Connection.release``), not left to them.
#: The pytest fixture's server, in the test's own process, leaves its collector be
SERVE_COLLECTOR_THRESHOLDS = (2_000, 50, 20)

if TYPE_CHECKING:
    import argparse
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from mockdcp.data import Workers
    from mockdcp.model import Bucket, Users
    from mockdcp.server import Identity, MockDcpServer


def _ready_line(server: MockDcpServer, args: argparse.Namespace) -> str:
    info = {
        "kv_port": server.kv_port,
        "http_port": server.http_port,
        "host": server.host,
        "bucket": server.bucket.name,
        "buckets": server.buckets.names,
        "vbuckets": server.bucket.num_vbuckets,
        "connection_string": server.connection_string,
        "http": server.http_url,
        "nodes": [n.as_json() for n in server.nodes],
        "replicas": server.topology.cluster.map.num_replicas,
    }
    tls = server.tls
    if tls is not None:
        info.update(
            tls_port=server.tls_port,
            https_port=server.https_port,
            tls_connection_string=server.tls_connection_string,
            https=server.https_url,
            ca_file=None if tls.ca_file is None else str(tls.ca_file),
        )
    if args.json:
        return json.dumps({"event": "ready", **info})
    line = (
        f"mockdcp ready: kv {server.host}:{server.kv_port} http {server.host}:{server.http_port} "
        f"bucket {info['bucket']} ({info['vbuckets']} vbuckets) {server.connection_string}"
    )
    for n in server.nodes[1:]:
        line += f" node{n.number} kv {n.host}:{n.kv_port} http {n.host}:{n.http_port}"
    if len(server.nodes) > 1:
        line += f" ({info['replicas']} replica(s))"
    if tls is not None:
        line += (
            f" tls {server.host}:{server.tls_port} https {server.host}:{server.https_port} "
            f"{server.tls_connection_string} ca {tls.ca_file}"
        )
    return line


def _network(args: argparse.Namespace) -> dict[str, Any]:
    """serve()'s alternate-address and TLS keywords from the command line (serve says
    which need ``--tls``)."""
    return {
        "external_host": args.external_host,
        "external_kv_port": args.external_kv_port,
        "external_http_port": args.external_http_port,
        "external_kv_tls_port": args.external_kv_tls_port,
        "external_https_port": args.external_https_port,
        "tls": args.tls,
        "tls_port": args.tls_port,
        "https_port": args.https_port,
        "tls_dir": args.tls_dir,
        "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "tls_ca": args.tls_ca,
        "tls_names": args.tls_names,
        "client_cert_auth": args.client_cert_auth,
        "client_cert_path": args.client_cert_path,
        "client_cert_prefix": args.client_cert_prefix,
        "client_cert_delimiter": args.client_cert_delimiter,
    }


async def _serve(args: argparse.Namespace) -> None:
    from mockdcp.cli import _live
    from mockdcp.model import Bucket, ephemeral_settings, make_clock
    from mockdcp.server import serve

    if args.json:
        _live.use_json_logs()

    scenario = getattr(args, "scenario", None)
    specs = args.bucket or []
    clock = make_clock(
        getattr(args, "clock", "wall"), getattr(args, "clock_start", None), time.time
    )
    bucket = (
        None
        if scenario
        else Bucket(
            specs[0].name if specs else "default",
            args.vbuckets,
            seed=args.seed,
            clock=clock,
            collections=getattr(args, "collections", None) or {},
            storage=args.storage,
            history_retention_bytes=args.history_retention_bytes,
            history_retention_seconds=args.history_retention_seconds,
            backfills_per_connection=args.backfills_per_connection,
            bucket_type=args.bucket_type,
            ephemeral=ephemeral_settings(
                args.bucket_type,
                args.eviction_policy,
                args.memory_quota,
                args.ephemeral_purge_age,
            ),
        )
    )
    corpus = getattr(args, "corpus", None)
    _print_corpus_log()
    docs = args.docs if bucket is not None and not corpus else 0
    workers: AbstractAsyncContextManager[Workers | None] = contextlib.nullcontext()
    if docs:  # without documents, the document generator is not even imported
        from mockdcp.data import early_worker

        workers = early_worker(docs, args.seed, args.vbuckets)
    async with (
        workers as worker,
        serve(
            host=args.host,
            port=args.port,
            http_port=args.http_port,
            users=users_option(args.user, args.password),
            bucket_obj=bucket,
            pcap=args.pcap,
            control_open=args.control_open,
            flush_interval=args.flush_interval or None,
            scenario=scenario,
            nodes=args.nodes,
            replicas=args.replicas,
            buckets=specs,
            server_version=args.server_version,
            corpus=corpus,
            on_disk=bool(getattr(args, "on_disk", False)),
            **_limits(args),
            **_network(args),
        ) as server,
    ):
        bucket = server.bucket
        persist_later = False
        if args.docs and not scenario and not corpus:
            server.hold()  # connections wait for the data: ready means ready
            try:
                persist_later = await _load(bucket, args.docs, args.seed, worker)
            finally:
                server.release()
            loaded = f"mockdcp loaded {args.docs} documents"
            if args.json:
                loaded = json.dumps({"event": "loaded", "docs": args.docs})
            print(loaded, file=sys.stderr, flush=True)
        print(_ready_line(server, args), flush=True)
        # after "ready", before the first client: the codec and numpy (frame patching)
        from mockdcp.producer import preload
        from mockdcp.util import load_numpy

        preload()
        load_numpy()
        if args.collector_paused:  # since the start (``_main.main``): ready now
            # what the start made (modules, the bucket's vbuckets) lives as long as the
            # process: frozen out of later collections, each of which walked it all again
            # (0.05 s a full one, the first while the first client streams); a bucket a
            # step deletes is then freed by its reference counts, its cycles kept
            gc.freeze()
            gc.set_threshold(*SERVE_COLLECTOR_THRESHOLDS)
            gc.enable()
        async with trio.open_nursery() as nursery:
            if persist_later:
                from mockdcp.data import persist_all

                nursery.start_soon(persist_all, bucket)
            if _live.wanted(sys.stdout, json_logs=args.json):
                nursery.start_soon(_live.run_live_view, server.state)
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    break
            nursery.cancel_scope.cancel()


def _print_corpus_log() -> None:
    """What ``serve(corpus=...)`` reports (``mockdcp.corpus``: the load, the import's
    progress, a corpus changed while served) as plain lines on stderr, whatever the log
    level."""
    import logging

    corpus_log = logging.getLogger("mockdcp.corpus")
    if corpus_log.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    corpus_log.addHandler(handler)
    corpus_log.setLevel(logging.INFO)
    corpus_log.propagate = False


def users_option(values: list[str] | None, password: str) -> Users:
    """``serve --user`` (repeatable): ``NAME:PASSWORD[:ROLES]`` (roles comma separated,
    default ``admin``), or a ``NAME`` alone with ``--password``; none: the default
    administrator. The password policy of the REST API is not applied here.
    ``ServerError`` naming a bad one."""
    from mockdcp.model import Users

    if not values:  # the role table (``_rbac``) loads when a user is first looked at
        return Users.admins({"Administrator": password})
    from mockdcp.model import Role, User, check_user_name, parse_roles
    from mockdcp.util import ServerError

    made: list[User] = []
    for value in values:
        name, sep, rest = value.partition(":")
        secret, _, roles = rest.partition(":") if sep else (password, "", "")
        try:
            check_user_name(name)
            chosen = parse_roles(roles) if roles else (Role("admin"),)
        except ValueError as exc:
            raise ServerError(f"--user {name}: {exc}") from None
        made.append(User(name=name, password=secret, roles=chosen))
    return Users(made)


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    """serve()'s connection limits (issue 18) that were given on the command line."""
    limits: dict[str, Any] = {}
    if args.max_connections is not None:
        limits["max_connections"] = args.max_connections
    if args.output_limit is not None:
        limits["output_limit"] = args.output_limit
    if args.auth_timeout is not None:
        limits["auth_timeout"] = args.auth_timeout or None
    return limits


async def _load(bucket: Bucket, docs: int, seed: int, worker: Workers | None) -> bool:
    """The generated documents (drawn by ``worker`` if started), with a
    progress bar on a terminal (stderr). True when they are still to be persisted
    (``persist_all``): a large load is ready once it is in memory, and persists after
    the ready line (about a second for a million)."""
    from mockdcp.data import WORKER_MIN, load_documents

    later = docs >= WORKER_MIN and bucket.flusher.enabled
    if not sys.stderr.isatty():
        await load_documents(bucket, docs, seed, worker=worker, persist=not later)
        return later
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"loading {docs:,} documents", total=docs)
        await load_documents(
            bucket,
            docs,
            seed,
            lambda done, _: bar.update(task, completed=done),
            worker=worker,
            persist=not later,
        )
    return later


def run_serve(args: argparse.Namespace) -> int:
    from mockdcp.data import PipelineError
    from mockdcp.util import ModelError, ScenarioError, ServerError

    try:
        trio.run(_serve, args)
    except (ServerError, ModelError, ScenarioError, PipelineError) as exc:
        print(f"mockdcp: {exc}", file=sys.stderr)
        return 1
    return 0


def run_ca(args: argparse.Namespace) -> int:
    """``mockdcp ca``: print the kept CA (made first if there is none), or with
    ``--client NAME`` write a client certificate for NAME signed by it."""
    from pathlib import Path

    from mockdcp.server import default_tls_dir, load_or_create_ca
    from mockdcp.util import ServerError

    directory = Path(args.tls_dir).expanduser() if args.tls_dir else default_tls_dir()
    try:
        ca = load_or_create_ca(directory)
        if args.client is None:
            sys.stdout.write(ca.cert_pem.decode())
            return 0
        return _write_client(ca, args.client, Path(args.out_dir))
    except ServerError as exc:
        print(f"mockdcp ca: {exc}", file=sys.stderr)
        return 1


def _write_client(ca: Identity, name: str, out: Path) -> int:
    from mockdcp.server import issue_certificate

    if not name or "/" in name or name.startswith("."):
        print(f"mockdcp ca: {name!r} cannot name a file", file=sys.stderr)
        return 2
    client = issue_certificate(ca, name, [])
    cert, key = out / f"{name}.pem", out / f"{name}-key.pem"
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(client.key_pem)
        cert.write_bytes(client.cert_pem)
    except OSError as exc:
        print(f"mockdcp ca: cannot write the client certificate: {exc}", file=sys.stderr)
        return 1
    print(f"{cert}\n{key}")
    return 0


def _describe(vb: int, event: object) -> dict[str, Any]:
    name = type(event).__name__
    row: dict[str, Any] = {"vb": vb, "event": name}
    if isinstance(event, tuple):
        row.update(event="Rollback", seqno=event[1])
        return row
    sid = getattr(event, "stream_id", None)
    if sid is not None:
        row["sid"] = sid
    for field in ("by_seqno", "start_seqno", "end_seqno", "flags", "reason", "rev_seqno"):
        if hasattr(event, field):
            row[field] = int(getattr(event, field))
    row.update(_collection_fields(event))
    key = getattr(event, "key", None)
    if key is not None and "type" not in row:
        row["key"] = key.decode(errors="replace")
        row["collection"] = getattr(event, "collection_id", None) or 0
    value = getattr(event, "value", None)
    if value is not None and name in ("Mutation",):
        row["value"] = value.decode(errors="replace")
    return row


def _collection_fields(event: object) -> dict[str, Any]:
    """What tail shows of a system event, a stream end, an OSO marker, a refused
    stream: names of the wire numbers, and the event's ids."""
    from mockdcp.client import StreamRefused
    from mockdcp.protocol import (
        OsoSnapshot,
        OsoSnapshotFlag,
        Status,
        StreamEnd,
        StreamEndReason,
        SystemEvent,
        SystemEventType,
    )

    if isinstance(event, StreamEnd):
        return {"reason_name": _name(StreamEndReason, event.reason)}
    if isinstance(event, OsoSnapshot):
        return {"oso": "start" if event.flags & OsoSnapshotFlag.START else "end"}
    if isinstance(event, StreamRefused):
        return {"sid": event.stream_id, "status": _name(Status, event.status)}
    if not isinstance(event, SystemEvent):
        return {}
    data = event.data()
    row: dict[str, Any] = {
        "type": _name(SystemEventType, event.event),
        "manifest_uid": data.manifest_uid,
        "scope_id": data.scope_id,
    }
    cid = getattr(data, "collection_id", None)
    if cid is not None:
        row["collection_id"] = cid
    if event.key:
        row["name"] = event.key.decode(errors="replace")
    ttl = getattr(data, "max_ttl", None)
    if ttl is not None:
        row["max_ttl"] = ttl
    return row


def _name(enum: Any, number: int) -> str:  # noqa: ANN401 - any IntEnum class
    try:
        return str(enum(number).name)
    except ValueError:
        return str(number)


def _id_or_name(text: str) -> int | str:
    """``0x1a`` (hex) or ``26`` (decimal) is an id; anything else is a name."""
    if text.lower().startswith("0x"):
        return int(text, 16)
    return int(text) if text.isdigit() else text


async def _tail_streams(args: argparse.Namespace, consumer: Any) -> list[Any]:  # noqa: ANN401
    """The stream filter ``--collection``/``--scope`` ask for, names resolved with
    GET_COLLECTION_ID / GET_SCOPE_ID (one StreamFilter; none without the options)."""
    from mockdcp.client import StreamFilter

    if args.scope is not None:
        scope = _id_or_name(args.scope)
        if isinstance(scope, str):
            (scope,) = await consumer.lookup_ids([scope], scopes=True)
        return [StreamFilter(scope=scope)]
    if not args.collection:
        return []
    wanted = [_id_or_name(c) for c in args.collection]
    paths = [c if "." in c else f"_default.{c}" for c in wanted if isinstance(c, str)]
    found = iter(await consumer.lookup_ids(paths) if paths else [])
    return [StreamFilter(collections=[c if isinstance(c, int) else next(found) for c in wanted])]


async def _tail(args: argparse.Namespace) -> None:
    from mockdcp.client import ClusterConsumer, DcpConsumer
    from mockdcp.protocol import DcpNoop, StreamFlag

    count = 0
    done = trio.Event()
    console = None
    if not args.json and sys.stdout.isatty():
        # rich only for a person reading: into a pipe or a file (``check``, ``run``
        # keep tail's lines) plain lines, unwrapped, and rich (a twentieth of a second
        # to import, and more to print each line) is never loaded
        from rich.console import Console

        console = Console()

    def on_event(vb: int, event: object) -> None:
        nonlocal count
        if isinstance(event, DcpNoop):
            return
        row = _describe(vb, event)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            rest = " ".join(f"{k}={v}" for k, v in row.items() if k not in ("vb", "event"))
            if console is None:
                print(f"{row['event']:<14} vb={vb:<4} {rest}", flush=True)
            else:
                console.print(f"[bold]{row['event']:<14}[/bold] vb={vb:<4} {rest}", highlight=False)
        if "key" in row:
            count += 1
            if args.limit and count >= args.limit:
                done.set()

    vbuckets = args.vbuckets  # None: every vbucket the bucket has
    options: dict[str, Any] = {
        "user": args.user,
        "password": args.password,
        "bucket": args.bucket,
        "name": "mockdcp-tail",
        "vbuckets": vbuckets,
        "collections": not args.no_collections,
        "on_event": on_event,
        "stream_flags": StreamFlag.FROM_LATEST if args.start == "now" else 0,
        "buffer_size": args.buffer_size,
        "noop_interval": args.noop_interval,
        "change_streams": args.change_streams,
        "sync_writes": args.sync_writes,
    }
    if args.clustermap_notification is not None:  # else each consumer's default
        options["clustermap_notification"] = args.clustermap_notification
    consumer: DcpConsumer | ClusterConsumer
    if args.cluster:  # a connection per node, following the map
        consumer = ClusterConsumer(args.host, args.port, **options)
    else:
        consumer = DcpConsumer(args.host, args.port, **options)
        consumer.core.streams = await _tail_streams(args, consumer) or consumer.streams

    async def until_every_stream_ended() -> None:  # e.g. FILTER_EMPTY on each of them
        assert isinstance(consumer, DcpConsumer)
        await consumer.finished.wait()
        print("mockdcp tail: every stream has ended", file=sys.stderr, flush=True)
        done.set()

    async def until_terminated() -> None:  # `mockdcp run`/`check` stop it with SIGTERM
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                done.set()
                return

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer.run)
            if isinstance(consumer, DcpConsumer):
                nursery.start_soon(until_every_stream_ended)
            nursery.start_soon(until_terminated)
            if args.output:
                nursery.start_soon(_keep_output, consumer, args.output, args.progress)
            await done.wait()
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the consumer's error, unwrapped for run_tail
        raise_unwrapped(group)
    finally:
        if args.output:
            _write_output(consumer.state, args.output, args.progress)


#: how often ``tail --output`` rewrites its file while the documents change (seconds)
OUTPUT_EVERY = 0.05


async def _keep_output(consumer: Any, path: str, progress: str | None) -> None:  # noqa: ANN401
    """Rewrite ``path`` (and ``progress``, how far it goes) with the consumer's documents
    whenever they changed (the final write is ``_tail``'s, when it stops); a large state
    is rewritten less often, so writing takes at most a tenth of the time."""
    from mockdcp.client import stream_progress

    written = None
    while True:
        state = consumer.state
        mark: tuple[object, ...] = (
            state.items,
            len(state.rollbacks),
            state.system_events,
            consumer.connects,
        )
        if progress is not None:  # a position moves without a document too (a prepare)
            mark += (stream_progress(state),)
        took = 0.0
        if mark != written:
            started = time.perf_counter()
            _write_output(state, path, progress)
            written, took = mark, time.perf_counter() - started
        await trio.sleep(max(OUTPUT_EVERY, 10 * took))


def _write_output(state: Any, path: str, progress: str | None) -> None:  # noqa: ANN401
    """The documents, then how far they go (``MOCKDCP_PROGRESS``: a reader that reads
    it first never sees an output short of it)."""
    from mockdcp.client import write_documents, write_progress

    write_documents(state, path)
    if progress is not None:
        write_progress(state, progress)


def run_tail(args: argparse.Namespace) -> int:
    from mockdcp.client import CallbackError, ConsumerError

    if args.cluster and (args.collection or args.scope is not None):
        print(
            "mockdcp tail: --cluster streams whole vbuckets (no --collection/--scope)",
            file=sys.stderr,
        )
        return 2
    if (args.collection or args.scope is not None) and args.no_collections:
        print("mockdcp tail: --collection and --scope need collections", file=sys.stderr)
        return 2
    if args.collection and args.scope is not None:
        print(
            "mockdcp tail: a stream filters on --collection or --scope, not both", file=sys.stderr
        )
        return 2
    import gc

    # what the imports made lives as long as the process: the collector need not walk it
    # again, on each full collection nor in the interpreter's collections at exit (a
    # tenth of a short tail's CPU: check and explore start one per scenario)
    gc.freeze()
    try:
        trio.run(_tail, args)
    except KeyboardInterrupt:
        return 0
    except CallbackError as exc:
        if isinstance(exc.__cause__, BrokenPipeError):  # the reader left (`| head`)
            # what is still buffered cannot be written either: discard it quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        print(f"mockdcp tail: {exc}", file=sys.stderr)
        return 1
    except (ConsumerError, OSError) as exc:
        print(f"mockdcp tail: {exc}", file=sys.stderr)
        return 1
    return 0
