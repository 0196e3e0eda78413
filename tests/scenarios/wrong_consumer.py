"""Consumers that get DCP wrong, for the scenario library's tests.

Run as ``python tests/scenarios/wrong_consumer.py --mode MODE`` (as ``mockdcp run``'s
consumer command: the ``MOCKDCP_*`` variables say where the node is):

* ``ignore-rollbacks``: on ROLLBACK it keeps what it has and asks again from its old
  position (the bug a rollback scenario must catch);
* ``never-ack``: opens a flow-control window and never sends a buffer acknowledgement
  (the producer stops once the window is full).

Both are the reference consumer with one behaviour broken.
"""

from __future__ import annotations

import argparse
import os
import sys

import trio

from mockdcp.client import DcpConsumer
from mockdcp.protocol import Frame, Status

#: the flow-control window the never-ack consumer opens
NEVER_ACK_BUFFER = 64 * 1024


class IgnoresRollbacks(DcpConsumer):
    """Treats ROLLBACK as "try again": same start seqno, same uuid, nothing undone."""

    async def _handle_frame(self, frame: Frame) -> None:
        if frame.status == Status.ROLLBACK and frame.opaque in self._opaques:
            await trio.sleep(0.05)  # do not spin: ask again as a naive retry loop would
            await self._open_stream(self._opaques[frame.opaque])
            return
        await super()._handle_frame(frame)


class NeverAcks(DcpConsumer):
    """Sets a connection buffer size but never acknowledges a byte."""

    async def _maybe_ack(self) -> None:
        return


MODES: dict[str, type[DcpConsumer]] = {
    "ignore-rollbacks": IgnoresRollbacks,
    "never-ack": NeverAcks,
}


def make_consumer(
    mode: str,
    host: str,
    port: int,
    *,
    user: str = "Administrator",
    password: str = "password",
    bucket: str = "default",
) -> DcpConsumer:
    """The wrong consumer of ``mode`` for the node at ``host:port``."""
    return MODES[mode](
        host,
        port,
        user=user,
        password=password,
        bucket=bucket,
        vbuckets=None,
        name=f"wrong-{mode}",
        buffer_size=NEVER_ACK_BUFFER if mode == "never-ack" else 20 * 1024 * 1024,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    args = parser.parse_args(argv)
    env = os.environ
    consumer = make_consumer(
        args.mode,
        env.get("MOCKDCP_HOST", "127.0.0.1"),
        int(env.get("MOCKDCP_KV_PORT", "11210")),
        user=env.get("MOCKDCP_USER", "Administrator"),
        password=env.get("MOCKDCP_PASSWORD", "password"),
        bucket=env.get("MOCKDCP_BUCKET", "default"),
    )
    try:
        trio.run(consumer.run)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
