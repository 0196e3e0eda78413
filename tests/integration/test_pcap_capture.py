"""``serve(pcap=...)`` / ``mockdcp serve --pcap``: a capture tshark decodes as ours.

tshark's couchbase dissector is an independent reading of the frames mockdcp sends. The
decode needs ``tshark`` (``.ci/run`` installs it); without it the tshark test is skipped.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import TYPE_CHECKING

import pytest
import trio

from mockdcp import ServerError
from mockdcp.client import DcpConsumer
from mockdcp.model import Bucket
from mockdcp.server import serve

from ._raw import wait_until

if TYPE_CHECKING:
    from pathlib import Path


def _tshark(capture: Path, port: int, *args: str) -> list[list[str]]:
    out = subprocess.run(
        ["tshark", "-r", str(capture), "-d", f"tcp.port=={port},couchbase", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return [line.split("\t") for line in out.splitlines() if line]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
async def test_tshark_reads_every_streamed_mutation_from_the_capture(tmp_path: Path) -> None:
    capture = tmp_path / "kv.pcap"
    bucket = Bucket("default", 8, seed=2, clock=time.time)
    for i in range(300):  # ~1 KiB values: frames span TCP segments of the capture
        bucket.set(f"doc::{i}", f'{{"i":{i},"pad":"{"x" * 1000}"}}')
    async with serve(port=0, http_port=0, bucket_obj=bucket, pcap=capture) as server:
        consumer = DcpConsumer(server.host, server.kv_port, vbuckets=range(8))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumer.run)
            with trio.fail_after(20):
                await wait_until(lambda: consumer.state.items >= 300)
            nursery.cancel_scope.cancel()
        port = server.kv_port
    mutations = _tshark(
        capture,
        port,
        "-Y",
        "couchbase.opcode == 0x57",
        "-T",
        "fields",
        "-e",
        "couchbase.vbucket",
        "-e",
        "couchbase.extras.by_seqno",
        "-e",
        "couchbase.key.logical_key",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=;",
    )
    seen: set[tuple[str, str, str]] = set()
    for vbs, seqnos, keys in mutations:  # one line per packet, frames joined with ";"
        seen.update(zip(vbs.split(";"), seqnos.split(";"), keys.split(";"), strict=True))
    expected = {
        (str(it.vbucket), str(it.seqno), it.key.decode()) for it in bucket.oracle().values()
    }
    assert seen == expected
    assert _tshark(capture, port, "-Y", "_ws.malformed") == []
    # the handshake, SASL and DCP_OPEN decode too: tshark saw the client's requests
    opcodes = {
        op
        for (field,) in _tshark(capture, port, "-T", "fields", "-e", "couchbase.opcode")
        for op in field.split(",")
    }
    assert {"0x1f", "0x21", "0x50", "0x53", "0x56", "0x57"} <= opcodes


async def test_an_unwritable_capture_file_is_a_server_error(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="packet capture"):
        async with serve(port=0, http_port=0, vbuckets=4, pcap=tmp_path / "no" / "kv.pcap"):
            pass
