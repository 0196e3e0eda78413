from __future__ import annotations

import pytest

from mockdcp import ScenarioError
from mockdcp.model import Bucket
from mockdcp.scenario import ScenarioProblems, check_steps, parse_scenario, scenario_bucket
from mockdcp.scenario.steps import CreateCollection, ModifyCollection, PurgeHistory


def bucket(storage: str = "magma") -> Bucket:
    return Bucket(
        "default",
        4,
        seed=1,
        clock=lambda: 1_700_000_000.0,
        storage=storage,
        collections={"inventory": ["hotel"]},
    )


def test_history_steps_check_on_magma() -> None:
    check_steps(
        [
            CreateCollection(collection="inventory.log", history=False),
            ModifyCollection(collection="inventory.hotel", history=False),
            PurgeHistory(),
        ],
        bucket(),
    )


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (CreateCollection(collection="_default.c", history=True), "magma"),
        (ModifyCollection(collection="_default._default", history=True), "magma"),
        (PurgeHistory(), "magma"),
    ],
)
def test_history_steps_on_couchstore_are_refused_before_anything(
    step: object, message: str
) -> None:
    b = bucket("couchstore")
    with pytest.raises(ScenarioProblems) as info:
        check_steps([step], b)  # type: ignore[list-item]
    assert message in info.value.problems[0].message
    assert b.manifest.uid == 2


def test_purge_history_upto_beyond_persisted_is_refused() -> None:
    with pytest.raises(ScenarioProblems):
        check_steps([PurgeHistory(vbuckets=0, upto=99)], bucket())


def test_modify_collection_history_keeps_the_max_ttl() -> None:
    b = Bucket(
        "default",
        1,
        clock=lambda: 1_700_000_000.0,
        storage="magma",
        collections={"inventory": [{"name": "hotel", "maxTTL": 60}]},
    )
    change = ModifyCollection(collection="inventory.hotel", history=False).plan(b.manifest)
    assert [(c.max_ttl, c.history) for c in change.collections if c.name == "hotel"] == [
        (60, False)
    ]


def test_bucket_block_declares_storage_and_retention() -> None:
    plan = parse_scenario(
        "name: t\nbucket:\n  vbuckets: 4\n  storage: magma\n  history_retention_seconds: 60\n"
    )
    b = scenario_bucket(plan)
    assert (b.storage, b.history_retention_bytes, b.history_retention_seconds) == (
        "magma",
        0,
        60,
    )
    bad = parse_scenario("name: t\nbucket:\n  history_retention_bytes: 100\n")
    with pytest.raises(ScenarioError, match="magma"):
        scenario_bucket(bad)
