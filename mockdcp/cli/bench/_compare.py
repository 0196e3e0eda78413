"""``mockdcp bench compare REF``: a git ref (an earlier release) against the working
tree, side by side on the same machine, so that no regression goes unseen.

REF's tree (``git archive``) is installed into a virtual environment of its own under
``$MOCKDCP_CACHE/bench-compare/<commit>`` (kept: the next compare of that commit reuses
it): ``pip install --no-deps --no-index`` with the running interpreter's packages
visible to it (a ``.pth`` file), else, where pip cannot build offline (no ``wheel``),
the package directory copied in as a wheel of a pure-Python package would lay it out.
Its dependencies are the working tree's: the comparison is of mockdcp's code.

Each of ``--runs`` rounds measures every default path with both installs, the order
alternating from round to round (old first, then new first): a machine whose load
drifts weighs on both alike. Every process runs in a neutral directory, so that neither
imports the checkout it was started from.

* ``memory``, ``disk``, ``legacy``: events/s of ``mockdcp bench --items N`` (the spelling
  both understand), with ``--from-disk`` and ``--legacy``;
* ``docs_aware``, ``docs_legacy``: ``mockdcp serve --docs N`` streamed by the working
  tree's bench consumer (the instrument stays the same), collection-aware and legacy;
  ``docs_ready``: seconds to that server's ready line;
* ``startup``: seconds from spawning ``mockdcp serve --docs 0`` to its ready line;
  ``import``: seconds of ``import mockdcp``; ``import_server``: of ``import
  mockdcp.server`` (what serving needs, whatever ``import mockdcp`` leaves for later).

Every process reads its bytecode from the bench's cache (``_harness.bytecode_cached``),
as installed copies read what pip compiled. Each path's ratio is new over old as a
speed: a rate's new/old, a time's old/new; 1.0 or more is no regression.
"""

from __future__ import annotations

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

from mockdcp.cli.bench._harness import bytecode_cached, emit
from mockdcp.cli.bench._startup import free_port, import_time

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

#: the paths and whether each is a time (its ratio is then old/new)
PATHS = {
    "memory": False,
    "disk": False,
    "legacy": False,
    "docs_aware": False,
    "docs_legacy": False,
    "docs_ready": True,
    "startup": True,
    "import": True,
    "import_server": True,
}

#: the default size of a compare: what a busy two-core machine measures in minutes
COMPARE_ITEMS = 100_000


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


def install(root: Path, commit: str, cache: Path) -> tuple[str, str]:
    """The python of an environment holding ``commit``'s mockdcp (made once per commit,
    then reused), and how it was installed (``pip`` or ``copy``)."""
    home = cache / commit
    python = home / "venv" / "bin" / "python"
    done = home / "installed"
    if done.exists():
        return str(python), done.read_text().strip()
    shutil.rmtree(home, ignore_errors=True)
    src = home / "src"
    src.mkdir(parents=True)
    archive = _git(root, "archive", "--format=tar", commit)
    with tempfile.TemporaryFile() as tar_file:
        tar_file.write(archive)
        tar_file.seek(0)
        with tarfile.open(fileobj=tar_file) as tar:
            tar.extractall(src, filter="data")
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(home / "venv")], check=True)
    site_dir = _site_packages(home / "venv")
    # the working tree's dependencies (and build backend), after the venv's own packages
    here = [p for p in sys.path if p.endswith("site-packages")]
    (site_dir / "_mockdcp_compare_deps.pth").write_text("\n".join(here) + "\n")
    pip = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"),
            *("--no-deps", "--no-index", "--no-build-isolation", str(src)),
        ],
        capture_output=True,
        check=False,
        cwd=home,
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
    ).stdout.decode()
    if not found.startswith(str(site_dir)):
        raise RuntimeError(f"{commit}'s environment imports mockdcp from {found.strip()}")
    done.write_text(how + "\n")
    return str(python), how


def _bench_rate(python: str, items: int, vbuckets: int, *flags: str) -> float:
    """events/s of ``python -m mockdcp bench --items N`` (a report of either shape)."""
    out = subprocess.run(
        [
            *(python, "-m", "mockdcp", "bench", "--items", str(items)),
            *("--vbuckets", str(vbuckets), "--runs", "1", "--json", *flags),
        ],
        capture_output=True,
        check=True,
        timeout=1800,
    ).stdout
    report = json.loads(out.splitlines()[-1])
    return float(report.get("figures", report)["events_per_s"])


