"""A connection the shell is done with (``Connection.release``) is freed by reference
counts. Its replies, its scheduler and the checker's tap call back into it: cycles,
which only a full run of the cyclic collector frees, and ``mockdcp serve`` makes those
rare (``SERVE_COLLECTOR_THRESHOLDS``): 200 consumers a round kept 15 to 40 MiB more
after each (``tests/bench/test_many_consumers.py``)."""

from __future__ import annotations

import gc
import weakref
from typing import TYPE_CHECKING

import attrs
import pytest

from mockdcp.model import Bucket
from mockdcp.protocol import Mutation, StreamEnd

from ._session import Session, from_zero

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The cyclic collector off (what reference counts alone free)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _streamed_and_closed() -> tuple[Session, weakref.ref[object]]:
    """A connection that streamed a vbucket to its end, then closed, as the shell
    leaves it; and a weak reference to it."""
    bucket = Bucket("default", 4, seed=1, clock=lambda: 1_700_000_000.0)
    for i in range(20):
        bucket.set(f"doc-{i}", b'{"n": 1}', vbucket=0)
    session = Session(bucket)
    session.open_dcp(buffer_size=1 << 20)
    session.read()
    replies = session.call(attrs.evolve(from_zero(0, 7), end_seqno=20))
    replies += session.read()
    assert sum(isinstance(m, Mutation) for m in replies) == 20
    assert isinstance(replies[-1], StreamEnd)
    session.conn.close("connection finished")
    return session, weakref.ref(session.conn)


@pytest.mark.usefixtures("no_collector")
def test_a_released_connection_is_freed_by_reference_counts() -> None:
    session, conn = _streamed_and_closed()
    session.conn.release()
    del session
    assert conn() is None


@pytest.mark.usefixtures("no_collector")
def test_a_closed_connection_not_released_waits_for_the_cyclic_collector() -> None:
    session, conn = _streamed_and_closed()
    del session
    assert conn() is not None  # in its cycles
    gc.collect()
    assert conn() is None
