from __future__ import annotations

import pytest

from mockdcp.model import Bucket
from mockdcp.scenario import Generate, ScenarioProblems, Set, check_steps
from mockdcp.scenario._check import resolve_collection


def bucket() -> Bucket:
    return Bucket(
        "default",
        8,
        seed=1,
        clock=lambda: 1_700_000_000.0,
        collections={"inventory": ["hotel", "airline"]},
    )


@pytest.mark.parametrize(
    ("name", "cid"),
    [("inventory.hotel", 8), ("inventory.airline", 9), ("_default._default", 0), ("_default", 0)],
)
def test_resolve_collection_reads_the_manifest(name: str, cid: int) -> None:
    assert resolve_collection(bucket(), name) == cid


def test_unknown_collection_names_what_the_bucket_has() -> None:
    with pytest.raises(ValueError, match=r"inventory\.hotel, inventory\.airline"):
        resolve_collection(bucket(), "inventory.rail")


def test_steps_in_declared_collections_check_and_unknown_ones_do_not() -> None:
    check_steps([Generate(docs=3, collection="inventory.hotel")], bucket())
    with pytest.raises(ScenarioProblems) as info:
        check_steps([Set(key="k", value="{}", collection="nope.hotel")], bucket())
    assert "unknown scope 'nope'" in info.value.problems[0].message
