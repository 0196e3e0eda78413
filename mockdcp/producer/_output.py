"""The replies a connection owes, counted in bytes, and the output limit (issue 18).

A data node stops serving a connection whose send queue is full and goes on once the
client has drained it. mockdcp does the same: a client that pipelines requests and never
reads holds at most the limit plus one reply, not every reply it asked for.

``OutputQueue`` is that accounting, sans-IO. ``unsent`` is the bytes queued for the shell
plus the bytes the shell took and has not yet reported written (``written``). Stream data needs no
entry of its own here: it is taken only when the shell asks, at most one write's worth,
and the flow-control window bounds what the client leaves unacknowledged.
"""

from __future__ import annotations

from collections import deque

#: Default bytes of unsent output past which a connection is not read (a few MiB: more
#: than one write of stream data, ``MAX_WRITE``, so streaming alone never pauses input).
DEFAULT_OUTPUT_LIMIT = 8 * 1024 * 1024


class OutputQueue:
    """Encoded replies in order, with a running byte count and the output limit."""

    __slots__ = ("_parts", "in_flight", "limit", "queued")

    def __init__(self, limit: int = DEFAULT_OUTPUT_LIMIT) -> None:
        if limit <= 0:
            raise ValueError(f"output limit must be positive, not {limit}")
        self._parts: deque[bytes] = deque()
        #: bytes of the queued replies
        self.queued = 0
        #: bytes handed to the shell and not yet reported written
        self.in_flight = 0
        self.limit = limit

    def set_limit(self, limit: int) -> None:
        """Change the limit (the shell's configuration). Raises ``ValueError`` if < 1."""
        if limit <= 0:
            raise ValueError(f"output limit must be positive, not {limit}")
        self.limit = limit

    def append(self, data: bytes) -> None:
        self._parts.append(data)
        self.queued += len(data)

    def __bool__(self) -> bool:
        return bool(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    def take(self) -> list[bytes | memoryview]:
        """Every queued reply, oldest first; the queue is left empty."""
        parts: list[bytes | memoryview] = list(self._parts)
        self._parts.clear()
        self.queued = 0
        return parts

    def handed_out(self, nbytes: int) -> None:
        """The shell took ``nbytes`` (replies and stream data) to write."""
        self.in_flight += nbytes

    def written(self) -> None:
        """Everything handed out is on the socket."""
        self.in_flight = 0

    @property
    def unsent(self) -> int:
        """Bytes owed to the client: queued plus handed out and not yet confirmed."""
        return self.queued + self.in_flight

    @property
    def over_limit(self) -> bool:
        """True when no more requests should be read (the shell stops reading)."""
        return self.unsent >= self.limit
