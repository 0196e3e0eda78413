"""The processes of the machine as Linux's ``/proc/<pid>/stat`` tells them: what a
consumer command's process group (``_consumer_process``) and the bench's CPU of a
server and the workers it started (``bench._harness``) read.

A line of ``stat`` is ``pid (comm) state ppid pgrp ... utime stime cutime cstime ...``;
``comm`` may hold spaces and parentheses, so the fields are those after its last ``)``:
``state`` first (index 0), ``ppid`` 1, ``pgrp`` 2, ``utime`` 11 to ``cstime`` 14.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

STATE, PPID, PGRP = 0, 1, 2
#: utime, stime (the process's own CPU), cutime, cstime (its waited-for children's)
UTIME, STIME, CUTIME, CSTIME = 11, 12, 13, 14


def stat_fields(pid: int) -> list[str]:
    """``/proc/<pid>/stat``'s fields after the command's name; ``OSError`` when the
    process is gone."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def every_stat() -> Iterator[tuple[int, list[str]]]:
    """Each process's pid and ``stat_fields`` (one that exits meanwhile is left out)."""
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                yield int(entry.name), stat_fields(int(entry.name))
            except OSError:  # it exited meanwhile
                continue
