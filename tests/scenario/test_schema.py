from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest
import yaml

from mockdcp.scenario._schema import render, scenario_schema

from .test_convert import DESIGN_EXAMPLE


def test_the_shipped_schema_is_generated_from_the_step_classes() -> None:
    shipped = (resources.files("mockdcp") / "scenario" / "scenario.schema.json").read_text()
    assert shipped == render()


def test_the_design_example_validates_against_the_schema() -> None:
    jsonschema.validate(yaml.safe_load(DESIGN_EXAMPLE), scenario_schema())


@pytest.mark.parametrize(
    "step",
    [
        {"frobnicate": {}},
        {"persist": {"upto": "x"}},
        {"set": {"key": "k"}},
        {"wait": {"consumer": {"bogus": 1}}},
        {"persist": {}, "purge": {}},
    ],
    ids=json.dumps,
)
def test_bad_steps_fail_the_schema(step: dict[str, object]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "steps": [step]}, scenario_schema())


def test_every_library_scenario_validates_against_the_schema() -> None:
    folder = resources.files("mockdcp") / "scenarios"
    for entry in folder.iterdir():
        if entry.name.endswith(".yaml"):
            jsonschema.validate(yaml.safe_load(entry.read_text()), scenario_schema())


@pytest.mark.parametrize(
    "meta",
    [
        {"tags": ["Rollback"]},
        {"needs": ["telepathy"]},
        {"reproduces": {"summary": "x"}},
        {"consumer": {"buffer_size": "big"}},
    ],
    ids=json.dumps,
)
def test_bad_metadata_fails_the_schema_and_the_parser(meta: dict[str, object]) -> None:
    from mockdcp.scenario import ScenarioProblems, parse_scenario

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", **meta}, scenario_schema())
    with pytest.raises(ScenarioProblems):
        parse_scenario(json.dumps({"name": "x", **meta}))
