"""The bucket's CAS clock: a hybrid logical clock (kv_engine ``HLC``, ``hlc.h``:
nanoseconds of the clock with the low 16 bits clear, always above the last value given).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


class CasClock:
    """The CAS values of one bucket, read from its ``clock`` (a part of ``Bucket``)."""

    clock: Callable[[], float]
    _last_cas: int

    def _next_cas(self) -> int:
        return self.reserve_cas(1)

    def reserve_cas(self, count: int) -> int:
        """The first of ``count`` consecutive CAS values, each above every CAS given
        before (a hybrid logical clock: nanoseconds with the low 16 bits clear)."""
        first = max(self._last_cas + 1, int(self.clock() * 1e9) & ~0xFFFF)
        if count:
            self._last_cas = first + count - 1
        return first

    @property
    def last_cas(self) -> int:
        """The highest CAS given (or reserved) so far."""
        return self._last_cas

    def give_back_cas(self, last: int) -> None:
        """CAS values reserved above ``last`` were not used (a bulk load stopped at a
        refused row): the next one given follows ``last`` (or the clock)."""
        self._last_cas = last

    def advance_cas(self, cas: int) -> None:
        """Every CAS given from now on is above ``cas`` (documents loaded with their own
        CAS values, as an on-disk corpus's)."""
        self._last_cas = max(self._last_cas, cas)
