"""``serve(corpus=..., on_disk=...)``: the corpus options of the Python API, which
``mockdcp.Server`` and the pytest plugin's marker and factory take as ``mockdcp serve
--corpus DIR [--on-disk]`` does."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest
import trio

from mockdcp import Server, serve
from mockdcp.data import PipelineError
from mockdcp.pipeline import generate_partition
from mockdcp.util import ServerError
from tests.pipeline.test_ondisk import SPEC, _write

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MOCKDCP_CACHE", str(tmp_path / "cache"))
    return _write(tmp_path / "corpus")


def test_a_server_serves_a_corpus_in_memory_or_on_disk_with_the_same_documents(
    corpus: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mockdcp.corpus")
    with Server(port=0, http_port=0, vbuckets=16, corpus=corpus) as server:
        in_memory = server.oracle()
        state = server.state()["corpus"]
        assert isinstance(state, dict)
        assert (state["on_disk"], state["changed"]) == (False, [])
    with Server(port=0, http_port=0, vbuckets=16, corpus=corpus, on_disk=True) as server:
        on_disk = server.oracle()
        state = server.state()["corpus"]
        assert isinstance(state, dict)
        assert state["on_disk"] is True
        assert state["documents"] == len(in_memory)
    # the same documents (on disk, seqnos renumbered as a compacted disk has them)
    assert {k: (v.rev_seqno, v.value, v.flags, v.expiry) for k, v in on_disk.items()} == {
        k: (v.rev_seqno, v.value, v.flags, v.expiry) for k, v in in_memory.items()
    }
    assert len(in_memory) > 0
    said = caplog.text
    assert "mockdcp loaded" in said
    assert "mockdcp on disk:" in said


def test_serve_checks_the_corpus_before_it_binds_a_port(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    pq.write_table(generate_partition(SPEC, 0).drop_columns(["op"]), bad / "part-00000.parquet")

    async def main() -> None:
        async with serve(port=0, http_port=0, vbuckets=4, corpus=bad):
            raise AssertionError("a bad corpus was served")

    with pytest.raises(PipelineError, match="missing column 'op'"):
        trio.run(main)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"on_disk": True}, "--on-disk serves a --corpus DIR"),
        ({"corpus": "x", "docs": 5}, "docs and corpus"),
        ({"corpus": "x", "scenario": "stall"}, "--corpus and --scenario"),
    ],
)
def test_serve_refuses_corpus_options_that_do_not_go_together(
    options: dict[str, object], message: str
) -> None:
    async def main() -> None:
        async with serve(port=0, http_port=0, vbuckets=4, **options):  # type: ignore[arg-type]
            raise AssertionError("served")

    with pytest.raises(ServerError, match=message):
        trio.run(main)
