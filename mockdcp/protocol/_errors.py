"""The protocol's errors: a frame or message that broke the protocol, with the status a
server would answer. ``LocalProtocolError`` is raised inside the sans-IO layers for
something they were asked to do; ``RemoteProtocolError`` where the peer's bytes were at
fault (h11's split).
"""

from __future__ import annotations

from mockdcp.protocol._enums import Status
from mockdcp.util import MockDcpError


class ProtocolError(MockDcpError):
    """A frame or message broke the protocol.

    ``status`` is what a server would answer (EINVAL unless said otherwise);
    ``field`` names the offending part of the frame, when one is to blame.
    """

    def __init__(
        self, message: str, *, status: Status | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.status: Status = Status.EINVAL if status is None else status
        self.field = field

    def __new__(cls, *args: object, **kwargs: object) -> ProtocolError:
        if cls is ProtocolError:
            raise TypeError("ProtocolError is abstract: raise Local- or RemoteProtocolError")
        return super().__new__(cls)


class LocalProtocolError(ProtocolError):
    """Raised by the codec and state machines for something they were asked to do."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes or a message that break the protocol."""
