"""The options of ``mockdcp bench [MODE]`` (the mode modules read them) and the
spellings of the single-command bench that came before the modes, mapped onto them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

#: the modes, each a module of this package (``compare``: ``_compare``)
MODES = (
    "stream",
    "cold",
    "written",
    "docs",
    "corpus",
    "cluster",
    "rebalance",
    "history",
    "durable",
    "ephemeral",
    "startup",
    "compare",
)

_STREAMING = {"items", "value_size", "vbuckets", "from_disk", "legacy"}
#: the options each mode reads beyond ``--runs`` and ``--json``
MODE_OPTIONS: dict[str, set[str]] = {
    "stream": _STREAMING | {"consumers", "filter", "stream_ids", "tls", "bare"},
    "cold": {"items", "value_size", "vbuckets", "legacy"},
    "written": {"items", "value_size", "vbuckets", "legacy"},
    "docs": {"items", "vbuckets"},
    "corpus": {"corpus", "vbuckets"},
    "cluster": _STREAMING | {"nodes", "replicas", "count"},
    "rebalance": {"items", "value_size", "vbuckets", "nodes", "replicas"},
    "history": {"items", "value_size", "vbuckets", "from_disk", "revisions", "storage"},
    "durable": _STREAMING | {"fraction"},
    "ephemeral": {"items", "value_size", "vbuckets", "legacy"},
    "startup": set(),
    "compare": {"ref", "items", "vbuckets"},
}

#: the spellings before the modes: option (its dest) -> the mode it selects
OLD_SPELLINGS = {
    "rebalance": "rebalance",
    "history": "history",
    "durable": "durable",
    "on_disk": "corpus",
    "cold": "cold",
    "docs": "docs",
}


def add_bench_parser(
    sub: Any,  # noqa: ANN401 - argparse's private _SubParsersAction
    int_in: Callable[[int, int | None], Callable[[str], int]],
) -> None:
    """``mockdcp bench``'s parser, added to the ``mockdcp`` subcommands."""
    bench = sub.add_parser(
        "bench",
        help="streaming throughput, startup time and memory, one mode at a time",
        description="Modes: " + ", ".join(MODES) + " (default: stream). Every mode "
        "writes one report shape: --json prints it as a line.",
    )
    bench.add_argument("mode", nargs="?", choices=MODES, default=None, metavar="MODE")
    bench.add_argument(
        "ref", nargs="?", default=None, metavar="REF", help="compare: the git ref to compare"
    )
    bench.add_argument("--items", type=int_in(1, None), default=None, help="default 1,000,000")
    bench.add_argument("--value-size", type=int_in(16, None), default=256, help="bytes (>= 16)")
    bench.add_argument("--vbuckets", type=int_in(1, 1024), default=64)
    bench.add_argument("--runs", type=int_in(1, None), default=3)
    bench.add_argument("--json", action="store_true", help="the report as one JSON line")
    bench.add_argument(
        "--from-disk",
        action="store_true",
        help="persist the bucket before streaming, so the stream backfills from disk",
    )
    bench.add_argument(
        "--legacy",
        action="store_true",
        help="the consumer does not negotiate collections (java-dcp-client, gocbcore defaults)",
    )
    bench.add_argument(
        "--bare",
        action="store_true",
        help="stream: the consumer negotiates nothing (no HELLO, no DCP_CONTROL: no "
        "collections, no flow control, no noops), as a hand-written consumer may",
    )
    bench.add_argument(
        "--consumers",
        type=int_in(1, 1000),
        default=1,
        help="stream: connections streaming every item at once (one consumer process)",
    )
    bench.add_argument(
        "--filter",
        action="store_true",
        help="stream: items spread over 4 collections; the consumer streams one",
    )
    bench.add_argument(
        "--stream-ids",
        type=int_in(1, 4),
        nargs="?",
        const=2,
        default=0,
        metavar="N",
        help="stream: N streams per vbucket with stream-ids (default 2); with --filter each "
        "streams its own collection, without it each gets every item",
    )
    bench.add_argument("--tls", action="store_true", help="stream: also over TLS (a CA of its own)")
    bench.add_argument(
        "--nodes",
        type=int_in(1, 16),
        default=1,
        help="cluster, rebalance: nodes serving the bucket",
    )
    bench.add_argument(
        "--replicas", type=int_in(0, 3), default=0, help="cluster, rebalance: replicas"
    )
    bench.add_argument(
        "--count",
        choices=("cpu", "instructions"),
        default="cpu",
        help="cluster: the server's cost of a pass in CPU seconds, or in instructions "
        "counted by valgrind's callgrind (deterministic; about 50 times slower)",
    )
    bench.add_argument(
        "--revisions",
        type=int_in(1, 1000),
        default=4,
        metavar="N",
        help="history: writes of each key, every one streamed",
    )
    bench.add_argument(
        "--storage",
        choices=("couchstore", "magma"),
        default=None,
        help="history: the bucket's backend (only magma keeps history)",
    )
    bench.add_argument(
        "--fraction",
        type=float,
        default=0.1,
        metavar="F",
        help="durable: the fraction (0..1] of the writes that are durable",
    )
    bench.add_argument("--corpus", metavar="DIR", help="corpus: a directory of Parquet files")
    # the spellings before the modes (OLD_SPELLINGS): each selects its mode
    old = bench.add_argument_group("earlier spellings (each selects a mode)")
    old.add_argument("--cold", action="store_true", help="mockdcp bench cold")
    old.add_argument(
        "--docs", type=int_in(1, None), default=0, metavar="N", help="mockdcp bench docs --items N"
    )
    old.add_argument("--on-disk", action="store_true", help="mockdcp bench corpus --corpus DIR")
    old.add_argument("--rebalance", action="store_true", help="mockdcp bench rebalance --nodes N")
    old.add_argument(
        "--history",
        type=int_in(1, 1000),
        nargs="?",
        const=4,
        default=0,
        metavar="N",
        help="mockdcp bench history --revisions N",
    )
    old.add_argument(
        "--durable",
        type=float,
        default=0.0,
        metavar="F",
        help="mockdcp bench durable --fraction F",
    )
    known = set().union(*MODE_OPTIONS.values(), OLD_SPELLINGS)
    bench.set_defaults(bench_defaults={dest: bench.get_default(dest) for dest in sorted(known)})


