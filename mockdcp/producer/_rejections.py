"""The ``reject`` step: the next requests of a kind get a status instead of their
answer (a NOT_MY_VBUCKET a rebalance gives, an ETMPFAIL of a busy node...), whichever
node of the cluster they reach.

The dispatch asks ``Rejections.take`` for each request once the connection's state and
its user's privileges admitted it (``_dispatch``): a matching rejection answers instead
of the handler, and counts down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from mockdcp.protocol import Status


@attrs.define
class Rejection:
    """The next ``count`` requests with ``opcode`` (on ``vbucket``, if given) get
    ``status`` instead of their answer (the ``reject`` step)."""

    opcode: int
    status: Status
    count: int = 1
    vbucket: int | None = None


@attrs.define(eq=False)
class Rejections:
    """The rejections pending, oldest first (shared by every node of a cluster)."""

    pending: list[Rejection] = attrs.field(factory=list)

    def add(self, rejection: Rejection) -> None:
        """Answer the next matching requests with a status (the ``reject`` step)."""
        self.pending.append(rejection)

    def take(self, opcode: int, vbucket: int | None) -> Status | None:
        """The status a request must get instead of its answer, if a rejection
        matches it (counted down)."""
        for r in self.pending:
            if r.opcode == opcode and (r.vbucket is None or r.vbucket == vbucket):
                r.count -= 1
                if r.count <= 0:
                    self.pending.remove(r)
                return r.status
        return None
