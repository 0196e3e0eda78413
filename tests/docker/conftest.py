from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.docker._engine import (
    OWN_SOCKET,
    Engine,
    Unavailable,
    base_image,
    build_context,
    engine,
    run,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

IMAGE_TAG = "mockdcp-test:latest"
BUILD_TIMEOUT = 900


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Engine]:
    try:
        with engine() as found:
            yield found
    except Unavailable as exc:
        pytest.skip(f"no Docker engine: {exc}")


@pytest.fixture(scope="session")
def base_image_tag(docker_engine: Engine) -> str:
    try:
        return base_image(docker_engine)
    except Unavailable as exc:
        pytest.skip(f"no local base image: {exc}")


@pytest.fixture(scope="session")
def mockdcp_image(
    docker_engine: Engine, base_image_tag: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    context = build_context(tmp_path_factory.mktemp("docker-context"))
    env = {**docker_engine.env, "DOCKER_BUILDKIT": "0"}  # Debian's engine has no buildx
    run(
        [
            "docker",
            "build",
            "--file",
            context / "docker" / "Dockerfile",
            "--build-arg",
            f"BASE_IMAGE={base_image_tag}",
            "--tag",
            IMAGE_TAG,
            context,
        ],
        env=env,
        timeout=BUILD_TIMEOUT,
    )
    yield IMAGE_TAG
    run(["docker", "image", "rm", "--force", IMAGE_TAG], env=docker_engine.env, check=False)
    if docker_engine.env.get("DOCKER_HOST") == f"unix://{OWN_SOCKET}":
        # the engine's data root is this suite's own cache: drop the build stages, keep
        # the base image for the next run
        run(["docker", "image", "prune", "--force"], env=docker_engine.env, check=False)
