"""A consumer command for ``tests/integration/test_check.py``: before running the reference
consumer it plays another process's client that reached the run's port (the usual
credentials, a DCP name of its own, an acknowledgement of bytes it was never sent) and
writes the status its login got to ``$FOREIGN_STATUS``."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from mockdcp.protocol import (
    DcpBufferAck,
    DcpControl,
    DcpOpen,
    DcpOpenFlag,
    FrameReader,
    Hello,
    HelloFeature,
    Message,
    SaslAuth,
    SelectBucket,
    Status,
)


def main() -> None:
    host, port = os.environ["MOCKDCP_HOST"], int(os.environ["MOCKDCP_KV_PORT"])
    reader = FrameReader()
    with socket.create_connection((host, port), timeout=10) as sock:

        def call(msg: Message) -> int:
            sock.sendall(msg.encode())
            while (frame := reader.next_frame()) is None:
                data = sock.recv(65536)
                if not data:
                    return -1  # closed on us
                reader.feed(data)
            return int(frame.status)

        call(Hello(opaque=1, agent=b"foreign", features=(HelloFeature.XERROR,)))
        status = call(SaslAuth(opaque=2, mechanism="PLAIN", payload=b"\0Administrator\0password"))
        Path(os.environ["FOREIGN_STATUS"]).write_text(str(status))
        if status == Status.SUCCESS:
            call(SelectBucket(opaque=3, bucket=os.environ["MOCKDCP_BUCKET"]))
            call(DcpOpen(opaque=4, name=b"foreign", flags=int(DcpOpenFlag.PRODUCER)))
            call(DcpControl(opaque=5, key="connection_buffer_size", value="1024"))
            sock.sendall(DcpBufferAck(opaque=6, nbytes=5000).encode())  # never sent: over-ack
            call(DcpControl(opaque=7, key="connection_buffer_size", value="1024"))
    os.execv(sys.executable, [sys.executable, "-m", "mockdcp", "tail", "--json"])


if __name__ == "__main__":
    main()
