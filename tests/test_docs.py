"""The documentation site (``docs/``, ``mkdocs.yml``): every code block of every page runs
as the README's do (``tests/doc_examples.py``), its generated parts are the code's, and
``mkdocs build --strict`` builds it without a warning.

The fast tier checks what is cheap: every block is of a kind that runs and parses (Python
compiles, a scenario validates, a ``mockdcp`` command's arguments are ones its parser
takes, a Java or Go block is taken from its module's suite, a Maven dependency is the
``pom.xml``'s), every page is in the navigation, and the generated parts. Running the
blocks and building the site is the full tier's."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from tests import doc_examples as ex

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from types import ModuleType

DOCS = ex.ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
BLOCKS = [b for page in PAGES for b in ex.blocks(page)]
#: the README's shell commands: ``tests/test_readme.py`` runs them, so they are not run twice
README_COMMANDS = {c for b in ex.blocks(ex.ROOT / "README.md", "sh") for c in ex.commands(b.text)}
#: the scenario the pages' shell commands name as ``my.yaml``: the first of Scenarios
MY_YAML = next(b for b in ex.blocks(DOCS / "scenarios.md") if ex.is_scenario(b))


def _id(block: ex.Block) -> str:
    return f"{block.page.relative_to(DOCS)}:{block.line}"


def hooks() -> ModuleType:
    """``docs/_hooks.py``, the module mkdocs loads."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "_hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the fast tier: every block is of a kind that runs, and parses ------------------------


def test_the_pages_have_examples_of_every_kind() -> None:
    assert {b.language for b in BLOCKS} == set(ex.LANGUAGES)


@pytest.mark.parametrize("block", [pytest.param(b, id=_id(b)) for b in BLOCKS])
def test_every_block_is_of_a_kind_that_runs_and_parses(block: ex.Block, tmp_path: Path) -> None:
    assert block.language in ex.LANGUAGES, f"{block.where}: no way to run {block.language!r}"
    if block.language == "python":
        compile(block.text, block.where, "exec")
    elif ex.is_scenario(block):
        from mockdcp.cli._scenario_commands import validate_file

        path = tmp_path / "scenario.yaml"
        path.write_text(block.text)
        assert validate_file(str(path)) == [], block.where
    elif block.language == "yaml":  # a scenario's metadata, shown on its own
        from mockdcp.scenario import parse_scenario

        parse_scenario(MY_YAML.text + block.text, block.where)
    elif block.language == "sh":
        for command in ex.commands(block.text):
            if ex.not_run(command) is None:
                ex.check_command_parses(command)
    elif block.language == "xml":
        ex.check_maven_dependency(block)
    else:
        ex.check_java_or_go(block)


def test_the_metadata_example_belongs_to_the_scenario_it_follows() -> None:
    from mockdcp.scenario import Need, parse_scenario

    (metadata,) = [b for b in ex.blocks(DOCS / "scenarios.md", "yaml") if not ex.is_scenario(b)]
    scenario = parse_scenario(MY_YAML.text + metadata.text, metadata.where)
    assert scenario.needs == (Need.FLOW_CONTROL,)
    assert scenario.consumer.environment() == {"MOCKDCP_BUFFER_SIZE": "65536"}


