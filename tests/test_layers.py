"""The package's layering, read from its import statements (lazy ones included).

The design's layers, bottom up: ``util`` (errors and process helpers), ``protocol`` (the wire
codec), ``model`` (the bucket), ``producer`` (connection and stream state machines), ``data``
(document generation and corpus loading), ``scenario`` (steps, triggers, the runner), ``server``
(the trio shell), ``client`` (the reference consumer), ``pipeline`` (the Spark jobs) and ``cli``
(the commands); the package root, ``__main__`` and the pytest plugin sit on top. A package
imports only packages below it, and only their public names: no ``mockdcp.<other>._module``
and no ``_name`` taken from another package.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mockdcp"

#: bottom to top; each may import the ones before it
LAYERS = (
    "util",
    "protocol",
    "model",
    "producer",
    "data",
    "scenario",
    "server",
    "client",
    "pipeline",
    "explore",
    "cli",
    "<top>",
)
TOP = "<top>"


class Import(NamedTuple):
    source: Path
    line: int
    module: str  # the absolute module imported from
    names: tuple[str, ...]  # the names taken (empty for ``import x``)


def package_of(module: str) -> str:
    """The layer a ``mockdcp...`` module belongs to (``<top>`` for the root's own modules)."""
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return TOP


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[Import]:
    """Every import of a mockdcp module in ``path``, at any depth (functions too)."""
    name = module_name(path)
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [Import(path, node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            names = tuple(alias.name for alias in node.names)
            found.append(Import(path, node.lineno, module, names))
    return [i for i in found if i.module == "mockdcp" or i.module.startswith("mockdcp.")]


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "fbs" not in p.parts)


def crossing_imports() -> list[Import]:
    """The imports that cross from one package into another."""
    return [
        i
        for path in sources()
        for i in imports_of(path)
        if package_of(i.module) != package_of(module_name(path))
    ]


def where(i: Import) -> str:
    return f"{i.source.relative_to(ROOT)}:{i.line}: {i.module} {', '.join(i.names)}".rstrip()


def upward_imports() -> list[str]:
    """Crossings into a package above the importer's own layer."""
    return [
        f"{where(i)} ({package_of(module_name(i.source))} -> {package_of(i.module)})"
        for i in crossing_imports()
        if LAYERS.index(package_of(i.module)) > LAYERS.index(package_of(module_name(i.source)))
    ]


def private_imports() -> list[str]:
    """Crossings that take a private module or name of another package."""
    return [
        where(i)
        for i in crossing_imports()
        if any(part.startswith("_") for part in i.module.split(".")[1:])
        or any(name.startswith("_") and name != "__version__" for name in i.names)
    ]


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages <= set(LAYERS), sorted(packages - set(LAYERS))


def test_packages_import_only_the_layers_below_them() -> None:
    upward = upward_imports()
    assert not upward, "\n".join(upward)


def test_packages_take_only_public_names_from_each_other() -> None:
    private = private_imports()
    assert not private, "\n".join(private)


@pytest.mark.parametrize(
    ("text", "upward", "private"),
    [
        ("from mockdcp.model._item import Item", False, False),
        ("from mockdcp.protocol._frame import Frame", False, True),
        ("from mockdcp.protocol import _helper", False, True),
        ("from mockdcp.server import serve", True, False),
        ("import mockdcp.server._kv", True, True),
        ("from mockdcp.protocol import Frame", False, False),
        ("from . import _sibling", False, False),
    ],
)
def test_the_checks_catch_each_kind_of_crossing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, upward: bool, private: bool
) -> None:
    for package in ("model", "protocol", "server"):
        (tmp_path / "mockdcp" / package).mkdir(parents=True)
        (tmp_path / "mockdcp" / package / "__init__.py").write_text("")
    (tmp_path / "mockdcp" / "model" / "_thing.py").write_text(text + "\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "PACKAGE", tmp_path / "mockdcp")
    assert bool(upward_imports()) is upward
    assert bool(private_imports()) is private
