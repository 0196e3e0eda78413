"""The steps that act on a cluster's live connections, through the node a scenario
reaches them by (``Node.steps``): the faults (stall, throttle, delay, corrupt), ending
streams (end_stream, and SLOW for an idle backfill), dropping cursors, and a user whose
roles changed.

Each acts on the connections of every node of the cluster (``Node.matching``: those
whose DCP_OPEN name is the step's ``connection``, or all), as a consumer has one
connection per node, and wakes each connection it changed so that the shell writes what
it now has to send. Pure: the caller passes the times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from mockdcp.model import UserChange
    from mockdcp.producer._connection import Connection
    from mockdcp.producer._faults import Corruption
    from mockdcp.producer._node import Node
    from mockdcp.protocol import StreamEndReason


@attrs.frozen(eq=False)
class ConnectionSteps:
    """The steps of the module docstring, on ``node``'s cluster."""

    node: Node

    def _woken(self, name: str | None, act: Callable[[Connection], object]) -> int:
        """``act`` on the connections named ``name`` (all when None), each woken; how
        many."""
        conns = self.node.matching(name)
        for conn in conns:
            act(conn)
            self.node.wake(conn)
        return len(conns)

    def stall(self, seconds: float, name: str | None = None) -> int:
        """Stop writing to the connections for ``seconds``; how many."""
        return self._woken(name, lambda conn: conn.stall(seconds))

    def throttle(self, rate: float, seconds: float, name: str | None = None) -> int:
        """Write at most ``rate`` bytes/s to the connections for ``seconds``; how many."""
        return self._woken(name, lambda conn: conn.throttle(rate, seconds))

    def delay(
        self, seconds: float, opcodes: frozenset[int] | None, count: int, name: str | None = None
    ) -> int:
        """Hold back the replies to the next ``count`` matching requests; how many
        connections."""
        conns = self.node.matching(name)
        for conn in conns:
            conn.faults.delay(seconds, opcodes, count)
        return len(conns)

    def corrupt(self, kind: Corruption, name: str | None = None) -> int:
        """Damage the next frame written to the connections; how many."""
        return self._woken(name, lambda conn: conn.faults.corrupt(kind))

    def end_streams(
        self, vbuckets: Iterable[int], reason: StreamEndReason, name: str | None = None
    ) -> int:
        """End the live streams of ``vbuckets`` with STREAM_END(``reason``); how many."""
        n = 0
        for conn in self.node.matching(name):
            ended = sum(conn.end_streams(vb, reason) for vb in vbuckets)
            if ended:
                self.node.wake(conn)
            n += ended
        return n

    def end_idle_backfills(self, start: float, end: float) -> int:
        """The bucket's clock moved from ``start`` to ``end``: the streams whose backfill
        made no progress for the bucket's ``backfill_idle_limit`` meanwhile end SLOW
        (``mockdcp.producer._idle``); how many."""
        from mockdcp.producer._idle import end_idle_backfills

        node = self.node
        return end_idle_backfills(node, start, end, node.bucket.timers.backfill_idle_limit)

    def drop_cursor(
        self, vbuckets: Iterable[int] | None = None, name: str | None = None
    ) -> list[tuple[int, str]]:
        """The memory-to-disk switch for chosen streams, now: drops the cursors of the
        streams of ``vbuckets`` (all when None) on the connections named ``name`` (all
        when None) that allow cursor dropping. Returns the (vbucket, cursor) dropped."""
        wanted = None if vbuckets is None else set(vbuckets)
        dropped: list[tuple[int, str]] = []
        for conn in self.node.matching(name):
            if not conn.settings.cursor_dropping:
                continue
            for stream in conn.streams:
                if wanted is None or stream.vbucket in wanted:
                    dropped += self.node.bucket.drop_cursor(stream.vbucket, stream.cursor_name)
        return dropped

    def users_changed(self, change: UserChange) -> None:
        """A user or its roles changed (``change``): every connection of the cluster
        looks again at what its user may do (``Connection.privileges_changed``), as
        memcached re-reads a connection's privileges when ns_server pushes a new RBAC
        revision. Authenticated connections keep their identity: a deleted user's or a
        changed password's connections stay until their next authentication."""
        for conn in self.node.all_connections():
            if conn.user == change.user and conn.privileges_changed():
                self.node.wake(conn)
