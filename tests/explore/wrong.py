"""Wrong consumers of ``tests/scenarios/wrong_consumer.py`` as ``explore`` takes an
in-process consumer: ``-- tests.explore.wrong:drop_deletions``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import trio

from mockdcp.client import DcpConsumer
from mockdcp.explore import reference_consumer
from tests.scenarios.wrong_consumer import make_consumer

if TYPE_CHECKING:
    from trio import TaskStatus

    from mockdcp.explore import ConsumerFactory, InProcessConsumer
    from mockdcp.explore._consumers import Connect

TASK_STATUS_IGNORED = trio.TASK_STATUS_IGNORED


def drop_deletions(host: str, port: int, nodes: int) -> InProcessConsumer:
    return make_consumer("drop-deletions", host, port)


def apply_prepares(host: str, port: int, nodes: int) -> InProcessConsumer:
    return make_consumer("apply-prepares", host, port)


def crashes(host: str, port: int, nodes: int) -> InProcessConsumer:
    """The reference consumer, which raises as soon as it runs (a consumer crash)."""

    class Crashing(DcpConsumer):
        async def run(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
            raise RuntimeError("planted crash")

    return Crashing(host, port, vbuckets=None)


def no_reopen(host: str, port: int, nodes: int) -> InProcessConsumer:
    return make_consumer("no-reopen", host, port)


def ignore_rollbacks(host: str, port: int, nodes: int) -> InProcessConsumer:
    return make_consumer("ignore-rollbacks", host, port)


def complete_snapshot(host: str, port: int, nodes: int) -> InProcessConsumer:
    return make_consumer("complete-snapshot", host, port)


def never_ack(host: str, port: int, nodes: int) -> InProcessConsumer:
    return make_consumer("never-ack", host, port)


#: virtual seconds ``exits_early`` streams before it leaves: less than the 0.1 s without
#: an event after which a ``conformant`` window may end, so that a schedule's end never
#: meets the exit at one virtual instant (at 0.1 s a shrunk schedule of waits and a
#: window failed it while shrinking and passed it on replay, as trio's tie went)
EXITS_AFTER = 0.05


def exits_early(
    host: str, port: int, nodes: int, *, connect: Connect | None = None
) -> InProcessConsumer:
    """The reference consumer, which returns from ``run()`` after ``EXITS_AFTER``
    seconds of streaming (a consumer that stops early: a consumer exit)."""
    return _Exits(reference_consumer(host, port, nodes, connect=connect), None)


def exits_process(
    host: str, port: int, nodes: int, *, connect: Connect | None = None
) -> InProcessConsumer:
    """The reference consumer, which calls ``sys.exit(3)`` after ``EXITS_AFTER``
    seconds of streaming, as a script consumer ends its process."""
    return _Exits(reference_consumer(host, port, nodes, connect=connect), 3)


class _Exits:
    def __init__(self, inner: InProcessConsumer, code: int | None) -> None:
        self.inner = inner
        self.code = code

    @property
    def state(self) -> Any:  # noqa: ANN401 - the reference consumer's state
        return self.inner.state

    async def run(self) -> None:
        with trio.move_on_after(EXITS_AFTER):
            await self.inner.run()
        if self.code is not None:
            sys.exit(self.code)


def over_memory(mode: str) -> ConsumerFactory:
    """The wrong consumer of ``mode`` (``tests/scenarios/wrong_consumer.py``) as the
    reference consumer runs in-process: on a cluster with a connection per node, each
    connection over explore's in-memory network, so its schedules run under the
    virtual clock (``takes_connect``)."""

    def factory(
        host: str, port: int, nodes: int, *, connect: Connect | None = None
    ) -> InProcessConsumer:
        return make_consumer(mode, host, port, nodes=nodes, connect=connect)

    factory.__name__ = f"over_memory_{mode.replace('-', '_')}"
    return factory


def spins(host: str, port: int, nodes: int, *, connect: Connect | None = None) -> InProcessConsumer:
    """The reference consumer's state, and a ``run()`` that never blocks (it only
    yields): under explore's virtual clock no timer can fire while it runs."""
    inner = reference_consumer(host, port, nodes, connect=connect)

    class Spins:
        state = inner.state

        async def run(self) -> None:
            while True:
                await trio.lowlevel.checkpoint()

    return Spins()