def resolve(args: argparse.Namespace) -> str:
    """The mode the options select, with ``args`` rewritten to the mode's spelling;
    raises ``ValueError`` (the message says what to write instead) when they do not
    make one mode."""
    defaults: dict[str, Any] = args.bench_defaults
    old = [dest for dest in OLD_SPELLINGS if getattr(args, dest) != defaults[dest]]
    picked = {OLD_SPELLINGS[dest] for dest in old}
    if args.history and args.durable:
        raise ValueError("--history or --durable (a fraction 0..1), not both")
    if len(picked) > 1:
        raise ValueError(
            "one mode at a time: " + ", ".join("--" + d.replace("_", "-") for d in old)
        )
    mode: str | None = args.mode
    if picked:
        (wanted,) = picked
        if mode is not None and mode != wanted:
            raise ValueError(f"--{old[0].replace('_', '-')} selects mode {wanted}, not {mode}")
        mode = wanted
    elif mode is None:
        mode = "corpus" if args.corpus else "cluster" if args.nodes > 1 else "stream"
        if args.storage == "magma":
            raise ValueError(
                "--storage magma measures history (a couchstore bucket keeps no history): "
                "mockdcp bench history --storage magma"
            )
    if args.ref is not None and mode != "compare":
        raise ValueError(f"a REF ({args.ref}) goes with mode compare only")
    _rewrite(args, mode)
    extra = [
        dest
        for dest, default in defaults.items()
        if dest not in MODE_OPTIONS[mode]
        and dest not in OLD_SPELLINGS
        and getattr(args, dest) != default
    ]
    if extra:
        given = ", ".join("--" + d.replace("_", "-") for d in extra)
        raise ValueError(f"mode {mode} does not take {given}")
    args.items_given = args.items is not None
    if args.items is None:
        args.items = 1_000_000
    return mode


def _rewrite(args: argparse.Namespace, mode: str) -> None:
    """The earlier spellings as the mode's options."""
    if args.docs:
        if args.items is not None and args.items != args.docs:
            raise ValueError("--docs N is the number of documents: mockdcp bench docs --items N")
        args.items = args.docs
    if args.history:
        args.revisions = args.history
    if args.durable:
        args.fraction = args.durable
    if args.on_disk and not args.corpus:
        raise ValueError(
            "--corpus DIR --on-disk go together (now spelled: mockdcp bench corpus --corpus DIR)"
        )
    if mode == "corpus" and not args.corpus:
        raise ValueError("corpus needs --corpus DIR (a directory of Parquet files)")
    if mode == "history" and args.storage == "couchstore":
        raise ValueError("--storage couchstore keeps no history: history runs on magma")
