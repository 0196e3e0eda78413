from __future__ import annotations

import json
import re
import sys
import urllib.request
from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from mockdcp.cli.bench._ports import unclaimed_port
from mockdcp.data._dataset import faker_documents
from tests.docker._engine import (
    REPO,
    SESSION,
    Engine,
    Unavailable,
    build_image,
    compose_command,
    remove_image,
    run,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.docker

DOCS = 1000  # compose.yaml's default, as `mockdcp serve`'s
VBUCKETS = 16
# The "small image": docker/Dockerfile's is the tree docker/runtime.py assembles
# on an empty base (the venv as docker/slim.py leaves it, 72 MiB: numpy 20 MB and its
# OpenBLAS 28 MB, the bytecode of what the server imports 8 MB, pygments under rich 5 MB,
# cramjam 4 MB, Faker with one locale 3 MB, ...; the interpreter, the standard library a
# server can use and the libraries they link, about 45 MB). 120 MB when written (200 MB
# built on its base); the rest of the limit is room for dependencies' releases to grow.
IMAGE_SIZE_LIMIT = 150 * 10**6
STREAM_TIMEOUT = 120


@attrs.frozen
class Compose:
    """docker/compose.yaml run as a project of its own, on free host ports."""

    command: list[str]
    env: dict[str, str]
    kv_port: int
    http_port: int

    def __call__(self, *args: str, timeout: float = 300) -> str:
        return run([*self.command, *args], env=self.env, timeout=timeout).stdout

    def container(self, service: str) -> dict[str, Any]:
        ids = self("ps", "--all", "--quiet", service).split()
        assert len(ids) == 1, ids
        found: dict[str, Any] = json.loads(run(["docker", "inspect", ids[0]], env=self.env).stdout)[
            0
        ]
        return found


def timestamp(text: str) -> datetime:
    """Docker's RFC 3339 times carry nanoseconds; datetime takes microseconds."""
    return datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", text).replace("Z", "+00:00"))


def streamed_documents(json_lines: str) -> dict[str, str]:
    """``mockdcp tail --json``'s mutations, key to body; a key streamed twice fails."""
    events = [json.loads(line) for line in json_lines.splitlines() if line.startswith("{")]
    mutations = [(e["key"], e["value"]) for e in events if e["event"] == "Mutation"]
    documents = dict(mutations)
    assert len(documents) == len(mutations), "a document was streamed twice"
    return documents


def expected_documents() -> dict[str, str]:
    """What ``mockdcp serve --docs DOCS`` loads: the image's Faker, pruned to the locales
    the generator uses, must draw the same documents as the full one installed here."""
    return {key: body.decode() for key, body in faker_documents(DOCS)}


@pytest.fixture(scope="module")
def compose(docker_engine: Engine, mockdcp_image: str) -> Iterator[Compose]:
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
        "MOCKDCP_VBUCKETS": str(VBUCKETS),
    }
    project = ["--file", str(REPO / "docker" / "compose.yaml"), "--project-name"]
    project.append(f"mockdcp-test-{SESSION}")
    up = Compose([*command, *project], env, kv_port, http_port)
    try:
        yield up
    finally:
        up("down", "--volumes", "--remove-orphans", "--timeout", "5")


def test_image_runs_mockdcp_serve_on_all_interfaces_as_a_non_root_user(
    docker_engine: Engine, mockdcp_image: str
) -> None:
    config = json.loads(docker_engine.docker("image", "inspect", mockdcp_image))[0]["Config"]
    assert config["Entrypoint"] == ["mockdcp", "serve", "--host", "0.0.0.0"]
    assert config["User"] == "10001:10001"
    assert set(config["ExposedPorts"]) == {"11210/tcp", "8091/tcp"}
    assert "MOCKDCP_HEALTH_URL=http://127.0.0.1:8091/mock/health" in config["Env"]
    assert config["Healthcheck"]["Test"][0] == "CMD"


def test_image_is_under_150_mb_and_holds_nothing_of_its_base(
    docker_engine: Engine, mockdcp_image: str, base_image_tag: str
) -> None:
    image, base = (
        json.loads(docker_engine.docker("image", "inspect", tag))[0]
        for tag in (mockdcp_image, base_image_tag)
    )
    assert image["Size"] < IMAGE_SIZE_LIMIT, f"{image['Size'] / 10**6:.1f} MB"
    assert not set(base["RootFS"]["Layers"]) & set(image["RootFS"]["Layers"])
    # no shell, no package manager: what runtime.py does not copy is not there
    assert_absent(docker_engine, mockdcp_image, "/bin/sh", "/usr/bin/apt-get", "/usr/bin/dpkg")


def assert_absent(docker_engine: Engine, image: str, *paths: str) -> None:
    """None of ``paths`` is in ``image`` (its python looks: there is no shell)."""
    for absent in paths:
        probe = f"import os, sys; sys.exit(os.path.lexists({absent!r}))"
        docker_engine.docker("run", "--rm", "--entrypoint", "python3", image, "-c", probe)


