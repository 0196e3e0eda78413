"""Each step interprets itself: its class carries its check and its apply."""

from __future__ import annotations

import pytest

from mockdcp.scenario import steps
from mockdcp.scenario.steps import STEP_TYPES, Step


@pytest.mark.parametrize("cls", STEP_TYPES, ids=lambda cls: cls.NAME)
def test_every_step_applies_itself_unless_the_runner_awaits_it(cls: type[Step]) -> None:
    assert cls.WAITS or cls.apply is not Step.apply, f"{cls.NAME} has no apply"
    assert not (cls.WAITS and cls.apply is not Step.apply), f"{cls.NAME} waits and applies"


def test_the_waiting_steps_are_wait_and_expect() -> None:
    assert {cls.NAME for cls in STEP_TYPES if cls.WAITS} == {"wait", "expect"}


def test_a_step_without_apply_is_caught() -> None:
    class Forgotten(steps.Step):
        NAME = "forgotten"

    with pytest.raises(AssertionError, match="forgotten has no apply"):
        test_every_step_applies_itself_unless_the_runner_awaits_it(Forgotten)
