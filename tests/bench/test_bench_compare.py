"""``mockdcp bench compare REF``: every default path measured with REF's install and the
working tree's, alternately, and each ratio reported as a speed (1.0 or more: no
regression)."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from mockdcp.cli.bench._compare import (
    PATHS,
    _bench_rates,
    _imports,
    _only_compare,
    _site_packages,
    _spawn_ready,
    compare,
    install,
    install_tree,
    ratios,
    server_cpu_seconds,
    settled,
    side_environ,
)
from mockdcp.cli.bench._startup import serve_times
from tests.bench._run import bench_refusal, bench_report

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def test_the_sides_alternate_from_round_to_round() -> None:
    order: list[str] = []

    def measure(python: str) -> dict[str, float]:
        order.append(python)
        return dict.fromkeys(PATHS, 1.0 if python == "old" else 2.0)

    samples = compare("old", "new", 3, measure)
    assert order == ["old", "new", "new", "old", "old", "new"]
    assert samples["memory"] == {"old": [1.0] * 3, "new": [2.0] * 3}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: Linux")
def test_the_servers_cpu_is_read_finer_than_a_clock_tick() -> None:
    """A legacy stream of a compare's documents costs the server a few 10 ms ticks of
    ``/proc/PID/stat``: its CPU is read to the nanosecond, from each of its threads."""
    import os
    import threading

    def spin(seconds: float) -> None:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    before = server_cpu_seconds(os.getpid())
    spin(0.003)
    mid = server_cpu_seconds(os.getpid())
    assert 0.003 <= mid - before < 0.01  # ticks would read 0 or 0.01
    assert mid - before != round(mid - before, 2)
    spun, done = threading.Event(), threading.Event()

    def other() -> None:
        spin(0.003)
        spun.set()
        done.wait(10)

    worker = threading.Thread(target=other)
    worker.start()
    try:
        assert spun.wait(10)
        assert server_cpu_seconds(os.getpid()) - mid >= 0.003  # the other thread's too
    finally:
        done.set()
        worker.join(10)


def test_a_second_compare_on_the_same_cache_waits_for_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each compare makes the working tree's environment afresh: two at once on one
    cache would install over each other while measuring, so the second waits."""
    import threading

    order: list[str] = []

    def second() -> None:
        with _only_compare(tmp_path):
            order.append("second")

    with _only_compare(tmp_path):
        waiter = threading.Thread(target=second)
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive()  # waiting
        order.append("first")
    waiter.join(10)
    assert order == ["first", "second"]
    assert "waiting for another compare" in capsys.readouterr().err


def test_a_rate_is_new_over_old_and_a_time_old_over_new() -> None:
    samples = {p: {"old": [1.0, 3.0, 2.0], "new": [4.0, 4.0, 5.0]} for p in PATHS}
    figures = ratios(samples)
    assert figures["memory_old"] == 2.0
    assert figures["memory_new"] == 4.0
    assert figures["memory_ratio"] == 2.0  # twice the events/s
    assert figures["startup_ratio"] == 0.5  # twice the seconds


def test_a_serve_that_does_not_start_says_why_with_its_stderr(tmp_path: Path) -> None:
    """A side that cannot serve fails the compare with the end of serve's stderr, not
    with "serve did not become ready" alone."""
    with pytest.raises(RuntimeError, match=r"(?s)did not become ready.*stderr ends.*vbuckets"):
        _spawn_ready(sys.executable, 0, 0)  # a vbucket count serve refuses
    python = tmp_path / "python"  # an environment whose mockdcp cannot even import
    python.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named attrs' >&2\nexit 1\n")
    python.chmod(0o755)
    with pytest.raises(RuntimeError, match=r"(?s)did not become ready.*No module named attrs"):
        _spawn_ready(str(python), 0, 64)
    with pytest.raises(RuntimeError, match=r"(?s)exited \(1\) before listening.*named attrs"):
        serve_times(str(python))


def test_compare_needs_a_ref_that_names_a_commit() -> None:
    assert b"give the git ref" in bench_refusal("compare")
    assert b"names no commit" in bench_refusal("compare", "no-such-ref-anywhere")


def test_a_kept_environment_sees_this_interpreters_dependencies(tmp_path: Path) -> None:
    """An environment kept from an earlier compare named the dependencies of the
    interpreter that made it, which may be gone (its virtual environment deleted): it is
    given the running interpreter's again before it is reused."""
    home = tmp_path / ("0" * 40)
    site = _site_packages(home / "venv")
    site.mkdir(parents=True)
    (site / "_mockdcp_compare_deps.pth").write_text("/a/venv/that/is/gone\n")
    (home / "installed").write_text("copy\n")
    python, how = install(tmp_path, "0" * 40, tmp_path)
    assert (python, how) == (str(home / "venv" / "bin" / "python"), "copy")
    shown = (site / "_mockdcp_compare_deps.pth").read_text().split()
    assert shown == [p for p in sys.path if p.endswith("site-packages")]


