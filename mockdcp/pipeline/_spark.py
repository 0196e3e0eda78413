"""One Spark session for the pipeline's jobs: ``local[*]`` unless ``--master`` says
otherwise, the running interpreter as Spark's Python, and quiet logs.

Spark's JVM logs go through log4j2; a small configuration file (written once into a
temporary directory) keeps them at ERROR, and the console progress bar is off (the
pipeline draws its own). ``PYSPARK_PYTHON`` is set to ``sys.executable`` so executors
run the same interpreter, with the same mockdcp and Faker, as the driver.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from mockdcp.data import PipelineError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pyspark import StatusTracker
    from pyspark.sql import SparkSession

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _log4j_file() -> str:
    path = Path(tempfile.gettempdir()) / f"mockdcp-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        path.write_text(_LOG4J)
    return str(path)


def spark_session(master: str | None = None, app: str = "mockdcp") -> SparkSession:
    """The (one per process) Spark session; ``PipelineError`` if Spark cannot start
    (no Java runtime, a bad master URL)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or "local[*]"
    if master.startswith("local"):
        # a local job needs no network name; saves the "hostname resolves to loopback" warning
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - a dependency
        raise PipelineError(f"pyspark is not installed ({exc})") from None
    java_opts = f"-Dlog4j.configurationFile=file:{_log4j_file()}"
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.shuffle.partitions", str(max(4, 2 * (os.cpu_count() or 2))))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
    )
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # py4j / a JVM that did not start: say what to check
        raise PipelineError(
            f"Spark did not start ({type(exc).__name__}: {exc}); it needs a Java runtime "
            "(17 or later) on PATH or in JAVA_HOME"
        ) from exc
    session.sparkContext.setLogLevel("ERROR")
    return session


def stage_progress(
    session: SparkSession, total: int, label: str, enabled: bool
) -> Callable[[], None]:
    """Start a progress bar of ``total`` tasks that polls Spark's status tracker; returns
    the function that stops it."""
    if not enabled:
        return lambda: None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    tracker = session.sparkContext.statusTracker()
    stop = threading.Event()
    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=False,
    )
    task = bar.add_task(label, total=total)

    def poll() -> None:
        with bar:
            while not stop.wait(0.2):
                done = sum(_completed(tracker, s) for s in tracker.getActiveStageIds())
                bar.update(task, completed=min(done, total))
            bar.update(task, completed=total)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()

    def finish() -> None:
        stop.set()
        thread.join()

    return finish


def _completed(tracker: StatusTracker, stage: int) -> int:
    info = tracker.getStageInfo(stage)
    return int(info.numCompletedTasks) if info is not None else 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:400]


@contextlib.contextmanager
def spark_errors(what: str) -> Iterator[None]:
    """Turn a Spark or py4j failure into a ``PipelineError`` saying ``what`` failed and
    the first line of Spark's message (the JVM stack trace stays on ``__cause__``)."""
    try:
        yield
    except PipelineError:
        raise
    except Exception as exc:
        module = type(exc).__module__
        if module.startswith(("pyspark", "py4j")):
            raise PipelineError(f"{what}: {_first_line(exc)}") from exc
        raise
