"""A consumer command's process, as ``mockdcp check``, ``explore`` and ``run`` start and
stop it: in a process group of its own, stopped as a group.

A consumer command is often a launcher (a shell script, ``mvn exec:java``, ``go run``, a
Python wrapper that calls ``subprocess``) whose child is the consumer that connects.
Signalled alone, the launcher exits and its child lives on, an orphan that keeps
reconnecting to the server's ports (``mockdcp tail`` started by a wrapper was left
running after ``explore``). So the command starts as the leader of a new process group
(``process_group=0``: the terminal's session, so it may still write there, but Ctrl-C at
the terminal, or its hangup, reaches ``mockdcp`` alone, which stops it as below:
``_signals``), and stopping it sends
SIGTERM to the whole group, waits up to the grace for the leader to exit and for the
rest of the group to follow (a child flushing what it holds is given the grace too),
then SIGKILLs whatever of the group is left. ``stop_consumer`` returns once the leader
is reaped and no other member runs (they are the leader's children's, reaped by whoever
inherits them; a SIGKILLed process is gone at once unless it waits on the kernel:
``KILL_WAIT``). A process that leaves the group (``setsid``, a daemon) is beyond reach,
as it is for a shell's job control or GNU ``timeout``. The group's id is the leader's
pid, which no new process or group is given while a member of the group lives.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from mockdcp.cli._procfs import PGRP, STATE, every_stat

if TYPE_CHECKING:
    from collections.abc import Sequence

#: seconds a SIGKILLed group is given to be gone before ``stop_consumer`` returns anyway
KILL_WAIT = 5.0
#: seconds between looks at whether a stopped consumer's group has emptied (only once its
#: leader has exited and the group still has a member)
GROUP_POLL = 0.02


async def open_consumer(command: Sequence[str], **options: Any) -> trio.Process:  # noqa: ANN401
    """Start ``command`` as the leader of a new process group (``options`` are
    ``trio.lowlevel.open_process``'s)."""
    return await trio.lowlevel.open_process(list(command), process_group=0, **options)


async def stop_consumer(proc: trio.Process, grace: float) -> None:
    """SIGTERM to the consumer's process group, SIGKILL to what is left of it after
    ``grace`` seconds; returns once the leader is reaped and the rest of the group gone.
    Also when the leader has exited already: what it started may still run."""
    _signal_group(proc.pid, signal.SIGTERM)
    # a member stopped (SIGTTIN: it read the terminal from its background group) takes
    # SIGTERM only once continued, as GNU timeout continues what it signals
    _signal_group(proc.pid, signal.SIGCONT)
    with trio.move_on_after(grace):
        await _gone(proc)
        return
    _signal_group(proc.pid, signal.SIGKILL)
    with trio.move_on_after(KILL_WAIT):
        await _gone(proc)
    await proc.wait()


async def _gone(proc: trio.Process) -> None:
    await proc.wait()
    while group_running(proc.pid):  # noqa: ASYNC110 - no event says a group emptied
        await trio.sleep(GROUP_POLL)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group has emptied
        os.killpg(pgid, signum)


def group_running(pgid: int) -> bool:
    """A process of group ``pgid`` still runs. A zombie does not count: a member whose
    parent has not reaped it yet, or one reparented to an init that reaps late, has
    finished (``killpg(pgid, 0)`` counts them; on Linux ``/proc`` tells them apart)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    if not Path("/proc").is_dir():
        return True
    return any(int(fields[PGRP]) == pgid and fields[STATE] != "Z" for _, fields in every_stat())
