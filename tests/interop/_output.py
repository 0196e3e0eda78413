"""What a failure report shows of a real client's output (its stdout and stderr, one
log file): the end, where a crash is, first.

A Go program that panics prints ``panic: ...`` and the panicking goroutine's stack
last, and exits 2 (a ``fatal error: ...`` prints every goroutine's stack, often tens of
kilobytes); a Java program prints ``Exception in thread ...`` and its stack trace. The
report starts with the crash, from the line that begins it (its first ``CRASH_CHARS``,
which hold the message and the top of the stack), then the output's last ``TAIL_CHARS``
before it, so that a log cut at its end (a CI page, a terminal) still shows why the
client died. Without a crash it is the output's last ``TAIL_CHARS``.
"""

from __future__ import annotations

import re

#: how much of a crash a report shows, from its first line
CRASH_CHARS = 6000
#: how much of the output before the crash (or of the whole, without one) it shows
TAIL_CHARS = 4000

#: the first line of a crash: a Go panic or runtime fatal error, a Java uncaught exception
_CRASH = re.compile(r"^(?:panic: |fatal error: |Exception in thread )", re.MULTILINE)


def output_excerpt(text: str) -> str:
    """The part of a client's output a failure report shows (see the module docstring)."""
    crash = _CRASH.search(text)
    if crash is None:
        return _tail(text, TAIL_CHARS)
    start = crash.start()
    stack = text[start:]
    if len(stack) > CRASH_CHARS:
        stack = stack[:CRASH_CHARS] + f"\n[... {len(stack) - CRASH_CHARS} more characters]"
    before = _tail(text[:start], TAIL_CHARS)
    return f"--- the crash ---\n{stack}\n--- the output before it ---\n{before}"


def _tail(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    return f"[... {len(text) - chars} characters before]\n{text[-chars:]}"
