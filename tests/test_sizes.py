"""One concern per class (issue 40): the vbucket and the stream stay compositions of
their parts, the connection keeps the checker's wiring in its tap, and no function of
the model or the producer grows past a screenful or two."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "mockdcp"

#: class -> its most lines
LIMITS = {
    ("model/_vbucket.py", "VBucket"): 350,
    ("producer/_stream.py", "Stream"): 350,
    ("model/_bucket.py", "Bucket"): 400,
    ("model/_cluster.py", "Cluster"): 400,
}


def _span(node: ast.AST) -> int:
    assert isinstance(node, ast.stmt)
    assert node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def test_the_vbucket_the_stream_and_the_connection_stay_within_their_lines() -> None:
    for (path, name), limit in LIMITS.items():
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
        assert _span(cls) <= limit, f"{name} ({path}) has {_span(cls)} lines, over {limit}"


def test_no_function_of_the_model_or_the_producer_is_over_100_lines() -> None:
    for package in ("model", "producer"):
        for path in sorted((ROOT / package).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                    assert _span(node) <= 100, f"{where} has {_span(node)} lines"


def test_handlers_change_the_connection_through_its_verbs() -> None:
    """No handler sets a field of the connection (``conn.x = ...``, ``conn.settings.y
    = ...``): it calls one of the connection's verbs (``negotiated``, ``opened``,
    ``control``, ...)."""
    producer = ROOT / "producer"
    for path in [*producer.glob("_*_handlers.py"), producer / "_dispatch.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            else:
                continue
            for target in targets:
                text = ast.unparse(target)
                assert not text.startswith("conn."), f"{path.name}:{node.lineno}: {text} ="


# -- issue 40's target: no class over 400 lines, anywhere in the package --------------

#: most lines of any class of ``mockdcp/`` (nested ones included)
CLASS_LIMIT = 400


def classes_over(root: Path, limit: int) -> list[tuple[str, str, int]]:
    """(path under ``root``, class, lines) of every class over ``limit`` lines."""
    return [
        (path.relative_to(root).as_posix(), node.name, _span(node))
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and _span(node) > limit
    ]


def test_no_class_of_the_package_is_over_400_lines() -> None:
    over = [
        f"{name} ({path}) has {lines} lines"
        for path, name, lines in classes_over(ROOT, CLASS_LIMIT)
    ]
    assert not over, f"over {CLASS_LIMIT} lines: {over}"


def test_the_class_check_finds_a_long_class_and_a_nested_one(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(5))
    nested = body.replace("    ", "        ")
    (tmp_path / "m.py").write_text(
        f"class Long:\n{body}\n\nclass Outer:\n    class Inner:\n{nested}"
    )
    found = [("m.py", "Long", 6), ("m.py", "Outer", 7), ("m.py", "Inner", 6)]
    assert classes_over(tmp_path, 5) == found
    assert classes_over(tmp_path, 6) == [("m.py", "Outer", 7)]
