"""``mockdcp.Server``: the same server as ``serve(...)``, in a background thread, for
synchronous code (plain pytest tests, scripts, other event loops).

Every call crosses into the server's trio thread (``trio.from_thread``), so the model is
only ever touched there. ``start()`` returns once the server is ready (or raises what
stopped it from starting); ``stop()`` shuts it down and joins the thread, and raises
``ServerError`` (its cause what was raised) if the server died of an error after it was
ready; a call to a server that died so raises the same.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import trio

from mockdcp.util import ServerError

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from types import TracebackType

    from mockdcp.model import Bucket, Oracle
    from mockdcp.scenario import ConsumerProgress, ExpectationResult, Step
    from mockdcp.server._serve import MockDcpServer

#: seconds ``start()`` waits for the server to be ready
START_TIMEOUT = 60.0


class Server:
    """A mock node in a background thread; ``options`` are ``serve``'s keywords."""

    def __init__(self, **options: Any) -> None:  # noqa: ANN401 - serve()'s keywords
        self._options = options
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._server: MockDcpServer | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None

    # -- life ---------------------------------------------------------------------------

    def start(self) -> Server:
        """Start the server; returns once it is ready. Raises ``ServerError`` (or the
        scenario's problems) if it cannot start."""
        if self._thread is not None:
            raise ServerError("this Server was started already")
        self._thread = threading.Thread(target=self._run, name="mockdcp-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise ServerError(f"the server was not ready within {START_TIMEOUT:g}s")
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        from mockdcp.server._serve import serve

        self._stop = trio.Event()
        async with serve(**self._options) as server:
            self._server = server
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            await self._stop.wait()

    def stop(self) -> None:
        """Shut the server down (connections closed) and join its thread. Raises
        ``ServerError`` if the server had died of an error since it was ready (once:
        stopping it again is a no-op)."""
        if self._thread is None or self._token is None or self._stop is None:
            return
        with contextlib.suppress(trio.RunFinishedError):
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join()
        self._thread = None
        if self._error is not None:
            raise self._died() from self._error

    def _died(self) -> ServerError:
        return ServerError(f"the server died after it was ready: {self._error!r}")

    @contextlib.contextmanager
    def _running(self) -> Iterator[None]:
        """A call into the server thread; one that finds the run over says why."""
        try:
            yield
        except trio.RunFinishedError:
            if self._error is None:
                raise ServerError("the server is not running") from None
            raise self._died() from self._error

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- the handle ---------------------------------------------------------------------

    @property
    def server(self) -> MockDcpServer:
        """The running server's handle (touch it from the server thread only)."""
        if self._server is None:
            raise ServerError("the server is not running")
        return self._server

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def kv_port(self) -> int:
        return self.server.kv_port

    @property
    def http_port(self) -> int:
        return self.server.http_port

    @property
    def connection_string(self) -> str:
        return self.server.connection_string

    @property
    def tls_port(self) -> int | None:
        """The KV TLS port (None without ``tls=True``)."""
        return self.server.tls_port

    @property
    def https_port(self) -> int | None:
        """The HTTPS management port (None without ``tls=True``)."""
        return self.server.https_port

    @property
    def tls_connection_string(self) -> str | None:
        return self.server.tls_connection_string

    @property
    def ca_pem(self) -> bytes | None:
        """The CA clients trust to reach the TLS ports (PEM; None without TLS)."""
        return self.server.ca_pem

    @property
    def bucket(self) -> Bucket:
        """The model (call its methods through ``call`` to stay in the server thread)."""
        return self.server.bucket

    def call(self, fn: Any, *args: Any) -> Any:  # noqa: ANN401 - any function of the model
        """Run ``fn(*args)`` in the server thread and return its result."""
        with self._running():
            return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def apply(self, *steps: Step | Mapping[str, object]) -> None:
        """``MockDcpServer.apply``, from this thread (blocks while steps wait)."""
        with self._running():
            trio.from_thread.run(self.server.apply, *steps, trio_token=self._token)

    def wait(self, trigger: ConsumerProgress | float, *, limit: float = 60.0) -> None:
        """``MockDcpServer.wait``, from this thread."""
        server = self.server

        async def wait() -> None:
            await server.wait(trigger, limit=limit)

        with self._running():
            trio.from_thread.run(wait, trio_token=self._token)

    def oracle(self) -> Oracle:
        """See ``MockDcpServer.oracle``."""
        result: Oracle = self.call(self.server.oracle)
        return result

    def state(self) -> dict[str, object]:
        result: dict[str, object] = self.call(self.server.state)
        return result

    def expectations(self) -> list[ExpectationResult]:
        result: list[ExpectationResult] = self.call(self.server.expectations)
        return result
