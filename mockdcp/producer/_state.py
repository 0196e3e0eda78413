"""States of a producer connection and of a stream, and the legal transitions.

Rules of this file (h11 ``_state.py`` style): every state is an enum member; every change
of state goes through ``transition()``, which looks the pair up in a table; a pair that is
not in the table is a bug in the caller and raises ``LocalProtocolError``. Nothing else
lives here.

Connection (kv_engine ``daemon/mcbp_validators.cc``, ``dcp_open_executor.cc``):

    CONNECTED --auth--> AUTHENTICATED --select_bucket--> BUCKET_SELECTED --dcp_open--> DCP_OPEN
    any --close--> CLOSED

SELECT_BUCKET may also come before SASL completes on a real node only for callers that
already authenticated, so the table allows re-authentication and re-selection until
DCP_OPEN, after which SASL and SELECT_BUCKET are refused.

Stream (kv_engine ``engines/ep/src/dcp/active_stream.cc``, ``dcp/producer.cc``):

    PENDING --backfill--> BACKFILLING --memory--> IN_MEMORY --drop_cursor--> BACKFILLING
    PENDING --memory--> IN_MEMORY
    any live --end--> ENDING (STREAM_END queued) --drained--> DEAD
    any --close--> DEAD (CLOSE_STREAM without send_stream_end_on_client_close_stream)
"""

from __future__ import annotations

import enum

from mockdcp.protocol import LocalProtocolError


class ConnectionState(enum.Enum):
    CONNECTED = "connected"
    AUTHENTICATED = "authenticated"
    BUCKET_SELECTED = "bucket_selected"
    DCP_OPEN = "dcp_open"
    CLOSED = "closed"


class ConnectionEvent(enum.Enum):
    AUTH = "auth"
    SELECT_BUCKET = "select_bucket"
    DCP_OPEN = "dcp_open"
    CLOSE = "close"


class StreamState(enum.Enum):
    #: members are singletons compared by identity: hashed by it too, in C (``Enum``
    #: hashes its name in Python; each stream makes three transitions, a lookup of its
    #: state and event each)
    __hash__ = object.__hash__

    PENDING = "pending"
    BACKFILLING = "backfilling"
    IN_MEMORY = "in_memory"
    ENDING = "ending"
    DEAD = "dead"


class StreamEvent(enum.Enum):
    __hash__ = object.__hash__  # (as ``StreamState``'s)

    BACKFILL = "backfill"
    MEMORY = "memory"
    DROP_CURSOR = "drop_cursor"
    END = "end"
    DRAINED = "drained"
    CLOSE = "close"


_C = ConnectionState
_CE = ConnectionEvent
CONNECTION_TRANSITIONS: dict[ConnectionState, dict[ConnectionEvent, ConnectionState]] = {
    _C.CONNECTED: {_CE.AUTH: _C.AUTHENTICATED, _CE.CLOSE: _C.CLOSED},
    _C.AUTHENTICATED: {
        _CE.AUTH: _C.AUTHENTICATED,
        _CE.SELECT_BUCKET: _C.BUCKET_SELECTED,
        _CE.CLOSE: _C.CLOSED,
    },
    _C.BUCKET_SELECTED: {
        _CE.AUTH: _C.BUCKET_SELECTED,
        _CE.SELECT_BUCKET: _C.BUCKET_SELECTED,
        _CE.DCP_OPEN: _C.DCP_OPEN,
        _CE.CLOSE: _C.CLOSED,
    },
    _C.DCP_OPEN: {_CE.CLOSE: _C.CLOSED},
    _C.CLOSED: {_CE.CLOSE: _C.CLOSED},
}

_S = StreamState
_SE = StreamEvent
STREAM_TRANSITIONS: dict[StreamState, dict[StreamEvent, StreamState]] = {
    _S.PENDING: {
        _SE.BACKFILL: _S.BACKFILLING,
        _SE.MEMORY: _S.IN_MEMORY,
        _SE.END: _S.ENDING,
        _SE.CLOSE: _S.DEAD,
    },
    _S.BACKFILLING: {
        _SE.MEMORY: _S.IN_MEMORY,
        _SE.BACKFILL: _S.BACKFILLING,
        _SE.END: _S.ENDING,
        _SE.CLOSE: _S.DEAD,
    },
    _S.IN_MEMORY: {
        _SE.DROP_CURSOR: _S.BACKFILLING,
        _SE.END: _S.ENDING,
        _SE.CLOSE: _S.DEAD,
    },
    _S.ENDING: {_SE.DRAINED: _S.DEAD, _SE.CLOSE: _S.DEAD},
    _S.DEAD: {_SE.CLOSE: _S.DEAD},
}


def transition_connection(state: ConnectionState, event: ConnectionEvent) -> ConnectionState:
    """The state after ``event``; raises ``LocalProtocolError`` for an illegal pair."""
    try:
        return CONNECTION_TRANSITIONS[state][event]
    except KeyError:
        raise LocalProtocolError(
            f"connection cannot {event.value} in state {state.value}"
        ) from None


def transition_stream(state: StreamState, event: StreamEvent) -> StreamState:
    """The state after ``event``; raises ``LocalProtocolError`` for an illegal pair."""
    try:
        return STREAM_TRANSITIONS[state][event]
    except KeyError:
        raise LocalProtocolError(f"stream cannot {event.value} in state {state.value}") from None
