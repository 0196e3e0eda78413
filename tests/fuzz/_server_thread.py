"""A mock node in a background thread, for tests that drive it with blocking sockets
(the fuzzer: hypothesis runs its examples synchronously, one after another, against one
long-lived server)."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import trio

from mockdcp.model import Bucket
from mockdcp.server import serve

if TYPE_CHECKING:
    from types import TracebackType

    from mockdcp.server import MockDcpServer


class ErrorRecords(logging.Handler):
    """Keeps every record at ERROR or above (a logged traceback is one)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self) -> list[str]:
        return [f"{r.name}: {self.format(r)}" for r in self.records]


class ServerThread:
    """``with ServerThread(bucket) as st:`` serves ``bucket`` on free ports until exit."""

    def __init__(self, bucket: Bucket, **options: Any) -> None:  # noqa: ANN401 - serve()'s
        self.bucket = bucket
        self.options = options
        self.server: MockDcpServer | None = None
        self.errors = ErrorRecords()
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="mockdcp-server", daemon=True)
        self._failure: BaseException | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.kv_port

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported by __exit__ / alive()
            self._failure = exc
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with serve(port=0, http_port=0, bucket_obj=self.bucket, **self.options) as server:
            self.server = server
            self._ready.set()
            await self._stop.wait()

    def alive(self) -> bool:
        return self._thread.is_alive() and self._failure is None

    def __enter__(self) -> ServerThread:
        logging.getLogger("mockdcp").addHandler(self.errors)
        self._thread.start()
        if not self._ready.wait(30) or self.server is None:
            raise RuntimeError(f"the server did not start: {self._failure!r}")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._token is not None and self._stop is not None and self.alive():
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            self._thread.join(30)
        finally:
            logging.getLogger("mockdcp").removeHandler(self.errors)
        if self._failure is not None:
            raise RuntimeError("the server thread failed") from self._failure


def seeded_bucket(vbuckets: int, docs: int, seed: int = 18) -> Bucket:
    bucket = Bucket("default", vbuckets, seed=seed, clock=time.time)
    for i in range(docs):
        bucket.set(f"doc::{i}", f'{{"i":{i},"pad":"{"x" * (i % 50)}"}}')
    return bucket
