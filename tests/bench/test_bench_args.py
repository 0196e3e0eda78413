"""The options of ``mockdcp bench``: a mode each, the spellings from before the modes
mapped onto theirs (``mockdcp.cli.bench._args.resolve``)."""

from __future__ import annotations

import pytest

from mockdcp.cli import build_parser
from mockdcp.cli.bench._args import MODE_OPTIONS, MODES, resolve


def _resolved(*argv: str) -> tuple[str, dict[str, object]]:
    args = build_parser().parse_args(["bench", *argv])
    mode = resolve(args)
    return mode, vars(args)


@pytest.mark.parametrize(
    ("argv", "mode", "options"),
    [
        ((), "stream", {"items": 1_000_000}),
        (("--legacy", "--from-disk"), "stream", {"legacy": True, "from_disk": True}),
        (("--docs", "300"), "docs", {"items": 300}),
        (("--cold",), "cold", {}),
        (("--corpus", "c", "--on-disk"), "corpus", {"corpus": "c"}),
        (("--corpus", "c"), "corpus", {"corpus": "c"}),
        (("--nodes", "3", "--replicas", "1"), "cluster", {"nodes": 3, "replicas": 1}),
        (
            ("cluster", "--nodes", "3", "--count", "instructions"),
            "cluster",
            {"count": "instructions"},
        ),
        (("--rebalance", "--nodes", "2"), "rebalance", {"nodes": 2}),
        (("--history",), "history", {"revisions": 4}),
        (("--history", "7", "--from-disk"), "history", {"revisions": 7}),
        (("--durable", "0.25"), "durable", {"fraction": 0.25}),
        (("compare", "14df38a", "--items", "10"), "compare", {"ref": "14df38a", "items": 10}),
    ],
)
def test_each_spelling_selects_its_mode(
    argv: tuple[str, ...], mode: str, options: dict[str, object]
) -> None:
    got, args = _resolved(*argv)
    assert got == mode
    assert {k: args[k] for k in options} == options


def test_every_mode_has_its_module_and_options() -> None:
    import importlib

    assert set(MODE_OPTIONS) == set(MODES)
    for mode in MODES:
        assert callable(importlib.import_module(f"mockdcp.cli.bench._{mode}").run)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("docs", "--tls"), "mode docs does not take --tls"),
        (("cluster", "--filter"), "mode cluster does not take --filter"),
        (("stream", "--count", "instructions"), "mode stream does not take --count"),
        (("--cold", "--rebalance"), "one mode at a time: --rebalance, --cold"),
        (("stream", "--history", "3"), "--history selects mode history, not stream"),
        (("--on-disk",), "now spelled: mockdcp bench corpus --corpus DIR"),
        (("startup", "ref"), "a REF (ref) goes with mode compare only"),
    ],
)
def test_options_that_make_no_one_mode_are_refused(argv: tuple[str, ...], message: str) -> None:
    args = build_parser().parse_args(["bench", *argv])
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve(args)