def _consume(port: int, items: int, vbuckets: int, legacy: bool) -> float:
    """events/s of the working tree's bench consumer streaming ``items`` from ``port``."""
    out = subprocess.run(
        [
            *(sys.executable, "-m", "mockdcp.cli.bench._consumer", "--port", str(port)),
            *("--items", str(items), "--vbuckets", str(vbuckets)),
            *(["--legacy"] if legacy else []),
        ],
        capture_output=True,
        check=True,
        timeout=1800,
    ).stdout
    report = json.loads(out.splitlines()[-1])
    if report["events"] != items:
        raise RuntimeError(f"the consumer got {report['events']} of {items} documents")
    return float(report["events"] / report["seconds"])


def _served(python: str, docs: int, vbuckets: int) -> dict[str, float]:
    """``python -m mockdcp serve --docs DOCS``: seconds to its ready line, then events/s
    of a collection-aware and of a legacy consumer streaming every document."""
    cmd = [python, "-m", "mockdcp", "serve", "--port", "0", "--http-port", str(free_port())]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*cmd, "--vbuckets", str(vbuckets), "--docs", str(docs), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        ready = time.perf_counter() - t0
        if b"ready" not in line:
            raise RuntimeError(f"serve did not become ready: {line!r}")
        port = int(json.loads(line)["kv_port"])
        return {
            "docs_ready": ready,
            "docs_aware": _consume(port, docs, vbuckets, legacy=False),
            "docs_legacy": _consume(port, docs, vbuckets, legacy=True),
        }
    finally:
        proc.terminate()
        proc.wait(30)


def _ready(python: str) -> float:
    """Seconds from spawning ``python -m mockdcp serve --docs 0`` to its ready line."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [python, "-m", "mockdcp", "serve", "--port", "0", "--http-port", "0", "--docs", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if b"ready" not in line:
            raise RuntimeError(f"serve did not become ready: {line!r}")
        return time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)


def measure_round(python: str, items: int, vbuckets: int) -> dict[str, float]:
    """Every path once with ``python``'s mockdcp."""
    figures = {
        "startup": statistics.median(_ready(python) for _ in range(3)),
        "import": statistics.median(import_time(python, "mockdcp")["seconds"] for _ in range(3)),
        "import_server": statistics.median(
            import_time(python, "mockdcp.server")["seconds"] for _ in range(3)
        ),
        "memory": _bench_rate(python, items, vbuckets),
        "disk": _bench_rate(python, items, vbuckets, "--from-disk"),
        "legacy": _bench_rate(python, items, vbuckets, "--legacy"),
    }
    figures.update(_served(python, items, vbuckets))
    return figures


def compare(
    old: str, new: str, runs: int, measure: Callable[[str], dict[str, float]]
) -> dict[str, dict[str, list[float]]]:
    """``runs`` rounds of ``measure`` with each python, the order alternating; each
    path's samples, old and new."""
    samples: dict[str, dict[str, list[float]]] = {p: {"old": [], "new": []} for p in PATHS}
    for round_number in range(runs):
        sides = [("old", old), ("new", new)]
        for side, python in sides if round_number % 2 == 0 else sides[::-1]:
            for path, value in measure(python).items():
                samples[path][side].append(value)
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
    old, how = install(root, commit, cache_root() / "bench-compare")
    neutral = tempfile.mkdtemp(prefix="mockdcp-compare-")
    here = os.getcwd()
    try:
        os.chdir(neutral)  # neither side imports the checkout it was started from
        with bytecode_cached():
            for python in (old, sys.executable):  # the bytecode cache filled, not timed
                _ready(python)
            samples = compare(
                old, sys.executable, args.runs, lambda py: measure_round(py, items, args.vbuckets)
            )
    finally:
        os.chdir(here)
        shutil.rmtree(neutral, ignore_errors=True)
    params = {
        "ref": args.ref,
        "commit": commit,
        "installed_by": how,
        "items": items,
        "vbuckets": args.vbuckets,
    }
    targets = {f"{path}_ratio": ">= 1.0" for path in PATHS}
    return emit(args, "compare", params, ratios(samples), samples, True, targets)
