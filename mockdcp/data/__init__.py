"""The data a server holds: Faker's value pools (``_faker``, the one place Faker is
drawn from, for these documents and the pipeline's corpora), the seeded documents of
``mockdcp serve --docs`` and the ``generate`` step (``_dataset``), and Parquet corpora
read into a bucket (``_load``; the corpus and oracle schemas in ``_schema``). Below
``mockdcp.scenario`` and ``mockdcp.server``, which load data through it; the Spark jobs
that make corpora are in ``mockdcp.pipeline``, above. pyarrow, numpy and Faker load on
first use of a name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.data._errors import (
    PipelineError as PipelineError,
    require_pipeline as require_pipeline,
)
from mockdcp.util import lazy_getattr

if TYPE_CHECKING:
    from mockdcp.data._cache import cache_root as cache_root
    from mockdcp.data._dataset import (
        JSON as JSON,
        LOAD_BATCH as LOAD_BATCH,
        STEP_ROWS as STEP_ROWS,
        WORKER_MIN as WORKER_MIN,
        DocumentGenerator as DocumentGenerator,
        LoadPhases as LoadPhases,
        Workers as Workers,
        document_chunks as document_chunks,
        early_worker as early_worker,
        faker_documents as faker_documents,
        load_documents as load_documents,
        persist_all as persist_all,
    )
    from mockdcp.data._faker import (
        cached_pools as cached_pools,
        draw_pools as draw_pools,
        seeded_faker as seeded_faker,
    )
    from mockdcp.data._load import (
        LoadReport as LoadReport,
        collection_id as collection_id,
        load_corpus as load_corpus,
        load_corpus_sync as load_corpus_sync,
        open_corpus as open_corpus,
    )
    from mockdcp.data._ondisk import (
        OnDiskReport as OnDiskReport,
        PreparedOnDisk as PreparedOnDisk,
        check_corpus as check_corpus,
        corpus_fingerprint as corpus_fingerprint,
        fingerprint_changes as fingerprint_changes,
        load_on_disk as load_on_disk,
        prepare_on_disk as prepare_on_disk,
    )
    from mockdcp.data._schema import (
        CORPUS_COLUMNS as CORPUS_COLUMNS,
        CORPUS_FORMAT as CORPUS_FORMAT,
        CORPUS_VERSION as CORPUS_VERSION,
        MANIFEST as MANIFEST,
        OP_DELETE as OP_DELETE,
        OP_EXPIRE as OP_EXPIRE,
        OP_INSERT as OP_INSERT,
        OP_UPDATE as OP_UPDATE,
        ORACLE_COLUMNS as ORACLE_COLUMNS,
        ORACLE_FORMAT as ORACLE_FORMAT,
        ORACLE_VERSION as ORACLE_VERSION,
        REMOVE_OPS as REMOVE_OPS,
        WRITE_OPS as WRITE_OPS,
        arrow_schema as arrow_schema,
        check_columns as check_columns,
        open_dataset as open_dataset,
        parquet_files as parquet_files,
        read_manifest as read_manifest,
        spark_ddl as spark_ddl,
        write_manifest as write_manifest,
    )

_NAMES = {
    **dict.fromkeys(
        [
            "JSON",
            "LOAD_BATCH",
            "STEP_ROWS",
            "WORKER_MIN",
            "DocumentGenerator",
            "LoadPhases",
            "Workers",
            "document_chunks",
            "early_worker",
            "faker_documents",
            "load_documents",
            "persist_all",
        ],
        "_dataset",
    ),
    "cache_root": "_cache",
    **dict.fromkeys(["cached_pools", "draw_pools", "seeded_faker"], "_faker"),
    **dict.fromkeys(
        ["LoadReport", "collection_id", "load_corpus", "load_corpus_sync", "open_corpus"],
        "_load",
    ),
    **dict.fromkeys(
        [
            "OnDiskReport",
            "PreparedOnDisk",
            "check_corpus",
            "corpus_fingerprint",
            "fingerprint_changes",
            "load_on_disk",
            "prepare_on_disk",
        ],
        "_ondisk",
    ),
    **dict.fromkeys(
        [
            "CORPUS_COLUMNS",
            "CORPUS_FORMAT",
            "CORPUS_VERSION",
            "MANIFEST",
            "OP_DELETE",
            "OP_EXPIRE",
            "OP_INSERT",
            "OP_UPDATE",
            "ORACLE_COLUMNS",
            "ORACLE_FORMAT",
            "ORACLE_VERSION",
            "REMOVE_OPS",
            "WRITE_OPS",
            "arrow_schema",
            "check_columns",
            "open_dataset",
            "parquet_files",
            "read_manifest",
            "spark_ddl",
            "write_manifest",
        ],
        "_schema",
    ),
}

__all__ = ["PipelineError", "require_pipeline", *_NAMES]

if not TYPE_CHECKING:
    __getattr__ = lazy_getattr(__name__, _NAMES, globals())
