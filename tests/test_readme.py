"""Every example of the README runs as written: its Python blocks run, its scenario is
valid and passes with the reference consumer, its shell commands run against a server
this test starts (fixed ports in them replaced by the server's free ones), and its Java
and Go lines are taken from the tests their modules' suites run. The machinery, and the
commands that cannot run unattended here (each with its reason and the test that covers
it), are in ``tests/doc_examples.py``; ``tests/test_docs.py`` does the same for ``docs/``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from tests import doc_examples as ex

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

README = ex.ROOT / "README.md"
#: the README is the first screen and a tour; the rest is the documentation's
MAX_LINES = 300


def test_the_readme_is_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines: move the rest into docs/"


def test_every_block_of_the_readme_is_of_a_kind_that_runs() -> None:
    for block in ex.blocks(README):
        assert block.language in ex.LANGUAGES, f"{block.where}: {block.language!r}"


def test_every_link_of_the_readme_reaches_a_file() -> None:
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith(("http://", "https://")):
            assert (ex.ROOT / target).is_file(), f"README links to {target}, not a file"


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, int]]:
    with ex.server() as ports:
        yield ports


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory holding the README's scenario as ``my.yaml``, which its commands name."""
    (block,) = [b for b in ex.blocks(README) if ex.is_scenario(b)]
    (tmp_path / "my.yaml").write_text(block.text)
    return tmp_path


def test_every_scenario_block_of_the_readme_is_a_valid_scenario(tmp_path: Path) -> None:
    from mockdcp.cli._scenario_commands import validate_file

    for block in [b for b in ex.blocks(README) if ex.is_scenario(b)]:
        path = tmp_path / f"line{block.line}.yaml"
        path.write_text(block.text)
        assert validate_file(str(path)) == [], block.where


def _shell(page: Path) -> list[object]:
    return [
        pytest.param(
            command,
            id=f"line {block.line}: {command[:40]}",
            marks=[pytest.mark.full] if command.startswith(ex.HEAVY) else [],
        )
        for block in ex.blocks(page, "sh")
        for command in ex.commands(block.text)
    ]


@pytest.mark.parametrize("command", _shell(README))
def test_every_shell_command_runs_as_written(
    command: str, server: dict[str, int], workdir: Path
) -> None:
    if ex.not_run(command) is not None:
        assert command.split()[0] in {"pip", "python", "mockdcp", "docker", "tshark", "cd"}
        return  # listed in doc_examples.NOT_RUN, with the test that covers it
    ex.run_command(command, server, workdir)


def test_the_scenario_of_the_readme_passes_with_the_reference_consumer(tmp_path: Path) -> None:
    (block,) = [b for b in ex.blocks(README) if ex.is_scenario(b)]
    ex.run_scenario(block, tmp_path)


@pytest.mark.parametrize(
    "block", [pytest.param(b, id=f"line {b.line}") for b in ex.blocks(README, "python")]
)
def test_every_python_example_runs_as_written(block: ex.Block, tmp_path: Path) -> None:
    ex.run_python(block, tmp_path)


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b, id=f"{b.language} line {b.line}")
        for b in ex.blocks(README)
        if b.language in {"java", "go"}
    ],
)
def test_the_java_and_go_lines_are_taken_from_the_modules_suites(block: ex.Block) -> None:
    ex.check_java_or_go(block)
