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
    # issue 40's target is 400; privileges that change (a stream losing DcpStream) and a
    # connection moving to another bucket's node brought it to 419 in the wave that added
    # them: a ratchet until those move into parts of their own
    ("producer/_connection.py", "Connection"): 420,
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
