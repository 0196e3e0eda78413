"""What a stream costs the server alone (issue 44): a ``Node`` over a bucket loaded as
``mockdcp serve --docs N`` loads it, driven in memory (sans-IO, no socket, no event
loop) by the bytes the bench consumer sends: HELLO, SASL, SELECT_BUCKET, DCP_OPEN, its
controls, a stream request for every vbucket from seqno 0, and buffer acks, until every
document came back. The figure is the server's CPU microseconds a stream (a pass's
process CPU over its streams; the median of ``--passes``, after a first pass of each
not counted), collection-aware and legacy, and ``first``: the first pass of all, a
collection-aware one with the first connection's one-time costs. With the default
1,024 vbuckets and 10,000 documents (about ten a stream) it is mostly what each stream
costs whatever its length: its request, its backfill, its marker, its frames' encoding.

``bench compare``'s ``streams_*`` paths measure the same over sockets, where the
consumer process and the kernel share the machine; this leaves them out, so that a
change to the producer or the model shows in a few rounds.

Run: ``python -m tests.bench.stream_cost REF [--rounds 4] [--docs 10000]`` installs
REF (a git ref) and the working tree as ``bench compare`` does, each in an environment
of its own, and runs this file's ``measure`` with each alternately, printing each
side's medians and the ratios (old over new: a speed, 1.0 or more is no regression).
``python tests/bench/stream_cost.py measure`` measures the running interpreter's
mockdcp. The file imports nothing of the tests, and of mockdcp only what every release
since 14df38a has (``Bucket``, ``Node``, the protocol's messages, ``load_documents``), and
what a release has that serve does once ready (``preload``, the collector's thresholds),
where it has them.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: DCP_MUTATION, DCP_DELETION, DCP_EXPIRATION
_ITEMS = frozenset({0x57, 0x58, 0x59})
_BODY = struct.Struct(">I")
#: the bench consumer's flow-control buffer (``mockdcp.cli.bench._consumer``)
BUFFER = 20 * 1024 * 1024


def _imports() -> dict[str, Any]:
    """What a pass needs, from the running interpreter's mockdcp (any release)."""
    from mockdcp import protocol
    from mockdcp.model import Bucket
    from mockdcp.producer import Node

    try:
        from mockdcp.data import load_documents
    except ImportError:  # a release before the data package
        load_documents = importlib.import_module("mockdcp._dataset").load_documents
    try:  # the collector's thresholds serve sets once ready (none before them)
        thresholds = importlib.import_module("mockdcp.cli._commands").SERVE_COLLECTOR_THRESHOLDS
    except (ImportError, AttributeError):
        thresholds = None
    preload = getattr(importlib.import_module("mockdcp.producer"), "preload", None)
    if preload is None:  # a release whose serve imported the connection itself

        def preload() -> None:
            importlib.import_module("mockdcp.producer._connection")

    return {
        "protocol": protocol,
        "Bucket": Bucket,
        "Node": Node,
        "load": load_documents,
        "preload": preload,
        "thresholds": thresholds,
    }


