"""The machinery that runs the examples of a Markdown page (the README, the pages of
``docs/``): its fenced blocks, read in order, and how each kind runs.

- ``python``: run as a script, or with pytest when it defines tests;
- ``yaml`` with ``steps:``: a scenario, validated, then run with the reference consumer;
- ``sh``: each command runs against a server the test starts (the fixed ports in it
  replaced by that server's free ones), unless ``NOT_RUN`` says why not and which test
  covers it; a command that runs until stopped must print its first line;
- ``java``, ``go``: the complete example a module's suite runs, or an excerpt of a file
  that suite compiles (segments cut by ``// ...``, each found whole, in order);
- ``xml``: a Maven dependency, the one the module's ``pom.xml`` declares.

``tests/test_readme.py`` and ``tests/test_docs.py`` use it; a block in any other language
fails them, so a new kind of example comes with a way to run it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
MOCKDCP = [sys.executable, "-m", "mockdcp"]
LANGUAGES = ("sh", "python", "yaml", "java", "go", "xml")

#: commands (a part of the line) not run here, and why (the test that covers them)
NOT_RUN = {
    "pip install": "the README's two commands are what CI itself runs",
    "python -m pytest": "the test suite itself (.ci/run runs both tiers)",
    "mkdocs serve": "serves the site until stopped; tests/test_docs.py builds it (--strict)",
    "mockdcp bench": "minutes of CPU; tests/bench runs the benchmark",
    "docker": "tests/docker builds the image and runs compose",
    "tshark": "tests/integration/test_pcap_capture.py decodes a capture with tshark",
    "mockdcp corpus": "a million documents on Spark; tests/pipeline runs each pipeline command",
    "mockdcp oracle": "Spark; tests/pipeline runs each pipeline command",
    "mockdcp verify": "Spark; tests/pipeline runs each pipeline command",
    "mockdcp serve --corpus": "needs the corpus above; tests/pipeline/test_serve_corpus.py",
    "mockdcp serve --pcap": "tests/integration/test_pcap_capture.py serves with --pcap",
    "--key-col": "the continuation of a verify command",
    "cd integrations/": "the Java and Go modules' suites; tests/integrations runs them",
    "go get": "fetches the Go module; tests/integrations builds it from this checkout",
    "mockdcp check -j 2 -- mockdcp tail": "the whole library with the reference consumer: "
    "tests/integration/test_check.py::test_the_reference_consumer_passes_the_whole_library",
}
#: commands run in the full tier only (minutes under load); the fast tier parses them
HEAVY = ("mockdcp check",)
#: the collections the server of the shell commands declares (the ``tail`` lines name them)
COLLECTIONS = ("--collections", "inventory.hotel,inventory.air")
#: commands that run until stopped: each must print its first line, then is stopped
LONG_RUNNING = ("mockdcp serve", "mockdcp tail")


class Block(NamedTuple):
    """One fenced block of a page."""

    page: Path
    line: int
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path, language: str | None = None) -> list[Block]:
    """The fenced blocks of ``page`` (in ``language``, or all of them)."""
    text = page.read_text(encoding="utf-8")
    found = [
        Block(page, text[: m.start()].count("\n") + 1, m.group(1), m.group(2))
        for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
    ]
    return [b for b in found if language is None or b.language == language]


def commands(block: str) -> list[str]:
    """The commands of a shell block: comments dropped, continuations joined."""
    joined = re.sub(r"\\\n\s*", " ", block)
    lines = (
        line.split("#")[0].strip() if line.lstrip().startswith("#") else line
        for line in joined.splitlines()
    )
    return [c for c in (line.split("  #")[0].strip() for line in lines) if c]


def not_run(command: str) -> str | None:
    """Why ``command`` is not run here, or None when it runs."""
    return next((why for start, why in NOT_RUN.items() if start in command), None)


def check_command_parses(command: str) -> None:
    """A ``mockdcp`` command's arguments are ones its parser takes (cheap: nothing runs)."""
    argv = shlex.split(command)
    if ">" in argv:
        argv = argv[: argv.index(">")]
    assert argv[0] in {"mockdcp", "curl"}, f"{command!r}: not a mockdcp command"
    if argv[0] == "mockdcp":
        from mockdcp.cli._main import build_parser

        cut = argv.index("--") if "--" in argv else len(argv)  # run/check ... -- CONSUMER
        try:
            build_parser().parse_args(argv[1:cut])
        except SystemExit as exc:
            raise AssertionError(f"{command!r}: mockdcp does not take these arguments") from exc


