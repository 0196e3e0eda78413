from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from mockdcp.model import Bucket
from mockdcp.pipeline import CorpusSpec, make_corpus
from mockdcp.pipeline._spark import spark_session

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pyspark.sql import SparkSession

#: One small corpus for the whole session: 3 logical partitions, every kind of row.
SPEC = CorpusSpec(docs=3000, seed=11, partitions=3, hot_share=0.02, hot_updates=5)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def corpus(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "c"
    make_corpus(SPEC, str(out))
    return out


def new_bucket(vbuckets: int = 64) -> Bucket:
    return Bucket("default", vbuckets, seed=5, clock=time.time)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs Spark (a Java runtime, a JVM started per session) is of the full
    tier; the pipeline's pure-Python parts stay in the fast one. Before the tiers split
    the items (tests/conftest.py): tryfirst."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.full)
