"""``mockdcp bench startup``: what a user waits for before the first byte streams.

* import: seconds to ``import mockdcp``, ``import mockdcp.cli`` and ``import
  mockdcp.server`` (what serving needs, as ``bench compare``'s ``import_server``) in a
  fresh interpreter (the interpreter's own start is not counted), with the CPU seconds,
  and the heavy modules each leaves imported (numpy, pyarrow, hypercorn, cryptography:
  none is wanted before use, not even by ``mockdcp.server``: a bucket loads numpy
  when it first needs it);
* ``mockdcp serve --docs 0``: seconds from spawning it to its KV port accepting a
  connection (polled every millisecond, on a port the bench holds for it: ``held_port``)
  and to its ready line, and whether its HTTP port accepts a connection at the ready
  line; the
  same for a plain ``mockdcp serve`` (its default 1,000 documents: the KV port listens,
  holding connections, while they load);
* in-process ``mockdcp.serve(port=0, http_port=0)``, as the pytest fixture of a trio
  test runs it: seconds from entering to the server being up, then to closed (the first
  time in a process apart: it pays the imports left for first use), and
  ``mockdcp.Server`` (the fixture of a plain test: a server in a thread) started and
  stopped.

Medians of ``--runs`` (at least 5 for the spawns: one is within the noise of a busy
machine), with the samples; CPU seconds beside the wall seconds of the import and of
the ready line (on a busy machine the wall clock measures the other work too). Every
process reads its bytecode from a cache (``_harness.bytecode_cached``), filled by a
first spawn that is not timed.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from mockdcp.cli.bench._harness import bytecode_cached, emit, tree_cpu_seconds
from mockdcp.cli.bench._ports import held_port

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

#: modules ``import mockdcp`` must not pull in before they are used
HEAVY_MODULES = ("numpy", "pyarrow", "hypercorn", "cryptography")

_IMPORT_SCRIPT = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import {module}
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
heavy = [m for m in {heavy!r} if m in sys.modules]
print(json.dumps({{"seconds": seconds, "cpu_s": cpu, "heavy": heavy}}))
"""

_IN_PROCESS_SCRIPT = """
import json, time
import trio
import mockdcp

async def once():
    t0 = time.perf_counter()
    async with mockdcp.serve(port=0, http_port=0) as server:
        up = time.perf_counter() - t0
        assert server.kv_port
    return up, time.perf_counter() - t0

first = trio.run(once)
later = [trio.run(once) for _ in range({runs})]
threads = []
for _ in range({runs}):
    t0 = time.perf_counter()
    server = mockdcp.Server(port=0, http_port=0).start()
    up = time.perf_counter() - t0
    server.stop()
    threads.append((up, time.perf_counter() - t0))
print(json.dumps({{"first": first, "later": later, "threads": threads}}))
"""


