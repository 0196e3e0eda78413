"""``mockdcp bench rebalance --nodes N [--replicas R]``: the seconds a rebalance from N
nodes to N + 1 takes while the reference cluster consumer (``mockdcp.client``) streams
a bucket of ``--items``, and until that consumer holds the oracle (target: under 10 s).
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import TYPE_CHECKING

from mockdcp.cli.bench._harness import bench_server, emit, load_bucket

if TYPE_CHECKING:
    import argparse

    from mockdcp.model import Bucket


def refusal(args: argparse.Namespace) -> str | None:
    """Why these options cannot be measured together (None: they can)."""
    if args.replicas > args.nodes - 1:
        return f"{args.replicas} replica(s) need more nodes"
    return None


async def rebalance_once(bucket: Bucket, nodes: int, replicas: int) -> dict[str, float]:
    """A rebalance from ``nodes`` to ``nodes + 1`` nodes while the reference cluster
    consumer streams the bucket: seconds the rebalance took, then until the consumer
    held the oracle."""
    import trio

    from mockdcp.client import ClusterConsumer

    async with bench_server(bucket, nodes, replicas) as server:
        consumer = ClusterConsumer(server.host, server.kv_port, name="mockdcp-bench-rebalance")
        async with trio.open_nursery() as nursery:
            await nursery.start(consumer.run)
            await trio.sleep(0.2)  # streaming under way
            t0 = time.perf_counter()
            await server.apply({"add_node": {}}, {"rebalance": {}})
            rebalance_s = time.perf_counter() - t0
            oracle = {k: item.seqno for k, item in server.oracle().items()}
            while True:
                held = {k: v.seqno for k, v in consumer.state.documents().items()}
                if held == oracle:
                    break
                await trio.sleep(0.5)
            converged_s = time.perf_counter() - t0
            nursery.cancel_scope.cancel()
        moved = server.topology.rev
    return {"rebalance_s": rebalance_s, "converged_s": converged_s, "config_rev": moved}


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    import trio

    results = []
    for _ in range(args.runs):
        bucket, _, _ = load_bucket(args.items, args.value_size, args.vbuckets)
        results.append(trio.run(rebalance_once, bucket, args.nodes, args.replicas))
        del bucket
        gc.collect()
    params = {
        "items": args.items,
        "vbuckets": args.vbuckets,
        "nodes": args.nodes,
        "replicas": args.replicas,
    }
    figures = {
        "rebalance_s": statistics.median(r["rebalance_s"] for r in results),
        "consumer_holds_oracle_after_s": statistics.median(r["converged_s"] for r in results),
    }
    targets = {"rebalance_s": "< 10"}
    return emit(args, "rebalance", params, figures, {"all": results}, True, targets)