@contextlib.contextmanager
def server() -> Iterator[dict[str, int]]:
    """A server as the README's tour starts one (documents, the collections its ``tail``
    lines name), on free ports: ``{"kv": port, "http": port}``."""
    proc = subprocess.Popen(
        [
            *MOCKDCP,
            "serve",
            *("--port", "0", "--http-port", "0"),
            "--docs",
            "200",
            "--json",
            *COLLECTIONS,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    try:
        ready = json.loads(proc.stdout.readline())
        yield {"kv": ready["kv_port"], "http": ready["http_port"]}
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _argv(command: str, ports: dict[str, int]) -> list[str]:
    command = command.replace("11210", str(ports["kv"])).replace("8091", str(ports["http"]))
    argv = shlex.split(command)
    if argv[0] == "mockdcp":
        argv = [*MOCKDCP, *argv[1:]]
        if argv[3:4] == ["serve"] and "--port" not in argv:
            argv += ["--port", "0", "--http-port", "0"]
    return argv


def run_command(command: str, ports: dict[str, int], cwd: Path) -> None:
    """Run one shell command of a page against the server on ``ports``, in ``cwd``."""
    argv = _argv(command, ports)
    # the kept CA of ``serve --tls`` and ``mockdcp ca`` goes to the test's directory
    env = {**os.environ, "XDG_DATA_HOME": str(cwd)}
    if command.startswith(LONG_RUNNING):
        # it runs until stopped: it must print its first line (ready, an event) or, if it
        # has nothing to print (``tail --from now``), still be running after a while
        proc = subprocess.Popen(
            argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        assert proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            # ``--from now`` has nothing to print until a write: a few seconds show it runs
            printed = bool(selector.select(timeout=3 if "--from now" in command else 20))
        running = proc.poll() is None
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        assert printed or running, f"{command!r} ended at once: {err[-2000:]}"
        if printed:
            assert running or proc.returncode == 0, f"{command!r} failed: {err[-2000:]}"
        return
    out = None
    if ">" in argv:  # ``cmd > FILE``: the shell's redirection, the one the pages use
        argv, out = argv[: argv.index(">")], cwd / argv[argv.index(">") + 1]
    # the whole library under ``mockdcp check`` takes minutes on a loaded machine
    timeout = 900 if command.startswith(HEAVY) else 180
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, (
        f"{command!r} exited {done.returncode}: {done.stdout[-3000:]}{done.stderr[-2000:]}"
    )
    if out is not None:
        out.write_text(done.stdout)
        assert done.stdout, f"{command!r} printed nothing"


def run_python(block: Block, tmp_path: Path) -> None:
    """Run a Python block as written: a test file with pytest (every test must pass), any
    other block as a script."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    tests = block.text.count("def test_")
    path = tmp_path / ("test_example.py" if tests else "example.py")
    path.write_text(block.text)
    argv = [sys.executable, str(path)]
    if tests:  # a test file: pytest runs it, in a project of its own
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(path)]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{block.where}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    if tests:
        assert f"{tests} passed" in done.stdout, f"{block.where}: {done.stdout[-3000:]}"


def is_scenario(block: Block) -> bool:
    return block.language == "yaml" and "steps:" in block.text


def run_scenario(block: Block, tmp_path: Path) -> None:
    """Run a scenario block with the reference consumer (``--cluster`` for several nodes)
    through ``mockdcp run``: it must pass."""
    import yaml

    path = tmp_path / "scenario.yaml"
    path.write_text(block.text)
    nodes = (yaml.safe_load(block.text).get("bucket") or {}).get("nodes", 1)
    consumer = [*MOCKDCP, "tail", *(["--cluster"] if nodes > 1 else [])]
    run = [*MOCKDCP, "run", str(path), "--", *consumer]
    done = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{block.where}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip("\n").splitlines()]


def excerpt_of(block: Block, files: list[Path]) -> Path | None:
    """The file ``block`` is taken from: equal to it, or each of its segments (cut at
    ``// ...`` lines) found whole and in order among its lines, indentation aside."""
    segments: list[list[str]] = [[]]
    for line in _lines(block.text):
        if line == "// ...":
            segments.append([])
        else:
            segments[-1].append(line)
    for path in files:
        lines, at = _lines(path.read_text(encoding="utf-8")), 0
        for segment in segments:
            at = next(
                (
                    i + len(segment)
                    for i in range(at, len(lines))
                    if lines[i : i + len(segment)] == segment
                ),
                -1,
            )
            if at < 0:
                break
        else:
            return path
    return None


def java_example(source: str) -> str:
    """The complete Java example a page shows of ``MyConsumerTest.java``: its imports and its
    class (the rule of the module's own ``ReadmeTest``)."""
    imports = source[source.index("import static") : source.index("// The example of")]
    body = source[source.index("@MockDcp(vbuckets") :]
    return imports.strip() + "\n\n" + body.strip()


def check_java_or_go(block: Block) -> None:
    """A Java or Go block is a file of its module's suite, or an excerpt of one."""
    module = ROOT / "integrations" / block.language
    example = module / "src/test/java/com/example/MyConsumerTest.java"
    if block.language == "java" and block.text.strip() == java_example(example.read_text()):
        return
    files = sorted(module.rglob(f"*.{block.language}"))
    assert excerpt_of(block, files) is not None, (
        f"{block.where}: not taken from a file under {module.relative_to(ROOT)} "
        "(a complete file, or segments of one cut by '// ...')"
    )


def check_maven_dependency(block: Block) -> None:
    """An XML block is one Maven dependency: the Java module itself (its coordinates and
    version) or one its ``pom.xml`` declares with the same version."""
    pom = ROOT / "integrations" / "java" / "pom.xml"
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    project = ET.parse(pom).getroot()
    props = {p.tag.split("}")[1]: p.text or "" for p in project.find("m:properties", ns) or []}

    def text(node: ET.Element, tag: str) -> str:
        found = node.find(f"m:{tag}", ns)
        value = "" if found is None else (found.text or "")
        return re.sub(r"\$\{([^}]+)\}", lambda m: props.get(m.group(1), m.group(0)), value)

    shown = ET.fromstring(block.text)
    coordinates = tuple(shown.findtext(t) for t in ("groupId", "artifactId", "version"))
    declared = {(text(project, "groupId"), text(project, "artifactId"), text(project, "version"))}
    declared |= {
        (text(d, "groupId"), text(d, "artifactId"), text(d, "version"))
        for d in project.iterfind(".//m:dependency", ns)
    }
    assert coordinates in declared, f"{block.where}: {coordinates} is not in {pom.name}"
