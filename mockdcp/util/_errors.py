"""mockdcp's exception hierarchy.

``MockDcpError`` is the root. The protocol errors, which carry a wire status, live
with the codec (``mockdcp.protocol``).
"""

from __future__ import annotations

from typing import NoReturn


class MockDcpError(Exception):
    """Base of every error mockdcp raises on purpose."""


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
