from __future__ import annotations

import json

import pytest

from mockdcp.scenario import (
    ConsumerProgress,
    Expect,
    Persist,
    RollbackExpectation,
    ScenarioProblems,
    Set,
    Wait,
    parse_duration,
    parse_scenario,
    parse_steps,
    scenario_bucket,
)
from mockdcp.util import ScenarioError

DESIGN_EXAMPLE = """\
name: rollback-after-failover
description: The active copy fails over; items above seqno 40 are lost.
seed: 7
bucket: {name: default, vbuckets: 16}
steps:
  - generate: {docs: 100}
  - persist: {upto: 40}
  - wait: {consumer: {vbucket: all, seqno: high}}
  - failover: {vbuckets: all, lose_unpersisted: true}
  - disconnect: {}
  - expect: {rollback: {vbucket: 0, to: 40}, within: 10s}
"""


def test_the_design_example_parses_into_step_objects() -> None:
    scenario = parse_scenario(DESIGN_EXAMPLE, "example.yaml")
    assert scenario.seed == 7
    assert scenario.bucket.vbuckets == 16
    assert scenario.steps[1] == Persist(upto=40)
    assert scenario.steps[2] == Wait(consumer=ConsumerProgress(vbucket="all", seqno="high"))
    assert scenario.steps[-1] == Expect(rollback=RollbackExpectation(vbucket=0, to=40), within=10)


def test_yaml_json_and_python_spell_the_same_steps() -> None:
    yaml_steps = parse_scenario(
        "name: x\nsteps:\n  - set: {key: a, value: {n: 1}}\n  - persist: {vbuckets: [0, 5]}\n"
    ).steps
    json_steps = parse_steps(
        json.loads('[{"set": {"key": "a", "value": {"n": 1}}}, {"persist": {"vbuckets": [0, 5]}}]')
    )
    python_steps = [Set(key="a", value={"n": 1}), Persist(vbuckets=(0, 5))]
    assert list(yaml_steps) == json_steps == python_steps


def test_errors_name_the_file_line_step_and_field() -> None:
    text = (
        "name: bad\nsteps:\n  - persist: {upto: x}\n  - frobnicate: {}\n"
        "  - wait:\n      consumer:\n        seqno: -3\n  - set: {key: k, value: 5}\n"
    )
    with pytest.raises(ScenarioProblems) as info:
        parse_scenario(text, "bad.yaml")
    found = {(p.line, p.step, p.field) for p in info.value.problems}
    assert (3, 0, "persist.upto") in found
    assert (4, 1, None) in found
    assert (7, 2, "wait.consumer.seqno") in found
    assert (8, 3, "set.value") in found
    assert "bad.yaml:4: step 2: unknown step 'frobnicate'" in str(info.value)


def test_unknown_fields_and_missing_fields_are_reported() -> None:
    with pytest.raises(ScenarioProblems) as info:
        parse_steps([{"touch": {"key": "k", "bogus": 1}}])
    messages = " ".join(p.message for p in info.value.problems)
    assert "unknown fields: bogus" in messages
    assert "required field missing" in messages


def test_types_are_strict() -> None:
    for bad in (
        {"persist": {"upto": True}},
        {"persist": {"upto": "7"}},
        {"stall": {"seconds": "x"}},
    ):
        with pytest.raises(ScenarioProblems):
            parse_steps([bad])


def test_not_yaml_is_an_error_with_a_line() -> None:
    with pytest.raises(ScenarioProblems) as info:
        parse_scenario("name: x\nsteps: [\n", "broken.yaml")
    assert info.value.problems[0].line is not None


@pytest.mark.parametrize(
    ("text", "seconds"), [(3, 3.0), (0.5, 0.5), ("500ms", 0.5), ("10s", 10.0), ("2m", 120.0)]
)
def test_durations_take_seconds_or_units(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_metadata_parses_with_durations_and_needs() -> None:
    from mockdcp.scenario import Need

    scenario = parse_scenario(
        "name: m\ntags: [rollback, flow-control]\nneeds: [flow_control, noops]\n"
        "reproduces: {summary: it stalls, source: 'https://example.org/x'}\n"
        "consumer: {buffer_size: 65536, noop_interval: 500ms}\n"
    )
    assert scenario.tags == ("rollback", "flow-control")
    assert scenario.needs == (Need.FLOW_CONTROL, Need.NOOPS)
    assert scenario.reproduces is not None
    assert scenario.reproduces.summary == "it stalls"
    assert scenario.consumer.environment() == {
        "MOCKDCP_BUFFER_SIZE": "65536",
        "MOCKDCP_NOOP_INTERVAL": "0.5",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("needs: [telepathy]", "unknown need 'telepathy' (known: collections, flow_control"),
        ("tags: [Rollback]", "a tag is lower-case letters, digits and dashes, not 'Rollback'"),
        ("reproduces: {summary: x}", "required field missing"),
        ("colour: red", "unknown key 'colour'"),
    ],
)
def test_bad_metadata_is_reported_clearly(text: str, message: str) -> None:
    with pytest.raises(ScenarioProblems) as info:
        parse_scenario(f"name: m\n{text}\n", "m.yaml")
    assert message in str(info.value)


