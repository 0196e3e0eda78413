"""How ``check``, ``explore`` and ``run`` stop a consumer command
(``mockdcp/cli/_consumer_process.py``): its whole process group, what a launcher started
included. Signalled alone, a launcher exited and left its child running: ``mockdcp tail``
under a Python wrapper outlived ``mockdcp explore`` and the test session
(tests/explore/test_explore_cli.py, the consumer slow to stream)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

import trio

from mockdcp.cli._consumer_process import group_running, open_consumer, stop_consumer
from tests.integration._stubborn import LAUNCHER, STUBBORN, alive, kill_told, told_pid

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from mockdcp.scenario import Scenario

#: a consumer that ignores SIGTERM too: only SIGKILL ends it
DEAF = STUBBORN.replace("signal.SIGINT", "signal.SIGTERM")
#: a launcher that starts its child in the background and exits at once
DETACHING = "import subprocess, sys; subprocess.Popen(sys.argv[1:])"


def _told_now(told: Path) -> int | None:
    return int(told.read_text()) if told.exists() and told.read_text() else None


async def _told(told: Path) -> int:
    """The pid the consumer wrote to ``told``, once it has."""
    with trio.fail_after(60):
        while (pid := _told_now(told)) is None:  # noqa: ASYNC110 - a file, no event
            await trio.sleep(0.02)
    return pid


@contextlib.asynccontextmanager
async def _started(command: list[str], told: Path) -> AsyncIterator[tuple[trio.Process, int]]:
    """The consumer's process and the pid its stubborn part told; both SIGKILLed after,
    whatever the test asserted."""
    proc = await open_consumer(command)
    try:
        yield proc, await _told(told)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        kill_told(told)
        with trio.CancelScope(shield=True):
            await proc.wait()


async def test_a_launchers_child_is_stopped_with_it(tmp_path: Path) -> None:
    told = tmp_path / "pid"
    command = [sys.executable, "-c", LAUNCHER, sys.executable, "-c", STUBBORN, str(told)]
    async with _started(command, told) as (proc, child):
        started = time.monotonic()
        await stop_consumer(proc, grace=30)
        assert time.monotonic() - started < 10  # SIGTERM did it, not SIGKILL after 30 s
        assert proc.returncode == -signal.SIGTERM
        assert not alive(child)
        assert not group_running(proc.pid)


async def test_what_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    told = tmp_path / "pid"
    command = [sys.executable, "-c", LAUNCHER, sys.executable, "-c", DEAF, str(told)]
    async with _started(command, told) as (proc, child):
        started = time.monotonic()
        await stop_consumer(proc, grace=0.5)
        assert time.monotonic() - started >= 0.5
        assert not alive(child)
        assert not group_running(proc.pid)


async def test_a_child_left_by_a_consumer_that_exited_is_stopped(tmp_path: Path) -> None:
    told = tmp_path / "pid"
    command = [sys.executable, "-c", DETACHING, sys.executable, "-c", STUBBORN, str(told)]
    async with _started(command, told) as (proc, child):
        assert await proc.wait() == 0
        assert alive(child)
        await stop_consumer(proc, grace=30)
        assert not alive(child)


async def test_a_consumer_that_exits_on_sigterm_costs_no_grace() -> None:
    proc = await open_consumer([sys.executable, "-c", "import time; time.sleep(60)"])
    started = time.monotonic()
    await stop_consumer(proc, grace=30)
    assert time.monotonic() - started < 10
    assert proc.returncode == -signal.SIGTERM


# -- as check, explore and run stop their consumer ---------------------------------------

#: a scenario that waits for a consumer (the stubborn one never connects)
STALL = "stall"


def _launched(told: Path) -> list[str]:
    """A launcher whose child, the consumer, tells its pid in ``told``."""
    return [sys.executable, "-c", LAUNCHER, sys.executable, "-c", STUBBORN, str(told)]


@contextlib.contextmanager
def _child_killed_after(told: Path) -> Iterator[None]:
    try:
        yield
    finally:
        kill_told(told)


async def test_check_stops_a_launched_consumer_that_never_connected(tmp_path: Path) -> None:
    """The scenario's end (here: the consumer never connected within its time) stops
    the consumer, what its launcher started included (check and explore)."""
    from mockdcp.cli._check import CheckOptions, Verdict, check_scenario

    told = tmp_path / "pid"
    options = CheckOptions(command=_launched(told), connect_within=5, limit=30)
    with _child_killed_after(told):
        result = await check_scenario(_library(STALL), options)
        assert result.verdict is Verdict.FAILED
        assert "never connected" in result.reason
        assert not alive(told_pid(told, within=0))


async def test_a_cancelled_check_stops_a_launched_consumer(tmp_path: Path) -> None:
    """Cancelled (Ctrl-C, SIGTERM, explore's time spent): the consumer is stopped before
    check_scenario returns, what its launcher started included."""
    from mockdcp.cli._check import CheckOptions, check_scenario

    told = tmp_path / "pid"
    options = CheckOptions(command=_launched(told), connect_within=60, limit=60)
    with _child_killed_after(told):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(check_scenario, _library(STALL), options)
            child = await _told(told)
            nursery.cancel_scope.cancel()
        assert not alive(child)


async def test_run_stops_a_launched_consumer_at_its_time_limit(tmp_path: Path) -> None:
    from mockdcp.cli._scenario_commands import run_scenario

    told = tmp_path / "pid"
    with _child_killed_after(told):
        report = await run_scenario(_library(STALL).source, _launched(told), limit=5)
        assert "did not finish within 5s" in (report.failure or "")
        assert not alive(told_pid(told, within=0))


def _library(name: str) -> Scenario:
    from importlib import resources

    from mockdcp.scenario import load_scenario

    return load_scenario(str(resources.files("mockdcp") / "scenarios" / f"{name}.yaml"))
