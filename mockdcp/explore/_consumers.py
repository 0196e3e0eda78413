"""Python consumers ``explore`` runs in-process (``-- module:callable``): a callable
``(host, kv_port, nodes) -> consumer`` whose consumer has ``async run()`` (reconnecting
as it needs to; cancelled when the schedule is judged) and ``state.documents()`` (what
it holds, judged against the oracle), as the reference consumer has.

A factory that also takes a ``connect`` keyword (``async (host, port) -> trio stream``,
as ``reference_consumer`` does) opens every connection with it: explore then runs it
over in-memory streams under a virtual clock (``takes_connect``). One that takes
``noop_interval`` or ``buffer_size`` is given the scenario's consumer settings
(``settings_for``), as a consumer command is given them in its environment."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    import trio

    from mockdcp.scenario import ConsumerSettings

    #: opens a connection to a node: ``await connect(host, port)``
    Connect = Callable[[str, int], Awaitable[trio.abc.Stream]]

#: ``package.module:callable``
SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class InProcessConsumer(Protocol):
    """What an in-process consumer offers."""

    async def run(self) -> None: ...

    @property
    def state(self) -> Any: ...  # noqa: ANN401 - has ``documents()``


class ConsumerFactory(Protocol):
    def __call__(self, host: str, port: int, nodes: int) -> InProcessConsumer: ...


def reference_consumer(
    host: str,
    port: int,
    nodes: int,
    *,
    connect: Connect | None = None,
    user: str = "Administrator",
    password: str = "password",
    noop_interval: float = 120.0,
) -> InProcessConsumer:
    """The reference consumer as ``mockdcp tail`` runs it: a connection per node (the
    cluster's map followed) when the cluster has several, else one to the node; each
    connection opened with ``connect`` (default: TCP), logged in as ``user``, asking
    for a DCP_NOOP every ``noop_interval`` seconds (``--noop-interval``)."""
    from mockdcp.client import ClusterConsumer, DcpConsumer

    if nodes > 1:
        return ClusterConsumer(
            host, port, connect=connect, user=user, password=password, noop_interval=noop_interval
        )
    opener = None if connect is None else (lambda: connect(host, port))
    return DcpConsumer(
        host,
        port,
        vbuckets=None,
        connect=opener,
        user=user,
        password=password,
        noop_interval=noop_interval,
    )


def _takes(factory: ConsumerFactory, *names: str) -> bool:
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return all(n in parameters and parameters[n].kind in kinds for n in names)


def takes_connect(factory: ConsumerFactory) -> bool:
    """The factory takes a ``connect`` keyword (module docstring)."""
    return _takes(factory, "connect")


def takes_credentials(factory: ConsumerFactory) -> bool:
    """The factory takes ``user`` and ``password`` keywords: explore then runs its
    server with a password of the run's own and gives it them, so that no other
    process's client reaching the server's free ports is judged as it (as ``mockdcp
    check`` does for a command, ``_check.run_users``)."""
    return _takes(factory, "user", "password")


def settings_for(factory: ConsumerFactory, settings: ConsumerSettings) -> dict[str, Any]:
    """The scenario's consumer settings (``consumer:``) as keywords of ``factory``: those
    it takes (``noop_interval``, ``buffer_size``) and the scenario sets, as a consumer
    command gets them in ``MOCKDCP_NOOP_INTERVAL`` and ``MOCKDCP_BUFFER_SIZE``
    (``ConsumerSettings.environment``) and ``mockdcp tail`` takes them."""
    given = {"noop_interval": settings.noop_interval, "buffer_size": settings.buffer_size}
    return {k: v for k, v in given.items() if v is not None and _takes(factory, k)}


def is_spec(command: list[str]) -> bool:
    """A consumer given as one ``module:callable`` word (run in-process)."""
    return len(command) == 1 and SPEC.match(command[0]) is not None


def load_factory(spec: str) -> ConsumerFactory:
    """The callable ``spec`` names (its module found on ``sys.path`` or in the current
    directory); ``ValueError`` saying why it cannot be had."""
    module_name, _, name = spec.partition(":")
    if os.getcwd() not in sys.path:  # a module of the directory it runs in, as ``-m`` finds
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"the consumer {spec} cannot start: {exc}") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ValueError(f"the consumer {spec} cannot start: {module_name} has no callable {name}")
    return factory  # type: ignore[no-any-return]


def held(consumer: InProcessConsumer) -> Mapping[Any, Any]:
    """What the consumer holds: key -> a version with ``seqno`` and ``value``."""
    return dict(consumer.state.documents())


__all__ = [
    "ConsumerFactory",
    "InProcessConsumer",
    "is_spec",
    "load_factory",
    "reference_consumer",
    "settings_for",
    "takes_connect",
    "takes_credentials",
]
