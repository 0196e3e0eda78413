"""The ``mockdcp`` command line (README "The two commands").

Kept light on purpose: only argparse at import time; trio, the model and the server are
imported by the command that needs them, so ``mockdcp serve`` is ready fast.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mockdcp.model import BucketSpec


def _vbucket_range(text: str) -> list[int]:
    """``0-15``, ``3``, ``0,5,9-11`` → vbucket ids."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a vbucket range: {text!r}") from None
        if a < 0 or b < a:
            raise argparse.ArgumentTypeError(f"not a vbucket range: {text!r}")
        out.extend(range(a, b + 1))
    return out


#: the units ``--memory-quota`` takes, in bytes
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}


def _bytes(text: str) -> int:
    """An argparse type: a byte count > 0, with an optional unit (``500KB``, ``64MiB``)."""
    number = text.strip().rstrip("BbIiKkMmGg")
    unit = text.strip()[len(number) :].lower()
    try:
        n = int(number) * _UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(
            f"not a byte count: {text!r} (a number, with B, KB, MB, GB, KiB, MiB or GiB)"
        ) from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive byte count")
    return n


def _int_in(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``lo..hi`` (no upper bound when ``hi`` is None)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if n < lo or (hi is not None and n > hi):
            bounds = f"{lo}..{hi}" if hi is not None else f"at least {lo}"
            raise argparse.ArgumentTypeError(f"{n} is not {bounds}")
        return n

    return parse


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more."""
    try:
        n = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= n < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds >= 0")
    return n


def _bucket_spec(text: str) -> BucketSpec:
    """``--bucket NAME[:TYPE]``: a name a node refuses or an unknown type, named."""
    from mockdcp.model import BucketSpec
    from mockdcp.util import ModelError

    try:
        return BucketSpec.parse(text)
    except ModelError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from exc


def _common_server(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument(
        "--port", type=_int_in(0, 65535), default=11210, help="KV port (0 = any free port)"
    )
    p.add_argument(
        "--http-port", type=_int_in(0, 65535), default=8091, help="management port (0 = any)"
    )
    p.add_argument(
        "--bucket",
        action="append",
        type=_bucket_spec,
        metavar="NAME[:TYPE]",
        help="a bucket to serve (repeatable; the first is the steps' default; TYPE:"
        " couchbase); default: one couchbase bucket named default",
    )
    p.add_argument("--vbuckets", type=int, default=1024, help="number of vbuckets (1..1024)")
    p.add_argument(
        "--user",
        action="append",
        metavar="NAME[:PASSWORD[:ROLES]]",
        help="a user (repeatable): its password and its roles, comma separated as ns_server "
        "spells them (data_dcp_reader[default],data_reader[*]; default admin); a NAME alone "
        "takes --password (default: Administrator, password, admin)",
    )
    p.add_argument("--password", default="password", help="the password of a --user NAME")
    p.add_argument("--seed", type=int, default=0, help="seed for uuids, CAS and data")
    p.add_argument(
        "--nodes",
        type=_int_in(1, 64),
        default=1,
        help="data nodes, each with its own ports (consecutive from --port/--http-port)",
    )
    p.add_argument(
        "--replicas", type=_int_in(0, 3), default=0, help="replica copies of each vbucket"
    )


def _collection_paths(text: str) -> dict[str, list[str]]:
    """``scope.collection,...`` as the bucket's ``collections`` (scope -> names)."""
    out: dict[str, list[str]] = {}
    for path in filter(None, (p.strip() for p in text.split(","))):
        scope, dot, name = path.partition(".")
        if not dot or not scope or not name or "." in name:
            raise argparse.ArgumentTypeError(f"{path!r} is not scope.collection")
        out.setdefault(scope, []).append(name)
    return out


def _server_version(text: str) -> str:
    """``--server-version``: a version that names a profile, else an error naming it."""
    from mockdcp.protocol import UnknownServerVersion, resolve_server_version

    try:
        resolve_server_version(text)
    except UnknownServerVersion as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _tls_default() -> bool | None:
    """``--tls``'s default from ``MOCKDCP_TLS``: True (1), False (0), None (unset: on)."""
    value = os.environ.get("MOCKDCP_TLS", "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return None


def _network_options(p: argparse.ArgumentParser) -> None:
    """``serve``'s alternate address and TLS options (docs/tls.md);
    the external address and ``--tls`` also read ``MOCKDCP_*`` variables, so the Docker
    image takes them from ``docker run -e``."""
    env = os.environ.get
    ext = p.add_argument_group(
        "alternate address",
        "the address clients outside this host reach the node at (mapped ports): put in "
        "every cluster map as alternateAddresses.external; defaults from MOCKDCP_EXTERNAL_HOST, "
        "MOCKDCP_EXTERNAL_KV_PORT, MOCKDCP_EXTERNAL_HTTP_PORT, MOCKDCP_EXTERNAL_KV_TLS_PORT, "
        "MOCKDCP_EXTERNAL_HTTPS_PORT",
    )
    ext.add_argument(
        "--external-host", default=env("MOCKDCP_EXTERNAL_HOST") or None, metavar="HOST"
    )
    port = _int_in(1, 65535)
    for option, variable in (
        ("--external-kv-port", "MOCKDCP_EXTERNAL_KV_PORT"),
        ("--external-http-port", "MOCKDCP_EXTERNAL_HTTP_PORT"),
        ("--external-kv-tls-port", "MOCKDCP_EXTERNAL_KV_TLS_PORT"),
        ("--external-https-port", "MOCKDCP_EXTERNAL_HTTPS_PORT"),
    ):
        # argparse parses a string default as it parses the option's value
        ext.add_argument(option, type=port, default=env(variable) or None, metavar="PORT")
    tls = p.add_argument_group(
        "TLS", "KV over TLS and HTTPS beside the plain ports (on by default)"
    )
    tls.add_argument(
        "--tls",
        action=argparse.BooleanOptionalAction,
        default=_tls_default(),
        help="serve KV over TLS and HTTPS too, and list them in the cluster map, as a 7.x node "
        "always does; by default its certificate is made on a TLS client's first use, with "
        "--tls (MOCKDCP_TLS=1) at start; --no-tls (MOCKDCP_TLS=0) leaves TLS out",
    )
    tls.add_argument(
        "--tls-port",
        type=_int_in(0, 65535),
        default=None,
        metavar="PORT",
        help="KV over TLS (default 11207 for --port 11210: 3 below it; 0 = any free)",
    )
    tls.add_argument(
        "--https-port",
        type=_int_in(0, 65535),
        default=None,
        metavar="PORT",
        help="HTTPS management port (default 18091 for --http-port 8091; 0 = any free)",
    )
    tls.add_argument(
        "--tls-dir",
        metavar="DIR",
        help="where the CA is kept (default $XDG_DATA_HOME/mockdcp or ~/.local/share/mockdcp; "
        "MOCKDCP_TLS_DIR)",
    )
    tls.add_argument("--tls-cert", metavar="FILE", help="serve this certificate (PEM) instead")
    tls.add_argument("--tls-key", metavar="FILE", help="... with this key (PEM, unencrypted)")
    tls.add_argument("--tls-ca", metavar="FILE", help="... signed by this CA (PEM)")
    tls.add_argument(
        "--tls-name",
        action="append",
        default=[],
        dest="tls_names",
        metavar="NAME",
        help="another host name or address the node certificate is for (repeatable)",
    )
    tls.add_argument(
        "--client-cert-auth",
        choices=("disable", "enable", "mandatory"),
        default="disable",
        help="client certificate authentication, as Couchbase's client-cert-auth",
    )
    tls.add_argument(
        "--client-cert-path",
        choices=("subject.cn", "san.uri", "san.dnsname", "san.email"),
        default="subject.cn",
        help="the certificate field that names the user",
    )
    tls.add_argument(
        "--client-cert-prefix", default="", metavar="TEXT", help="cut from the field's start"
    )
    tls.add_argument(
        "--client-cert-delimiter",
        default="",
        metavar="CHARS",
        help="the user name ends before any of these",
    )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; ``command``: the one about to run, where it is ``serve``
    (the first) or ``tail`` (every scenario's consumer under ``check`` and ``explore``)
    only the commands up to it: the others' options and the modules they come from
    were a twentieth of a tail's start, 4 ms of a serve's."""
    parser = argparse.ArgumentParser(
        prog="mockdcp", description="A mock Couchbase DCP producer for testing DCP consumers."
    )
    parser.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING, ERROR")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the server with an embedded default bucket")
    _common_server(serve)
    serve.add_argument(
        "--docs",
        type=_int_in(0),
        default=1000,
        help="seeded Faker documents to load at start (0 = none)",
    )
    serve.add_argument(
        "--collections",
        type=_collection_paths,
        default=None,
        metavar="SCOPE.COLLECTION,...",
        help="scopes and collections the bucket has from the start (e.g. "
        "inventory.hotel,inventory.air); their creation events are the first seqnos",
    )
    serve.add_argument(
        "--storage",
        choices=("couchstore", "magma"),
        default="couchstore",
        help="the bucket's storage backend; magma retains history (change streams)",
    )
    serve.add_argument(
        "--bucket-type",
        choices=("couchbase", "ephemeral"),
        default="couchbase",
        help="ephemeral: no disk (backfills from memory, tombstones purged by age, "
        "OBSERVE_SEQNO persisted 0, a restart loses everything)",
    )
    serve.add_argument(
        "--eviction-policy",
        choices=("noEviction", "nruEviction"),
        help="ephemeral: when the memory quota is full, refuse writes (TMPFAIL; the "
        "default) or delete the oldest documents (streamed as deletions)",
    )
    serve.add_argument(
        "--memory-quota",
        type=_bytes,
        metavar="BYTES",
        help="ephemeral: the bucket's memory quota (e.g. 64MiB, 500KB; default none)",
    )
    serve.add_argument(
        "--ephemeral-purge-age",
        type=_int_in(0),
        metavar="S",
        help="ephemeral: seconds a tombstone is kept (default 86400, ns_server's day)",
    )
    serve.add_argument(
        "--history-retention-bytes",
        type=_int_in(0),
        metavar="BYTES",
        help="magma: history kept for the whole bucket (default 4 GiB unless seconds given)",
    )
    serve.add_argument(
        "--history-retention-seconds",
        type=_int_in(0),
        metavar="S",
        help="magma: history kept this long on the bucket's clock (0 = no time limit)",
    )
    serve.add_argument(
        "--backfills-per-connection",
        type=_int_in(1),
        default=1,
        metavar="N",
        help="backfills one DCP connection reads at once, the others waiting their turn "
        "(kv_engine dcp_backfill_in_progress_per_connection_limit: 1; more stages a node "
        "before MB-57304, whose backfills interleave)",
    )
    serve.add_argument(
        "--clock",
        choices=("wall", "virtual"),
        default="wall",
        help="the bucket's clock: the wall clock, or a virtual one that only the "
        "advance_clock step moves (running the expiry pager and compaction meanwhile)",
    )
    serve.add_argument(
        "--clock-start",
        metavar="ISO",
        help="--clock virtual: the time it starts at (e.g. 2024-01-01T00:00:00Z; default now)",
    )
    serve.add_argument(
        "--server-version",
        type=_server_version,
        metavar="VERSION",
        help="the Couchbase Server release the node behaves as: 7.0, 7.2, 7.6 or 8.0 "
        "(default 8.0, the newest), or a full version string like 7.2.4-7070-enterprise: "
        "HELLO features, DCP controls and stream flags taken, versions and capabilities "
        "reported (docs/versions.md)",
    )
    serve.add_argument(
        "--json", action="store_true", help="print the ready line and the log as JSON lines"
    )
    serve.add_argument(
        "--control-open",
        action="store_true",
        help="no credentials for the HTTP control API even off loopback (/mock/..., /metrics)",
    )
    serve.add_argument(
        "--scenario",
        metavar="FILE",
        help="serve this scenario: its bucket, seed and steps (no default documents)",
    )
    serve.add_argument(
        "--flush-interval",
        type=_seconds,
        default=0.005,
        metavar="SECONDS",
        help="persist each write this long after it, as a node's flusher does (0 = never)",
    )
    serve.add_argument(
        "--pcap",
        metavar="FILE",
        help="record every KV connection into FILE (pcap; tshark -d tcp.port==PORT,couchbase)",
    )
    # -- connection limits (issue 18); unset: serve()'s defaults --
    serve.add_argument("--max-connections", type=_int_in(1), help="at once (default 60000)")
    serve.add_argument(
        "--output-limit",
        type=_int_in(1),
        metavar="BYTES",
        help="unsent output per connection before it is no longer read (default 8 MiB)",
    )
    serve.add_argument(
        "--auth-timeout",
        type=float,
        metavar="S",
        help="seconds to authenticate (default 120, 0 = none)",
    )
    serve.add_argument(
        "--corpus",
        metavar="DIR",
        help="load this Parquet corpus (mockdcp corpus) instead of --docs",
    )
    serve.add_argument(
        "--on-disk",
        action="store_true",
        help="serve --corpus from per-vbucket files imported once into $MOCKDCP_CACHE "
        "(default ~/.cache/mockdcp), not from memory: a corpus larger than memory",
    )
    _network_options(serve)

    if command == "serve":
        return parser

    ca = sub.add_parser(
        "ca",
        help="print the CA that signs the TLS certificates (made on first use)",
        description="Prints the CA certificate `mockdcp serve --tls` uses (PEM): trust it once. "
        "With --client NAME, writes a client certificate for user NAME signed by it instead.",
    )
    ca.add_argument("--tls-dir", metavar="DIR", help="where the CA is kept (as serve's)")
    ca.add_argument("--client", metavar="NAME", help="issue a client certificate (CN=NAME)")
    ca.add_argument(
        "--out-dir",
        metavar="DIR",
        default=".",
        help="where --client writes NAME.pem and NAME-key.pem (default .)",
    )

    tail = sub.add_parser(
        "tail",
        help="the reference consumer: print events as they arrive",
        description="Defaults come from MOCKDCP_HOST, MOCKDCP_KV_PORT, MOCKDCP_BUCKET, "
        "MOCKDCP_USER and MOCKDCP_PASSWORD when set (as `mockdcp run` sets them).",
    )
    env = os.environ.get
    tail.add_argument("--host", default=env("MOCKDCP_HOST", "127.0.0.1"))
    tail.add_argument(
        "--port", type=_int_in(1, 65535), default=int(env("MOCKDCP_KV_PORT", "11210"))
    )
    tail.add_argument("--bucket", default=env("MOCKDCP_BUCKET", "default"))
    tail.add_argument("--user", default=env("MOCKDCP_USER", "Administrator"))
    tail.add_argument("--password", default=env("MOCKDCP_PASSWORD", "password"))
    tail.add_argument(
        "--vbuckets", type=_vbucket_range, default=None, help="e.g. 0-15 (default all)"
    )
    tail.add_argument("--from", dest="start", choices=("now", "beginning"), default="beginning")
    tail.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    tail.add_argument("--no-collections", action="store_true", help="do not negotiate collections")
    tail.add_argument(
        "--cluster",
        action="store_true",
        default=int(env("MOCKDCP_NODES", "1")) > 1,
        help="a connection per node, each vbucket followed to its node as the map changes "
        "(the default when $MOCKDCP_NODES, set by mockdcp run and check, is above 1)",
    )
    tail.add_argument(
        "--collection",
        action="append",
        default=[],
        metavar="NAME_OR_ID",
        help="stream only this collection: scope.name (a bare name is in _default) or an id "
        "(0x8, or digits: decimal); repeatable",
    )
    tail.add_argument(
        "--scope",
        metavar="NAME_OR_ID",
        help="stream only this scope's collections, those created later too (name or id)",
    )
    tail.add_argument(
        "--limit", type=_int_in(0), default=0, help="stop after this many items (0 = never)"
    )
    tail.add_argument(
        "--buffer-size",
        type=_int_in(0),
        default=env("MOCKDCP_BUFFER_SIZE", str(20 * 1024 * 1024)),
        help="flow-control buffer in bytes; acks go out at half of it (0 = no flow control; "
        "default MOCKDCP_BUFFER_SIZE or 20 MiB)",
    )
    tail.add_argument(
        "--noop-interval",
        type=_seconds,
        default=env("MOCKDCP_NOOP_INTERVAL", "120"),
        help="seconds between the producer's noops (default MOCKDCP_NOOP_INTERVAL or 120)",
    )
    tail.add_argument(
        "--output",
        default=env("MOCKDCP_OUTPUT") or None,
        metavar="FILE",
        help="keep the documents it holds in FILE, as JSON lines (default MOCKDCP_OUTPUT, "
        "as `mockdcp check` sets it)",
    )
    tail.add_argument(
        "--progress",
        default=env("MOCKDCP_PROGRESS") or None,
        metavar="FILE",
        help="with --output, keep in FILE how far the output goes on each vbucket, as JSON "
        "(default MOCKDCP_PROGRESS, as `mockdcp check` sets it)",
    )
    tail.add_argument(
        "--change-streams",
        action=argparse.BooleanOptionalAction,
        default=env("MOCKDCP_CHANGE_STREAMS", "") == "1",
        help="ask for history snapshots (every revision; a Magma bucket with retention); "
        "a node that refuses them (before 7.2, or couchstore) streams without "
        "(default MOCKDCP_CHANGE_STREAMS=1, as a scenario may ask)",
    )
    tail.add_argument(
        "--sync-writes",
        action="store_true",
        help="enable sync writes: durable writes shown once committed, never when aborted",
    )
    tail.add_argument(
        "--clustermap-notification",
        action=argparse.BooleanOptionalAction,
        default={"1": True, "0": False}.get(env("MOCKDCP_CLUSTERMAP_NOTIFICATION", "")),
        help="ask HELLO for cluster config pushes and follow them (default: with --cluster"
        " yes, polling the map only if no node grants them; else no; "
        "MOCKDCP_CLUSTERMAP_NOTIFICATION=1 or 0 sets it, as a scenario may ask)",
    )
    if command == "tail":
        return parser

    run = sub.add_parser(
        "run",
        help="serve a scenario, run a consumer against it, check the expectations",
        usage="mockdcp run SCENARIO [--json] [--timeout S] [-- CONSUMER CMD...]",
    )
    run.add_argument("scenario", help="a scenario file (YAML)")
    run.add_argument("--json", action="store_true", help="the report as JSON")
    run.add_argument(
        "--timeout", type=float, default=300.0, help="seconds for the whole scenario (300)"
    )

    check = sub.add_parser(
        "check",
        help="grade a consumer command against the scenario library: a report card",
        usage="mockdcp check [SCENARIO...] [options] -- CONSUMER CMD...",
        description="Runs each scenario (the library's, or those named: names or files) on "
        "a fresh server with free ports against the consumer command, which gets the "
        "MOCKDCP_* variables of `mockdcp run`, MOCKDCP_SCENARIO and MOCKDCP_OUTPUT (where it "
        "may write the documents or events it holds, as JSON lines or Parquet, verified "
        "against the scenario's oracle). Exit 0 only if every scenario that applies passes.",
    )
    check.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="names or files")
    check.add_argument("--tag", metavar="TAG,...", help="only scenarios with any of these tags")
    check.add_argument("--exclude", metavar="NAME_OR_TAG,...", help="leave these out")
    check.add_argument(
        "--capabilities",
        metavar="NEED,...",
        help="what the consumer supports (collections, flow_control, noops, change_streams, "
        "sync_writes, several_nodes, clustermap_notification); scenarios needing anything "
        "else do not apply (default: everything)",
    )
    check.add_argument("-j", "--jobs", type=_int_in(1, 64), default=1, help="scenarios at once")
    check.add_argument("--timeout", type=_seconds, default=60.0, help="seconds per scenario (60)")
    check.add_argument(
        "--connect-timeout",
        type=_seconds,
        default=15.0,
        help="seconds for the consumer to connect (15)",
    )
    check.add_argument("--junit", metavar="FILE", help="write JUnit XML (a test per scenario)")
    check.add_argument("--html", metavar="FILE", help="write an HTML page with each failure")
    check.add_argument(
        "--json",
        action="store_true",
        help="the whole report as JSON on stdout (the card on stderr)",
    )
    check.add_argument(
        "--output-dir",
        metavar="DIR",
        help="keep each scenario's MOCKDCP_OUTPUT here as NAME.out (default: a temporary "
        "directory)",
    )

    from mockdcp.cli._explore_parser import add_parser as add_explore

    add_explore(sub)

    validate = sub.add_parser("validate", help="check scenario files (errors with lines)")
    validate.add_argument("files", nargs="+", metavar="FILE")

    scenarios = sub.add_parser("scenarios", help="list the bundled scenarios")
    scenarios.add_argument("--json", action="store_true", help="JSON lines")

    from mockdcp.cli._pipeline_commands import add_pipeline_parsers

    add_pipeline_parsers(sub)

    from mockdcp.cli.bench import add_bench_parser

    add_bench_parser(sub, _int_in)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mockdcp`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["serve"] or not gc.isenabled():
        return _main(argv)
    # nothing ``mockdcp serve`` makes before its ready line (modules, the bucket) is
    # garbage, and the collector's passes over it were a sixth of its start: it resumes
    # at the ready line (``_commands._serve``), or here if serve stops before it
    gc.disable()
    try:
        return _main(argv, collector_paused=True)
    finally:
        gc.enable()


def _main(argv: list[str], *, collector_paused: bool = False) -> int:
    consumer: list[str] = []
    if "--" in argv:  # mockdcp run/check/explore ... [options] -- CONSUMER CMD...
        cut = argv.index("--")
        argv, consumer = argv[:cut], argv[cut + 1 :]
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    args.consumer = consumer
    args.collector_paused = collector_paused
    import logging

    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    if args.command == "serve":
        from mockdcp.cli._commands import run_serve

        return run_serve(args)
    if args.command == "tail":
        from mockdcp.cli._commands import run_tail

        return run_tail(args)
    if args.command == "ca":
        from mockdcp.cli._commands import run_ca

        return run_ca(args)
    if args.command in ("run", "validate", "scenarios"):
        from mockdcp.cli import _scenario_commands as commands

        run = {
            "run": commands.run_run,
            "validate": commands.run_validate,
            "scenarios": commands.run_scenarios,
        }[args.command]
        return run(args)
    if args.command == "check":
        from mockdcp.cli._check_report import run_check

        return run_check(args)
    if args.command == "explore":
        from mockdcp.cli._explore import run_explore

        return run_explore(args)
    if args.command == "bench":
        from mockdcp.cli.bench import run_bench

        return run_bench(args)
    if args.command in ("corpus", "oracle", "verify"):
        from mockdcp.cli._pipeline_commands import run_pipeline

        return run_pipeline(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
