"""The flow-control window (kv_engine ``docs/dcp/documentation/flow-control.md``) without
sockets."""

from __future__ import annotations

from collections import deque

from mockdcp.producer._flow import FlowWindow
from mockdcp.producer._stream import Chunk


def frames(count: int, size: int, *, base: int = 0) -> Chunk:
    """A chunk of ``count`` messages of ``size`` bytes (message i filled with byte i)."""
    buf = bytearray(b"".join(bytes([i]) * size for i in range(count)))
    return Chunk(buf, [base + size * (i + 1) for i in range(count)], base)


def test_messages_go_while_outstanding_is_below_the_size_overshooting_by_one_at_most() -> None:
    window = FlowWindow()
    window.resize(100)
    chunks = deque([frames(10, 30)])
    parts: list[bytes | memoryview] = []
    assert window.take(chunks, parts, quantum=1 << 20) == 120  # starts 0, 30, 60, 90 < 100
    assert b"".join(parts) == bytes([0]) * 30 + bytes([1]) * 30 + bytes([2]) * 30 + bytes([3]) * 30
    assert window.unacked == 120
    assert not window.open
    assert window.take(chunks, parts, quantum=1 << 20) == 0


def test_an_ack_reopens_the_window_where_it_stopped() -> None:
    window = FlowWindow()
    window.resize(100)
    chunks = deque([frames(10, 30)])
    first: list[bytes | memoryview] = []
    window.take(chunks, first, quantum=1 << 20)
    assert window.ack(60) == 0
    assert window.open
    rest: list[bytes | memoryview] = []
    assert window.take(chunks, rest, quantum=1 << 20) == 60  # starts at 60 and 90 of 100
    assert b"".join(rest) == bytes([4]) * 30 + bytes([5]) * 30
    assert (window.unacked, window.acked) == (120, 60)


def test_without_a_buffer_size_the_quantum_alone_bounds_a_take() -> None:
    window = FlowWindow()
    chunks = deque([frames(10, 30), frames(2, 50)])
    parts: list[bytes | memoryview] = []
    assert window.take(chunks, parts, quantum=100) == 120  # whole messages up to ~quantum
    assert window.take(chunks, parts, quantum=1 << 20) == 180 + 100
    assert not chunks
    assert window.unacked == 0


def test_chunks_whose_ends_carry_a_base_are_cut_at_message_boundaries() -> None:
    window = FlowWindow()
    window.resize(45)
    chunks = deque([frames(4, 20, base=1000)])
    parts: list[bytes | memoryview] = []
    assert window.take(chunks, parts, quantum=1 << 20) == 60
    assert b"".join(parts) == bytes([0]) * 20 + bytes([1]) * 20 + bytes([2]) * 20


def test_turning_flow_control_on_or_off_resets_the_count() -> None:
    window = FlowWindow()
    window.resize(100)
    window.take(deque([frames(5, 30)]), [], quantum=1 << 20)
    window.resize(200)  # a new size keeps what is outstanding
    assert window.unacked == 120
    window.resize(0)
    assert window.unacked == 0
    assert window.open


def test_acking_more_than_outstanding_is_counted_and_reported() -> None:
    window = FlowWindow()
    window.resize(100)
    window.take(deque([frames(1, 30)]), [], quantum=1 << 20)
    assert window.ack(50) == 20
    assert (window.unacked, window.acked) == (0, 50)
