"""The bucket (and the users) a scenario runs on, made in one place for every command
that runs or checks one (``mockdcp serve --scenario``, ``run``, ``validate``,
``oracle --scenario``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.model import Bucket, Users, parse_roles
from mockdcp.util import ModelError, ScenarioError

if TYPE_CHECKING:
    from mockdcp.scenario._convert import Scenario

#: The bucket clock of a scenario run (2023-11-14T22:13:20Z): CAS values and delete times
#: then depend on the steps alone, so every run of a scenario sends the same bytes.
SCENARIO_EPOCH = 1_700_000_000.0


def scenario_bucket(scenario: Scenario) -> Bucket:
    """A fresh bucket as the scenario's ``bucket:`` block declares it, seeded with its seed,
    on the fixed scenario clock (``SCENARIO_EPOCH``); ``ScenarioError`` if the block
    declares a bucket that cannot be (history on couchstore...)."""
    try:
        return _bucket(scenario)
    except ModelError as exc:
        raise ScenarioError(f"{scenario.source}: bucket: {exc}") from None


def scenario_users(scenario: Scenario, users: Users | None = None) -> Users:
    """The users a scenario's server starts with: ``users`` (default: the
    administrator) and the scenario's consumer user, with its roles."""
    users = Users.default() if users is None else users
    spec = scenario.consumer.user
    if spec is not None:
        users.put(spec.name, password=spec.password, roles=parse_roles(spec.roles))
    return users


def _bucket(scenario: Scenario) -> Bucket:
    spec = scenario.bucket
    return Bucket(
        spec.name,
        spec.vbuckets,
        seed=scenario.seed,
        clock=lambda: SCENARIO_EPOCH,
        collections=spec.collections,
        storage=spec.storage,
        history_retention_bytes=spec.history_retention_bytes,
        history_retention_seconds=spec.history_retention_seconds,
        backfills_per_connection=spec.backfills_per_connection,
    )
