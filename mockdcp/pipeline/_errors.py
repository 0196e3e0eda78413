"""The pipeline's one error type (kept apart so the CLI can catch it without pyarrow)."""

from __future__ import annotations

from mockdcp._errors import MockDcpError


class PipelineError(MockDcpError, ValueError):
    """A corpus, an oracle or a consumer's output cannot be read or made: a missing or
    mistyped column, an empty directory, a corpus of another version, a Spark failure.

    The message names the file or column at fault; it is meant for the user as it is.
    """
