"""The bucket's clock and the intervals of a node's timed tasks.

A bucket reads the time through its injected clock (seconds since the epoch). The shell
gives a wall-clock bucket ``time.time``; a *virtual* clock (``VirtualClock``) stands
still until ``Bucket.advance_clock`` moves it, and what a node does on its timers
within the time moved runs then (``mockdcp.model._timers``). Nothing here reads a clock.

``ServerTimers`` holds the intervals, each a bucket setting with a real node's default:

* ``exp_pager_stime``: seconds between two runs of the expiry pager (kv_engine
  ``engines/ep/configuration.json`` ``exp_pager_stime``, 600; its first run one
  interval after the bucket starts, ``exp_pager_initial_run_time`` -1).
* ``metadata_purge_age``: seconds a tombstone stays on disk before compaction may purge
  it (kv_engine ``configuration.json`` ``persistent_metadata_purge_age``, 259200 = the
  3 days of ns_server's ``purgeInterval``, ``compaction_api:get_purge_interval``).
* ``compaction_interval``: seconds between two automatic compactions of the bucket
  (ns_server's compaction daemon checks every 30 s; the mock takes every check as a
  compaction).
* ``backfill_idle_limit``: seconds a backfill may make no progress before its stream
  ends SLOW (kv_engine ``configuration.json`` ``dcp_backfill_idle_limit_seconds``, 720,
  added in 8.0.0).
* ``ephemeral_purge_interval``: seconds between two runs of an ephemeral bucket's
  tombstone purger (kv_engine ``configuration.json``
  ``ephemeral_metadata_purge_interval``, 60).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from mockdcp.model._ephemeral import EPHEMERAL_PURGE_INTERVAL
from mockdcp.util import ModelError

if TYPE_CHECKING:
    import datetime as dt

#: kv_engine ``configuration.json`` ``exp_pager_stime``
EXP_PAGER_STIME = 600
#: kv_engine ``configuration.json`` ``persistent_metadata_purge_age`` (3 days)
METADATA_PURGE_AGE = 3 * 24 * 3600
#: ns_server's compaction daemon check interval, in seconds
COMPACTION_INTERVAL = 30
#: kv_engine ``configuration.json`` ``dcp_backfill_idle_limit_seconds``
BACKFILL_IDLE_LIMIT = 720


def _positive(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ModelError(f"{attribute.name} is a number of seconds >= 1, not {value!r}")


@attrs.frozen(kw_only=True)
class ServerTimers:
    """The intervals of a bucket's timed tasks (see the module docstring), in seconds."""

    exp_pager_stime: int = attrs.field(default=EXP_PAGER_STIME, validator=_positive)
    metadata_purge_age: int = attrs.field(default=METADATA_PURGE_AGE, validator=_positive)
    compaction_interval: int = attrs.field(default=COMPACTION_INTERVAL, validator=_positive)
    backfill_idle_limit: int = attrs.field(default=BACKFILL_IDLE_LIMIT, validator=_positive)
    ephemeral_purge_interval: int = attrs.field(
        default=EPHEMERAL_PURGE_INTERVAL, validator=_positive
    )


class VirtualClock:
    """A clock that stands still until moved: ``now`` seconds since the epoch, from
    ``start``. Called, it gives ``now`` (a bucket's ``clock``)."""

    __slots__ = ("now", "start")

    def __init__(self, start: float) -> None:
        if not start >= 0:
            raise ModelError(f"a clock starts at a time >= 0 (the epoch), not {start!r}")
        self.start = float(start)
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def __repr__(self) -> str:
        return f"VirtualClock(now={iso_time(self.now)})"


#: what a bucket reads the time from: seconds since the epoch
Clock = Callable[[], float]
#: the kinds of bucket clock (``serve --clock``)
CLOCK_KINDS = ("wall", "virtual")


def make_clock(kind: str, start: str | float | None, wall: Clock) -> Clock:
    """The bucket clock ``serve --clock KIND --clock-start START`` asks for: ``wall``
    itself, or a ``VirtualClock`` from ``start`` (an ISO 8601 time or seconds since the
    epoch; default: ``wall``'s time, to the second). ``ModelError`` for an unknown kind,
    a start given to a wall clock, or a bad time."""
    if kind not in CLOCK_KINDS:
        raise ModelError(f"clock is wall or virtual, not {kind!r}")
    if kind == "wall":
        if start is not None:
            raise ModelError("clock_start needs clock='virtual' (--clock virtual)")
        return wall
    try:
        return VirtualClock(float(int(wall())) if start is None else parse_time(start))
    except ModelError as exc:
        raise ModelError(f"clock_start: {exc}") from None


def parse_time(text: str | float | dt.datetime) -> float:
    """An ISO 8601 time (``2024-01-01T00:00:00Z``; no zone is UTC) or seconds since the
    epoch as seconds since the epoch; ``ModelError`` naming the text otherwise."""
    import datetime as dt  # here: a start without --clock-start reads no time

    if isinstance(text, dt.datetime):
        when = text
    elif isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    else:
        try:
            when = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        except ValueError:
            raise ModelError(
                f"{text!r} is not an ISO 8601 time (like 2024-01-01T00:00:00Z)"
            ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def iso_time(seconds: float) -> str:
    """Seconds since the epoch as an ISO 8601 UTC time (``...Z``)."""
    import datetime as dt

    when = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return when.isoformat().replace("+00:00", "Z")


__all__ = [
    "BACKFILL_IDLE_LIMIT",
    "CLOCK_KINDS",
    "COMPACTION_INTERVAL",
    "EXP_PAGER_STIME",
    "METADATA_PURGE_AGE",
    "ServerTimers",
    "VirtualClock",
    "iso_time",
    "make_clock",
    "parse_time",
]
