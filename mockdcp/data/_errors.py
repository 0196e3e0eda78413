"""The pipeline's one error type (kept apart so the CLI can catch it without pyarrow)."""

from __future__ import annotations

from mockdcp.util import MockDcpError


class PipelineError(MockDcpError, ValueError):
    """A corpus, an oracle or a consumer's output cannot be read or made: a missing or
    mistyped column, an empty directory, a corpus of another version, a Spark failure.

    The message names the file or column at fault; it is meant for the user as it is.
    """


def require_pipeline(*, spark: bool = True) -> None:
    """``PipelineError`` saying how to install them, unless pyarrow (and, with ``spark``,
    pyspark) are installed: they come with the ``pipeline`` extra, which a plain
    ``pip install mockdcp`` (the Docker image) leaves out."""
    import importlib.util

    wanted = ["pyarrow", "pyspark"] if spark else ["pyarrow"]
    missing = [name for name in wanted if importlib.util.find_spec(name) is None]
    if missing:
        raise PipelineError(
            f"{' and '.join(missing)} not installed: pip install 'mockdcp[pipeline]'"
        )
