"""A TLS connection over a trio socket stream: ``ssl.SSLObject`` between two memory BIOs.

trio's own ``SSLStream`` drops what OpenSSL has to say when a handshake fails, so a client
refused for its certificate would see the connection reset instead of the alert a node
sends (``certificate required`` without a certificate where one is mandatory,
``unknown CA`` for one the CA did not sign). This stream sends that alert before it
gives up, tells plaintext on a TLS port apart from a failed handshake, sends several
buffers with one socket write (``send_parts``, the KV writer's batches), and reads as many
records as are in, up to the size asked for, in one ``receive_some``.

One task reads and one writes at a time (the KV connection's reader and writer); a lock
keeps the records in order on the socket when reading produces output too (a TLS 1.3
key update answered). Writes to a memory BIO never block: ``SSLObject.write`` takes
everything, and the bytes are sent once per call.
"""

from __future__ import annotations

import contextlib
import ssl
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from collections.abc import Sequence

#: bytes read from the socket at a time
RECEIVE_SIZE = 256 * 1024
#: seconds a failed handshake's alert may take to leave
ALERT_GRACE = 1.0
#: the first byte of every TLS handshake record (RFC 8446 5.1, ``handshake(22)``)
TLS_HANDSHAKE_RECORD = 0x16


class TlsHandshakeError(Exception):
    """The TLS handshake failed; ``plaintext`` when the peer did not speak TLS at all."""

    def __init__(self, reason: str, *, plaintext: bool = False) -> None:
        super().__init__(reason)
        self.plaintext = plaintext


def _plaintext_reason(first: int) -> str:
    if first == 0x80:
        what = "a memcached request"
    elif chr(first).isupper():
        what = "an HTTP request"
    else:
        what = f"byte {first:#04x}"
    return f"plaintext on a TLS port: {what}, not a TLS handshake"


class TlsStream(trio.abc.Stream):
    """A TLS connection on ``transport`` with ``context`` (module docstring).

    ``do_handshake`` first (``TlsHandshakeError`` when it fails); then ``receive_some``,
    ``send_all`` and ``send_parts``. Errors of the connection after the handshake are
    ``trio.BrokenResourceError``; an end of the peer's data, with or without
    ``close_notify``, is ``b""``.
    """

    def __init__(
        self,
        transport: trio.SocketStream,
        context: ssl.SSLContext,
        *,
        server_side: bool,
        server_hostname: str | None = None,
    ) -> None:
        self.transport_stream = transport
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(
            self._incoming, self._outgoing, server_side=server_side, server_hostname=server_hostname
        )
        self._send_lock = trio.Lock()
        self._first: int | None = None
        self._notified = False
        self._closed = False

    @property
    def socket(self) -> trio.socket.SocketType:
        return self.transport_stream.socket

    # -- the handshake ---------------------------------------------------------------------

    async def do_handshake(self) -> None:
        """Run the handshake; raises ``TlsHandshakeError`` (after sending the alert, when
        there is one) or the transport's errors."""
        while True:
            try:
                self._ssl.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            except (ssl.SSLError, ssl.CertificateError) as exc:
                await self._send_alert()
                raise self._failure(exc) from exc
            await self._flush()
            if done:
                return
            chunk = await self.transport_stream.receive_some(RECEIVE_SIZE)
            if not chunk:
                raise TlsHandshakeError(
                    "the peer closed the connection during the TLS handshake",
                    plaintext=self._first is not None and self._first != TLS_HANDSHAKE_RECORD,
                )
            if self._first is None:
                self._first = chunk[0]
            self._incoming.write(chunk)

    def _failure(self, exc: Exception) -> TlsHandshakeError:
        if self._first is not None and self._first != TLS_HANDSHAKE_RECORD:
            return TlsHandshakeError(_plaintext_reason(self._first), plaintext=True)
        reason = getattr(exc, "reason", None) or str(exc)
        return TlsHandshakeError(f"TLS handshake failed: {reason}")

    async def _send_alert(self) -> None:
        with (
            trio.move_on_after(ALERT_GRACE),
            contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError),
        ):
            await self._flush()

    def getpeercert(self) -> bytes | None:
        """The peer's certificate (DER), when it sent one that verified."""
        return self._ssl.getpeercert(binary_form=True)

    def selected_alpn_protocol(self) -> str | None:
        return self._ssl.selected_alpn_protocol()

    def version(self) -> str | None:
        return self._ssl.version()

    # -- data ------------------------------------------------------------------------------

    async def _flush(self) -> None:
        """Send everything OpenSSL has written, in order."""
        async with self._send_lock:
            while data := self._outgoing.read():
                await self.transport_stream.send_all(data)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Up to ``max_bytes`` of plaintext (as many records as are in), at least one
        byte, or ``b""`` at the end of the peer's data."""
        await trio.lowlevel.checkpoint()
        size = max_bytes or RECEIVE_SIZE
        while True:
            try:
                data = self._read(size)
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            except ssl.SSLError as exc:
                raise trio.BrokenResourceError(f"TLS: {exc}") from exc
            else:
                if self._outgoing.pending and not self._send_lock.locked():
                    await self._flush()
                return data
            if self._outgoing.pending and not self._send_lock.locked():
                await self._flush()
            chunk = await self.transport_stream.receive_some(RECEIVE_SIZE)
            if chunk:
                self._incoming.write(chunk)
            else:
                self._incoming.write_eof()

    def _read(self, size: int) -> bytes:
        """The plaintext of the records already in, up to ``size``; raises
        ``SSLWantReadError`` when there is none."""
        first = self._ssl.read(size)
        parts, total = [first], len(first)
        while first and total < size:
            try:
                more = self._ssl.read(size - total)
            except ssl.SSLError:  # nothing more in, or an error the next call raises
                break
            if not more:
                break
            parts.append(more)
            total += len(more)
        return first if len(parts) == 1 else b"".join(parts)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.send_parts([data])

    async def send_parts(self, parts: Sequence[bytes | bytearray | memoryview]) -> None:
        """Encrypt ``parts`` in order and send them with one socket write."""
        if self._closed:
            raise trio.ClosedResourceError("the TLS stream is closed")
        for part in parts:
            view = memoryview(part)
            try:
                while view.nbytes:
                    view = view[self._ssl.write(view) :]
            except ssl.SSLError as exc:
                raise trio.BrokenResourceError(f"TLS: {exc}") from exc
        await self._flush()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    # -- closing ---------------------------------------------------------------------------

    async def send_close_notify(self) -> None:
        """Tell the peer no more data comes (``close_notify``), without waiting for its
        own; errors of a connection already gone are ignored."""
        if self._notified:
            return
        self._notified = True
        with contextlib.suppress(ssl.SSLError):
            self._ssl.unwrap()  # queues close_notify; the peer's has not come yet
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await self._flush()

    async def aclose(self) -> None:
        """``close_notify`` (bounded by the caller's cancel scope), then close the socket."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.send_close_notify()
        finally:
            await self.transport_stream.aclose()
