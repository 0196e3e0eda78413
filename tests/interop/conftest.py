from __future__ import annotations

import fcntl
import itertools
import json
import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from mockdcp.model import Bucket
from mockdcp.server import MockDcpServer, serve

from ._output import output_excerpt

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

HERE = Path(__file__).parent
BUILD_TIMEOUT = 1500


def _build(script: Path) -> None:
    """Runs a build script (it does nothing when its output is up to date), one process
    at a time: the full tier's processes share the build directories."""
    with open(script.parent / ".build.lock", "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _run_build(script)


def _run_build(script: Path) -> None:
    result = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")


@pytest.fixture(scope="session")
def java_jar() -> Path:
    _build(HERE / "java" / "build.sh")
    return HERE / "java" / "target" / "mockdcp-interop-java.jar"


@pytest.fixture(scope="session")
def go_bin() -> Path:
    _build(HERE / "go" / "build.sh")
    return HERE / "go" / "bin"


#: system events after which a consumer holds none of the collection's earlier
#: documents (java-dcp-client's type names, then gocbcore-consumer's)
_FORGETTING_EVENTS = frozenset(
    {"collection_dropped", "collection_flushed", "delete_collection", "flush_collection"}
)


@attrs.define
class ClientRun:
    """A real client consumer process streaming from the mock, and what it wrote."""

    name: str
    process: trio.Process
    events_path: Path
    state_path: Path
    stderr_path: Path

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        out = []
        for line in self.events_path.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line being written
        return out

    def docs_seen(self, sid: int | None = None) -> dict[str, dict[str, Any]]:
        """Fold the event log into the latest version per key (rollbacks undone; a
        collection's drop or flush forgets its versions below it in that vbucket).
        ``sid``: only the events of that stream id."""
        versions: dict[str, list[dict[str, Any]]] = {}
        for ev in self.events():
            kind = ev.get("event")
            if sid is not None and ev.get("sid") != sid:
                continue
            if kind == "system_event" and ev.get("type") in _FORGETTING_EVENTS:
                cid = ev.get("collection_id", ev.get("collection"))
                for key in list(versions):
                    versions[key] = [
                        v
                        for v in versions[key]
                        if v["vb"] != ev["vb"]
                        or v.get("collection", 0) != cid
                        or v["seqno"] > ev["seqno"]
                    ]
            elif kind in ("mutation", "deletion", "expiration"):
                key = f"{ev.get('collection', 0)}:{ev['key']}"
                versions.setdefault(key, []).append(ev)
            elif kind == "rollback":
                for key in list(versions):
                    versions[key] = [
                        v for v in versions[key] if v["vb"] != ev["vb"] or v["seqno"] <= ev["seqno"]
                    ]
        return {k: v[-1] for k, v in versions.items() if v and v[-1]["event"] == "mutation"}

    def stderr(self) -> str:
        """The client's output as a failure report shows it: a crash (a Go panic and its
        stack) first, then the last lines before it (``output_excerpt``), and the file
        that holds all of it."""
        if not self.stderr_path.exists():
            return ""
        text = self.stderr_path.read_text(errors="replace")
        return f"{output_excerpt(text)}\n--- all of it: {self.stderr_path} ---"

    async def wait_for(self, predicate: Callable[[], bool], seconds: float, what: str) -> None:
        deadline = trio.current_time() + seconds
        while not predicate():
            if self.process.returncode is not None:
                raise AssertionError(
                    f"{self.name} exited with {self.process.returncode} while waiting for {what}:\n"
                    + self.stderr()
                )
            if trio.current_time() > deadline:
                raise AssertionError(f"{self.name}: timed out waiting for {what}:\n{self.stderr()}")
            await trio.sleep(0.1)

    async def stop(self) -> dict[str, Any]:
        """Close stdin (the programs' stop signal) and read the final state."""
        if self.process.stdin is not None:
            await self.process.stdin.aclose()
        with trio.move_on_after(30):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
            raise AssertionError(f"{self.name} did not stop on stdin EOF:\n{self.stderr()}")
        assert self.process.returncode == 0, (
            f"{self.name} exit {self.process.returncode}:\n{self.stderr()}"
        )
        state: dict[str, Any] = json.loads(self.state_path.read_text())
        return state


@pytest.fixture
async def mock() -> AsyncIterator[MockDcpServer]:
    bucket = Bucket("default", 64, seed=11, clock=time.time)
    async with serve(port=0, http_port=0, bucket_obj=bucket) as server:
        yield server


@pytest.fixture
async def start_client(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[..., Any]]:
    """Start a client by name against a server; returns a ``ClientRun``. On teardown
    (inside the test's Trio run, so closing a pipe can wake its waiters) every process
    still running is killed, and every stdin pipe a test left open is closed: a test
    that failed before ``stop``, or whose client exited by itself (else its
    ResourceWarning fails whichever later test collects it)."""
    runs = itertools.count()  # numbers each run's directory under tmp_path
    started: list[trio.Process] = []

    async def start(
        name: str,
        server: MockDcpServer,
        *extra: str,
        host: str | None = None,
        kv_port: int | None = None,
        http_port: int | None = None,
        env: dict[str, str] | None = None,
    ) -> ClientRun:
        """``host``, ``kv_port``, ``http_port``: the seed, when not the server's own
        plain address (a TLS port, a forwarded one); ``env``: more environment."""
        common = [
            "--host",
            host or server.host,
            "--kv-port",
            str(kv_port or server.kv_port),
            "--user",
            "Administrator",
            "--password",
            "password",
            "--bucket",
            server.bucket.name,
        ]
        if name != "java":  # java-dcp-client bootstraps over KV only (BucketConfigHandler)
            common += ["--http-port", str(http_port or server.http_port)]
        run_dir = tmp_path / f"{name}-{next(runs)}"
        run_dir.mkdir()
        events, state, stderr = (
            run_dir / "events.jsonl",
            run_dir / "state.json",
            run_dir / "stderr.log",
        )
        files = ["--out", str(events), "--state", str(state)]
        if name == "java":
            jar = request.getfixturevalue("java_jar")
            cmd = ["java", "-jar", str(jar), *common, *files, *extra]
        else:
            binary = request.getfixturevalue("go_bin") / f"{name}-consumer"
            cmd = [str(binary), *common, *files, *extra]
        with stderr.open("wb") as err:
            proc = await trio.lowlevel.open_process(
                cmd,
                stdin=subprocess.PIPE,
                stdout=err,
                stderr=err,
                env={**os.environ, **(env or {})},
            )
        started.append(proc)
        return ClientRun(name, proc, events, state, stderr)

    yield start
    for proc in started:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        if proc.stdin is not None:
            await proc.stdin.aclose()
