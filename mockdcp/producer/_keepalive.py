"""Noops and the idle disconnect of one DCP connection.

Rules (kv_engine ``docs/dcp/documentation/dead-connections.md`` and
``engines/ep/src/dcp/producer.cc`` ``maybeSendNoop``): with ``enable_noop=true`` the
producer sends a DCP_NOOP every ``set_noop_interval`` seconds while no noop is
outstanding (the code sends one every interval, busy or not, whatever the doc says), and
disconnects a connection from which nothing arrived for the idle timeout (360 s by
default). The first noop's opaque is 10,000,001 (a pre-incremented counter).
"""

from __future__ import annotations

import attrs

from mockdcp.protocol import DcpNoop

#: The first DCP_NOOP opaque is 10,000,001 (pre-incremented counter).
NOOP_OPAQUE_BASE = 10_000_000


@attrs.define
class Keepalive:
    """Noop timing and liveness; times are the ``now`` the connection is given."""

    last_received: float
    last_noop: float
    pending: int | None = None
    opaque: int = NOOP_OPAQUE_BASE
    sent: int = 0
    answered: int = 0

    def received(self, now: float) -> None:
        """Bytes arrived: the connection is alive."""
        self.last_received = now

    def restart(self, now: float) -> None:
        """DCP_OPEN or a noop control: the interval counts from now."""
        self.last_noop = now

    def due(self, now: float, interval: float) -> bytes | None:
        """The DCP_NOOP to send now, if one is due (and none is outstanding). Due from
        ``deadline`` on, the same sum: ``now - last_noop < interval`` held at
        0.08 + 0.5 (0.58 - 0.08 is 0.4999...), and a writer woken at its deadline found
        nothing due and woke again at once, for ever under a virtual clock (explore
        --seed 39, schedule 1182, with noops every 0.5 s)."""
        if self.pending is not None or now < self.last_noop + interval:
            return None
        self.opaque += 1
        self.pending = self.opaque
        self.last_noop = now
        self.sent += 1
        return DcpNoop(opaque=self.opaque).encode()

    def answer(self, opaque: int) -> bool:
        """The consumer answered a noop; False if no noop with ``opaque`` is pending."""
        if opaque != self.pending:
            return False
        self.pending = None
        self.answered += 1
        return True

    def deadline(self, interval: float, idle_timeout: float, resume: float | None = None) -> float:
        """When to look again: the next noop, or the idle disconnect. ``resume``: when
        writing may resume, if a fault (a stall) holds every write now: a noop due
        before it can only go then (explore --seed 39 --nodes 3, schedule 292: a noop
        due inside a stall gave a deadline already passed, and the connection's writer
        woke for it again and again without end, under the virtual clock for ever)."""
        idle = self.last_received + idle_timeout
        if self.pending is not None:
            return idle
        noop = self.last_noop + interval
        return min(idle, noop if resume is None else max(noop, resume))

    def idle_for(self, now: float, idle_timeout: float) -> float | None:
        """Seconds of silence if past the idle timeout, else None."""
        silent = now - self.last_received
        return silent if silent >= idle_timeout else None