def test_every_performance_figure_names_a_command_mockdcp_takes() -> None:
    text = (DOCS / "performance.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    shown = [c for row in rows for c in re.findall(r"`(mockdcp [^`]+)`", row)]
    assert len(shown) > 20
    for command in shown:
        if not command.startswith("mockdcp serve --docs"):  # a measure's name, not a command
            ex.check_command_parses(command.replace("DIR", "corpus/"))


def _nav_pages(nav: list[Any]) -> set[str]:
    found: set[str] = set()
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            found |= _nav_pages(value) if isinstance(value, list) else {value}
    return found


def test_every_page_is_in_the_navigation() -> None:
    import yaml

    config = yaml.safe_load((ex.ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = {str(p.relative_to(DOCS)) for p in PAGES}
    assert _nav_pages(config["nav"]) == pages


# -- the generated parts -------------------------------------------------------------------


def test_every_marker_names_a_generated_part() -> None:
    generated = hooks()
    for page in PAGES:
        for name in generated.MARKER.findall(page.read_text(encoding="utf-8")):
            assert name in generated.GENERATED, f"{page.name}: unknown part {name!r}"


def test_the_step_reference_has_every_step_and_field() -> None:
    import attrs

    from mockdcp.scenario.steps import STEP_TYPES

    page = hooks().fill((DOCS / "reference" / "steps.md").read_text(encoding="utf-8"))
    for cls in STEP_TYPES:
        assert f"### `{cls.NAME}`" in page
        section = page.split(f"### `{cls.NAME}`")[1].split("\n### ")[0]
        for field in attrs.fields(cls):
            assert f"| `{field.name}` |" in section, f"{cls.NAME}.{field.name}"


def test_the_http_reference_has_every_operation_of_the_openapi_document() -> None:
    from mockdcp.server._control_openapi import openapi_document

    page = hooks().fill((DOCS / "http-api.md").read_text(encoding="utf-8"))
    for path, operations in openapi_document()["paths"].items():
        for method in operations:
            assert f"### `{method.upper()} {path}`" in page


def test_the_matrix_page_is_rendered_from_the_checked_in_matrix() -> None:
    """``tests/interop/test_matrix.py`` checks ``matrix.json`` against the clients."""
    from tests.interop import matrix

    page = hooks().fill((DOCS / "checker" / "matrix.md").read_text(encoding="utf-8"))
    assert matrix.table(matrix.load()) in page


def test_the_versions_page_shows_what_differs_from_the_profiles() -> None:
    page = hooks().fill((DOCS / "versions.md").read_text(encoding="utf-8"))
    assert "| | 7.0 | 7.2 | 7.6 | 8.0 |" in page
    assert "| DCP_CONTROL `max_marker_version` |  |  |  | yes |" in page
    assert "| unknown stream flags | ignored | EINVAL | EINVAL | EINVAL |" in page
    assert "enable_noop" not in page  # the same in every release: no row
    assert "generated:" not in page


def test_a_misspelled_marker_fails_the_build() -> None:
    with pytest.raises(ValueError, match="no generated part 'step'"):
        hooks().fill("<!-- generated: step -->")


# -- the full tier: the blocks run, the site builds ----------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, int]]:
    with ex.server() as ports:
        yield ports


@pytest.mark.full
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(command, id=f"{_id(block)}: {command[:40]}")
        for block in BLOCKS
        if block.language == "sh"
        for command in ex.commands(block.text)
        if ex.not_run(command) is None and command not in README_COMMANDS
    ],
)
def test_every_shell_command_runs_as_written(
    command: str, server: dict[str, int], tmp_path: Path
) -> None:
    (tmp_path / "my.yaml").write_text(MY_YAML.text)
    ex.run_command(command, server, tmp_path)


@pytest.mark.full
@pytest.mark.parametrize(
    "block", [pytest.param(b, id=_id(b)) for b in BLOCKS if b.language == "python"]
)
def test_every_python_block_runs_as_written(block: ex.Block, tmp_path: Path) -> None:
    ex.run_python(block, tmp_path)


@pytest.mark.full
@pytest.mark.parametrize("block", [pytest.param(b, id=_id(b)) for b in BLOCKS if ex.is_scenario(b)])
def test_every_scenario_passes_with_the_reference_consumer(block: ex.Block, tmp_path: Path) -> None:
    ex.run_scenario(block, tmp_path)


@pytest.mark.full
def test_the_site_builds_without_a_warning(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)]
    done = subprocess.run(build, cwd=ex.ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    steps = (tmp_path / "reference" / "steps" / "index.html").read_text(encoding="utf-8")
    assert "sync_write" in steps
    assert "generated:" not in steps