def test_image_builds_as_small_on_a_python_under_usr_local_as_the_official_images_have(
    docker_engine: Engine, usr_local_base_tag: str, docker_context: Path
) -> None:
    # docker/Dockerfile's default base (python:3.11-slim) cannot be pulled here; its
    # layout can be made: a CPython built from source under /usr/local, no Debian python.
    # docker/runtime.py must find that interpreter, its standard library and libpython
    # there, and the build's imagecheck serve, stream and run a scenario with them.
    tag = f"mockdcp-test-on-usr-local:{SESSION}"
    build_image(docker_engine, docker_context, usr_local_base_tag, tag)
    try:
        image = json.loads(docker_engine.docker("image", "inspect", tag))[0]
        # the interpreter copied here is stripped, as the official images' is
        print(f"image on /usr/local: {image['Size'] / 10**6:.1f} MB")
        assert image["Size"] < IMAGE_SIZE_LIMIT, f"{image['Size'] / 10**6:.1f} MB"
        where = "import os, sys; print(os.path.realpath(sys.executable), sys.base_prefix)"
        found = docker_engine.docker("run", "--rm", "--entrypoint", "python3", tag, "-c", where)
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        assert found.split() == [f"/usr/local/bin/{version}", "/usr/local"]
        assert_absent(docker_engine, tag, "/bin/sh")
    finally:
        remove_image(docker_engine, tag)


# Run inside the image as its user: `mockdcp serve --docs 1000` under `python -v` until it
# is ready, then `mockdcp tail` streams every document; prints what the server logged
# about where each module's code came from.
SERVE_VERBOSE = f"""
import json, subprocess, sys, tempfile
log = tempfile.TemporaryFile("w+")  # python -v writes more than a pipe holds
server = subprocess.Popen(
    [sys.executable, "-v", "-m", "mockdcp", "serve", "--json", "--port", "0",
     "--http-port", "0", "--docs", "{DOCS}"],
    stdout=subprocess.PIPE, stderr=log, text=True)
ready = next(e for e in map(json.loads, server.stdout) if e["event"] == "ready")
subprocess.run([sys.executable, "-m", "mockdcp", "tail", "--port", str(ready["kv_port"]),
                "--limit", "{DOCS}", "--json"], check=True, stdout=subprocess.DEVNULL)
server.terminate()
server.wait(timeout=30)
log.seek(0)
sys.stdout.write(log.read())
"""


def test_image_serves_without_compiling_a_module(docker_engine: Engine, mockdcp_image: str) -> None:
    # its user cannot write __pycache__: each module the server imports (at start, loading
    # the documents and streaming them) must come with its bytecode, or it is compiled again
    # on every start
    run_python = ["run", "--rm", "--entrypoint", "python", mockdcp_image, "-c", SERVE_VERBOSE]
    log = docker_engine.docker(*run_python, timeout=STREAM_TIMEOUT)
    # python -v writes a message and its newline apart: the server's threads import too,
    # so one line may hold two messages (seen: "# code object from '...entities.cpython-
    # 311.pyc'import 'mockdcp.producer._stream_request' # <...SourceFileLoader...>")
    loaded = re.findall(r"# code object from '([^']*)'", log)
    assert any(path.endswith(".pyc") for path in loaded)  # what python -v says on a .pyc
    assert [path for path in loaded if not path.endswith(".pyc")] == []


def test_consumer_service_streams_every_document_once_mockdcp_is_healthy(
    compose: Compose,
) -> None:
    compose("up", "--no-build", "--pull", "never", "--exit-code-from", "consumer")
    logs = compose("logs", "--no-color", "--no-log-prefix", "consumer")
    assert streamed_documents(logs) == expected_documents()
    # depends_on (condition: service_healthy) held the consumer back until a health check
    # of mockdcp had passed
    probes = compose.container("mockdcp")["State"]["Health"]["Log"]
    passed = [timestamp(p["End"]) for p in probes if p["ExitCode"] == 0]
    assert passed
    assert min(passed) <= timestamp(compose.container("consumer")["State"]["StartedAt"])


def test_reference_consumer_streams_from_the_published_port(compose: Compose) -> None:
    compose("up", "--no-build", "--pull", "never", "--detach", "--wait", "mockdcp")
    assert compose.container("mockdcp")["State"]["Health"]["Status"] == "healthy"
    uid = compose("exec", "-T", "mockdcp", "python3", "-c", "import os; print(os.getuid())")
    assert uid.strip() == "10001"
    health = f"http://127.0.0.1:{compose.http_port}/mock/health"
    with urllib.request.urlopen(health, timeout=10) as response:
        assert response.status == 200
    tail = [sys.executable, "-m", "mockdcp", "tail", "--port", str(compose.kv_port)]
    out = run([*tail, "--json", "--limit", str(DOCS)], timeout=STREAM_TIMEOUT).stdout
    assert streamed_documents(out) == expected_documents()
