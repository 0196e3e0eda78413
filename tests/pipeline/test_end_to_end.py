from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import trio

from mockdcp.client import ConsumerState, DcpConsumer
from mockdcp.model import Bucket
from mockdcp.pipeline import load_corpus, oracle_rows, verify, write_oracle
from mockdcp.server import serve

from ..integration._raw import wait_until

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from pyspark.sql import SparkSession


async def _until(predicate: Callable[[], bool], seconds: float = 60) -> None:
    with trio.fail_after(seconds):
        await wait_until(predicate)


def _live(bucket: Bucket) -> dict[tuple[int, bytes], bytes]:
    return {k: item.value for k, item in bucket.oracle().items()}


def _held(state: ConsumerState) -> dict[tuple[int, bytes], bytes]:
    return {k: v.value for k, v in state.documents().items()}


def _event_rows(state: ConsumerState) -> list[dict[str, Any]]:
    """What the consumer kept of the events it received (rolled-back ones undone), as
    JSON-lines rows: numeric collection id, text values."""
    return [
        {
            "collection": cid,
            "key": key.decode(),
            "value": v.value.decode(),
            "seqno": v.seqno,
            "rev": v.rev,
            "cas": v.cas,
            "deleted": v.deleted,
        }
        for (cid, key), versions in state.versions.items()
        for v in versions
    ]


async def _stream_corpus_through_faults(corpus: Path) -> tuple[Bucket, ConsumerState]:
    bucket = Bucket("default", 64, seed=21, clock=time.time)
    state = ConsumerState()
    async with serve(port=0, http_port=0, bucket_obj=bucket) as server:
        consumer = DcpConsumer(server.host, server.kv_port, vbuckets=range(64), state=state)
        async with trio.open_nursery() as nursery:
            await nursery.start(consumer.run)
            await load_corpus(bucket, corpus, batch_rows=500)
            # a whole corpus loads into the cold tier, which a backfill reads deduplicated
            # (a deleted key's tombstone alone): documents seen, then deleted, in memory
            doomed = [f"doomed::{i}" for i in range(10)]
            for key in doomed:
                bucket.set(key, b'{"doomed":true}')
            await _until(lambda: all((0, k.encode()) in state.versions for k in doomed))
            for key in doomed:
                bucket.delete(key)
            bucket.flusher.pause()  # the next writes stay unpersisted until the failover
            bucket.persist()
            for i in range(200):
                bucket.set(f"unpersisted::{i}", b'{"lost":true}')
            await _until(lambda: (0, b"unpersisted::199") in state.versions)
            bucket.failover()  # the unpersisted writes are lost: the consumer rolls back
            for i in range(200):
                bucket.set(f"after::{i}", json.dumps({"i": i}))
            await _until(lambda: (0, b"after::199") in state.versions)  # streams are back
            bucket.persist()
            bucket.checkpoint()
            assert server.drop_cursor()  # memory-to-disk switch of every stream
            for i in range(100):
                bucket.set(f"after::{i}", json.dumps({"i": i, "again": True}))
            await _until(lambda: _held(state) == _live(bucket))
            nursery.cancel_scope.cancel()
    assert state.rollbacks
    assert state.violations == []
    return bucket, state


async def test_served_corpus_streamed_through_faults_verifies_clean_and_breakage_is_caught(
    spark: SparkSession, corpus: Path, tmp_path: Path
) -> None:
    bucket, state = await _stream_corpus_through_faults(corpus)
    expected = write_oracle(oracle_rows(bucket), tmp_path / "oracle")
    events = _event_rows(state)
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in events))
    docs = [{"key": k.decode(), "value": v.value} for (_, k), v in state.documents().items()]
    pq.write_table(pa.Table.from_pylist(docs), tmp_path / "docs.parquet")

    clean = await trio.to_thread.run_sync(verify, expected, tmp_path / "events.jsonl")
    assert (clean.differences, clean.mode, clean.matched) == (0, "events", clean.expected)
    clean = await trio.to_thread.run_sync(verify, expected, tmp_path / "docs.parquet")
    assert (clean.differences, clean.mode, clean.matched) == (0, "documents", clean.expected)

    broken, faults = _break(events)
    (tmp_path / "broken.jsonl").write_text("".join(json.dumps(r) + "\n" for r in broken))
    report = await trio.to_thread.run_sync(verify, expected, tmp_path / "broken.jsonl")
    found = {c: sorted(e["key"] for e in report.examples[c]) for c in faults}
    assert found == faults
    assert (report.missing, report.phantom, report.stale, report.wrong_value) == (0, 2, 1, 1)


def _break(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """The event log with a dropped deletion, a stale version, an extra document and a
    wrong value; and the keys each category must name."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for row in events:
        by_key.setdefault(row["key"], []).append(row)
    deleted = next(
        k for k, v in by_key.items() if v[-1]["deleted"] and len(v) > 1 and not v[-2]["deleted"]
    )
    stale = next(
        k for k, v in by_key.items() if len(v) > 1 and not v[-1]["deleted"] and k != deleted
    )
    wrong = next(k for k, v in by_key.items() if not v[-1]["deleted"] and k not in (stale,))
    out = []
    for key, versions in by_key.items():
        if key in (deleted, stale):
            versions = versions[:-1]
        if key == wrong:
            versions = [*versions[:-1], {**versions[-1], "value": '{"tampered":true}'}]
        out += versions
    out.append({"key": "ghost::1", "value": "{}", "seqno": 1, "rev": 1, "deleted": False})
    faults = {"phantom": sorted([deleted, "ghost::1"]), "stale": [stale], "wrong_value": [wrong]}
    return out, faults


SCENARIO = """\
name: corpus-through-faults
description: a corpus streamed through a failover and a memory-to-disk switch
seed: 21
bucket: {vbuckets: 64}
steps:
  - persistence: {paused: true}
  - load: {corpus: CORPUS}
  - persist: {}
  - wait: {consumer: {seqno: high}, timeout: 60s}
  - generate: {docs: 200, prefix: unpersisted}
  - wait: {consumer: {seqno: high}, timeout: 60s}
  - failover: {}
  - generate: {docs: 200, prefix: after}
  - wait: {consumer: {seqno: high}, timeout: 60s}
  - persist: {}
  - checkpoint: {}
  - drop_cursor: {}
  - generate: {docs: 100, prefix: after}
  - wait: {consumer: {seqno: high}, timeout: 60s}
"""


async def test_a_corpus_streamed_through_a_fault_scenario_verifies_clean(
    spark: SparkSession, corpus: Path, tmp_path: Path
) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO.replace("CORPUS", str(corpus)))
    state = ConsumerState()
    async with serve(port=0, http_port=0, scenario=path) as server:
        bucket = server.bucket
        consumer = DcpConsumer(server.host, server.kv_port, vbuckets=range(64), state=state)
        async with trio.open_nursery() as nursery:
            await nursery.start(consumer.run)
            with trio.fail_after(240):
                await server.scenario_done.wait()
            assert server.runner.progress.failure is None
            await _until(lambda: _held(state) == _live(bucket))
            nursery.cancel_scope.cancel()
    assert state.rollbacks
    assert state.violations == []
    expected = write_oracle(oracle_rows(bucket), tmp_path / "oracle")
    events = _event_rows(state)
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in events))
    report = await trio.to_thread.run_sync(verify, expected, tmp_path / "events.jsonl")
    assert (report.differences, report.matched) == (0, report.expected)
