"""Numbers on the command line are checked where they are parsed: a count below zero or
a port beyond 65535 is refused by name (exit 2), never served (``serve --docs -1`` once
started and reported ``loaded -1 docs``)."""

from __future__ import annotations

import pytest

from mockdcp.cli import build_parser


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--docs", "-1"], "argument --docs: -1 is not at least 0"),
        (["serve", "--port", "70000"], "argument --port: 70000 is not 0..65535"),
        (["serve", "--http-port", "-5"], "argument --http-port: -5 is not 0..65535"),
        (["serve", "--docs", "many"], "argument --docs: not an integer: 'many'"),
        (["tail", "--limit", "-2"], "argument --limit: -2 is not at least 0"),
        (["tail", "--port", "0"], "argument --port: 0 is not 1..65535"),
    ],
)
def test_a_number_out_of_range_is_refused_by_name(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_the_edges_of_each_range_are_taken() -> None:
    args = build_parser().parse_args(
        ["serve", "--docs", "0", "--port", "0", "--http-port", "65535"]
    )
    assert (args.docs, args.port, args.http_port) == (0, 0, 65535)
    assert build_parser().parse_args(["tail", "--port", "1", "--limit", "0"]).limit == 0
