"""Every example of the README runs as written: its Python blocks run, its scenario is
valid and passes with the reference consumer, and its shell commands run against a
server this test starts (fixed ports in them replaced by the server's free ones). The
blocks that cannot run unattended here are listed, each with the reason and the test
that covers what it shows; a new block runs unless it is added there."""

from __future__ import annotations

import json
import os
import re
import selectors
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MOCKDCP = [sys.executable, "-m", "mockdcp"]

#: commands (a line's start) not run here, and why
NOT_RUN = {
    "pip install": "the README's two commands are what CI itself runs",
    "mockdcp bench": "minutes of CPU; tests/bench runs the benchmark",
    "docker": "tests/docker builds the image and runs compose",
    "tshark": "tests/integration/test_pcap_capture.py decodes a capture with tshark",
    "mockdcp corpus": "a million documents on Spark; tests/pipeline runs each pipeline command",
    "mockdcp oracle": "Spark; tests/pipeline runs each pipeline command",
    "mockdcp verify": "Spark; tests/pipeline runs each pipeline command",
    "mockdcp serve --corpus": "needs the corpus above; tests/pipeline/test_serve_corpus.py",
    "mockdcp serve --pcap": "tests/integration/test_pcap_capture.py serves with --pcap",
    "--key-col": "the continuation of a verify command",
}
COLLECTIONS = ("--collections", "inventory.hotel,inventory.air")
#: commands that run until stopped: each must print its first line, then is stopped
LONG_RUNNING = ("mockdcp serve", "mockdcp tail")


def blocks(language: str) -> list[tuple[int, str]]:
    """(line number, text) of the README's fenced blocks in ``language``."""
    text = README.read_text(encoding="utf-8")
    return [
        (text[: m.start()].count("\n") + 1, m.group(2))
        for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S)
        if m.group(1) == language
    ]


