"""mockdcp's exception hierarchy.

``MockDcpError`` is the root. Protocol errors carry a wire hint (``status``) the server
can answer with; ``LocalProtocolError`` is raised inside the sans-IO layers and re-raised
as ``RemoteProtocolError`` where the peer's bytes were at fault (h11's split).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    # Imported lazily at run time: importing ``mockdcp.protocol`` runs its package
    # ``__init__``, whose codec modules import this module (a cycle at import time).
    from mockdcp.protocol._enums import Status


class MockDcpError(Exception):
    """Base of every error mockdcp raises on purpose."""


class ProtocolError(MockDcpError):
    """A frame or message broke the protocol.

    ``status`` is what a server would answer (EINVAL unless said otherwise);
    ``field`` names the offending part of the frame, when one is to blame.
    """

    def __init__(
        self, message: str, *, status: Status | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        if status is None:
            from mockdcp.protocol._enums import Status

            status = Status.EINVAL
        self.status: Status = status
        self.field = field

    def __new__(cls, *args: object, **kwargs: object) -> ProtocolError:
        if cls is ProtocolError:
            raise TypeError("ProtocolError is abstract: raise Local- or RemoteProtocolError")
        return super().__new__(cls)


class LocalProtocolError(ProtocolError):
    """Raised by the codec and state machines for something they were asked to do."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes or a message that break the protocol."""


class ModelError(MockDcpError, ValueError):
    """A bad argument to the bucket model (unknown vbucket, seqno beyond high seqno...).

    The model raises it before changing anything.
    """


class ScenarioError(MockDcpError):
    """A scenario file or step is invalid."""


class ServerError(MockDcpError):
    """The server could not start or serve (port in use, bad configuration)."""


def raise_unwrapped(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Raise the exception inside a chain of one-member exception groups (or ``group``
    itself when it holds several), keeping that exception's own cause.

    trio (0.25 and later) wraps whatever escapes a nursery in an exception group. A
    context manager that yields inside a nursery (``serve``) would hand its caller a
    group around the caller's own exception; it raises the exception instead
    (``from None`` would erase its cause, so it is raised from that cause).
    """
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    raise exc from exc.__cause__
