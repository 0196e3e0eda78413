"""The change feed: what one model operation changed, and who is told.

A model operation (a write, a storage step, a cluster step) ends by publishing one
``Change``, a small frozen record of what it changed, on its bucket's ``ChangeFeed``.
The feed hands it, in order, to its subscribers: the flusher (which vbuckets have new
writes), the cluster (replication follows the actives, replicas attach again after a
cut), the producer's topology (each node wakes the streams of each copy it holds and
ends those whose copy was reset), a scenario runner (which branches a step cut). Nothing
polls the model for what moved.

kv_engine's shape: a vbucket operation notifies its connections once it is done
(``DcpConnMap::notifyVBConnections`` after a write, ``DcpProducer::
closeStreamDueToVbStateChange`` and ``closeStreamDueToRollback`` when a vbucket's state
changes or its history is cut); ns_server's failover cuts a new branch whose entry is
the one the failover log shows (kv_engine ``failover-table.cc``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

import attrs

#: told each change, in publishing order
Subscriber = Callable[["Change"], None]


@attrs.frozen(slots=True)
class BranchCut:
    """A vbucket's active copy got a new failover entry: a new branch from ``seqno``
    with the vbucket uuid ``uuid`` (kv_engine ``failover-table.cc``,
    ``FailoverTable::createEntry``)."""

    vbucket: int
    uuid: int
    seqno: int


@attrs.frozen(slots=True)
class Change:
    """What one operation changed.

    ``vbuckets``: the vbuckets whose active copy changed (a write, a step, a new active);
    ``reset``: those of them whose active's history was cut or whose state changed (their
    streams end STATE_CHANGED); ``branches``: the new failover entries of actives;
    ``collections``: the manifest changed; ``copies`` and ``copies_reset``: (node,
    vbucket) copies a cluster step changed (reset: cut, or a new state), beside the
    actives' own."""

    vbuckets: Sequence[int] = ()
    reset: frozenset[int] = frozenset()
    branches: tuple[BranchCut, ...] = ()
    collections: bool = False
    copies: frozenset[tuple[str, int]] = frozenset()
    copies_reset: frozenset[tuple[str, int]] = frozenset()


class ChangeFeed:
    """The subscribers of one bucket's changes, told each ``Change`` in the order they
    were published: one published while the subscribers are being told of another (a
    cluster's replicas rolled back by a cut) waits until every subscriber has been told
    of that one."""

    __slots__ = ("_delivering", "_later", "_subscribers")

    def __init__(self) -> None:
        self._subscribers: tuple[Subscriber, ...] = ()
        self._later: deque[Change] = deque()
        self._delivering = False

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers = (*self._subscribers, subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """Stop telling ``subscriber`` (nothing if it was not subscribed)."""
        self._subscribers = tuple(s for s in self._subscribers if s != subscriber)

    def publish(self, change: Change) -> None:
        if self._delivering:
            self._later.append(change)
            return
        self._delivering = True
        try:
            for subscriber in self._subscribers:
                subscriber(change)
            later = self._later
            while later:
                change = later.popleft()
                for subscriber in self._subscribers:
                    subscriber(change)
        finally:
            self._delivering = False
            self._later.clear()


class ChangeNote:
    """A cluster step's change while it is made, published once as a ``Change``
    (``change``): which copies it touched or reset, which actives, which branches."""

    __slots__ = ("branches", "copies", "copies_reset", "reset", "vbuckets")

    def __init__(self) -> None:
        self.vbuckets: set[int] = set()
        self.reset: set[int] = set()
        self.branches: dict[int, BranchCut] = {}
        self.copies: set[tuple[str, int]] = set()
        self.copies_reset: set[tuple[str, int]] = set()

    def copy(self, node: str, vbucket: int, *, reset: bool = False) -> None:
        """``node``'s copy of ``vbucket`` changed (``reset``: cut, or a new state)."""
        self.copies.add((node, vbucket))
        if reset:
            self.copies_reset.add((node, vbucket))

    def active(self, vbucket: int, *, reset: bool = False) -> None:
        """``vbucket``'s active copy changed (``reset``: it is another copy, or was cut,
        or its state changed)."""
        self.vbuckets.add(vbucket)
        if reset:
            self.reset.add(vbucket)

    def branch(self, cut: BranchCut) -> None:
        self.branches[cut.vbucket] = cut

    def __bool__(self) -> bool:
        return bool(self.vbuckets or self.copies or self.branches)

    def change(self) -> Change:
        """The frozen record (a replica's write, the commonest, makes no empty set)."""
        return Change(
            tuple(sorted(self.vbuckets)) if self.vbuckets else (),
            reset=frozenset(self.reset) if self.reset else _NONE,
            branches=tuple(self.branches[vb] for vb in sorted(self.branches))
            if self.branches
            else (),
            copies=frozenset(self.copies),
            copies_reset=frozenset(self.copies_reset) if self.copies_reset else _NO_COPIES,
        )


_NONE: frozenset[int] = frozenset()
_NO_COPIES: frozenset[tuple[str, int]] = frozenset()