def import_time(python: str, module: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``import MODULE`` in a fresh ``python`` (with environment ``env``; None: this
    process's): its seconds, CPU seconds and the heavy modules it left imported."""
    script = _IMPORT_SCRIPT.format(module=module, heavy=HEAVY_MODULES)
    out = subprocess.run(
        [python, "-c", script], capture_output=True, check=True, timeout=120, env=env
    ).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def stderr_tail(stderr: IO[bytes], limit: int = 4000) -> str:
    """The end of a child's standard error (a file it wrote to), as the end of an error
    message: why it did not start (a traceback, ``mockdcp: ...``), or nothing."""
    stderr.seek(0, os.SEEK_END)
    stderr.seek(max(0, stderr.tell() - limit))
    text = stderr.read().decode(errors="replace").strip()
    return f"; its stderr ends:\n{text}" if text else "; it wrote nothing to stderr"


def serve_failed(message: str, stderr: IO[bytes]) -> RuntimeError:
    """The error of a ``serve`` that did not start, with the end of its stderr."""
    return RuntimeError(message + stderr_tail(stderr))


def read_ready(
    proc: subprocess.Popen[bytes], stderr: IO[bytes], t0: float
) -> tuple[dict[str, Any], float, float]:
    """The ready line of ``serve --json`` (spawned at ``perf_counter`` ``t0``), the
    seconds to it and the CPU seconds of the server and of the processes it started
    (its workers, ``tree_cpu_seconds``) then; a serve that ends without one is
    terminated and raised as :func:`serve_failed`."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    ready = time.perf_counter() - t0
    cpu = tree_cpu_seconds(proc.pid)
    if b"ready" not in line:
        proc.terminate()
        proc.wait(30)
        raise serve_failed(f"serve did not become ready: {line!r}", stderr)
    fields: dict[str, Any] = json.loads(line)
    return fields, ready, cpu


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.05):
            return True
    except OSError:
        return False


#: spawns of ``serve_times`` on other held ports when the port was taken all the same
#: (``held_port``)
LISTEN_ATTEMPTS = 3


class PortTaken(RuntimeError):
    """A spawned ``serve`` could not listen on the port the bench held for it."""


def serve_times(python: str, docs: int | None = 0) -> dict[str, Any]:
    """``python -m mockdcp serve --docs DOCS``: seconds from spawning it to its KV port
    accepting a connection and to its ready line, its CPU seconds then, and whether its
    HTTP port accepted a connection at the ready line (``docs`` None: no ``--docs``,
    the default documents). The KV port is polled before the ready line names it: the
    bench holds it (``held_port``); the HTTP port is any, the ready line's. A port that
    serve could not bind all the same (twice in CI, by a socket CI did not show) is said
    on stderr with the sockets on it and their processes (``sockets_on``), and another
    is held, ``LISTEN_ATTEMPTS`` times at most: a spawn that did not start is not timed."""
    for attempt in range(1, LISTEN_ATTEMPTS + 1):
        with held_port() as port:
            try:
                return _serve_times(python, docs, port)
            except PortTaken as exc:
                taken = f"{exc}\nsockets on port {port}: {sockets_on(port) or 'none found'}"
                if attempt == LISTEN_ATTEMPTS:
                    raise PortTaken(taken) from None
                print(f"mockdcp bench: {taken}\ntrying another port", file=sys.stderr)
    raise AssertionError("unreachable")


def sockets_on(port: int) -> str:
    """The TCP sockets (IPv4, IPv6) on ``port`` as Linux's ``/proc`` shows them (those
    listening or connected; one only bound is in no table there): each one's state and
    the processes that have it (pid and command line; none for a connection in
    TIME_WAIT); empty elsewhere."""
    states = {"01": "ESTABLISHED", "06": "TIME_WAIT", "0A": "LISTEN"}
    owners: dict[str, str] = {}  # "socket:[inode]" -> its address and state
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()  # local address "ADDR:PORT" in hex, state, ..., inode
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                state = states.get(fields[3], fields[3])
                owners[f"socket:[{fields[9]}]"] = f"{fields[1]} {state}"
    found, owned = set(), set()
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            link = os.readlink(fd)
            if link not in owners:
                continue
            command = (fd.parent.parent / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        owned.add(link)
        pid = fd.parent.parent.name
        found.add(f"{owners[link]} pid {pid}: {command.decode(errors='replace')[:200]}")
    unowned = len(owners) - len(owned)
    return "; ".join(sorted(found) + [f"{unowned} more"] * (unowned > 0))


def _serve_times(python: str, docs: int | None, port: int) -> dict[str, Any]:
    cmd = [python, "-m", "mockdcp", "serve", "--port", str(port), "--http-port", "0"]
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*cmd, *([] if docs is None else ["--docs", str(docs)]), "--json"],
        stdout=subprocess.PIPE,
        stderr=stderr,
        env={**os.environ},
    )
    try:
        while not _accepts(port):
            if proc.poll() is not None:
                failed = serve_failed(f"serve exited ({proc.returncode}) before listening", stderr)
                if "Address already in use" in str(failed):
                    raise PortTaken(str(failed))
                raise failed
            time.sleep(0.001)
        listening = time.perf_counter() - t0
        fields, ready, cpu = read_ready(proc, stderr, t0)
        return {
            "kv_listening_s": listening,
            "ready_s": ready,
            "ready_cpu_s": cpu,
            "http_up": _accepts(int(fields["http_port"])),
        }
    finally:
        proc.terminate()
        proc.wait(10)
        stderr.close()
        if proc.stdout is not None:
            proc.stdout.close()


def in_process_times(python: str, runs: int) -> dict[str, Any]:
    """The in-process servers of the pytest fixtures (see the module docstring)."""
    out = subprocess.run(
        [python, "-c", _IN_PROCESS_SCRIPT.format(runs=runs)],
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def measure(python: str, runs: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The figures (medians) and samples of ``python``'s mockdcp."""
    spawns = max(runs, 5)
    import_time(python, "mockdcp.cli")  # the bytecode cache filled, not timed
    serve_times(python)
    modules = ("mockdcp", "mockdcp.cli", "mockdcp.server")
    imports = {m: [import_time(python, m) for _ in range(spawns)] for m in modules}
    serves = [serve_times(python) for _ in range(spawns)]
    # plain ``mockdcp serve``: its default documents loaded (connections held) first
    defaults = [serve_times(python, None) for _ in range(spawns)]
    fixture = in_process_times(python, spawns)
    figures = {
        "import_mockdcp_s": statistics.median(r["seconds"] for r in imports["mockdcp"]),
        "import_mockdcp_cpu_s": statistics.median(r["cpu_s"] for r in imports["mockdcp"]),
        "import_cli_s": statistics.median(r["seconds"] for r in imports["mockdcp.cli"]),
        "import_server_s": statistics.median(r["seconds"] for r in imports["mockdcp.server"]),
        "import_server_cpu_s": statistics.median(r["cpu_s"] for r in imports["mockdcp.server"]),
        "import_heavy_modules": sorted(
            {m for name in modules for r in imports[name] for m in r["heavy"]}
        ),
        "serve_kv_listening_s": statistics.median(s["kv_listening_s"] for s in serves),
        "serve_ready_s": statistics.median(s["ready_s"] for s in serves),
        # what a machine whose cores are not shared would wait, about (one thread)
        "serve_ready_cpu_s": statistics.median(s["ready_cpu_s"] for s in serves),
        "serve_http_up_at_ready": all(s["http_up"] for s in serves),
        "serve_default_docs_kv_listening_s": statistics.median(
            s["kv_listening_s"] for s in defaults
        ),
        "serve_default_docs_ready_s": statistics.median(s["ready_s"] for s in defaults),
        "fixture_first_up_s": fixture["first"][0],
        "fixture_up_s": statistics.median(up for up, _ in fixture["later"]),
        "fixture_up_and_closed_s": statistics.median(t for _, t in fixture["later"]),
        "thread_server_up_and_stopped_s": statistics.median(t for _, t in fixture["threads"]),
    }
    samples = {
        "imports": imports,
        "serve": serves,
        "serve_default_docs": defaults,
        "in_process": fixture,
    }
    return figures, samples


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    with bytecode_cached() as pycache:
        figures, samples = measure(sys.executable, args.runs)
    targets = {
        "serve_kv_listening_s": "<= 0.25",
        "fixture_up_and_closed_s": "<= 0.1",
        "import_heavy_modules": "none",
    }
    params = {"python": sys.executable, "bytecode_cache": pycache}
    return emit(args, "startup", params, figures, samples, True, targets)
