"""Checks a write's arguments pass before the model changes anything.

Every check raises ``ModelError`` naming what is wrong (for a batch: the row and the
field); none changes state. ``Bucket`` runs them for one write, ``BulkLoad`` for a batch.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from mockdcp.protocol import Datatype
from mockdcp.util import ModelError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from mockdcp.model._vbucket import VBucket

_T = TypeVar("_T")


def as_bytes(value: bytes | str, what: str) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise ModelError(f"{what} must be bytes or str, not {type(value).__name__}")


def check_u32(**fields: object) -> None:
    """``ModelError`` unless every field is an int in 0..0xffffffff."""
    for name, value in fields.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFFFFFF:
            raise ModelError(f"{name} must be an integer in 0..0xffffffff, not {value!r}")


def check_datatype(datatype: object) -> None:
    check_u32(datatype=datatype)
    assert isinstance(datatype, int)
    if datatype > 0x07:
        raise ModelError(f"datatype {datatype:#x} has unknown bits")


def check_value(value: bytes, datatype: int) -> None:
    """``ModelError`` unless ``value`` is what ``datatype`` says: Snappy (raw block
    format) when SNAPPY, starting with a well-formed xattr section when XATTR
    (docs/Document.md in kv_engine)."""
    from mockdcp.protocol import Datatype, RemoteProtocolError, split_xattrs

    body = value
    if datatype & Datatype.SNAPPY:
        import cramjam

        try:
            body = bytes(cramjam.snappy.decompress_raw(value))
        except cramjam.DecompressionError as exc:
            raise ModelError(f"datatype has SNAPPY but the value is not snappy: {exc}") from None
    if datatype & Datatype.XATTR:
        try:
            split_xattrs(body)
        except RemoteProtocolError as exc:
            raise ModelError(
                f"datatype has XATTR but the value has no xattr section: {exc}"
            ) from None


def with_xattrs(
    value: bytes, datatype: int, xattrs: Mapping[str, str | bytes] | Mapping[bytes, str | bytes]
) -> tuple[bytes, int]:
    """``value`` with an xattr section of ``xattrs`` in front (compressed again when the
    value was), and the datatype with XATTR."""
    from mockdcp.protocol import Datatype, encode_xattrs

    if datatype & Datatype.XATTR:
        raise ModelError("xattrs= and a datatype with XATTR: give the xattrs one way")
    compressed = bool(datatype & Datatype.SNAPPY)
    if compressed:
        import cramjam

        value = bytes(cramjam.snappy.decompress_raw(value))
    try:
        value = encode_xattrs(list(xattrs.items()), value)
    except (ValueError, TypeError) as exc:
        raise ModelError(f"bad xattrs: {exc}") from None
    if compressed:
        value = bytes(cramjam.snappy.compress_raw(value))
    return value, datatype | Datatype.XATTR


def as_bytes_column(column: Sequence[Any], field: str, what: str, offset: int = 0) -> list[bytes]:
    """``column`` as a list of bytes (``as_bytes`` a row), or ``ModelError`` naming
    the first bad row (``offset`` + its index). One pass in C when every row is bytes
    already."""
    if set(map(type, column)) <= {bytes}:
        return column if type(column) is list else list(column)
    return [
        v if type(v) is bytes else in_row(i, field, as_bytes, v, what)
        for i, v in enumerate(column, offset)
    ]


def column_of(value: Sequence[Any] | int, count: int, name: str) -> Sequence[Any]:
    """One value per row: a sequence of ``count``, or one int for every row."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * count
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ModelError(f"{name} must be an int or a sequence of ints")
    if len(value) != count:
        raise ModelError(f"{name} has {len(value)} entries for {count} keys")
    return value


def guess_datatype(value: bytes) -> int:
    """JSON when the value parses as a JSON document, else RAW."""
    try:
        json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return Datatype.RAW
    return Datatype.JSON


def in_row(index: int, field: str, check: Callable[..., _T], *args: object) -> _T:
    """``check(*args)``, its ``ModelError`` naming the row and the field."""
    try:
        return check(*args)
    except ModelError as exc:
        raise ModelError(f"row {index}: {field}: {exc}") from None


def check_column(name: str, column: Sequence[int], top: int = 0xFFFFFFFF) -> None:
    """``ModelError`` naming the first row whose ``name`` is not an int in 0..top."""
    for i, value in enumerate(column):
        if type(value) is int and name == "datatype" and value > top:
            raise ModelError(f"row {i}: datatype {value:#x} has unknown bits")
        if type(value) is not int or not 0 <= value <= top:
            raise ModelError(f"row {i}: {name} must be an integer in 0..{top:#x}, not {value!r}")


# -- a batch (``Bucket.set_many``) ---------------------------------------------------------

#: a validated row of a batch: key, collection, value, datatype, flags, expiry, CAS
Row = tuple[bytes, int, bytes, int, int, int, int]


