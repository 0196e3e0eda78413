from __future__ import annotations

import pytest

from mockdcp import LocalProtocolError
from mockdcp.producer._state import (
    CONNECTION_TRANSITIONS,
    STREAM_TRANSITIONS,
    ConnectionEvent,
    ConnectionState,
    StreamEvent,
    StreamState,
    transition_connection,
    transition_stream,
)


def test_connection_reaches_dcp_open_through_auth_and_bucket() -> None:
    s = ConnectionState.CONNECTED
    for event in (ConnectionEvent.AUTH, ConnectionEvent.SELECT_BUCKET, ConnectionEvent.DCP_OPEN):
        s = transition_connection(s, event)
    assert s is ConnectionState.DCP_OPEN


def test_dcp_open_before_bucket_is_illegal() -> None:
    with pytest.raises(LocalProtocolError):
        transition_connection(ConnectionState.AUTHENTICATED, ConnectionEvent.DCP_OPEN)


def test_every_state_can_close() -> None:
    for state in ConnectionState:
        assert transition_connection(state, ConnectionEvent.CLOSE) is ConnectionState.CLOSED
    for sstate in StreamState:
        assert transition_stream(sstate, StreamEvent.CLOSE) is StreamState.DEAD


def test_cursor_drop_moves_memory_stream_back_to_backfill() -> None:
    assert (
        transition_stream(StreamState.IN_MEMORY, StreamEvent.DROP_CURSOR) is StreamState.BACKFILLING
    )


def test_ended_stream_cannot_go_back_to_memory() -> None:
    with pytest.raises(LocalProtocolError):
        transition_stream(StreamState.ENDING, StreamEvent.MEMORY)


def test_tables_cover_every_state() -> None:
    assert set(CONNECTION_TRANSITIONS) == set(ConnectionState)
    assert set(STREAM_TRANSITIONS) == set(StreamState)
