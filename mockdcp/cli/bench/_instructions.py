"""``mockdcp bench cluster --count instructions``: what a streamed event costs the
server in instructions, counted by valgrind's callgrind, from one node and from N nodes.

CPU seconds on a loaded machine move by a tenth from run to run, more than the
difference a cluster makes; an instruction count does not. Each configuration (one
node; ``--nodes`` with ``--replicas``) gets a server process of its own, started under
``valgrind --tool=callgrind --instr-atstart=no`` (its load and start run uninstrumented):
it loads the bench's bucket (``_harness.load_bucket``), serves it, waits for every
management port and prints its KV ports and plan. The bench consumer (a separate
process, not counted) streams it once to warm it (first-use imports, the first
stream's structures), then ``CLUSTER_PASSES`` times with the instrumentation switched
on around each pass (``callgrind_control -i on``/``-i off``) and a dump after it
(``callgrind_control -d``): a dump's totals are the instructions (``Ir``) and system
calls (``sysCount``, ``--collect-systime=yes``) the server's threads made in that pass,
the consumer's bootstrap of its connections included, as the CPU-seconds bench counts.

Figures (medians of the passes): instructions and system calls per event from one node
and from the nodes, and ``cluster_instructions_ratio``, one node's instructions per
event over the nodes' (the ``cluster_cpu_ratio`` of instructions; target 0.95). The
dumps are kept (their directory goes to stderr): ``callgrind_annotate FILE`` lists a
pass's instructions by function of the interpreter and its libraries.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mockdcp.cli.bench._cluster import cluster_params
from mockdcp.cli.bench._harness import bytecode_cached, consumer_command, emit

if TYPE_CHECKING:
    from collections.abc import Sequence

#: passes counted per configuration (after one uncounted pass that warms the server)
CLUSTER_PASSES = 3
#: seconds a pass may take under callgrind (about 50 times native for Python code)
PASS_TIMEOUT_S = 1800.0


def refusal() -> str | None:
    """Why instructions cannot be counted here (None: they can)."""
    missing = [tool for tool in ("valgrind", "callgrind_control") if shutil.which(tool) is None]
    if missing:
        return (
            "--count instructions runs the server under valgrind's callgrind: "
            f"{', '.join(missing)} not found"
        )
    return None


def dump_totals(path: Path) -> dict[str, int]:
    """A callgrind dump's totals by event name (``events:`` and ``totals:``, or
    ``summary:`` where there are no totals)."""
    names: list[str] = []
    found: dict[str, list[int]] = {}
    with path.open() as dump:
        for line in dump:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith(("totals:", "summary:")):
                key, _, values = line.partition(":")
                found[key] = [int(v) for v in values.split()]
    # callgrind 3.19 writes "summary: 0" beside the totals: the totals count
    totals = found.get("totals") or found.get("summary")
    if not names or not totals:
        raise ValueError(f"{path}: not a callgrind dump with totals")
    return dict(zip(names, totals, strict=False))


class CountedServer:
    """A bench server under callgrind, its instrumentation off until a pass asks."""

    def __init__(
        self, args: argparse.Namespace, nodes: int, replicas: int, out_dir: Path, tag: str
    ) -> None:
        self.out_base = out_dir / f"callgrind.{tag}"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--collect-systime=yes",
            f"--callgrind-out-file={self.out_base}",
            sys.executable,
            "-m",
            "mockdcp.cli.bench._instructions",
            "--items",
            str(args.items),
            "--value-size",
            str(args.value_size),
            "--vbuckets",
            str(args.vbuckets),
            "--nodes",
            str(nodes),
            "--replicas",
            str(replicas),
            *(["--from-disk"] if args.from_disk else []),
        ]
        self.log = (out_dir / f"valgrind.{tag}.log").open("wb")
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.log.close()
            raise RuntimeError(
                f"the counted server exited before it was ready: see {self.log.name}"
            )
        self.ready: dict[str, Any] = json.loads(line)
        self.dumps = 0

    def control(self, *options: str) -> None:
        """``callgrind_control OPTIONS PID`` (through vgdb)."""
        subprocess.run(
            ["callgrind_control", *options, str(self.proc.pid)],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def counted(self, consumer: Sequence[str]) -> tuple[dict[str, Any], dict[str, int]]:
        """One pass with the instrumentation on: the consumer's report and the totals
        of the dump taken after it."""
        self.control("-i", "on")
        try:
            report = _consume(consumer)
        finally:
            self.control("-i", "off")
        self.control("-d", f"pass{self.dumps + 1}")
        self.dumps += 1
        return report, dump_totals(Path(f"{self.out_base}.{self.dumps}"))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _consume(command: Sequence[str]) -> dict[str, Any]:
    result = subprocess.run(command, capture_output=True, check=True, timeout=PASS_TIMEOUT_S)
    report: dict[str, Any] = json.loads(result.stdout.decode().strip().splitlines()[-1])
    return report


def _consumer_command(args: argparse.Namespace, ready: dict[str, Any]) -> list[str]:
    """The bench consumer for a counted server: its port, or its plan."""
    return consumer_command(
        ready["port"], args.items, args.vbuckets, legacy=args.legacy, plan=ready["plan"]
    )


def _measure(
    args: argparse.Namespace, nodes: int, replicas: int, out_dir: Path, tag: str
) -> tuple[list[float], list[float], bool]:
    """Instructions and system calls per event, a pass each, and whether every pass
    brought every item."""
    server = CountedServer(args, nodes, replicas, out_dir, tag)
    try:
        consumer = _consumer_command(args, server.ready)
        warm = _consume(consumer)
        complete = bool(warm["complete"])
        instructions: list[float] = []
        syscalls: list[float] = []
        for _ in range(CLUSTER_PASSES):
            report, totals = server.counted(consumer)
            complete &= bool(report["complete"])
            instructions.append(totals["Ir"] / report["events"])
            syscalls.append(totals.get("sysCount", 0) / report["events"])
    finally:
        server.close()
    return instructions, syscalls, complete


def run(args: argparse.Namespace) -> int:
    """Count and report (see the module docstring)."""
    out_dir = Path(tempfile.mkdtemp(prefix="mockdcp-callgrind-"))
    single_ipe: list[float] = []
    cluster_ipe: list[float] = []
    single_spe: list[float] = []
    cluster_spe: list[float] = []
    ratios: list[float] = []
    passes: dict[str, list[float]] = {"one_node": [], "nodes": []}
    complete = True
    with bytecode_cached():
        for run_no in range(args.runs):
            one, one_sys, one_complete = _measure(args, 1, 0, out_dir, f"run{run_no}-1node")
            many, many_sys, many_complete = _measure(
                args, args.nodes, args.replicas, out_dir, f"run{run_no}-{args.nodes}nodes"
            )
            complete &= one_complete and many_complete
            passes["one_node"] += one
            passes["nodes"] += many
            single_ipe.append(statistics.median(one))
            cluster_ipe.append(statistics.median(many))
            single_spe.append(statistics.median(one_sys))
            cluster_spe.append(statistics.median(many_sys))
            ratios.append(single_ipe[-1] / cluster_ipe[-1])
    print(f"mockdcp bench cluster: callgrind dumps in {out_dir}", file=sys.stderr)
    params = {**cluster_params(args), "count": "instructions"}
    figures = {
        "instructions_per_event": statistics.median(single_ipe),
        "cluster_instructions_per_event": statistics.median(cluster_ipe),
        # one node's instructions an event over the nodes' (the target is 0.95)
        "cluster_instructions_ratio": statistics.median(ratios),
        "syscalls_per_event": statistics.median(single_spe),
        "cluster_syscalls_per_event": statistics.median(cluster_spe),
    }
    samples = {
        "instructions_per_event": single_ipe,
        "cluster_instructions_per_event": cluster_ipe,
        "cluster_instructions_ratio": ratios,
        # every counted pass's instructions per event (how far the passes differ)
        "pass_instructions_per_event": passes,
    }
    return emit(
        args,
        "cluster",
        params,
        figures,
        samples,
        complete,
        {"cluster_instructions_ratio": ">= 0.95"},
    )


async def _serve(bucket: Any, nodes: int, replicas: int) -> None:  # noqa: ANN401 - a Bucket
    """Serve ``bucket`` until stdin closes, after printing its KV port and plan."""
    import trio

    from mockdcp.cli.bench._harness import bench_server, cluster_plan, management_ready

    async with bench_server(bucket, nodes, replicas) as server:
        await management_ready(server)
        plan = cluster_plan(server) if nodes > 1 else []
        print(json.dumps({"port": server.kv_port, "plan": plan}), flush=True)
        await trio.to_thread.run_sync(sys.stdin.buffer.read)


def main() -> None:
    """The counted server (run under callgrind by ``CountedServer``)."""
    import gc

    import trio

    from mockdcp.cli.bench._harness import expel_to_disk, load_bucket

    p = argparse.ArgumentParser()
    p.add_argument("--items", type=int, required=True)
    p.add_argument("--value-size", type=int, required=True)
    p.add_argument("--vbuckets", type=int, required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--replicas", type=int, required=True)
    p.add_argument("--from-disk", action="store_true")
    a = p.parse_args()
    bucket, _, _ = load_bucket(a.items, a.value_size, a.vbuckets)
    if a.from_disk:
        expel_to_disk(bucket)
    gc.collect()
    trio.run(_serve, bucket, a.nodes, a.replicas)
    os._exit(0)  # the bucket's teardown is no part of any pass


if __name__ == "__main__":
    main()
