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
    # one validator for all: jsonschema.validate checks the schema itself on every call,
    # which cost 13 CPU seconds over the library against 0.4 s for the documents
    schema = scenario_schema()
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    folder = resources.files("mockdcp") / "scenarios"
    names = [entry.name for entry in folder.iterdir() if entry.name.endswith(".yaml")]
    assert len(names) >= 44
    for name in names:
        validator.validate(yaml.safe_load((folder / name).read_text()))


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
