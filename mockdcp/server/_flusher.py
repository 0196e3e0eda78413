"""The trio task that drives a bucket's flusher (``mockdcp/model/_flusher.py``).

It sleeps until the flusher's next deadline or until the bucket changes (a write, or
the flusher being released), then persists what is due. The policy is the model's; this
task only supplies the time and the waiting.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from mockdcp.model import Flusher


async def run_flusher(flusher: Flusher) -> None:
    """Persist the bucket's dirty vbuckets as they fall due, until cancelled."""
    wake = trio.Event()

    def on_change() -> None:
        wake.set()

    flusher.on_change = on_change
    try:
        while True:
            flusher.flush(trio.current_time())
            deadline = flusher.next_deadline()
            with trio.move_on_at(math.inf if deadline is None else deadline):
                await wake.wait()
            if wake.is_set():
                wake = trio.Event()
    finally:
        flusher.on_change = None
