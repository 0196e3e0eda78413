"""The backfill idle limit: a backfill that makes no progress for too long ends its
stream with STREAM_END SLOW.

kv_engine (``engines/ep/src/dcp/backfill_to_stream.cc`` ``shouldCancel``,
``backfill_disk_to_stream.cc`` ``isSlow``; ``configuration.json``
``dcp_backfill_idle_limit_seconds``, 720, ``dcp_backfill_idle_protection_enabled``, both
added in 8.0.0) cancels a disk backfill whose scan has not moved for the limit, when the
disk is over ``dcp_backfill_idle_disk_threshold`` and cancelling frees space; the stream
is set dead with ``DcpStreamEndStatus::Slow`` and, being in its backfill, its queued
items are dropped before the STREAM_END (``ActiveStream::endStream``). Takeover streams
are immune. It appeared in 8.0.0 (MB-62703, kv_engine commit 57b242f0e; no
``dcp_backfill_idle_*`` in ``configuration.json`` at any ``v7.6.x`` tag): a node of an
older ``--server-version`` (``ServerProfile.ends_idle_backfills`` false) never ends an
idle backfill, which waits for its consumer as long as it takes.

The mock measures the limit on the bucket's virtual clock (``advance_clock``): the
clock stands still between two moves, so a backfill that progressed since the last
move progressed at its time. A backfill makes no progress while its consumer holds it
back: the connection's flow-control window is full (nothing acknowledged, so the
scan's buffer does not drain); it progressed if the connection sent messages since it
was last looked at. The disk is taken as over the threshold (the case a
scenario stages). Pure: the caller passes the times.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from mockdcp.protocol import StreamEndReason

if TYPE_CHECKING:
    from mockdcp.producer._node import Node
    from mockdcp.producer._stream import Stream

#: per stream in its backfill: its connection's messages sent and the server time when
#: the backfill was last seen progressing (gone with the stream)
_PROGRESS: weakref.WeakKeyDictionary[Stream, tuple[int, float]] = weakref.WeakKeyDictionary()


def end_idle_backfills(node: Node, start: float, end: float, limit: float) -> int:
    """The server clock moved from ``start`` to ``end``: end SLOW the streams of every
    node of the cluster whose backfill has made no progress for ``limit`` seconds of
    it; how many. None on a node older than 8.0 (``ends_idle_backfills``: MB-62703)."""
    if not node.profile.ends_idle_backfills:
        return 0
    ended = 0
    for conn in node.matching():
        held = not conn.flow.open
        woke = False
        for stream in conn.streams:
            if not (stream.alive and stream.backfill_running and held):
                _PROGRESS.pop(stream, None)
                continue
            seen = _PROGRESS.get(stream)
            if seen is None or seen[0] != conn.flow.messages:
                seen = _PROGRESS[stream] = (conn.flow.messages, start)
            if end - seen[1] >= limit:
                stream.end(StreamEndReason.TOO_SLOW, discard_queue=True)
                conn.streams.mark_ready(stream)
                ended += 1
                woke = True
        if woke:
            node.wake(conn)
    return ended


__all__ = ["end_idle_backfills"]
