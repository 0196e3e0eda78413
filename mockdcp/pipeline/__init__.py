"""The data pipeline: Faker corpora, loading them, the oracle, and verification.

Spark (PySpark, ``local[*]`` unless a master is given) makes corpora and oracles and
verifies a consumer's output; serving a corpus needs only pyarrow. Heavy modules load
when a name below is first used.

Corpus (``mockdcp corpus``; Parquet, one file per logical partition, plus the manifest
``_mockdcp.json`` with ``"format": "mockdcp-corpus", "version": 1``). One row per write,
in history order within a file; all rows of a key are in one file:

==========  ======  ============================================================
partition   int32   logical partition (Faker and numpy are seeded with it)
offset      int64   the row's place in its partition's history
scope       string  scope name (``_default`` unless ``--collections``)
collection  string  collection name
key         string  document key, unique to its partition
op          string  ``insert``, ``update``, ``delete`` or ``expire``
value       binary  the JSON document (null for delete and expire)
datatype    int32   1 (JSON) for writes, 0 otherwise
flags       int64   0x02000006 (a Couchbase SDK's JSON flags) for writes
expiry      int64   absolute expiry (seconds since the epoch) or 0
rev         int64   the key's revision: 1 for its insert, +1 per later row
==========  ======  ============================================================

Oracle (``mockdcp oracle``, ``GET /mock/oracle``, ``oracle_rows(bucket)``; Parquet plus
``_mockdcp.json`` with ``"format": "mockdcp-oracle", "version": 1``). One row per live
document, sorted by (scope, collection, key):

==========  ======  ============================================================
scope       string  scope name
collection  string  collection name
key         string  document key (UTF-8)
value       binary  the document's value
datatype    int32   its datatype bits (1 JSON, 2 Snappy, 4 xattr)
flags       int64   its flags
expiry      int64   its expiry (0: none)
rev         int64   its rev seqno (revision)
seqno       int64   its by-seqno in its vbucket (null from a corpus)
vbucket     int32   its vbucket (null from a corpus)
cas         int64   its CAS as a signed 64-bit integer (null from a corpus)
==========  ======  ============================================================

In JSON (``GET /mock/oracle``) the body is ``{"rows": [row, ...]}`` with the same fields;
``value`` is the value as UTF-8 text, or, for a value that is not UTF-8, the field
``value_base64`` instead (``oracle_json(bucket)`` makes that body).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.data import PipelineError as PipelineError
from mockdcp.util import lazy_getattr

if TYPE_CHECKING:
    from mockdcp.data import (
        LoadReport as LoadReport,
        collection_id as collection_id,
        load_corpus as load_corpus,
        load_corpus_sync as load_corpus_sync,
        open_corpus as open_corpus,
    )
    from mockdcp.pipeline._corpus import (
        CorpusReport as CorpusReport,
        CorpusSpec as CorpusSpec,
        generate_partition as generate_partition,
        make_corpus as make_corpus,
        parse_collections as parse_collections,
    )
    from mockdcp.pipeline._local_verify import (
        read_output as read_output,
        verify_rows as verify_rows,
    )
    from mockdcp.pipeline._oracle import (
        oracle_body as oracle_body,
        oracle_from_corpus as oracle_from_corpus,
        oracle_from_json as oracle_from_json,
        oracle_from_scenario as oracle_from_scenario,
        oracle_from_url as oracle_from_url,
        oracle_json as oracle_json,
        oracle_rows as oracle_rows,
        read_oracle as read_oracle,
        write_oracle as write_oracle,
    )
    from mockdcp.pipeline._spark import (
        spark_errors as spark_errors,
        spark_session as spark_session,
    )
    from mockdcp.pipeline._verify import (
        Columns as Columns,
        VerifyReport as VerifyReport,
        verify as verify,
    )

_NAMES = {
    "CorpusReport": "_corpus",
    "CorpusSpec": "_corpus",
    "generate_partition": "_corpus",
    "make_corpus": "_corpus",
    "parse_collections": "_corpus",
    "oracle_body": "_oracle",
    "oracle_from_corpus": "_oracle",
    "oracle_from_json": "_oracle",
    "oracle_from_scenario": "_oracle",
    "oracle_from_url": "_oracle",
    "oracle_json": "_oracle",
    "oracle_rows": "_oracle",
    "read_oracle": "_oracle",
    "write_oracle": "_oracle",
    "Columns": "_verify",
    "VerifyReport": "_verify",
    "verify": "_verify",
    "read_output": "_local_verify",
    "verify_rows": "_local_verify",
    "spark_errors": "_spark",
    "spark_session": "_spark",
}

#: corpus loading lives below, in ``mockdcp.data``; re-exported here for the pipeline's users
_DATA = ("LoadReport", "collection_id", "load_corpus", "load_corpus_sync", "open_corpus")

__all__ = ["PipelineError", *_NAMES, *_DATA]

_lazy = lazy_getattr(__name__, _NAMES, globals())


def __getattr__(name: str) -> object:
    if name in _DATA:
        import mockdcp.data

        value = getattr(mockdcp.data, name)
        globals()[name] = value
        return value
    return _lazy(name)
