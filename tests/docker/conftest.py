from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.docker._engine import (
    SESSION,
    Engine,
    Unavailable,
    base_image,
    build_context,
    engine,
    run,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

# this session's own: test sessions may share an engine (DOCKER_HOST)
IMAGE_TAG = f"mockdcp-test:{SESSION}"
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
    if not docker_engine.own:  # an engine of this session's own is removed as a whole
        run(["docker", "image", "rm", "--force", IMAGE_TAG], env=docker_engine.env, check=False)
