"""The trio task that runs the server's timed tasks on the wall clock.

A data node runs them by itself: the expiry pager every ``exp_pager_stime`` (kv_engine
``item_pager.cc`` ``ExpiredItemPager``), compaction purging the tombstones older than
the metadata purge interval and applying Magma's history retention by seconds
(ns_server's auto-compaction), an ephemeral bucket's tombstone purger every
``ephemeral_metadata_purge_interval`` (kv_engine ``ephemeral_tombstone_purger.cc``).
The model decides what each run does (``mockdcp.model.WallTimers``); this task only
supplies the time and the waiting: one task per server, sleeping until the next run of
any of its buckets is due, or until a bucket is made or deleted, then handing each due
bucket the time of its clock.

A bucket on a virtual clock is left to ``advance_clock``. The backfill idle limit
(STREAM_END SLOW) is not run on the wall clock: kv_engine ends an idle backfill only
while the disk is over ``dcp_backfill_idle_disk_threshold`` (90 %, MB-62703 "End a
stalled backfill if disk space is low"), which a test's disk is not; a scenario stages
it on the virtual clock.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import attrs
import trio

from mockdcp.model import WallTimers
from mockdcp.util import MockDcpError

if TYPE_CHECKING:
    from mockdcp.model import Bucket

log = logging.getLogger("mockdcp.timers")


@attrs.define(eq=False)
class WallClockTimers:
    """The wall-clock timers of the server's buckets (``add`` when a bucket is made,
    ``remove`` when it is deleted) and the task that runs them (``run``)."""

    schedules: dict[int, WallTimers] = attrs.field(factory=dict)
    changed: trio.Event = attrs.field(factory=trio.Event)

    def add(self, model: Bucket) -> None:
        """Run ``model``'s timers from now on its clock (not on a virtual clock)."""
        if model.virtual_clock is not None:
            return
        self.schedules[id(model)] = WallTimers(model, model.clock())
        self.changed.set()

    def remove(self, model: Bucket) -> None:
        """``model`` was deleted: its timers stop."""
        if self.schedules.pop(id(model), None) is not None:
            self.changed.set()

    def delay(self) -> float:
        """Seconds until the next run of any bucket's timers (inf: none)."""
        return min((s.due() - s.bucket.clock() for s in self.schedules.values()), default=math.inf)

    def run_due(self) -> int:
        """Run each bucket's timers that fell due by its clock's time; how many buckets
        ran some. A run the model refuses is logged, never the server's end."""
        ran = 0
        for schedule in list(self.schedules.values()):
            now = schedule.bucket.clock()
            if now < schedule.due():
                continue
            ran += 1
            try:
                schedule.run(now)
            except MockDcpError as exc:
                log.warning("bucket %r: its timers failed: %s", schedule.bucket.name, exc)
        return ran

    async def run(self) -> None:
        """Run the timers as they fall due, until cancelled."""
        while True:
            self.run_due()
            with trio.move_on_after(max(self.delay(), 0.0)):
                await self.changed.wait()
            if self.changed.is_set():
                self.changed = trio.Event()


__all__ = ["WallClockTimers"]
