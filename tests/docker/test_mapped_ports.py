from __future__ import annotations

import json
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from mockdcp.cli.bench._ports import unclaimed_port
from tests.docker._engine import REPO, SESSION, Engine, Unavailable, compose_command
from tests.docker.test_image import DOCS, STREAM_TIMEOUT, Compose, expected_documents

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def gocbcore_consumer() -> Path:
    """tests/interop's gocbcore program (built by Go, or taken as built)."""
    from tests.interop.conftest import HERE, _build

    try:
        _build(HERE / "go" / "build.sh")
    except RuntimeError as exc:
        pytest.skip(f"the gocbcore consumer cannot be built: {exc}")
    return HERE / "go" / "bin" / "gocbcore-consumer"


@pytest.fixture
def mapped(docker_engine: Engine, mockdcp_image: str) -> Iterator[Compose]:
    """docker/compose.yaml's mockdcp on random host ports, told those ports
    (``MOCKDCP_EXTERNAL_*``, as ``docker run -e``)."""
    try:
        command = compose_command()
    except Unavailable as exc:
        pytest.skip(str(exc))
    kv_port, http_port = unclaimed_port(), unclaimed_port()
    env = {
        **docker_engine.env,
        "MOCKDCP_IMAGE": mockdcp_image,
        "MOCKDCP_KV_PORT": str(kv_port),
        "MOCKDCP_HTTP_PORT": str(http_port),
        "MOCKDCP_DOCS": str(DOCS),
        "MOCKDCP_VBUCKETS": "16",
        "MOCKDCP_EXTERNAL_HOST": "localhost",
        "MOCKDCP_EXTERNAL_KV_PORT": str(kv_port),
        "MOCKDCP_EXTERNAL_HTTP_PORT": str(http_port),
    }
    project = ["--file", str(REPO / "docker" / "compose.yaml"), "--project-name"]
    project.append(f"mockdcp-mapped-{SESSION}")
    up = Compose([*command, *project], env, kv_port, http_port)
    try:
        up("up", "--no-build", "--pull", "never", "--detach", "--wait", "mockdcp")
        yield up
    finally:
        up("down", "--volumes", "--remove-orphans", "--timeout", "5")


def _mutations(events: Path) -> dict[str, str]:
    if not events.exists():
        return {}
    lines = events.read_text(errors="replace").splitlines()
    found = [json.loads(line) for line in lines if line.endswith("}")]
    return {e["key"]: e["value"] for e in found if e.get("event") == "mutation"}


def test_gocbcore_on_the_host_seeded_on_the_published_ports_takes_the_external_address(
    mapped: Compose, gocbcore_consumer: Path, tmp_path: Path
) -> None:
    events, state, log = tmp_path / "events.jsonl", tmp_path / "state.json", tmp_path / "log"
    args = ["--host", "localhost", "--kv-port", str(mapped.kv_port)]
    args += ["--http-port", str(mapped.http_port), "--out", str(events), "--state", str(state)]
    with log.open("wb") as err:
        client = subprocess.Popen(
            [str(gocbcore_consumer), *args, "--verbose", "--connect-timeout", "60s"],
            stdin=subprocess.PIPE,
            stdout=err,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + STREAM_TIMEOUT
            expected = expected_documents()
            while _mutations(events) != expected and time.monotonic() < deadline:
                assert client.poll() is None, log.read_text()[-4000:]
                time.sleep(0.2)
            assert _mutations(events) == expected
        finally:
            assert client.stdin is not None
            client.stdin.close()
            client.wait(30)
    assert client.returncode == 0
    # gocbcore chose the network from the seed (configmanagement_component.go)
    assert "Using network type external" in log.read_text()
