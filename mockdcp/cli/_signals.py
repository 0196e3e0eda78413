"""Ctrl-C, SIGTERM and SIGHUP for the commands that start a consumer process (``run``,
``check``, ``explore``): each signal cancels the command's work, whose ``finally``
blocks stop the consumer (SIGTERM, then SIGKILL, to its process group:
``_consumer_process``), and the command exits with ``128 + signal``, as a shell reports
a process a signal ended. The consumer runs in a process group of its own, so what the
terminal sends to the foreground group (Ctrl-C; SIGHUP when it hangs up) or a shell to
the command's job reaches the command alone, and the command passes it on.

Left to Python, SIGTERM ended the command at once and left its consumer running (a CI
job cancelled, ``docker stop``, ``timeout``), and SIGINT did nothing at all when the
command was started with SIGINT ignored, as a shell starts a background job (``cmd &``):
the interpreter then never installs the handler that raises ``KeyboardInterrupt``."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, TypeVar

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

T = TypeVar("T")

#: the signals that stop ``run``, ``check`` and ``explore``
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(Exception):
    """The command was stopped by ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


async def until_signalled(work: Callable[[], Awaitable[T]]) -> T:
    """``await work()``, cancelled by SIGINT, SIGTERM or SIGHUP: then ``Interrupted`` is raised,
    once ``work``'s cleanup is done."""
    done: list[T] = []
    got: list[int] = []
    with trio.open_signal_receiver(*STOPPING) as signals:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                done.append(await work())
                nursery.cancel_scope.cancel()

            async def watch() -> None:
                async for signum in signals:
                    got.append(signum)
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(watch)
            nursery.start_soon(run)
    if done:  # finished (a signal after that changes nothing)
        return done[0]
    raise Interrupted(got[0])
