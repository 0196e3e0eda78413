"""Wrong consumers of ``tests/scenarios/wrong_consumer.py`` as ``explore`` takes an
in-process consumer: ``-- tests.explore.wrong:drop_deletions``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from mockdcp.client import DcpConsumer
from tests.scenarios.wrong_consumer import make_consumer

if TYPE_CHECKING:
    from trio import TaskStatus

    from mockdcp.explore import InProcessConsumer

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
