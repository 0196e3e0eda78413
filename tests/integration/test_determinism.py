"""For a given scenario and seed, every run sends the same bytes (uuids, CAS, delete
times and generated data come from the seed and the scenario clock)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import mockdcp
from mockdcp.protocol import Magic, Opcode, Status

from .test_bad_input import _opened

if TYPE_CHECKING:
    import pathlib

SCENARIO = """\
name: determinism
seed: 11
bucket: {vbuckets: 4}
steps:
  - persistence: {paused: true}
  - generate: {docs: 60}
  - delete: {key: doc::000007}
  - expire: {key: doc::000008}
  - persist: {upto: 10}
  - failover: {vbuckets: 2}
  - generate: {docs: 5, start: 100}
"""


async def _received(path: pathlib.Path) -> bytes:
    """Every byte of every vbucket's stream, read one vbucket after another."""
    out = bytearray()
    async with mockdcp.serve(port=0, http_port=0, scenario=path) as server:
        c = await _opened(server)
        for vb in range(server.bucket.num_vbuckets):
            high = server.bucket.vbucket(vb).high_seqno
            reply = await c.call(c.stream_request(vb, end_seqno=high))
            assert reply.status == Status.SUCCESS
            out += reply.encode()
            while True:
                frame = await c.frame()
                out += frame.encode()
                if frame.magic is Magic.REQUEST and frame.opcode == Opcode.DCP_STREAM_END:
                    break
        await c.aclose()
    return bytes(out)


async def test_two_runs_of_a_scenario_send_the_same_bytes(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(SCENARIO)
    first = await _received(path)
    second = await _received(path)
    assert len(first) > 60 * 24
    assert first == second