@attrs.frozen
class Columns:
    """A batch whose columns passed ``check_columns``: one entry per row in each, the
    datatypes None (each guessed), one int, or one per row (None: guessed)."""

    keys: Sequence[bytes]
    values: Sequence[bytes]
    collection_ids: Sequence[int]
    #: the batch's collections, each checked once
    collections: frozenset[int]
    flags: Sequence[int]
    expiry: Sequence[int]
    datatypes: Sequence[int | None] | int | None

    def __len__(self) -> int:
        return len(self.keys)


def check_columns(
    keys: Sequence[bytes],
    values: Sequence[bytes],
    *,
    collection_ids: Sequence[int] | None,
    flags: Sequence[int] | int,
    expiry: Sequence[int] | int,
    datatypes: Sequence[int | None] | int | None,
    check_collection: Callable[[int], object],
) -> Columns:
    """The batch's columns, or ``ModelError`` for a column of the wrong length, a bad
    flag, expiry or datatype (naming the row), or an unknown collection (naming the first
    row that uses it). The rows' keys and values are checked later, a step at a time
    (``check_rows``)."""
    count = len(keys)
    if len(values) != count:
        raise ModelError(f"values has {len(values)} entries for {count} keys")
    columns = {
        "collection_id": 0 if collection_ids is None else collection_ids,
        "flags": flags,
        "expiry": expiry,
        "datatype": 0 if datatypes is None else datatypes,
    }
    for name, column in columns.items():  # one value for every row: checked once
        top = 0x07 if name == "datatype" else 0xFFFFFFFF
        if isinstance(column, int) and not isinstance(column, bool):
            if name == "datatype" and column > top:
                raise ModelError(f"datatype {column:#x} has unknown bits")
            if not 0 <= column <= top:
                raise ModelError(f"{name} must be an integer in 0..{top:#x}, not {column}")
        elif name == "datatype":  # None in a row: guessed, as ``set`` does
            check_column(name, [d for d in column_of(column, count, name) if d is not None], top)
        else:
            check_column(name, column_of(column, count, name), top)
    cids = column_of(columns["collection_id"], count, "collection_ids")
    # the collections the rows use (none for no rows)
    cid_set = frozenset(cids) if collection_ids is not None or not count else frozenset({0})
    for cid in cid_set:  # each collection checked once, the first row using it named
        in_row(cids.index(cid), "collection_id", check_collection, cid)
    dts: Sequence[int | None] | int | None = datatypes
    if datatypes is not None and not isinstance(datatypes, int):
        dts = column_of(datatypes, count, "datatypes")
    return Columns(
        keys,
        values,
        cids,
        cid_set,
        column_of(flags, count, "flags"),
        column_of(expiry, count, "expiry"),
        dts,
    )


def vbucket_ids(keys: Sequence[bytes], vbuckets: int) -> NDArray[np.int64]:
    """``vbucket_of`` of each key: CRC32 a key in C (``map``), the rest with numpy (a
    call a row was a sixth of a batch's validation)."""
    import numpy as np

    crcs = np.fromiter(map(zlib.crc32, keys), np.int64, len(keys))
    out: NDArray[np.int64] = ((crcs >> 16) & 0x7FFF) % vbuckets
    return out


def check_rows(
    keys: Sequence[bytes],
    values: Sequence[bytes],
    datatypes: Sequence[int | None] | int | None,
    vbuckets: Sequence[VBucket],
    offset: int = 0,
) -> tuple[list[bytes], list[bytes], Sequence[int], list[int]]:
    """The keys, values and datatypes as stored and each row's vbucket id (of
    ``vbuckets``, which must be active), or ``ModelError`` naming the first bad row
    (``offset`` + its index) and field."""
    ks = as_bytes_column(keys, "key", "a key", offset)
    vs = as_bytes_column(values, "value", "a value", offset)
    lengths = set(map(len, ks))
    if min(lengths, default=1) < 1 or max(lengths, default=1) > 250:
        for i, k in enumerate(ks, offset):
            if not 1 <= len(k) <= 250:
                raise ModelError(f"row {i}: key: a key has 1..250 bytes, not {len(k)}")
    dts: Sequence[int]
    if datatypes is None:
        dts = [guess_datatype(v) for v in vs]
    elif isinstance(datatypes, int):  # checked once by ``check_columns``
        dts = [datatypes] * len(vs)
        if datatypes & 0x06:
            for i, v in enumerate(vs, offset):
                in_row(i, "value", check_value, v, datatypes)
    else:
        dts = [guess_datatype(v) if d is None else d for v, d in zip(vs, datatypes, strict=True)]
        for i, (v, dt) in enumerate(zip(vs, dts, strict=True), offset):
            if dt & 0x06:
                in_row(i, "value", check_value, v, dt)
    vbids = vbucket_ids(ks, len(vbuckets)).tolist()
    for vbid in set(vbids):
        try:
            vbuckets[vbid].check_writable()
        except ModelError as exc:
            raise ModelError(f"row {offset + vbids.index(vbid)}: key: {exc}") from None
    return ks, vs, dts, vbids
