"""The bucket a scenario runs on, made in one place for every command that runs or checks
one (``mockdcp serve --scenario``, ``run``, ``validate``, ``oracle --scenario``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model import Bucket, ServerTimers, VirtualClock, parse_time
from mockdcp.util import ModelError, ScenarioError

if TYPE_CHECKING:
    from mockdcp.scenario._convert import Scenario

#: The bucket clock of a scenario run (2023-11-14T22:13:20Z) unless its ``bucket:`` block
#: says ``clock_start``: a virtual clock that only ``advance_clock`` moves, so CAS values
#: and delete times depend on the steps alone and every run sends the same bytes.
SCENARIO_EPOCH = 1_700_000_000.0


def scenario_bucket(scenario: Scenario) -> Bucket:
    """A fresh bucket as the scenario's ``bucket:`` block declares it, seeded with its seed,
    on a virtual clock from ``clock_start`` (default ``SCENARIO_EPOCH``) that only
    ``advance_clock`` moves; ``ScenarioError`` if the block
    declares a bucket that cannot be (history on couchstore...)."""
    try:
        return _bucket(scenario)
    except ModelError as exc:
        raise ScenarioError(f"{scenario.source}: bucket: {exc}") from None


def _bucket(scenario: Scenario) -> Bucket:
    spec = scenario.bucket
    return Bucket(
        spec.name,
        spec.vbuckets,
        seed=scenario.seed,
        clock=VirtualClock(
            SCENARIO_EPOCH if spec.clock_start is None else parse_time(spec.clock_start)
        ),
        collections=spec.collections,
        storage=spec.storage,
        history_retention_bytes=spec.history_retention_bytes,
        history_retention_seconds=spec.history_retention_seconds,
        backfills_per_connection=spec.backfills_per_connection,
        timers=ServerTimers(
            exp_pager_stime=spec.exp_pager_stime, metadata_purge_age=spec.metadata_purge_age
        ),
    )
