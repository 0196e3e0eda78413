from __future__ import annotations

import pytest

from mockdcp.producer._output import OutputQueue


def test_unsent_counts_queued_and_the_last_handout_until_the_next() -> None:
    out = OutputQueue(100)
    out.append(b"x" * 30)
    out.append(b"y" * 30)
    assert (out.unsent, len(out)) == (60, 2)
    parts = out.take()
    assert parts == [b"x" * 30, b"y" * 30]
    out.handed_out(60)
    assert (out.queued, out.unsent) == (0, 60)
    out.written()
    assert out.unsent == 0


def test_over_limit_once_unsent_reaches_it() -> None:
    out = OutputQueue(100)
    out.append(b"z" * 60)
    assert not out.over_limit
    out.handed_out(40)
    assert out.over_limit


def test_a_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        OutputQueue(0)
    with pytest.raises(ValueError, match="positive"):
        OutputQueue(10).set_limit(-1)
