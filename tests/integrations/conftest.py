from __future__ import annotations

import attrs
import pytest


@attrs.frozen
class ContainerMode:
    """What the helpers' container tests need: the environment that points them at a
    Docker engine with this checkout's image (``MOCKDCP_IMAGE``), or why there is none."""

    env: dict[str, str]
    unavailable: str | None = None


@pytest.fixture(scope="session")
def container_mode(request: pytest.FixtureRequest) -> ContainerMode:
    """The image the Docker tests build (once a session: tests/docker/fixtures.py), for
    the Java and Go helpers' container tests. Where the Docker tests would skip, the
    helpers' suites still run their local mode and their container tests skip, saying
    why."""
    try:
        image: str = request.getfixturevalue("mockdcp_image")
        engine_env = request.getfixturevalue("docker_engine").env
    except pytest.skip.Exception as exc:
        return ContainerMode({}, unavailable=str(exc))
    # Ryuk, Testcontainers' reaper, is an image from a registry: the tests remove their
    # containers themselves
    env = {"MOCKDCP_IMAGE": image, "TESTCONTAINERS_RYUK_DISABLED": "true"}
    host = engine_env.get("DOCKER_HOST", "")
    if host:
        env["DOCKER_HOST"] = host
    if not host or host.startswith("unix://"):
        # an engine on this machine publishes ports here: without this, Testcontainers for
        # Java, run inside a container, looks for the gateway of a default bridge network,
        # which the tests' own engine (dockerd --bridge=none) does not have
        env["TESTCONTAINERS_HOST_OVERRIDE"] = "localhost"
    return ContainerMode(env)
