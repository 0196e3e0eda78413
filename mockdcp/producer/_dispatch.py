"""The one dispatch table of a producer connection, and what happens to each frame a
client sends before its handler runs.

A request is decoded (a bad shape gets EINVAL with the field), shown to the connection's
protocol checker (``_checker``, from DCP_OPEN on: it only observes), admitted or refused for
the connection's state (``_admission``: the status a real node gives for a command out of
order), refused EACCESS when the connection's user lacks the privilege it needs
(``_privileges``), checked against a scenario's ``reject`` step, then handed to the handler its
message type has here: session commands (``_session_handlers``), lookups
(``_lookup_handlers``), DCP (``_dcp_handlers``) and documents (``_document_handlers``).
An unknown command gets UNKNOWN_COMMAND. A response from the client (a consumer answering
a noop, a stream end) is checked as a producer does.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mockdcp.producer import events as ev
from mockdcp.producer._admission import admission_status
from mockdcp.producer._dcp_handlers import HANDLERS as DCP_HANDLERS
from mockdcp.producer._document_handlers import HANDLERS as DOCUMENT_HANDLERS
from mockdcp.producer._lookup_handlers import HANDLERS as LOOKUP_HANDLERS
from mockdcp.producer._privileges import request_status
from mockdcp.producer._session_handlers import HANDLERS as SESSION_HANDLERS
from mockdcp.protocol import (
    Magic,
    Opcode,
    RemoteProtocolError,
    Status,
    decode_client_message,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mockdcp.producer._connection import Connection
    from mockdcp.protocol import Frame

log = logging.getLogger("mockdcp.producer")

#: message type -> handler(connection, frame, message, now)
HANDLERS: dict[type, Callable[[Connection, Frame, Any, float], None]] = {
    **SESSION_HANDLERS,
    **LOOKUP_HANDLERS,
    **DCP_HANDLERS,
    **DOCUMENT_HANDLERS,
}


def handle_frame(conn: Connection, frame: Frame, now: float) -> None:
    """Answer one frame from the client (see the module docstring)."""
    if frame.magic in (Magic.RESPONSE, Magic.SERVER_RESPONSE, Magic.ALT_RESPONSE):
        conn.tap.request(None, frame, now)
        handle_response(conn, frame)
        return
    if frame.magic not in (Magic.REQUEST, Magic.ALT_REQUEST):
        conn.close(f"unexpected magic {int(frame.magic):#04x} from a client")
        return
    replies = conn.replies
    try:
        msg = decode_client_message(frame)
    except RemoteProtocolError as exc:
        log.info("connection %d: bad %#04x request: %s", conn.conn_id, frame.opcode, exc)
        replies.respond(frame, exc.status, context=str(exc))
        return
    conn.tap.request(msg, frame, now)  # the protocol checker sees it before its answer
    status = admission_status(conn.state, frame.opcode)
    if status is not None:
        replies.respond(frame, status, context=f"{status.name} for this command now")
        return
    status = request_status(
        conn.node.users,
        conn.user,
        conn.node.bucket.name,
        frame.opcode,
        getattr(msg, "flags", 0) if frame.opcode == Opcode.DCP_OPEN else 0,
    )
    if status is not None:
        replies.respond(frame, status, context="no access (a privilege the user lacks)")
        return
    rejected = conn.node.rejections.take(frame.opcode, frame.vbucket)
    if rejected is Status.NOT_MY_VBUCKET:
        replies.not_my_vbucket(frame)
        return
    if rejected is not None:
        replies.respond(frame, rejected, context="rejected by a scenario step")
        return
    handler = HANDLERS.get(type(msg))
    if handler is None:
        replies.respond(frame, Status.UNKNOWN_COMMAND)
        return
    handler(conn, frame, msg, now)


def handle_response(conn: Connection, frame: Frame) -> None:
    """A consumer's answer to something the producer sent (kv_engine ``dcp/producer.cc``).

    DCP_NOOP replies clear the pending noop; an unexpected success, or any status a
    producer does not tolerate, disconnects.
    """
    if frame.opcode == Opcode.DCP_NOOP:
        if conn.keepalive.answer(frame.opaque):
            conn.emit(ev.NoopAnswered, opaque=frame.opaque)
            return
        conn.close(f"DCP_NOOP reply with unknown opaque {frame.opaque}")
        return
    tolerated = {Status.SUCCESS, Status.NOT_MY_VBUCKET, 0x0A, 0x0B}
    if frame.opcode == Opcode.DCP_STREAM_END:
        tolerated.add(Status.KEY_ENOENT)
    if frame.status not in tolerated:
        conn.close(f"consumer answered {frame.opcode:#04x} with status {frame.status:#06x}")
