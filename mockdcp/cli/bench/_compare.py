"""``mockdcp bench compare REF``: a git ref (an earlier release) against the working
tree, side by side on the same machine, so that no regression goes unseen.

REF's tree (``git archive``) is installed into a virtual environment of its own under
``$MOCKDCP_CACHE/bench-compare/<commit>`` (kept: the next compare of that commit reuses
it), and the working tree likewise into ``bench-compare/worktree`` (made afresh each
time, with what is not committed yet; never the running interpreter, whose own start may
cost more than a fresh environment's): ``pip install --no-deps --no-index`` with the
running interpreter's packages visible to it (a ``.pth`` file), else, where pip cannot
build offline (no ``wheel``), the package directory copied in as a wheel of a
pure-Python package would lay it out.
Its dependencies are the working tree's: the comparison is of mockdcp's code.

Each of ``--runs`` rounds measures every default path with both installs, the order
alternating from round to round (old first, then new first): a machine whose load
drifts weighs on both alike. Every process runs in a neutral directory, so that neither
imports the checkout it was started from, and every process of a side (and what it
starts) without the caller's ``PYTHONPATH`` (``side_environ``), so that neither imports
a source tree it names.

* ``memory``, ``disk``, ``legacy``: events/s of ``mockdcp bench --items N`` (the spelling
  both understand), with ``--from-disk`` and ``--legacy``;
* ``docs_aware``, ``docs_legacy``, ``docs_bare``: ``mockdcp serve --docs N`` streamed by
  the working tree's bench consumer (the instrument stays the same), collection-aware,
  legacy, and negotiating nothing (``--bare``: no HELLO, no DCP_CONTROL; a release's own
  bench consumer may not know ``--bare``, the working tree's does);
  ``docs_ready``: seconds to that server's ready line (``docs_ready_cpu``: the CPU
  seconds of the server and of the worker processes it started for the load, by then:
  ``tree_cpu_seconds``; its own alone made a load drawn in workers look cheaper than
  the same drawn in the server's process). The server is measured warm:
  once what it does after its ready line is done (``after_ready``) and after a first
  pass not counted, whose one-time costs (a first connection's imports and tables)
  would otherwise be most of a short pass's CPU and are not what a stream costs;
* ``streams_aware``, ``streams_legacy``, ``streams_bare``: the same with the default
  1,024 vbuckets and
  ``SPREAD_DOCS`` documents, a few a stream: what each stream costs (its request, its
  backfill, its marker and end), which ``docs_*``'s 64 streams of many documents hide;
* ``after_ready``: the CPU seconds ``mockdcp serve --docs 0`` spends after its ready
  line with no client (``settled``: the work a start leaves for later, which a first
  consumer shares the CPU with): a start that moves work past its ready line is faster
  in ``startup`` and slower here;
* ``first_pass``: the server's CPU seconds for ``streams_aware``'s first pass, the one
  not counted there: what its streams cost with a first consumer's one-time costs;
* ``startup``: seconds from spawning ``mockdcp serve --docs 0`` to its ready line;
  ``import``: seconds of ``import mockdcp``; ``import_server``: of ``import
  mockdcp.server`` (what serving needs, whatever ``import mockdcp`` leaves for later).

Every process reads its bytecode from the bench's cache (``_harness.bytecode_cached``),
as installed copies read what pip compiled. Each path's ratio is new over old as a
speed: a rate's new/old, a time's old/new; 1.0 or more is no regression. Each path also
has a ``_cpu`` twin: the rate per CPU second of the server (``mockdcp bench``'s
``events_per_server_cpu_s``; for ``serve --docs``, the server process's CPU seconds
while the consumer streams, from ``/proc``) or the time in CPU seconds (the server's at
its ready line, the importing process's): where other work shares the cores, wall-clock
samples vary several-fold from round to round, these much less.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mockdcp.cli.bench._harness import bytecode_cached, consumer_command, cpu_seconds_of, emit
from mockdcp.cli.bench._startup import import_time, read_ready

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator

#: the paths and whether each is a time (its ratio is then old/new); each ``*_cpu``
#: path is its wall-clock twin per CPU second of the server (a rate) or in its CPU
#: seconds (a time): on a machine shared with other work, the figures to read
PATHS = {
    "memory": False,
    "memory_cpu": False,
    "disk": False,
    "disk_cpu": False,
    "legacy": False,
    "legacy_cpu": False,
    "docs_aware": False,
    "docs_aware_cpu": False,
    "docs_legacy": False,
    "docs_legacy_cpu": False,
    "docs_bare": False,
    "docs_bare_cpu": False,
    "docs_ready": True,
    "docs_ready_cpu": True,
    "streams_aware": False,
    "streams_aware_cpu": False,
    "streams_legacy": False,
    "streams_legacy_cpu": False,
    "streams_bare": False,
    "streams_bare_cpu": False,
    "after_ready": True,
    "first_pass": True,
    "startup": True,
    "startup_cpu": True,
    "import": True,
    "import_cpu": True,
    "import_server": True,
    "import_server_cpu": True,
}

#: the default size of a compare: what a busy two-core machine measures in minutes
COMPARE_ITEMS = 100_000

#: the documents of the ``streams_*`` paths, over 1,024 vbuckets (about ten a stream)
SPREAD_DOCS = 10_000


#: the variables a side's processes do not inherit. ``PYTHONPATH`` goes before a
#: virtual environment's site-packages: under one naming a source tree both sides would
#: import that tree's mockdcp, and measure the same code. The others that bear on
#: imports need not go: a virtual environment takes its ``sys.prefix`` and
#: site-packages from its ``pyvenv.cfg`` whatever ``PYTHONHOME`` says (which moves only
#: the standard library, alike for both sides; a ``PYTHONHOME`` or
#: ``PYTHONPLATLIBDIR`` without one stops the interpreter at its start), it has no user
#: site-packages (``PYTHONUSERBASE``, ``PYTHONNOUSERSITE``), and ``PYTHONSTARTUP``
#: runs only in an interactive interpreter
#: (https://docs.python.org/3/using/cmdline.html#environment-variables,
#: https://docs.python.org/3/library/site.html)
NOT_INHERITED = ("PYTHONPATH",)


def side_environ() -> dict[str, str]:
    """The environment of a process of a side's interpreter: this process's as it is now
    (``bytecode_cached``'s settings included) but for ``NOT_INHERITED``. The bench
    consumer is this interpreter's, and keeps this process's environment."""
    return {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}


def refusal(args: argparse.Namespace) -> str | None:
    """Why these options cannot be measured together (None: they can)."""
    if args.ref is None:
        return "give the git ref to compare with: mockdcp bench compare REF"
    return None


def _checkout() -> Path:
    """The git checkout the running mockdcp comes from."""
    root = Path(__file__).resolve().parents[3]  # mockdcp/cli/bench/_compare.py
    if not (root / ".git").exists():
        raise RuntimeError(f"{root} is not a git checkout: compare runs from a source tree")
    return root


def _git(root: Path, *argv: str) -> bytes:
    return subprocess.run(["git", "-C", str(root), *argv], capture_output=True, check=True).stdout


def commit_of(root: Path, ref: str) -> str:
    """The commit ``ref`` names (a ``ValueError`` when it names none)."""
    try:
        return _git(root, "rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()
    except subprocess.CalledProcessError:
        raise ValueError(f"{ref!r} names no commit of {root}") from None


def _site_packages(venv: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv / "lib" / version / "site-packages"


def _deps_path(venv: Path) -> None:
    """The running interpreter's dependencies (and build backend) visible to ``venv``,
    after its own packages (a ``.pth`` file)."""
    here = [p for p in sys.path if p.endswith("site-packages")]
    (_site_packages(venv) / "_mockdcp_compare_deps.pth").write_text("\n".join(here) + "\n")


def install(root: Path, commit: str, cache: Path) -> tuple[str, str]:
    """The python of an environment holding ``commit``'s mockdcp (made once per commit,
    then reused), and how it was installed (``pip`` or ``copy``)."""
    home = cache / commit
    if (home / "installed").exists():  # its dependencies: this interpreter's (an earlier
        _deps_path(home / "venv")  # one may be gone)
        return str(home / "venv" / "bin" / "python"), (home / "installed").read_text().strip()
    archive = _git(root, "archive", "--format=tar", commit)

    def unpack(src: Path) -> None:
        with tempfile.TemporaryFile() as tar_file:
            tar_file.write(archive)
            tar_file.seek(0)
            with tarfile.open(fileobj=tar_file) as tar:
                tar.extractall(src, filter="data")

    return _environment(home, unpack)


def install_tree(root: Path, cache: Path) -> tuple[str, str]:
    """The python of an environment holding the working tree's mockdcp as it is now (its
    files git tracks or would, changed or not), made afresh in ``cache/worktree`` the way
    ``install`` makes a commit's: both sides start alike. The running interpreter is no
    such side: an editable install's finder and whatever ``.pth`` files its
    site-packages hold run at its every start (on one development machine 0.07 CPU
    seconds more than a fresh environment's start, the whole of ``startup``'s gap)."""
    listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    names = [n for n in listed.decode().split("\0") if n]

    def copy(src: Path) -> None:
        for name in names:
            source = root / name
            if source.is_file():  # a tracked file deleted in the tree is left out
                (src / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, src / name)

    return _environment(cache / "worktree", copy)


def _environment(home: Path, fill: Callable[[Path], None]) -> tuple[str, str]:
    """A virtual environment at ``home`` whose mockdcp is the source ``fill`` lays out
    (see the module docstring), and how it was installed."""
    python = home / "venv" / "bin" / "python"
    shutil.rmtree(home, ignore_errors=True)
    src = home / "src"
    src.mkdir(parents=True)
    fill(src)
    base = getattr(sys, "_base_executable", sys.executable)
    env = side_environ()
    subprocess.run([base, "-m", "venv", "--without-pip", str(home / "venv")], check=True, env=env)
    site_dir = _site_packages(home / "venv")
    _deps_path(home / "venv")
    pip = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"),
            *("--no-deps", "--no-index", "--no-build-isolation", str(src)),
        ],
        capture_output=True,
        check=False,
        cwd=home,
        env=env,
    )
    how = "pip"
    if pip.returncode != 0:  # no wheel builder offline: lay the pure-Python package out
        shutil.copytree(src / "mockdcp", site_dir / "mockdcp")
        how = "copy"
    found = subprocess.run(
        [str(python), "-c", "import mockdcp; print(mockdcp.__file__)"],
        capture_output=True,
        check=True,
        cwd=home,
        env=env,
    ).stdout.decode()
    if not found.startswith(str(site_dir)):
        raise RuntimeError(f"{home}'s environment imports mockdcp from {found.strip()}")
    (home / "installed").write_text(how + "\n")
    return str(python), how


def _bench_rates(python: str, items: int, vbuckets: int, *flags: str) -> tuple[float, float]:
    """events/s and events per server CPU second of ``python -m mockdcp bench --items
    N`` (a report of either shape: the bench before the modes, or a mode's)."""
    out = subprocess.run(
        [
            *(python, "-m", "mockdcp", "bench", "--items", str(items)),
            *("--vbuckets", str(vbuckets), "--runs", "1", "--json", *flags),
        ],
        capture_output=True,
        check=True,
        timeout=1800,
        env=side_environ(),
    ).stdout
    report = json.loads(out.splitlines()[-1])
    figures = report.get("figures", report)
    return float(figures["events_per_s"]), float(figures["events_per_server_cpu_s"])


def server_cpu_seconds(pid: int) -> float:
    """The CPU seconds every thread of process ``pid`` has run, to the nanosecond (Linux's
    ``/proc/<pid>/task/*/schedstat``; ``cpu_seconds_of`` where there is none): the
    ticks of ``/proc/<pid>/stat`` are 10 ms, and a legacy stream of a compare's 100,000
    documents costs the server about 50 ms, so a tick more or less moved its ratio by a
    fifth. Only the threads alive at the reading count (a thread that ends between two
    readings takes its seconds with it), so this is for a stretch where the server's
    threads stay, as while a consumer streams; ``cpu_seconds_of`` keeps every
    thread's, ended ones too, in ticks (a start's figure)."""
    total, found = 0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tasks = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
            found = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e9 if found else cpu_seconds_of(pid)


def _consume(
    port: int, items: int, vbuckets: int, legacy: bool, server: int, *, bare: bool = False
) -> tuple[float, float]:
    """events/s of the working tree's bench consumer streaming ``items`` from ``port``
    (``bare``: negotiating nothing), and events per CPU second of the server (process
    ``server``) meanwhile (``server_cpu_seconds``)."""
    c0 = server_cpu_seconds(server)
    out = subprocess.run(
        consumer_command(port, items, vbuckets, legacy=legacy, extra=["--bare"] if bare else []),
        capture_output=True,
        check=True,
        timeout=1800,
    ).stdout
    cpu = server_cpu_seconds(server) - c0
    report = json.loads(out.splitlines()[-1])
    if report["events"] != items:
        raise RuntimeError(f"the consumer got {report['events']} of {items} documents")
    return float(report["events"] / report["seconds"]), items / max(cpu, 0.01)


def _spawn_ready(
    python: str, docs: int, vbuckets: int
) -> tuple[subprocess.Popen[bytes], int, float, float]:
    """``python -m mockdcp serve --docs DOCS`` spawned and read to its ready line: the
    process, its KV port, and the seconds and its CPU seconds to that line. Both ports
    are any free one, the server's choice (``--http-port 0``, there since the first
    ``serve``): a port picked free beforehand could be another process's by the time
    the server bound it."""
    cmd = [python, "-m", "mockdcp", "serve", "--port", "0", "--http-port", "0"]
    with tempfile.TemporaryFile() as stderr:  # the child keeps writing to its own copy
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [*cmd, "--vbuckets", str(vbuckets), "--docs", str(docs), "--json"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=side_environ(),
        )
        try:
            fields, ready, cpu = read_ready(proc, stderr, t0)
        except RuntimeError:
            assert proc.stdout is not None
            proc.stdout.close()
            raise
    return proc, int(fields["kv_port"]), ready, cpu


#: ``settled``: the server is idle once it ran less than this CPU seconds in a poll
SETTLED_CPU = 0.002
#: ``settled``'s polls (seconds apart), and the most seconds it waits
SETTLE_POLL, SETTLE_MOST = 0.1, 5.0


def settled(pid: int, poll: float = SETTLE_POLL, most: float = SETTLE_MOST) -> float:
    """Wait until process ``pid`` is idle (less than ``SETTLED_CPU`` in a ``poll``) or
    ``most`` seconds passed; the CPU seconds it ran meanwhile."""
    start = last = server_cpu_seconds(pid)
    deadline = time.perf_counter() + most
    while time.perf_counter() < deadline:
        time.sleep(poll)
        now = server_cpu_seconds(pid)
        if now - last < SETTLED_CPU:
            break
        last = now
    return last - start


def _served(python: str, docs: int, vbuckets: int) -> dict[str, float]:
    """``python -m mockdcp serve --docs DOCS``: seconds (and CPU seconds) to its ready
    line, then, the server settled and warmed by a first pass (``first_pass``: its
    CPU seconds), events/s (and per server CPU second) of a collection-aware, a legacy
    and a bare consumer (one that negotiates nothing) streaming every document."""
    proc, port, ready, ready_cpu = _spawn_ready(python, docs, vbuckets)
    try:
        settled(proc.pid)
        _, first_rate = _consume(port, docs, vbuckets, False, proc.pid)
        aware, aware_cpu = _consume(port, docs, vbuckets, False, proc.pid)
        legacy, legacy_cpu = _consume(port, docs, vbuckets, True, proc.pid)
        bare, bare_cpu = _consume(port, docs, vbuckets, True, proc.pid, bare=True)
        return {
            "docs_ready": ready,
            "docs_ready_cpu": ready_cpu,
            "docs_aware": aware,
            "docs_aware_cpu": aware_cpu,
            "docs_legacy": legacy,
            "docs_legacy_cpu": legacy_cpu,
            "docs_bare": bare,
            "docs_bare_cpu": bare_cpu,
            "first_pass": docs / first_rate,
        }
    finally:
        proc.terminate()
        proc.wait(30)


def _ready(python: str) -> tuple[float, float, float]:
    """Seconds and CPU seconds from spawning ``python -m mockdcp serve --docs 0`` to its
    ready line, and the CPU seconds it spends after it until ``settled``."""
    proc, _, ready, cpu = _spawn_ready(python, 0, 1024)
    try:
        after = settled(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
    return ready, cpu, after


def _imports(python: str, module: str) -> tuple[float, float]:
    """Seconds and CPU seconds of ``import MODULE`` (medians of 3)."""
    runs = [import_time(python, module, side_environ()) for _ in range(3)]
    return statistics.median(r["seconds"] for r in runs), statistics.median(
        r["cpu_s"] for r in runs
    )


def measure_round(python: str, items: int, vbuckets: int) -> dict[str, float]:
    """Every path once with ``python``'s mockdcp."""
    figures: dict[str, float] = {}
    starts = [_ready(python) for _ in range(3)]
    figures["startup"] = statistics.median(wall for wall, _, _ in starts)
    figures["startup_cpu"] = statistics.median(cpu for _, cpu, _ in starts)
    figures["after_ready"] = statistics.median(after for _, _, after in starts)
    figures["import"], figures["import_cpu"] = _imports(python, "mockdcp")
    figures["import_server"], figures["import_server_cpu"] = _imports(python, "mockdcp.server")
    for path, flags in (("memory", ()), ("disk", ("--from-disk",)), ("legacy", ("--legacy",))):
        figures[path], figures[f"{path}_cpu"] = _bench_rates(python, items, vbuckets, *flags)
    served = _served(python, items, vbuckets)
    del served["first_pass"]  # (the spread's, of many streams, is the one reported)
    figures.update(served)
    spread = _served(python, SPREAD_DOCS, 1024)
    for form in ("aware", "legacy", "bare"):
        figures[f"streams_{form}"] = spread[f"docs_{form}"]
        figures[f"streams_{form}_cpu"] = spread[f"docs_{form}_cpu"]
    figures["first_pass"] = spread["first_pass"]
    return figures


def compare(
    old: str, new: str, runs: int, measure: Callable[[str], dict[str, float]]
) -> dict[str, dict[str, list[float]]]:
    """``runs`` rounds of ``measure`` with each python, the order alternating; each
    path's samples, old and new (every path of ``PATHS``, and any other ``measure``
    gives: ``tests/bench/stream_cost.py`` measures its own)."""
    samples: dict[str, dict[str, list[float]]] = {p: {"old": [], "new": []} for p in PATHS}
    for round_number in range(runs):
        sides = [("old", old), ("new", new)]
        for side, python in sides if round_number % 2 == 0 else sides[::-1]:
            for path, value in measure(python).items():
                samples.setdefault(path, {"old": [], "new": []})[side].append(value)
    return samples


def ratios(samples: dict[str, dict[str, list[float]]]) -> dict[str, float]:
    """Per path: the old and new medians and new's speed over old's (see the module
    docstring), as ``PATH_old``, ``PATH_new``, ``PATH_ratio``."""
    figures: dict[str, float] = {}
    for path, is_time in PATHS.items():
        old = statistics.median(samples[path]["old"])
        new = statistics.median(samples[path]["new"])
        figures[f"{path}_old"] = old
        figures[f"{path}_new"] = new
        figures[f"{path}_ratio"] = old / new if is_time else new / old
    return figures


@contextlib.contextmanager
def _only_compare(cache: Path) -> Iterator[None]:
    """This compare alone uses ``cache``'s environments: the working tree's is made
    afresh by each compare, so a second compare at once (another checkout, another
    user of the same cache) waits for the first rather than install over it while it
    measures (an exclusive ``flock`` of ``cache/lock``)."""
    import fcntl

    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "lock", "wb") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"mockdcp bench compare: waiting for another compare using {cache}", file=sys.stderr
            )
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _measure(
    old: str, new: str, runs: int, items: int, vbuckets: int
) -> dict[str, dict[str, list[float]]]:
    """Every path of both installs, ``runs`` rounds, from a neutral directory."""
    neutral = tempfile.mkdtemp(prefix="mockdcp-compare-")
    here = os.getcwd()
    try:
        os.chdir(neutral)  # neither side imports the checkout it was started from
        with bytecode_cached():
            for python in (old, new):  # the bytecode cache filled, not timed
                _ready(python)
                import_time(python, "mockdcp.server", side_environ())
            return compare(old, new, runs, lambda py: measure_round(py, items, vbuckets))
    finally:
        os.chdir(here)
        shutil.rmtree(neutral, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    """Measure and report (see the module docstring)."""
    from mockdcp.data import cache_root

    items = args.items if args.items_given else COMPARE_ITEMS
    try:
        root = _checkout()
        commit = commit_of(root, args.ref)
    except (RuntimeError, ValueError) as e:
        print(f"mockdcp bench compare: {e}", file=sys.stderr)
        return 2
    with _only_compare(cache_root() / "bench-compare"):
        old, how = install(root, commit, cache_root() / "bench-compare")
        new, _ = install_tree(root, cache_root() / "bench-compare")
        samples = _measure(old, new, args.runs, items, args.vbuckets)
    params = {
        "ref": args.ref,
        "commit": commit,
        "installed_by": how,
        "items": items,
        "vbuckets": args.vbuckets,
    }
    targets = {f"{path}_ratio": ">= 1.0" for path in PATHS}
    return emit(args, "compare", params, ratios(samples), samples, True, targets)