def test_bucket_block_declares_the_backfills_per_connection() -> None:
    """kv_engine ``dcp_backfill_in_progress_per_connection_limit``: 1 unless the block
    stages an older node; below 1 is refused as the scenario's error."""
    assert scenario_bucket(parse_scenario("name: t\n")).backfills_per_connection == 1
    plan = parse_scenario("name: t\nbucket:\n  backfills_per_connection: 4\n")
    assert scenario_bucket(plan).backfills_per_connection == 4
    with pytest.raises(ScenarioError, match="backfills_per_connection"):
        scenario_bucket(parse_scenario("name: t\nbucket:\n  backfills_per_connection: 0\n"))


@pytest.mark.parametrize(
    ("steps", "collections", "scope"),
    [
        ("- set: {key: a, value: {n: 1}}", ("_default._default",), "_default"),
        (
            "- set: {key: a, value: {n: 1}, collection: inventory.hotel}\n"
            "- delete: {key: a, collection: hotel}",
            ("_default.hotel", "inventory.hotel"),
            "",
        ),
        (
            "- generate: {docs: 2, collection: inventory.hotel}\n"
            "- set: {key: a, value: {n: 1}, collection: inventory.airline}\n"
            "- drop_collection: {collection: inventory.rail}",
            ("inventory.airline", "inventory.hotel"),
            "inventory",
        ),
        ("- checkpoint: {}", (), ""),
    ],
)
def test_the_collections_a_scenario_writes_to_and_their_one_scope(
    steps: str, collections: tuple[str, ...], scope: str
) -> None:
    # issue 46: `check` tells a consumer configured for one scope which (go-dcp)
    text = "name: s\nsteps:\n" + "\n".join("  " + line for line in steps.splitlines())
    scenario = parse_scenario(text)
    assert scenario.collections() == collections
    assert scenario.scope() == scope


def test_bucket_block_declares_the_server_version() -> None:
    """``bucket: {server_version: ...}``: a release's profile, or a full version string
    naming one; the consumer block may ask for change streams (MOCKDCP_CHANGE_STREAMS)."""
    plan = parse_scenario(
        "name: t\nbucket: {server_version: '7.0'}\nconsumer: {change_streams: true}\n"
    )
    assert plan.bucket.server_version == "7.0"
    assert plan.consumer.environment() == {"MOCKDCP_CHANGE_STREAMS": "1"}
    assert parse_scenario("name: t\n").bucket.server_version is None
    full = parse_scenario("name: t\nbucket: {server_version: 7.2.4-7070-enterprise}\n")
    assert full.bucket.server_version == "7.2.4-7070-enterprise"


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("{server_version: '7.1'}", "unknown server version '7.1': 7.1 is not one of 7.0"),
        ("{server_version: newest}", "unknown server version 'newest'"),
        ("{server_version: '7.0', storage: magma}", "7.2 or later, not 7.0"),
    ],
)
def test_an_unknown_server_version_is_a_scenario_problem(block: str, message: str) -> None:
    with pytest.raises(ScenarioProblems) as info:
        parse_scenario(f"name: t\nbucket: {block}\n", "t.yaml")
    assert message in str(info.value)
    assert "t.yaml" in str(info.value)


def test_a_scenario_is_read_by_libyaml_and_bad_yaml_is_reported_as_pyyaml_says() -> None:
    """libyaml's parser reads a scenario (``check`` and ``explore`` read one per run);
    bad YAML keeps the pure-Python parser's message and line."""
    import yaml

    used: list[str] = []
    fast = yaml.CSafeLoader

    class Counting(fast):  # type: ignore[misc,valid-type]
        def __init__(self, stream: str) -> None:
            used.append(stream)
            super().__init__(stream)

    text = "name: s\nsteps:\n  - set: {key: k, value: {n: 1}}\n  - wait: {seconds: 0.1}\n"
    bad = "name: s\nsteps:\n  - set: {key: k\n  - wait: [\n"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(yaml, "CSafeLoader", Counting)
        scenario = parse_scenario(text)
        assert used == [text, text]
        with pytest.raises(ScenarioError) as caught:
            parse_scenario(bad)
    assert [s.NAME for s in scenario.steps] == ["set", "wait"]
    with pytest.raises(yaml.YAMLError) as pure:
        yaml.safe_load(bad)
    problem = caught.value.problems[0]  # type: ignore[attr-defined]
    assert problem.message == f"not valid YAML: {pure.value}"
    assert problem.line == pure.value.problem_mark.line + 1  # type: ignore[attr-defined]
