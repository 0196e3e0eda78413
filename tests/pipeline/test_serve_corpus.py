from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from mockdcp.pipeline import CorpusSpec, generate_partition

if TYPE_CHECKING:
    from pathlib import Path

SPEC = CorpusSpec(docs=400, seed=3, partitions=1)
SERVE = [sys.executable, "-m", "mockdcp", "serve", "--port", "0", "--http-port", "0"]


def _serve(corpus: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*SERVE, "--vbuckets", "16", "--json", "--corpus", str(corpus)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_serve_loads_the_corpus_instead_of_faker_documents(tmp_path: Path) -> None:
    table = generate_partition(SPEC, 0)
    pq.write_table(table, tmp_path / "part-00000.parquet")
    with _serve(tmp_path) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stderr is not None
            assert json.loads(proc.stdout.readline())["event"] == "ready"
            loaded = proc.stderr.readline()
        finally:
            proc.terminate()
            proc.communicate(timeout=10)
    assert f"mockdcp loaded {table.num_rows} rows" in loaded
    assert "documents" not in loaded  # no Faker documents besides the corpus


def test_serve_refuses_a_bad_corpus_before_ready(tmp_path: Path) -> None:
    pq.write_table(generate_partition(SPEC, 0).drop_columns(["op"]), tmp_path / "x.parquet")
    with _serve(tmp_path) as proc:
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert out == ""
    assert "missing column 'op'" in err


def test_serve_refuses_a_corpus_with_a_scenario_instead_of_ignoring_it(tmp_path: Path) -> None:
    pq.write_table(generate_partition(SPEC, 0), tmp_path / "part-00000.parquet")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nsteps: []\n")
    for extra in ([], ["--on-disk"]):
        with subprocess.Popen(
            [*SERVE, "--scenario", str(scenario), "--corpus", str(tmp_path), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as proc:
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == 1
        assert out == ""
        assert "--corpus and --scenario" in err
