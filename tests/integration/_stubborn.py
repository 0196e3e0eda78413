"""A consumer process that only SIGTERM (or SIGKILL) ends, for the tests of how ``check``,
``run`` and ``explore`` stop their consumer: it says its pid in a file and waits; and a
launcher that runs a consumer as its child."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

#: ``python -c STUBBORN TOLD``: writes its pid to TOLD, ignores SIGINT (as a JVM under
#: some launchers does) and waits
STUBBORN = (
    "import os, signal, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"
)


#: ``python -c LAUNCHER CMD...``: runs CMD as its child and waits for it (a launcher, as
#: a shell script or a build tool's ``exec`` is): signalled, it exits and leaves its child
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


def told_pid(told: Path, within: float = 60) -> int:
    """The pid the consumer wrote to ``told``, once it has (``within`` seconds)."""
    deadline = time.monotonic() + within
    while not (told.exists() and told.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(told.read_text())


def alive(pid: int) -> bool:
    """The process runs: a zombie is gone for this purpose (its parent has not reaped
    it yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def kill_told(told: Path) -> None:
    """SIGKILL the consumer that wrote to ``told``, if it did and still runs (a test's
    cleanup, whatever it asserted)."""
    if told.exists() and told.read_text():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(told.read_text()), signal.SIGKILL)
