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


def test_a_write_of_stream_data_holds_about_kv_engines_send_queue() -> None:
    """A connection's write takes stream data up to ``MAX_WRITE``, kv_engine's
    ``max_send_queue_size`` (1 MiB), not 4 MiB: each write's buffers live until the
    socket took them all, and a server of N nodes holds N connections' at once."""
    from mockdcp.model import Bucket
    from mockdcp.producer._connection import MAX_WRITE
    from mockdcp.producer._scheduler import QUANTUM
    from tests.producer._session import Session, from_zero

    bucket = Bucket("default", 4, seed=1, clock=lambda: 1_700_000_000.0)
    keys = [b"k%05d" % i for i in range(8000)]
    bucket.set_many(keys, [b"x" * 1000] * len(keys))  # about 8 MB to stream
    session = Session(bucket)
    session.open_dcp()
    for vb in range(4):
        session.send(from_zero(vb, opaque=vb).encode())
    sizes = []
    while parts := session.conn.buffers_to_send(session.now):
        sizes.append(sum(map(len, parts)))
        session.conn.data_written(session.now)
    assert sum(sizes) > 8_000_000  # every item went
    assert max(sizes) <= MAX_WRITE + QUANTUM <= 1024 * 1024 + QUANTUM
    assert len(sizes) >= 8
