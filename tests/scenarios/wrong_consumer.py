"""Consumers that get DCP wrong, for the scenario library's tests.

Run as ``python tests/scenarios/wrong_consumer.py --mode MODE`` (as ``mockdcp run``'s
consumer command: the ``MOCKDCP_*`` variables say where the node is):

* ``ignore-rollbacks``: on ROLLBACK it keeps what it has and asks again from its old
  position (the bug a rollback scenario must catch);
* ``never-ack``: opens a flow-control window and never sends a buffer acknowledgement
  (the producer stops once the window is full).

Both are the reference consumer's core with one rule broken, driven as it is.
"""

from __future__ import annotations

import argparse
import os
import sys

import trio

from mockdcp.client import Action, ConsumerCore, DcpConsumer, Reopen, StreamKey
from mockdcp.protocol import DcpBufferAck, Frame, Status

#: the flow-control window the never-ack consumer opens
NEVER_ACK_BUFFER = 64 * 1024


class IgnoresRollbacks(ConsumerCore):
    """Treats ROLLBACK as "try again": same start seqno, same uuid, nothing undone."""

    def on_stream_response(self, key: StreamKey, frame: Frame) -> list[Action]:
        if frame.status == Status.ROLLBACK:
            # do not spin: ask again as a naive retry loop would
            return [Reopen(key, 0.05)]
        return super().on_stream_response(key, frame)


class NeverAcks(ConsumerCore):
    """Sets a connection buffer size but never acknowledges a byte."""

    def buffer_ack(self) -> DcpBufferAck | None:
        return None


MODES: dict[str, type[ConsumerCore]] = {
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
    core = MODES[mode](
        vbuckets=None,
        name=f"wrong-{mode}",
        buffer_size=NEVER_ACK_BUFFER if mode == "never-ack" else 20 * 1024 * 1024,
    )
    return DcpConsumer(
        host, port, user=user, password=password, bucket=bucket, vbuckets=None, core=core
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