def measure(forms: list[str], passes: int, docs: int, vbuckets: int) -> dict[str, float]:
    """The server's CPU µs a stream, the median of ``passes`` for each of ``forms``
    (``aware``, ``legacy``), the forms alternating pass by pass. The collector is as it
    was afterwards (a test runs this in its own process: serve's thresholds left behind
    failed a later test of that process that compares them with its own)."""
    threshold = gc.get_threshold()
    try:
        return _measure(forms, passes, docs, vbuckets)
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _measure(forms: list[str], passes: int, docs: int, vbuckets: int) -> dict[str, float]:
    import trio

    got = _imports()
    p = got["protocol"]
    bucket = got["Bucket"]("default", vbuckets, seed=0, clock=time.time)
    trio.run(got["load"], bucket, docs, 0)
    node = got["Node"](bucket=bucket, users={"Administrator": "password"})
    got["preload"]()
    gc.freeze()  # as serve does once ready
    if got["thresholds"] is not None:
        gc.set_threshold(*got["thresholds"])
    base = [
        p.HelloFeature.XATTR,
        p.HelloFeature.XERROR,
        p.HelloFeature.SELECT_BUCKET,
        p.HelloFeature.JSON,
    ]
    requests = b"".join(
        p.DcpStreamRequest(
            opaque=100 + vb,
            vbucket=vb,
            flags=0,
            start_seqno=0,
            end_seqno=2**64 - 1,
            vbucket_uuid=0,
            snap_start_seqno=0,
            snap_end_seqno=0,
        ).encode()
        for vb in range(vbuckets)
    )

    def one_pass(now: float, form: str) -> float:
        features = base + ([p.HelloFeature.COLLECTIONS] if form == "aware" else [])
        conn = node.open_connection(now)
        for message in (
            p.Hello(opaque=1, agent=b"stream-cost", features=tuple(features)),
            p.SaslAuth(opaque=2, mechanism="PLAIN", payload=b"\0Administrator\0password"),
            p.SelectBucket(opaque=3, bucket="default"),
            p.DcpOpen(opaque=4, name=b"stream-cost", flags=int(p.DcpOpenFlag.PRODUCER)),
            p.DcpControl(opaque=5, key="enable_noop", value="true"),
            p.DcpControl(opaque=6, key="set_noop_interval", value="120"),
            p.DcpControl(opaque=7, key="connection_buffer_size", value=str(BUFFER)),
        ):
            conn.receive_data(message.encode(), now)
        conn.data_to_send(now)
        c0 = time.process_time()
        conn.receive_data(requests, now)
        count = unacked = 0
        while count < docs:
            data = conn.data_to_send(now)
            if not data:
                raise RuntimeError(f"the server sent nothing more after {count} documents")
            pos, size = 0, len(data)
            while pos < size:
                count += data[pos + 1] in _ITEMS
                pos += 24 + _BODY.unpack_from(data, pos + 8)[0]
            unacked += size
            if unacked >= BUFFER // 2:
                conn.receive_data(p.DcpBufferAck(opaque=0, nbytes=unacked).encode(), now)
                unacked = 0
        cpu = time.process_time() - c0
        conn.close("pass over")
        node.forget(conn)
        return cpu

    # not among the passes: the first of each form; the first form's is reported apart
    # (``first``: a first connection's pass, its one-time costs and each vbucket's first
    # read, what ``bench compare``'s ``first_pass`` measures over sockets)
    firsts = [one_pass(1.0, form) for form in forms]
    samples: dict[str, list[float]] = {form: [] for form in forms}
    for i in range(passes):
        for form in forms:
            samples[form].append(one_pass(2.0 + i, form))
    warm = {form: statistics.median(s) / vbuckets * 1e6 for form, s in samples.items()}
    return warm | {"first": firsts[0] / vbuckets * 1e6}


def _measured(python: str, args: argparse.Namespace) -> dict[str, float]:
    """``measure`` run by ``python`` (another install's), from a neutral directory and
    without the caller's ``PYTHONPATH`` (``bench compare``'s ``side_environ``: under one
    naming a source tree, both sides would measure that tree's mockdcp)."""
    from mockdcp.cli.bench._compare import side_environ

    out = subprocess.run(
        [
            python,
            str(Path(__file__).resolve()),
            "measure",
            "--passes",
            str(args.passes),
            "--docs",
            str(args.docs),
            "--vbuckets",
            str(args.vbuckets),
        ],
        capture_output=True,
        check=True,
        cwd="/",
        timeout=1800,
        env=side_environ(),
    ).stdout
    figures: dict[str, float] = json.loads(out.splitlines()[-1])
    return figures


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """REF and the working tree, ``--rounds`` rounds alternately (``bench compare``'s
    environments): each side's median µs a stream and old/new for each form."""
    from mockdcp.cli.bench._compare import (
        _checkout,
        _only_compare,
        commit_of,
        compare as alternately,  # (its rounds' order)
        install,
        install_tree,
    )
    from mockdcp.cli.bench._harness import bytecode_cached
    from mockdcp.data import cache_root

    root = _checkout()
    commit = commit_of(root, args.ref)
    cache = cache_root() / "bench-compare"
    with _only_compare(cache), bytecode_cached():
        old, _ = install(root, commit, cache)
        new, _ = install_tree(root, cache)
        samples = alternately(old, new, args.rounds, lambda python: _measured(python, args))
    report: dict[str, Any] = {"ref": commit, "docs": args.docs, "vbuckets": args.vbuckets}
    for form in ("aware", "legacy", "first"):
        before = statistics.median(samples[form]["old"])
        after = statistics.median(samples[form]["new"])
        report[f"{form}_us_old"], report[f"{form}_us_new"] = round(before, 1), round(after, 1)
        report[f"{form}_ratio"] = round(before / after, 3)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ref", help="a git ref to compare with, or 'measure'")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--passes", type=int, default=7)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--vbuckets", type=int, default=1024)
    args = parser.parse_args(argv)
    if args.ref == "measure":
        figures = measure(["aware", "legacy"], args.passes, args.docs, args.vbuckets)
        print(json.dumps(figures))
        return 0
    print(json.dumps(compare(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
