"""What a bucket is declared as: its name, its type and ns_server's settings of it.

``--bucket NAME[:TYPE]``, ``serve(buckets=...)``, the ``create_bucket`` step and ns_server's
``POST /pools/default/buckets`` all make a ``BucketSpec``; the names and values a node
refuses are refused here, by name, before anything is made. The rules are ns_server's
(``apps/ns_server/src/menelaus_web_buckets.erl``: ``validate_bucket_name``, a name of at
most ``MAX_BUCKET_NAME_LEN`` characters from ``ns_bucket:is_valid_bucket_name``;
``parse_validate_ram_quota`` and the 100 MiB ``membase_min_ram_quota``;
``parse_validate_replicas_number``). Pure.
"""

from __future__ import annotations

import enum

import attrs

from mockdcp.util import ModelError

#: menelaus_web_buckets.erl ``-define(MAX_BUCKET_NAME_LEN, 100)``
MAX_BUCKET_NAME_LEN = 100
#: ns_server's ``membase_min_ram_quota`` (MiB): a smaller ``ramQuota`` is refused
MIN_RAM_QUOTA_MB = 100
#: the quota a bucket made without one reports (MiB; ns_server's UI default)
DEFAULT_RAM_QUOTA_MB = 100
#: menelaus_web_buckets.erl ``?MAX_NUM_REPLICAS``
MAX_NUM_REPLICAS = 3
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%-")


class BucketType(enum.Enum):
    """The kinds of bucket a node serves over DCP (ns_server's ``bucketType`` form
    field; ``membase`` is the older spelling of ``couchbase``)."""

    COUCHBASE = "couchbase"

    @classmethod
    def parse(cls, text: str) -> BucketType:
        """The type ``text`` names; ``ModelError`` naming it for one there is none of."""
        if text == "membase":
            return cls.COUCHBASE
        for kind in cls:
            if kind.value == text:
                return kind
        known = ", ".join(k.value for k in cls)
        raise ModelError(f"unknown bucket type {text!r} (known: {known})")

    @property
    def config_type(self) -> str:
        """What the bucket config and ``/pools/default/buckets`` call it."""
        return "membase"


def bucket_name_error(name: str) -> str | None:
    """Why ns_server refuses ``name`` for a new bucket (its message), or None
    (menelaus_web_buckets.erl ``validate_bucket_name``, ns_bucket.erl
    ``is_valid_bucket_name``)."""
    if name == "":
        return "Bucket name cannot be empty"
    if len(name) > MAX_BUCKET_NAME_LEN:
        return f"Bucket name cannot exceed {MAX_BUCKET_NAME_LEN} characters"
    if name.startswith("."):
        return "Bucket name cannot start with dot."
    if not set(name) <= _NAME_CHARS:
        return (
            "Bucket name can only contain characters in range A-Z, a-z, 0-9 as well as "
            "underscore, period, dash & percent. Consult the documentation."
        )
    lower = name.lower()
    if lower.startswith(("_users.couch.", "_replicator.couch.")):
        return "This name is reserved for the internal use."
    return None


@attrs.frozen(kw_only=True)
class BucketSpec:
    """One bucket as declared: its name and type, and the settings ns_server reports
    for it (``ram_quota_mb``, ``replicas``, ``flush_enabled``, ``storage``)."""

    name: str
    type: BucketType = BucketType.COUCHBASE
    ram_quota_mb: int = DEFAULT_RAM_QUOTA_MB
    replicas: int = 0
    flush_enabled: bool = False
    storage: str = "couchstore"

    def check(self) -> None:
        """``ModelError`` (ns_server's message) for a bucket a node would not make."""
        error = bucket_name_error(self.name)
        if error is not None:
            raise ModelError(error)
        if self.ram_quota_mb < MIN_RAM_QUOTA_MB:
            raise ModelError(f"RAM quota cannot be less than {MIN_RAM_QUOTA_MB} MiB")
        if not 0 <= self.replicas <= MAX_NUM_REPLICAS:
            raise ModelError(f"replicas is 0..{MAX_NUM_REPLICAS}, not {self.replicas}")
        if self.storage not in ("couchstore", "magma"):
            raise ModelError("storage backend must be couchstore or magma")

    @classmethod
    def parse(cls, text: str) -> BucketSpec:
        """``NAME[:TYPE]`` (``mockdcp serve --bucket``): ``ModelError`` for a name a node
        refuses or a type it does not know, named."""
        name, sep, kind = text.partition(":")
        if sep and not kind:
            raise ModelError(f"--bucket {text!r}: a type after the colon (NAME[:TYPE])")
        spec = cls(name=name, type=BucketType.parse(kind) if sep else BucketType.COUCHBASE)
        spec.check()
        return spec
