"""``mockdcp bench cluster --nodes N [--replicas R]``: the bucket of ``stream`` (from
memory, or ``--from-disk``) served from N nodes and streamed by one consumer with a
connection per node, each streaming the vbuckets active there, against the same bucket
streamed from one node in the same run. Each is streamed ``CLUSTER_PASSES`` times a run
(the median pass counts: a single pass is a fraction of a second, within noise).
Figures: events/s across the nodes and its ratio to one node's (target 0.9), events
per CPU second of the nodes and of the consumer, events per server CPU second of one
node and the nodes' over it, run by run (``cluster_cpu_ratio``, target 0.95: a cluster
streams an event for the CPU one node does), the server's page faults a pass of one node
and of the nodes, and with replicas the seconds building their copies, the resident
bytes a replica copy of an item adds (target: no more than its active's) and loading
with the replicas over loading alone (target 2).
``--count instructions`` counts the server's instructions instead (``_instructions``).
"""

from __future__ import annotations

import gc
import statistics
from functools import partial
from typing import TYPE_CHECKING, Any

from mockdcp.cli.bench._harness import emit, expel_to_disk, load_bucket, stream_once

if TYPE_CHECKING:
    import argparse

#: streams of one node and of the cluster per run (the median pass counts)
CLUSTER_PASSES = 3


def refusal(args: argparse.Namespace) -> str | None:
    """Why these options cannot be measured together (None: they can)."""
    if args.nodes < 2:
        return "cluster measures 2..16 nodes: give --nodes N"
    if args.filter or args.stream_ids or args.consumers > 1 or args.tls:
        return (
            "--nodes measures one plain consumer (no --filter, --stream-ids, --consumers or --tls)"
        )
    if args.replicas > args.nodes - 1:
        return f"{args.replicas} replica(s) need more nodes"
    if args.count == "instructions":
        from mockdcp.cli.bench._instructions import refusal as counting_refusal

        return counting_refusal()
    return None


def cluster_params(args: argparse.Namespace) -> dict[str, Any]:
    """The parameters a cluster report names (in CPU seconds or in instructions)."""
    return {
        "items": args.items,
        "value_size": args.value_size,
        "vbuckets": args.vbuckets,
        "nodes": args.nodes,
        "replicas": args.replicas,
        "from_disk": args.from_disk,
        "legacy": args.legacy,
    }


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring); ``--count instructions``:
    ``_instructions``."""
    if args.count == "instructions":
        from mockdcp.cli.bench._instructions import run as count_instructions

        return count_instructions(args)
    import trio

    one_node: list[float] = []
    cluster_rates: list[float] = []
    server_cpu: list[float] = []
    single_cpu: list[float] = []
    consumer_cpu: list[float] = []
    faults: list[float] = []
    cluster_faults: list[float] = []
    replica_builds: list[float] = []
    replica_mem: list[float] = []
    load_seconds: list[float] = []
    complete: list[bool] = []
    for _ in range(args.runs):
        bucket, _, load_s = load_bucket(args.items, args.value_size, args.vbuckets)
        load_seconds.append(load_s)
        if args.from_disk:
            expel_to_disk(bucket)
        results = [
            trio.run(
                partial(
                    stream_once,
                    bucket,
                    args.items,
                    args.vbuckets,
                    args.legacy,
                    nodes=nodes,
                    replicas=replicas,
                    passes=CLUSTER_PASSES,
                )
            )
            for nodes, replicas in ((1, 0), (args.nodes, args.replicas))
        ]
        single, clustered = results
        one_node.append(single["events"] / single["seconds"])
        cluster_rates.append(clustered["events"] / clustered["seconds"])
        server_cpu.append(clustered["events"] / clustered["server_cpu_s"])
        single_cpu.append(single["events"] / single["server_cpu_s"])
        consumer_cpu.append(clustered["events"] / clustered["cpu_s"])
        faults.append(single["server_page_faults"])
        cluster_faults.append(clustered["server_page_faults"])
        replica_builds.append(clustered["setup_s"] - single["setup_s"])
        if args.replicas:
            grown_by = clustered["setup_rss"] - single["setup_rss"]
            replica_mem.append(grown_by / (args.items * args.replicas))
        complete += [bool(single["complete"]), bool(clustered["complete"])]
        del bucket
        gc.collect()
    params = cluster_params(args)
    figures: dict[str, Any] = {
        "cluster_events_per_s": statistics.median(cluster_rates),
        "events_per_s": statistics.median(one_node),
        # across the nodes over one node, run by run (the target is 0.9)
        "cluster_ratio": statistics.median(
            c / r for c, r in zip(cluster_rates, one_node, strict=True)
        ),
        # where a cluster's events cost more: the nodes, or the consumer walking a
        # connection per node
        "cluster_events_per_server_cpu_s": statistics.median(server_cpu),
        "events_per_server_cpu_s": statistics.median(single_cpu),
        # the nodes' CPU an event over one node's, run by run (the target is 0.95)
        "cluster_cpu_ratio": statistics.median(
            c / r for c, r in zip(server_cpu, single_cpu, strict=True)
        ),
        "cluster_events_per_consumer_cpu_s": statistics.median(consumer_cpu),
        # the server's page faults a pass (the median pass): its write buffers faulted
        # in again after each heap trim, counted where CPU seconds are noise
        "server_page_faults": statistics.median(faults),
        "cluster_server_page_faults": statistics.median(cluster_faults),
        "replica_build_s": statistics.median(replica_builds),
    }
    if args.replicas:
        figures["replica_bytes_per_item"] = statistics.median(replica_mem)
        figures["load_with_replicas_ratio"] = statistics.median(
            (ls + max(b, 0.0)) / ls for ls, b in zip(load_seconds, replica_builds, strict=True)
        )
    samples = {
        "cluster_events_per_s": cluster_rates,
        "events_per_s": one_node,
        "cluster_events_per_server_cpu_s": server_cpu,
        "events_per_server_cpu_s": single_cpu,
        "replica_build_s": replica_builds,
        "server_page_faults": faults,
        "cluster_server_page_faults": cluster_faults,
    }
    targets = {
        "cluster_ratio": ">= 0.9",
        "cluster_cpu_ratio": ">= 0.95",
        "load_with_replicas_ratio": "<= 2",
    }
    return emit(args, "cluster", params, figures, samples, all(complete), targets)
