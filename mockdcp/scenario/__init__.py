"""Scenarios: the one step vocabulary (``mockdcp.scenario.steps``), its converter for
YAML, JSON and Python data, validation, triggers, expectations and the runner."""

from __future__ import annotations

from mockdcp.scenario._bucket import (
    SCENARIO_EPOCH as SCENARIO_EPOCH,
    scenario_bucket as scenario_bucket,
    scenario_users as scenario_users,
)
from mockdcp.scenario._check import (
    Simulation as Simulation,
    resolve_vbuckets as resolve_vbuckets,
    split_collection as split_collection,
)
from mockdcp.scenario._convert import (
    BucketSpec as BucketSpec,
    ConsumerSettings as ConsumerSettings,
    ConsumerUser as ConsumerUser,
    FailureMode as FailureMode,
    Need as Need,
    Problem as Problem,
    Scenario as Scenario,
    ScenarioProblems as ScenarioProblems,
    load_scenario as load_scenario,
    parse_duration as parse_duration,
    parse_scenario as parse_scenario,
    parse_step as parse_step,
    parse_steps as parse_steps,
)
from mockdcp.scenario._runner import (
    ConsumerStart as ConsumerStart,
    ExpectationResult as ExpectationResult,
    Progress as Progress,
    StepFailed as StepFailed,
    StepRunner as StepRunner,
)
from mockdcp.scenario._validate import check_steps as check_steps
from mockdcp.scenario.steps import *  # noqa: F403
from mockdcp.scenario.steps import __all__ as _step_names

__all__ = [
    "SCENARIO_EPOCH",
    "BucketSpec",
    "ConsumerSettings",
    "ConsumerStart",
    "ConsumerUser",
    "ExpectationResult",
    "FailureMode",
    "Need",
    "Problem",
    "Progress",
    "Scenario",
    "ScenarioProblems",
    "Simulation",
    "StepFailed",
    "StepRunner",
    "check_steps",
    "load_scenario",
    "parse_duration",
    "parse_scenario",
    "parse_step",
    "parse_steps",
    "resolve_vbuckets",
    "scenario_bucket",
    "scenario_users",
    "split_collection",
    *_step_names,
]