def test_the_working_tree_is_installed_as_it_is_into_an_environment_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new side is the working tree laid out like the ref's (not the running
    interpreter, whose editable finder and ``.pth`` files would run at its every start):
    what is changed and not yet committed is in it, what git ignores is not. A
    ``PYTHONPATH`` naming another source tree (a checkout's tests run so) is not what
    the side imports (it would be both sides' mockdcp)."""
    decoy = tmp_path / "decoy"
    (decoy / "mockdcp").mkdir(parents=True)
    (decoy / "mockdcp" / "__init__.py").write_text("SIDE = 'decoy'\n")
    monkeypatch.setenv("PYTHONPATH", str(decoy))
    root = tmp_path / "tree"
    package = root / "mockdcp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("SIDE = 'committed'\n")
    (root / ".gitignore").write_text("ignored.py\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    (package / "__init__.py").write_text("SIDE = 'working'\n")
    (package / "added.py").write_text("ADDED = True\n")
    (package / "ignored.py").write_text("")
    python, _ = install_tree(root, tmp_path / "cache")
    shown = (
        subprocess.run(
            [python, "-c", "import mockdcp, mockdcp.added; print(mockdcp.SIDE, mockdcp.__file__)"],
            capture_output=True,
            check=True,
            cwd=tmp_path,
            env=side_environ(),  # as compare runs it (this may run under a PYTHONPATH)
        )
        .stdout.decode()
        .split()
    )
    assert shown[0] == "working"
    assert shown[1].startswith(str(tmp_path / "cache" / "worktree" / "venv"))
    assert not list((tmp_path / "cache" / "worktree").rglob("ignored.py"))


#: a stand-in for a side's python: writes its PYTHONPATH (or "unset") to ``seen``, then
#: the one line each measurement reads
_FAKE_PYTHON = """#!/bin/sh
echo "${{PYTHONPATH-unset}}" >> {seen}
echo '{line}'
"""


def _served_once(python: str) -> None:
    proc = _spawn_ready(python, 0, 4)[0]
    proc.wait(10)
    assert proc.stdout is not None
    proc.stdout.close()


@pytest.mark.parametrize(
    ("line", "measure"),
    [
        (
            '{"events_per_s": 1, "events_per_server_cpu_s": 1}',
            lambda python: _bench_rates(python, 10, 4),
        ),
        ('{"seconds": 0, "cpu_s": 0, "heavy": []}', lambda python: _imports(python, "mockdcp")),
        ('{"ready": true, "kv_port": 1}', _served_once),
    ],
    ids=["bench", "import", "serve"],
)
def test_every_process_of_a_side_starts_without_the_callers_pythonpath(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    line: str,
    measure: Callable[[str], object],
) -> None:
    seen = tmp_path / "seen"
    python = tmp_path / "python"
    python.write_text(_FAKE_PYTHON.format(seen=seen, line=line))
    python.chmod(0o755)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "a-source-tree"))
    measure(str(python))
    assert set(seen.read_text().split()) == {"unset"}


@pytest.mark.full
def test_compare_head_with_itself_reports_every_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOCKDCP_CACHE", str(tmp_path))
    report = bench_report("compare", "HEAD", "--items", "2000", "--vbuckets", "4")
    assert report["mode"] == "compare"
    assert len(report["params"]["commit"]) == 40
    for path in PATHS:
        assert report["figures"][f"{path}_old"] > 0
        assert report["figures"][f"{path}_new"] > 0
        assert report["figures"][f"{path}_ratio"] > 0
    # the environment is kept for the next compare of that commit
    assert (tmp_path / "bench-compare" / report["params"]["commit"] / "installed").exists()


def test_settled_waits_out_the_work_a_process_does_after_it_started_and_returns_its_cpu() -> None:
    """``settled`` (``after_ready``: what a start leaves past its ready line) polls the
    process's CPU until a poll adds next to none: a child that computes for 1 s and
    then sleeps is waited for and its CPU counted; a sleeping one settles at once."""
    # the interpreter's own start is not the work measured: it says when it is up (a
    # fixed 0.3 s was not always enough on a loaded machine)
    up = "import time\nprint('up', flush=True)\n"
    busy = "t = time.process_time()\nwhile time.process_time() - t < 1.0: pass\n"
    sleeper = "time.sleep(30)\n"
    for script, low, high in ((up + busy + sleeper, 0.4, 1.5), (up + sleeper, 0.0, 0.1)):
        with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE) as child:
            try:
                assert child.stdout is not None
                assert child.stdout.readline() == b"up\n"
                cpu = settled(child.pid, poll=0.1, most=10.0)
            finally:
                child.kill()
        assert low <= cpu <= high, (script, cpu)
