from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.docker._engine import SESSION, Engine, Unavailable, remove_image, usr_local_base

if TYPE_CHECKING:
    from collections.abc import Iterator

# docker_engine, base_image_tag, docker_context and mockdcp_image: tests/docker/fixtures.py


@pytest.fixture(scope="session")
def usr_local_base_tag(
    docker_engine: Engine, base_image_tag: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A base with this interpreter under /usr/local, as the official python images
    have theirs (``usr_local_base``)."""
    tag = f"mockdcp-test-usr-local:{SESSION}"
    try:
        usr_local_base(docker_engine, base_image_tag, tmp_path_factory.mktemp("usr-local"), tag)
    except Unavailable as exc:
        pytest.skip(f"no base with Python under /usr/local: {exc}")
    yield tag
    remove_image(docker_engine, tag)
