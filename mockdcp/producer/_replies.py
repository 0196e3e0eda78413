"""Every answer a connection sends, in request order: ``Replies``.

Handlers answer through it and nothing else. It owns the connection's reply queue
(``OutputQueue``, the output limit), keeps a delayed reply's successors behind it (the
``delay`` fault), adds a JSON error context where the client can read one, and applies
kv_engine ``Connection::remapErrorCode``: without HELLO XERROR the statuses EACCESS,
NO_BUCKET and DCP_STREAMID_INVALID disconnect instead of being sent.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from mockdcp.producer._output import OutputQueue
from mockdcp.producer._state import ConnectionState
from mockdcp.protocol import Datatype, HelloFeature, Opcode, Response, Status

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    from mockdcp.producer._faults import Faults
    from mockdcp.producer._lookups import Reply
    from mockdcp.protocol import Frame

    class Answering(Protocol):
        """What replies need of their connection."""

        features: frozenset[int]
        state: ConnectionState
        faults: Faults
        now: float
        peer_host: str

        def close(self, reason: str) -> None: ...
        def config_bytes(self) -> bytes: ...


#: kv_engine ``Connection::remapErrorCode``: statuses that disconnect a connection without
#: XERROR.
XERROR_ONLY = frozenset({Status.EACCESS, Status.NO_BUCKET, Status.DCP_STREAMID_INVALID})


class Replies:
    """The replies of one connection (see the module docstring)."""

    def __init__(self, conn: Answering, limit: int) -> None:
        self._conn = conn
        #: replies ready to write, counted against the output limit
        self.queue = OutputQueue(limit)
        #: shown every reply as it is queued (the protocol checker; it only observes)
        self.observe: Callable[[Response], None] | None = None

    def respond(
        self,
        frame: Frame,
        status: Status = Status.SUCCESS,
        *,
        value: bytes = b"",
        extras: bytes = b"",
        datatype: int = 0,
        context: str | None = None,
        cas: int = 0,
    ) -> None:
        """Answer ``frame`` (a failure with ``context`` carries it as a JSON error body
        when the client reads JSON)."""
        conn = self._conn
        if status in XERROR_ONLY and HelloFeature.XERROR not in conn.features:
            conn.close(f"{Opcode(frame.opcode).name} refused with {status.name} (no XERROR)")
            return
        failed = status not in (Status.SUCCESS, Status.ROLLBACK)
        if context and not value and failed and self.json_enabled:
            value = json.dumps({"error": {"context": context}}).encode()
            datatype = Datatype.JSON
        response = Response(
            opcode=frame.opcode,
            status=status,
            opaque=frame.opaque,
            extras=extras,
            value=value,
            datatype=datatype,
            cas=cas,
        )
        if self.observe is not None:
            self.observe(response)
        data = response.encode()
        faults = conn.faults
        delay = faults.reply_delay(frame.opcode)
        if delay or faults.held:
            # replies keep their order: one held back holds back those after it
            not_before = max(conn.now + delay, faults.held[-1][0] if faults.held else 0.0)
            faults.held.append((not_before, data))
        else:
            self.queue.append(data)

    def reply(self, frame: Frame, reply: Reply) -> None:
        """Answer with a lookup's reply (``_lookups``)."""
        self.respond(
            frame,
            reply.status,
            value=reply.value,
            extras=reply.extras,
            datatype=reply.datatype,
            context=reply.context,
        )

    def not_my_vbucket(self, frame: Frame) -> None:
        """NOT_MY_VBUCKET carries the current config, which clients apply (kv_engine
        ``Cookie::sendNotMyVBucket``)."""
        value = self._conn.config_bytes()
        self.respond(frame, Status.NOT_MY_VBUCKET, value=value, datatype=Datatype.JSON)

    @property
    def json_enabled(self) -> bool:
        """The client reads JSON error bodies (HELLO JSON, or a DCP connection)."""
        conn = self._conn
        return HelloFeature.JSON in conn.features or conn.state is ConnectionState.DCP_OPEN

    def owed(self) -> int:
        """Replies queued or held back by a fault (``contain`` counts them)."""
        return len(self.queue) + len(self._conn.faults.held)