def commands(block: str) -> list[str]:
    """The commands of a shell block: comments dropped, continuations joined."""
    joined = re.sub(r"\\\n\s*", " ", block)
    lines = (
        line.split("#")[0].strip() if line.lstrip().startswith("#") else line
        for line in joined.splitlines()
    )
    return [c for c in (line.split("  #")[0].strip() for line in lines) if c]


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, int]]:
    """A server as the README's "Using it" block starts one (documents, the collections its
    ``tail`` lines name), on free ports."""
    proc = subprocess.Popen(
        [
            *MOCKDCP,
            "serve",
            *("--port", "0", "--http-port", "0"),
            *("--docs", "200", "--json"),
            *COLLECTIONS,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    yield {"kv": ready["kv_port"], "http": ready["http_port"]}
    proc.terminate()
    proc.communicate(timeout=30)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory holding the README's scenario (its first YAML block with steps) as
    ``my.yaml``."""
    (_, scenario), *_ = [b for b in blocks("yaml") if "steps:" in b[1]]
    (tmp_path / "my.yaml").write_text(scenario)
    return tmp_path


def test_every_scenario_block_of_the_readme_is_a_valid_scenario(tmp_path: Path) -> None:
    from mockdcp.cli._scenario_commands import validate_file

    for line, text in [b for b in blocks("yaml") if "steps:" in b[1]]:
        path = tmp_path / f"line{line}.yaml"
        path.write_text(text)
        assert validate_file(str(path)) == [], f"README line {line}"


def _argv(command: str, ports: dict[str, int]) -> list[str]:
    command = command.replace("11210", str(ports["kv"])).replace("8091", str(ports["http"]))
    argv = shlex.split(command)
    if argv[0] == "mockdcp":
        argv = [*MOCKDCP, *argv[1:]]
        if argv[3:4] == ["serve"] and "--port" not in argv:
            argv += ["--port", "0", "--http-port", "0"]
    return argv


def _run(command: str, ports: dict[str, int], cwd: Path) -> None:
    argv = _argv(command, ports)
    if command.startswith(LONG_RUNNING):
        # it runs until stopped: it must print its first line (ready, an event) or, if it
        # has nothing to print (``tail --from now``), still be running after a while
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "XDG_DATA_HOME": str(cwd)},  # the kept CA of ``serve --tls``
        )
        assert proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            printed = bool(selector.select(timeout=20))
        running = proc.poll() is None
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        assert printed or running, f"{command!r} ended at once: {err[-2000:]}"
        if printed:
            assert running or proc.returncode == 0, f"{command!r} failed: {err[-2000:]}"
        return
    out = None
    if ">" in argv:  # ``cmd > FILE``: the shell's redirection, the one the README uses
        argv, out = argv[: argv.index(">")], cwd / argv[argv.index(">") + 1]
    # the kept CA of ``serve --tls`` and ``mockdcp ca`` goes to the test's directory
    env = {**os.environ, "XDG_DATA_HOME": str(cwd)}
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, (
        f"{command!r} exited {done.returncode}: {done.stdout[-3000:]}{done.stderr[-2000:]}"
    )
    if out is not None:
        out.write_text(done.stdout)
        assert done.stdout, f"{command!r} printed nothing"


#: README commands that check the whole scenario library (minutes on 2 cores): the full
#: tier, while tests/integration/test_check.py runs the library with the reference
#: consumer (two jobs) in the fast one
WHOLE_LIBRARY = {"mockdcp check -j 2 -- mockdcp tail"}

SHELL = [
    pytest.param(
        command,
        id=f"line {line}: {command[:40]}",
        marks=[pytest.mark.full] if command in WHOLE_LIBRARY else [],
    )
    for line, block in blocks("sh")
    for command in commands(block)
]


@pytest.mark.parametrize("command", SHELL)
def test_every_shell_command_runs_as_written(
    command: str, server: dict[str, int], workdir: Path
) -> None:
    reason = next((why for start, why in NOT_RUN.items() if start in command), None)
    if reason is not None:
        assert command.split()[0] in {"pip", "mockdcp", "docker", "tshark", "--key-col"}
        return  # listed above, with the test that covers it
    _run(command, server, workdir)


def test_the_scenario_of_the_readme_is_valid_and_passes_with_the_reference_consumer(
    workdir: Path,
) -> None:
    run = [*MOCKDCP, "run", "my.yaml", "--", *MOCKDCP, "tail"]
    done = subprocess.run(run, cwd=workdir, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_the_metadata_example_is_valid_in_the_readme_scenario(workdir: Path) -> None:
    from mockdcp.scenario import Need, parse_scenario

    ((_, metadata),) = [b for b in blocks("yaml") if "steps:" not in b[1]]
    scenario = parse_scenario((workdir / "my.yaml").read_text() + metadata, "README")
    assert scenario.needs == (Need.FLOW_CONTROL,)
    assert scenario.consumer.environment() == {"MOCKDCP_BUFFER_SIZE": "65536"}


@pytest.mark.parametrize(
    ("line", "code"), [pytest.param(*b, id=f"line {b[0]}") for b in blocks("python")]
)
def test_every_python_example_runs_as_written(line: int, code: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if "def test_" in code:  # a test file: pytest runs it, in a project of its own
        path = tmp_path / "test_example.py"
        path.write_text(code)
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(path)]
    else:
        path = tmp_path / "example.py"
        path.write_text(code)
        argv = [sys.executable, str(path)]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"README line {line}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    if "def test_" in code:
        assert f"{code.count('def test_')} passed" in done.stdout


#: the README's Go and Java examples are these files, which their own suites run
TESTED_EXAMPLES = {
    "go": ROOT / "integrations" / "go" / "clients" / "example" / "consumer_test.go",
}


@pytest.mark.parametrize("language", sorted(TESTED_EXAMPLES))
def test_the_go_example_is_the_file_its_suite_runs(language: str) -> None:
    ((_, code),) = blocks(language)
    assert code.strip() == TESTED_EXAMPLES[language].read_text().strip()


def test_the_java_example_is_the_one_the_modules_readme_test_holds() -> None:
    # integrations/java's ReadmeTest holds its README-section.md to MyConsumerTest.java
    section = ROOT / "integrations" / "java" / "README-section.md"
    ((_, code),) = blocks("java")
    assert f"```java\n{code.strip()}\n```" in section.read_text()


def test_the_matrix_of_the_readme_is_the_checked_in_one() -> None:
    """The README's table of real clients against the library is rendered from
    ``tests/interop/matrix.json``, which ``tests/interop/test_matrix.py`` checks."""
    from tests.interop import matrix

    shown = matrix.readme_block(README.read_text(encoding="utf-8"))
    assert shown == matrix.table(matrix.load()), "run `python -m tests.interop.matrix --readme`"
