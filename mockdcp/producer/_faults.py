"""Faults a scenario injects into one connection's output: stall, throttle, delay and
corrupt. Pure: every method takes ``now``; the connection asks before each write.

* ``stall(until)``: nothing is written before ``until`` (the consumer sees a silent
  producer; its noop/idle logic should notice).
* ``throttle(rate, until)``: at most ``rate`` bytes a second are written until ``until``
  (whole messages, so a write may overshoot by one message, as flow control does).
* ``delay(seconds, opcodes, count)``: the replies to the next ``count`` matching requests
  are written ``seconds`` late. Replies keep their order, so everything the connection
  writes after a delayed reply waits behind it.
* ``corrupt(kind)``: the next frame written is replaced by a damaged copy (shared frames
  are never changed): ``magic`` (an invalid magic byte), ``opcode`` (an opcode no DCP
  message has), ``length`` (body length one larger than the body: the consumer's framing
  breaks) or ``value`` (the last byte of the body inverted; framing intact).
"""

from __future__ import annotations

import enum
import math
import struct
from collections import deque

import attrs

Buffers = list[bytes | memoryview]

_BODY_LENGTH = struct.Struct(">I")


class Corruption(enum.Enum):
    """How ``corrupt`` damages the next frame (see the module docstring)."""

    MAGIC = "magic"
    OPCODE = "opcode"
    LENGTH = "length"
    VALUE = "value"


def corrupt_frame(frame: bytes | memoryview, kind: Corruption) -> bytes:
    """A damaged copy of one whole frame."""
    out = bytearray(frame)
    if kind is Corruption.MAGIC:
        out[0] = 0x00
    elif kind is Corruption.OPCODE:
        out[1] = 0xEE
    elif kind is Corruption.LENGTH:
        body = _BODY_LENGTH.unpack_from(out, 8)[0]
        _BODY_LENGTH.pack_into(out, 8, body + 1)
    elif len(out) > 24:
        out[-1] ^= 0xFF
    return bytes(out)


@attrs.define
class _Delay:
    seconds: float
    opcodes: frozenset[int] | None
    count: int


@attrs.define
class Faults:
    """The faults active on one connection."""

    stalled_until: float = -math.inf
    throttle_rate: float = 0.0
    throttle_until: float = -math.inf
    _throttle_sent: float = 0.0
    _throttle_since: float = 0.0
    corruptions: deque[Corruption] = attrs.field(factory=deque)
    _delays: list[_Delay] = attrs.field(factory=list)
    #: replies held back by a delay: (not before, bytes), in order
    held: deque[tuple[float, bytes]] = attrs.field(factory=deque)

    # -- set by steps ----------------------------------------------------------------

    def stall(self, now: float, seconds: float) -> None:
        self.stalled_until = max(self.stalled_until, now + seconds)

    def throttle(self, now: float, rate: float, seconds: float) -> None:
        self.throttle_rate = rate
        self.throttle_until = now + seconds
        self._throttle_sent = 0.0
        self._throttle_since = now

    def delay(self, seconds: float, opcodes: frozenset[int] | None, count: int) -> None:
        self._delays.append(_Delay(seconds, opcodes, count))

    def corrupt(self, kind: Corruption) -> None:
        self.corruptions.append(kind)

    # -- asked by the connection -----------------------------------------------------

    def reply_delay(self, opcode: int) -> float:
        """Seconds to hold the reply to a request with ``opcode`` (0 for none); counts
        the request against the first matching delay."""
        for d in self._delays:
            if d.opcodes is None or opcode in d.opcodes:
                d.count -= 1
                if d.count <= 0:
                    self._delays.remove(d)
                return d.seconds
        return 0.0

    def write_budget(self, now: float) -> float:
        """Bytes that may be written now: 0 while stalled, the throttle's allowance while
        throttled, else unlimited."""
        if now < self.stalled_until:
            return 0.0
        if now >= self.throttle_until or self.throttle_rate <= 0:
            return math.inf
        allowance = self.throttle_rate * (now - self._throttle_since) - self._throttle_sent
        return max(0.0, allowance)

    def wrote(self, now: float, nbytes: int) -> None:
        if now < self.throttle_until:
            self._throttle_sent += nbytes

    def deadline(self, now: float) -> float | None:
        """When writing may resume, if a fault holds it now. Nothing is written while
        the budget is 0 (``write_budget``: a stall, or a throttle's allowance spent),
        held replies included, so none is due before the budget comes back: a reply a
        delay held, due during a stall, gave a deadline already passed while nothing
        could be written, and the connection's writer woke for it again and again
        without end (under a virtual clock the time never moved on)."""
        if now < self.stalled_until:
            return self.stalled_until
        times = []
        if now < self.throttle_until and self.throttle_rate > 0:
            resume = min(self.throttle_until, now + 0.01)
            if self.write_budget(now) <= 0:
                return resume
            times.append(resume)
        if self.held:
            times.append(self.held[0][0])
        return min(times) if times else None

    def release_held(self, now: float, parts: Buffers) -> bool:
        """Move held replies that are due into ``parts``; True if some are still held."""
        while self.held and self.held[0][0] <= now:
            parts.append(self.held.popleft()[1])
        return bool(self.held)

    def apply_corruption(self, parts: Buffers, first: int) -> Corruption | None:
        """Damage the first whole frame at ``parts[first]`` (frames start at part
        boundaries there), if a corruption is pending; the damage done, or None."""
        if not self.corruptions or first >= len(parts):
            return None
        part = parts[first]
        size = 24 + _BODY_LENGTH.unpack_from(part, 8)[0]
        kind = self.corruptions.popleft()
        bad = corrupt_frame(part[:size], kind)
        parts[first : first + 1] = [bad, part[size:]] if size < len(part) else [bad]
        return kind
