"""The Docker fixtures of the whole suite (tests/conftest.py loads them as a plugin): one
engine and one image of this checkout per session, for tests/docker and for the container
modes of the Java and Go helpers (tests/integrations)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.docker._engine import (
    SESSION,
    Engine,
    Unavailable,
    base_image,
    build_context,
    build_image,
    engine,
    remove_image,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# this session's own: test sessions may share an engine (DOCKER_HOST)
IMAGE_TAG = f"mockdcp-test:{SESSION}"


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
def docker_context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What docker/Dockerfile builds from, with the wheels it installs."""
    return build_context(tmp_path_factory.mktemp("docker-context"))


@pytest.fixture(scope="session")
def mockdcp_image(
    docker_engine: Engine, base_image_tag: str, docker_context: Path
) -> Iterator[str]:
    build_image(docker_engine, docker_context, base_image_tag, IMAGE_TAG)
    yield IMAGE_TAG
    remove_image(docker_engine, IMAGE_TAG)
