"""The flusher: a bucket persists by itself, as a data node does.

A data node's flusher writes each vbucket's dirty items to disk shortly after they are
written (kv_engine ``engines/ep/src/flusher.cc``: a task per shard that wakes when a
vbucket has items in its checkpoint not yet persisted, and runs within milliseconds).
Consumers that mitigate rollbacks (java-dcp-client ``mitigateRollbacks``, go-dcp's
default rollback mitigation) deliver an item only once OBSERVE_SEQNO reports it
persisted, so a bucket that never persists gives them nothing.

The policy here is pure: it takes the time as an argument. A vbucket becomes *dirty* at
the first time the flusher is told of a write it has not persisted; once it has been
dirty for ``interval`` seconds, the whole vbucket is persisted (up to its high seqno).
``pause()`` holds the flusher (so a failover or restart loses unpersisted writes on
cue); ``resume()`` releases it. ``Bucket.persist`` works whether it is held or not. The
trio task that drives it is ``mockdcp/server/_flusher.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.model._bucket import Bucket
    from mockdcp.model._changes import Change

#: What ``mockdcp serve`` uses: a node flushes within milliseconds.
DEFAULT_FLUSH_INTERVAL = 0.005


class Flusher:
    """The persistence policy of one bucket; see the module docstring.

    ``interval`` None means no flusher: nothing is ever due (persistence only by
    ``Bucket.persist``). ``on_change`` is set by the shell: called (without arguments)
    when the flusher may have new work or was released, so the driving task wakes.
    """

    def __init__(self, bucket: Bucket, interval: float | None = None) -> None:
        self._bucket = bucket
        self.interval = interval
        self.paused = False
        #: vbuckets changed since the last ``poll`` (filled from the bucket's feed)
        self._changed: set[int] = set()
        #: vbucket -> the time it was first seen with unpersisted writes
        self._dirty: dict[int, float] = {}
        self.on_change: Callable[[], None] | None = None
        bucket.feed.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        self._changed.update(change.vbuckets)
        if change.vbuckets and self.on_change is not None and self.interval is not None:
            self.on_change()

    @property
    def enabled(self) -> bool:
        return self.interval is not None

    def pause(self) -> None:
        """Hold the flusher: nothing is persisted until ``resume`` (the step
        ``persistence: {paused: true}``)."""
        self.paused = True

    def resume(self) -> None:
        """Release the flusher; writes dirty for ``interval`` or longer persist at the
        next ``flush`` (the step ``persistence: {paused: false}``)."""
        self.paused = False
        if self.on_change is not None:
            self.on_change()

    def poll(self, now: float) -> list[int]:
        """Note which vbuckets are dirty (as of ``now``) and return those due: dirty for
        at least ``interval`` seconds. Nothing is due while paused or disabled."""
        vbuckets = self._bucket.vbuckets
        for vbid in self._changed:
            vb = vbuckets[vbid]
            if vb.high_seqno > vb.persisted_seqno:
                self._dirty.setdefault(vbid, now)
            else:
                self._dirty.pop(vbid, None)
        self._changed.clear()
        if self.paused or self.interval is None:
            return []
        interval = self.interval
        # the same sum as ``next_deadline``'s: at exactly that deadline (a virtual clock)
        # ``now - since`` may round below ``interval`` and nothing would ever be due
        return sorted(vbid for vbid, since in self._dirty.items() if now >= since + interval)

    def flush(self, now: float) -> list[int]:
        """Persist every vbucket due at ``now`` (up to its high seqno); the vbuckets
        persisted. Each persist is published on the bucket's feed, as ``Bucket.persist``'s."""
        due = self.poll(now)
        for vbid in due:
            self._dirty.pop(vbid, None)
            self._bucket.persist(vbid)
        return due

    def next_deadline(self) -> float | None:
        """When the next vbucket falls due (None: nothing dirty, paused, or disabled).
        Writes not yet ``poll``-ed count from the next ``poll``."""
        if self.paused or self.interval is None or not self._dirty:
            return None
        return min(self._dirty.values()) + self.interval
