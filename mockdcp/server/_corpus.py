"""A Parquet corpus as the bucket's data: ``serve(corpus=..., on_disk=...)``, which
``mockdcp serve --corpus DIR [--on-disk]``, ``mockdcp.Server`` and the pytest plugin's
``mockdcp`` marker all reach.

The corpus is checked before the server starts (every file's footer and columns, the
manifest's rows: a bad corpus is an error naming the file and column, never a
half-loaded server), loaded while connections wait (in memory, or ``on_disk`` as the
bucket's disk from its import's files), and watched while served: the corpus is
read-only to mockdcp, and a file changed, added or removed is logged once and listed in
``GET /mock/state``'s ``corpus.changed``.

What it reports goes to the ``mockdcp.corpus`` logger (``mockdcp serve`` prints it on
stderr): the load's counts, the import's progress, changes.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from mockdcp.server._serve import MockDcpServer

    #: a corpus's files (name, size, modification time), as ``corpus_fingerprint``
    Fingerprint = list[tuple[str, int, int]]

log = logging.getLogger("mockdcp.corpus")

#: seconds between two checks that the served corpus's files are unchanged
CORPUS_CHECK_INTERVAL = 3.0


def check_corpus_files(corpus: str | os.PathLike[str]) -> Fingerprint:
    """Check the corpus before anything starts; its fingerprint, which later checks
    compare with. Raises ``PipelineError`` naming the file and column at fault."""
    from mockdcp.data import check_corpus, corpus_fingerprint, open_corpus, require_pipeline

    require_pipeline(spark=False)
    path = os.fspath(corpus)
    open_corpus(path)
    check_corpus(path)  # every file's footer and columns, the manifest's rows
    return corpus_fingerprint(path)


async def load_corpus_into(
    server: MockDcpServer, corpus: str | os.PathLike[str], *, on_disk: bool
) -> None:
    """Load the corpus while connections wait (ready means ready): into memory, or as
    the bucket's disk (importing it once into the cache when the cache lacks it, in a
    worker thread). ``server.corpus`` then describes it."""
    path = os.fspath(corpus)
    server.hold()
    try:
        if on_disk:
            await _load_on_disk(server, path)
        else:
            await _load_in_memory(server, path)
    finally:
        server.release()


async def _load_in_memory(server: MockDcpServer, corpus: str) -> None:
    from mockdcp.data import load_corpus

    report = await load_corpus(server.bucket, corpus)
    log.info(
        "mockdcp loaded %d rows (%d writes, %d deletes, %d expiries) from %s",
        report.rows,
        report.written,
        report.deleted,
        report.expired,
        corpus,
    )
    server.corpus = {"path": corpus, "on_disk": False, "rows": report.rows, "changed": []}


async def _load_on_disk(server: MockDcpServer, corpus: str) -> None:
    from mockdcp.data import prepare_on_disk

    prepared = prepare_on_disk(server.bucket, corpus)
    if not prepared.ready:
        await trio.to_thread.run_sync(prepared.run_import, log.info)
    report = prepared.install(server.bucket)
    how = "imported" if report.imported else "reused"
    log.info(
        "mockdcp on disk: %d documents from %s (%s %s) in %.1f s",
        report.documents,
        corpus,
        how,
        report.directory,
        report.seconds,
    )
    server.corpus = {
        "path": corpus,
        "on_disk": True,
        "cache": str(report.directory),
        "documents": report.documents,
        "changed": [],
    }


async def watch_corpus(
    server: MockDcpServer,
    corpus: str | os.PathLike[str],
    first: Fingerprint,
    interval: float = CORPUS_CHECK_INTERVAL,
) -> None:
    """Every ``interval`` seconds, compare the corpus's files (names, sizes, times) with
    ``first``, those before the load: a change is logged once (a warning);
    ``GET /mock/state``'s ``corpus.changed`` lists the changes of the last check (what
    the server serves is what it read at start)."""
    from mockdcp.data import PipelineError, corpus_fingerprint, fingerprint_changes

    path = os.fspath(corpus)
    assert server.corpus is not None, "the corpus is loaded (load_corpus_into) first"
    reported: set[str] = set()
    while True:
        await trio.sleep(interval)
        try:
            now = await trio.to_thread.run_sync(corpus_fingerprint, path)
        except PipelineError as exc:
            changes = [str(exc)]
        else:
            changes = fingerprint_changes(first, now)
        server.corpus["changed"] = changes
        new = [c for c in changes if c not in reported]
        if new:
            reported.update(new)
            log.warning(
                "mockdcp: the corpus %s changed on disk since start (%s); still serving "
                "what was read at start",
                path,
                "; ".join(new),
            )
