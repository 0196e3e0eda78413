"""How many backfills of one connection read the disk at once: its backfill queue.

kv_engine's ``BackfillManager`` (``dcp/backfill-manager.h``) puts a backfill it cannot
start in its pending queue, and starts pending ones first come, first served, as
in-progress ones finish. ``KVStoreScanTracker::canCreateBackfill`` (MB-57304) lets a
connection have ``dcp_backfill_in_progress_per_connection_limit`` backfills in progress
(a snapshot open and being read), 1 by default: a consumer that asks for every vbucket
from disk gets them one after the other, not 1024 interleaved. The limit is the
bucket's ``backfills_per_connection``: a node before MB-57304, whose backfills of one
connection interleave, is staged with a larger one.

For mockdcp the limit also bounds memory: a backfill holds its whole read (seqnos,
frame offsets, sizes: tens of bytes a document) until its frames are all queued, and a
thousand streams reading a corpus at once held gigabytes. Sans-IO: streams ask, finish
and leave; the connection is told which waiting stream may go on (``on_free``).
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Generic, TypeVar

from mockdcp.model import BACKFILLS_PER_CONNECTION

if TYPE_CHECKING:
    from collections.abc import Callable

#: a stream (the queue knows nothing of it but its identity)
S = TypeVar("S")


class BackfillQueue(Generic[S]):
    """The in-progress backfills of one connection and the streams waiting to start
    one, first come, first served (kv_engine ``BackfillManager::schedule``,
    ``movePendingToInitializing``)."""

    __slots__ = ("_on_free", "limit", "running", "waiting")

    def __init__(
        self,
        limit: int = BACKFILLS_PER_CONNECTION,
        on_free: Callable[[S], None] | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError(f"backfills in progress per connection must be ≥ 1, not {limit}")
        self.limit = limit
        #: streams whose backfill is in progress
        self.running: list[S] = []
        #: streams waiting to start one, in the order they asked (a dict: ordered, and
        #: a stream is found in it at once)
        self.waiting: dict[S, None] = {}
        #: told of a waiting stream that may now start its backfill (it should be
        #: given a turn: ``StreamRegistry.mark_ready``)
        self._on_free = on_free

    def start(self, stream: S) -> bool:
        """May ``stream`` start (or go on with) a backfill now? If not, it waits its
        turn behind the streams that asked before it."""
        running = self.running
        if stream in running:
            return True
        waiting = self.waiting
        free = self.limit - len(running)
        if free <= 0:
            turn = False
        elif stream not in waiting:
            turn = len(waiting) < free
        elif free == 1:  # (the default limit: no walk) its turn if it asked first
            turn = next(iter(waiting)) is stream
        else:  # its turn if fewer than ``free`` asked before it
            turn = any(s is stream for s in islice(waiting, free))
        if turn:
            waiting.pop(stream, None)
            running.append(stream)
            return True
        waiting[stream] = None
        return False

    def finish(self, stream: S) -> None:
        """``stream``'s backfill is done (all read), or it ended or closed: its place
        goes to the first streams waiting. A waiting stream that leaves may have been
        told a place was free and not yet taken it: the place passes on just the same
        (telling a stream twice is harmless; it starts once)."""
        if stream in self.waiting:
            del self.waiting[stream]
        elif stream in self.running:
            self.running.remove(stream)
        else:  # it never asked
            return
        if self._on_free is not None:
            free = self.limit - len(self.running)
            for waiting in list(islice(self.waiting, max(free, 0))):
                self._on_free(waiting)
