"""A schedule written in the library's scenario format (YAML), read back by
``parse_scenario`` as the same steps: what ``explore --out`` writes and ``mockdcp run`` /
``mockdcp check`` replay."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mockdcp.scenario import Scenario
    from mockdcp.scenario.steps import Step


def _plain(value: object) -> object:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def step_data(step: Step) -> dict[str, Any]:
    """``{name: {fields}}`` with the fields that differ from their defaults."""
    fields = attrs.asdict(step, filter=lambda a, v: v != a.default, recurse=True)
    return {step.NAME: _plain(fields)}


def _flow(value: object) -> str:
    """One YAML flow value: JSON is YAML (keys quoted only where needed)."""
    if isinstance(value, dict):
        inner = ", ".join(f"{_key(k)}: {_flow(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return json.dumps(value)


def _key(key: str) -> str:
    return key if key.isidentifier() else json.dumps(key)


def scenario_yaml(
    scenario: Scenario,
    *,
    comments: Sequence[str] = (),
    description: str | None = None,
) -> str:
    """The scenario as a library file; ``comments`` go on top (``#`` lines)."""
    lines = [f"# {c}" for c in comments]
    lines.append(f"name: {json.dumps(scenario.name)}")
    text = description if description is not None else scenario.description
    lines.append(f"description: {json.dumps(text)}")
    lines.append(f"seed: {scenario.seed}")
    if scenario.tags:
        lines.append(f"tags: {_flow(list(scenario.tags))}")
    if scenario.needs:
        lines.append(f"needs: {_flow([str(n) for n in scenario.needs])}")
    spec = attrs.asdict(
        scenario.bucket, filter=lambda a, v: (v != a.default and v != {}) or a.name == "vbuckets"
    )
    lines.append(f"bucket: {_flow(_plain(spec))}")
    consumer = attrs.asdict(scenario.consumer, filter=lambda a, v: v is not None)
    if consumer:
        lines.append(f"consumer: {_flow(consumer)}")
    lines.append("steps:")
    lines += [f"  - {_flow(step_data(step))}" for step in scenario.steps]
    return "\n".join(lines) + "\n"


__all__ = ["scenario_yaml", "step_data"]
