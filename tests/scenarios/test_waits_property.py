"""Any valid step sequence with waits completes against the reference consumer (issue
45, item 5): a wait's gate holds the items past its target and nothing else (never a
STREAM_END, a marker the consumer needs, a control frame), so a correct consumer always
gets what a wait waits for. ``explore`` generates such sequences; here hypothesis does.

The default tier runs a few examples (each serves a scenario and streams it); the
``full`` tier runs many more."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as stt
import pytest
import trio
import yaml
from hypothesis import HealthCheck, given, settings

from mockdcp.client import DcpConsumer
from mockdcp.scenario import parse_scenario
from tests.scenarios._harness import run_scenario

VBUCKETS = 2
KEYS = [f"k{i}" for i in range(6)]
#: the STREAM_END reasons a correct consumer re-opens after (kv_engine
#: docs/dcp/documentation/commands/stream-end.md): a wait after them can be met
REOPENED = ["state_changed", "too_slow", "backfill_failed"]
#: seconds a wait of the generated scenarios may take before the scenario fails
WAIT_TIMEOUT = "10s"


def _wait(vbucket: int | None) -> dict[str, Any]:
    consumer: dict[str, Any] = {"seqno": "high"}
    if vbucket is not None:
        consumer["vbucket"] = [vbucket]
    return {"wait": {"consumer": consumer, "timeout": WAIT_TIMEOUT}}


#: one step of a generated scenario, before the live keys are known (``_valid``)
_STEP = stt.one_of(
    stt.tuples(stt.just("set"), stt.sampled_from(KEYS)),
    stt.tuples(stt.just("delete"), stt.sampled_from(KEYS)),
    stt.tuples(stt.just("generate"), stt.integers(1, 4)),
    stt.tuples(stt.just("checkpoint"), stt.none()),
    stt.tuples(stt.just("persist"), stt.none()),
    stt.tuples(
        stt.just("end_stream"),
        stt.tuples(stt.integers(0, VBUCKETS - 1), stt.sampled_from(REOPENED)),
    ),
    stt.tuples(stt.just("disconnect"), stt.none()),
    stt.tuples(stt.just("wait"), stt.one_of(stt.none(), stt.integers(0, VBUCKETS - 1))),
    stt.tuples(stt.just("sleep"), stt.none()),
)


def _valid(drawn: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The drawn steps as a valid scenario's (a key is deleted only while it lives),
    ending with a wait for everything."""
    live: set[str] = set()
    generated = 0
    steps: list[dict[str, Any]] = []
    for n, (kind, arg) in enumerate(drawn):
        if kind == "set":
            live.add(arg)
            steps.append({"set": {"key": arg, "value": {"n": n}}})
        elif kind == "delete":
            if arg in live:
                live.discard(arg)
                steps.append({"delete": {"key": arg}})
        elif kind == "generate":
            steps.append({"generate": {"docs": arg, "start": generated}})
            generated += arg
        elif kind == "end_stream":
            vb, reason = arg
            steps.append({"end_stream": {"vbuckets": [vb], "reason": reason}})
        elif kind == "wait":
            steps.append(_wait(arg))
        elif kind == "sleep":
            steps.append({"wait": {"seconds": 0.05}})
        else:
            steps.append({kind: {}})
    steps.append(_wait(None))
    return steps


def scenario_text(steps: list[dict[str, Any]]) -> str:
    return yaml.safe_dump(
        {
            "name": "generated-waits",
            "description": "a generated step sequence with waits",
            "seed": 1,
            "bucket": {"name": "default", "vbuckets": VBUCKETS},
            "steps": steps,
        },
        sort_keys=False,
    )


def completes(steps: list[dict[str, Any]]) -> None:
    scenario = parse_scenario(scenario_text(steps), "<generated>")

    async def run() -> None:
        outcome = await run_scenario(
            scenario, lambda host, port: DcpConsumer(host, port, vbuckets=None)
        )
        assert outcome.failure is None, scenario_text(steps) + outcome.explain()
        assert outcome.consumer_error is None, outcome.explain()
        assert outcome.converged, scenario_text(steps) + outcome.explain()

    trio.run(run)


SEQUENCES = stt.lists(_STEP, min_size=1, max_size=12).map(_valid)
_QUICK = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_THOROUGH = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_issue_sequence_completes() -> None:
    # the sequence of issue 45: the STREAM_END of end_stream must not wait behind the
    # last wait's gate
    completes(
        [
            {"set": {"key": "a", "value": {"n": 1}}},
            _wait(None),
            {"end_stream": {"vbuckets": [0], "reason": "state_changed"}},
            {"set": {"key": "b", "value": {"n": 1}}},
        ]
    )


@_QUICK
@given(SEQUENCES)
def test_any_valid_sequence_with_waits_completes_quick(steps: list[dict[str, Any]]) -> None:
    completes(steps)


@pytest.mark.slow
@pytest.mark.full
@_THOROUGH
@given(SEQUENCES)
def test_any_valid_sequence_with_waits_completes(steps: list[dict[str, Any]]) -> None:
    completes(steps)
