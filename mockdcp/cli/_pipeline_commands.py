"""``mockdcp corpus``, ``mockdcp oracle`` and ``mockdcp verify``: parsers and runners.

Only argparse at import time (``mockdcp serve`` builds the same parser); Spark, pyarrow
and rich load when one of these commands runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mockdcp.pipeline import VerifyReport


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{value} is not a share in 0..1")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def add_pipeline_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the three pipeline commands to the ``mockdcp`` parser."""
    master = {"default": None, "help": "Spark master URL (default local[*])"}
    corpus = sub.add_parser("corpus", help="Spark job: a Faker corpus with a change history")
    corpus.add_argument("--docs", type=_positive, required=True, help="documents (keys)")
    corpus.add_argument("--out", required=True, metavar="DIR", help="a new or empty directory")
    corpus.add_argument("--seed", type=int, default=0)
    corpus.add_argument("--master", **master)  # type: ignore[arg-type]
    corpus.add_argument(
        "--partitions", type=int, default=0, help="logical partitions (default docs/100,000)"
    )
    corpus.add_argument(
        "--collections",
        default="_default._default",
        help="scope.collection,... the shapes (user, order, hotel, airline) spread over",
    )
    corpus.add_argument("--update-share", type=_share, default=0.2)
    corpus.add_argument("--hot-share", type=_share, default=0.01, help="keys updated often")
    corpus.add_argument("--hot-updates", type=int, default=20)
    corpus.add_argument("--delete-share", type=_share, default=0.05)
    corpus.add_argument("--expire-share", type=_share, default=0.02)
    corpus.add_argument("--no-progress", action="store_true")

    oracle = sub.add_parser("oracle", help="the final state a correct consumer must hold")
    source = oracle.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", metavar="DIR")
    source.add_argument("--scenario", metavar="FILE")
    source.add_argument("--url", help="a running mockdcp's HTTP address (GET /mock/oracle)")
    oracle.add_argument("--out", required=True, metavar="DIR")
    oracle.add_argument("--master", **master)  # type: ignore[arg-type]

    verify = sub.add_parser("verify", help="Spark job: a consumer's output against the oracle")
    verify.add_argument("--expected", required=True, metavar="DIR", help="the oracle")
    verify.add_argument("--actual", required=True, metavar="PATH", help="the consumer's output")
    verify.add_argument("--master", **master)  # type: ignore[arg-type]
    verify.add_argument("--format", choices=("auto", "jsonl", "parquet"), default="auto")
    verify.add_argument(
        "--mode",
        choices=("auto", "documents", "events"),
        default="auto",
        help="final documents, or events to reduce (auto: events if an op/deleted column)",
    )
    for role in ("key", "value", "scope", "collection", "seqno", "rev", "cas", "op", "deleted"):
        verify.add_argument(
            f"--{role}-col", dest=f"col_{role}", default=role, help=f"column of the {role}"
        )
    verify.add_argument("--examples", type=int, default=5, help="examples per category")
    verify.add_argument("--json", action="store_true", help="the report as JSON")


def run_pipeline(args: argparse.Namespace) -> int:
    """Run ``corpus``, ``oracle`` or ``verify``; 0 on success, 1 on a difference (verify)
    or an error (printed as one line, never a bare Spark stack trace)."""
    from mockdcp.data import PipelineError, require_pipeline

    try:
        require_pipeline(spark=args.command != "oracle" or bool(args.corpus))
        return {"corpus": _corpus, "oracle": _oracle, "verify": _verify}[args.command](args)
    except PipelineError as exc:
        print(f"mockdcp {args.command}: {exc}", file=sys.stderr)
        return 1


def _corpus(args: argparse.Namespace) -> int:
    from mockdcp.pipeline import CorpusSpec, make_corpus, parse_collections

    spec = CorpusSpec(
        docs=args.docs,
        seed=args.seed,
        partitions=args.partitions,
        collections=parse_collections(args.collections),
        update_share=args.update_share,
        hot_share=args.hot_share,
        hot_updates=args.hot_updates,
        delete_share=args.delete_share,
        expire_share=args.expire_share,
    )
    progress = not args.no_progress and sys.stderr.isatty()
    report = make_corpus(spec, args.out, master=args.master, progress=progress)
    print(
        f"mockdcp corpus: {report.docs:,} documents, {report.rows:,} rows in "
        f"{report.partitions} partitions to {report.out} in {report.seconds:.1f} s "
        f"({report.docs / report.seconds:,.0f} documents/s)"
    )
    return 0


def _oracle(args: argparse.Namespace) -> int:
    from mockdcp.pipeline import (
        oracle_body,
        oracle_from_corpus,
        oracle_from_json,
        oracle_from_scenario,
        oracle_from_url,
        write_oracle,
    )

    body = oracle_body(args.url) if args.url else None
    if body is not None and "corpus" in body:  # a bucket serving a corpus on disk
        from mockdcp.data import require_pipeline

        require_pipeline()
        rows = oracle_from_corpus(body["corpus"], args.out, master=args.master, changes=body)
    elif args.corpus:
        rows = oracle_from_corpus(args.corpus, args.out, master=args.master)
    elif body is not None:
        table = oracle_from_json(body, args.url)
        write_oracle(table, args.out, source=args.url)
        rows = table.num_rows
    else:
        source = args.url or args.scenario
        table = oracle_from_url(args.url) if args.url else oracle_from_scenario(args.scenario)
        write_oracle(table, args.out, source=source)
        rows = table.num_rows
    print(f"mockdcp oracle: {rows:,} documents to {args.out}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from mockdcp.pipeline import Columns, verify

    columns = Columns(**{k[4:]: v for k, v in vars(args).items() if k.startswith("col_")})
    report = verify(
        args.expected,
        args.actual,
        columns=columns,
        fmt=args.format,
        mode=args.mode,
        master=args.master,
        examples=args.examples,
    )
    if args.json:
        print(json.dumps(report.as_json(), indent=2, default=str))
    else:
        _print_report(report)
    return 1 if report.differences else 0


def _print_report(report: VerifyReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"mockdcp verify ({report.mode}, {report.seconds:.1f} s)")
    table.add_column("category")
    table.add_column("count", justify="right")
    table.add_column("examples")
    for name in ("missing", "phantom", "stale", "wrong_value", "duplicates", "unparseable"):
        shown = report.examples.get(name, [])
        keys = ", ".join(str(e.get("key")) for e in shown)
        table.add_row(name, f"{getattr(report, name):,}", keys)
    console = Console()
    console.print(table)
    verdict = "0 differences" if not report.differences else f"{report.differences:,} differences"
    console.print(
        f"expected {report.expected:,}, consumer held {report.actual_documents:,} "
        f"({report.actual_rows:,} rows read), matched {report.matched:,}: {verdict}"
    )
