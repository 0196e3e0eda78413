"""``tree_cpu_seconds``: what a start costs counts the processes it started (``serve
--docs``'s workers), running or done, not only its own process's CPU."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from mockdcp.cli._procfs import PPID, every_stat
from mockdcp.cli.bench._harness import cpu_seconds_of, tree_cpu_seconds

#: a parent that starts a child computing for ``sys.argv[1]`` seconds of CPU, says
#: "ready" once the child has (the child then sleeps: still there), and sleeps; with
#: ``sys.argv[2]`` ``wait`` it waits for the child (which then exits) first
PARENT = """\
import subprocess, sys, time
busy = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < %s: pass\\n"
child = subprocess.Popen(
    [sys.executable, "-c", busy % sys.argv[1] + "print('done', flush=True)\\n"
     + ("" if sys.argv[2] == "wait" else "time.sleep(60)\\n")],
    stdout=subprocess.PIPE,
)
child.stdout.readline()
if sys.argv[2] == "wait":
    child.wait()
print("ready", flush=True)
time.sleep(60)
"""


def _measured(mode: str) -> tuple[float, float]:
    """The parent's own CPU seconds and its tree's, once it said "ready"."""
    with subprocess.Popen(
        [sys.executable, "-c", PARENT, "0.5", mode], stdout=subprocess.PIPE
    ) as parent:
        try:
            assert parent.stdout is not None
            assert parent.stdout.readline() == b"ready\n"
            return cpu_seconds_of(parent.pid), tree_cpu_seconds(parent.pid)
        finally:
            for child, fields in every_stat():  # before the parent: then still its
                if int(fields[PPID]) == parent.pid:
                    os.kill(child, signal.SIGKILL)
            parent.kill()


def test_a_child_still_running_counts_in_the_tree() -> None:
    own, tree = _measured("running")
    assert tree - own >= 0.45


def test_a_child_waited_for_counts_in_the_tree() -> None:
    own, tree = _measured("wait")
    assert tree - own >= 0.45
