"""The producer's modules import one another without a loop (lazy imports included; an
import only for type checking is not one): each job can be read, and changed, from the
modules below it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PRODUCER = Path(__file__).resolve().parents[2] / "mockdcp" / "producer"


def _runtime_imports(tree: ast.Module) -> list[ast.ImportFrom | ast.Import]:
    """Every import statement outside ``if TYPE_CHECKING:`` blocks, at any depth."""
    found: list[ast.ImportFrom | ast.Import] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module name (``_stream``, ``events``, ``__init__``) -> the package's modules it
    imports at run time."""
    modules = {p.stem for p in package.glob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    prefix = f"mockdcp.{package.name}"
    for path in package.glob("*.py"):
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif node.level == 1 or node.module == prefix:
                targets = [f"{prefix}.{a.name}" for a in node.names]
                if node.module and node.module != prefix:
                    targets = [f"{prefix}.{node.module}"]
            else:
                targets = [node.module or ""]
            for target in targets:
                if not target.startswith(prefix):
                    continue
                rest = target[len(prefix) + 1 :].split(".")[0] if target != prefix else ""
                graph[path.stem].add(rest if rest in modules else "__init__")
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import loop of ``graph``, as the modules along it, or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt == node:
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_producer_modules_import_each_other_without_a_loop() -> None:
    graph = import_graph(PRODUCER)
    graph.pop("__init__")  # the package's re-exports sit on top of its modules
    for targets in graph.values():
        targets.discard("__init__")
    assert cycle(graph) is None, " -> ".join(cycle(graph) or [])


def test_no_module_but_the_dispatch_table_imports_the_handlers() -> None:
    graph = import_graph(PRODUCER)
    handlers = {name for name in graph if name.endswith("_handlers")}
    importers = {name for name, targets in graph.items() if targets & handlers}
    assert handlers
    assert importers == {"_dispatch"}


A, B = "from mockdcp.producer._b import x", "import mockdcp.producer._a"
LAZY = "def f():\n    from mockdcp.producer import _b"
TYPE_ONLY = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mockdcp.producer._a"


@pytest.mark.parametrize(
    ("files", "loop"),
    [
        ({"_a": A, "_b": B}, True),
        ({"_a": LAZY, "_b": B}, True),
        ({"_a": A, "_b": TYPE_ONLY}, False),
        ({"_a": A, "_b": "x = 1"}, False),
    ],
    ids=["direct", "lazy", "type-only", "none"],
)  # fmt: skip
def test_the_loop_check_sees_lazy_imports_and_ignores_type_only_ones(
    tmp_path: Path, files: dict[str, str], loop: bool
) -> None:
    package = tmp_path / "producer"
    package.mkdir()
    for name, text in files.items():
        (package / f"{name}.py").write_text(text + "\n")
    assert (cycle(import_graph(package)) is not None) is loop
