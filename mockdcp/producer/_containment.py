"""A failing request handler fails its request, not its connection (issue 18).

Every frame a connection takes is dispatched inside ``contain``: a handler that raises
answers that request (its opaque and opcode) with the status the error names, EINVAL for
a protocol error, EINTERNAL with an XERROR context for anything unexpected, and the
connection goes on with the next frame. An unexpected exception is a mockdcp bug: it is
logged with its traceback (the fuzzer fails on any such record).

No reply is sent where the protocol has none: for a client's response (to a DCP_NOOP or
a stream message), for DCP_BUFFER_ACKNOWLEDGEMENT (java-dcp-client drops a connection
that gets one), and when the handler had already queued the request's reply.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mockdcp.protocol import Magic, Opcode, ProtocolError, Status

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.protocol import Frame

log = logging.getLogger("mockdcp.producer")

#: Requests that never get a reply (kv_engine sends none for a buffer acknowledgement).
_NO_REPLY = frozenset({int(Opcode.DCP_BUFFER_ACKNOWLEDGEMENT)})


def failure_status(exc: Exception) -> tuple[Status, str]:
    """The status and XERROR context that answer a request whose handler raised."""
    if isinstance(exc, ProtocolError):
        return exc.status, str(exc)
    return Status.EINTERNAL, f"internal error ({type(exc).__name__}), logged by mockdcp"


def wants_reply(frame: Frame) -> bool:
    """True when the protocol answers this frame at all."""
    return frame.magic in (Magic.REQUEST, Magic.ALT_REQUEST) and frame.opcode not in _NO_REPLY


def contain(
    conn_id: int,
    frame: Frame,
    handle: Callable[[], None],
    replies: Callable[[], int],
    answer: Callable[..., None],
) -> None:
    """Run ``handle`` for ``frame``; if it raises, log and ``answer`` the request.

    ``replies`` counts the replies queued so far (a reply queued before the failure
    already answers the request); ``answer(status, context=...)`` queues the error reply.
    Never raises an ``Exception`` of the handler's.
    """
    before = replies()
    try:
        handle()
    except Exception as exc:
        if isinstance(exc, ProtocolError):
            log.info("connection %d: %#04x request refused: %s", conn_id, frame.opcode, exc)
        else:
            log.exception(
                "connection %d: handler of opcode %#04x (opaque %#x) failed",
                conn_id,
                frame.opcode,
                frame.opaque,
            )
        if wants_reply(frame) and replies() == before:
            status, context = failure_status(exc)
            answer(status, context=context)
