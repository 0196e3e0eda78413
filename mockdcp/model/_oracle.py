"""The oracle: what a correct consumer must hold once it has caught up, in two views.

As a mapping, (collection id, key bytes) → the newest live ``Item`` (documents of dropped
collections and system events are not there). As rows, one per document sorted by
(scope, collection, key), with the columns of the pipeline's oracle schema: ``scope``,
``collection``, ``key`` (UTF-8 text), ``value``, ``datatype``, ``flags``, ``expiry``,
``rev`` (the item's rev seqno), ``seqno``, ``vbucket`` and ``cas`` (as a signed 64-bit
integer, as Parquet keeps it). ``server.oracle()``, ``GET /mock/oracle`` (``to_json``),
``mockdcp oracle --url`` and the pipeline's ``oracle_rows`` all read this one object.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mockdcp.model._item import Item

Key = tuple[int, bytes]


class Oracle(Mapping[Key, "Item"]):
    """The live documents of a bucket, keyed by (collection id, key), with ``rows()``.

    ``names`` gives each collection id its (scope, collection) names; an id it lacks is
    reported as scope ``_unknown`` and the id in hex rather than dropped.
    """

    __slots__ = ("_items", "_names")

    def __init__(self, items: dict[Key, Item], names: Mapping[int, tuple[str, str]]) -> None:
        self._items = items
        self._names = names

    def __getitem__(self, key: Key) -> Item:
        return self._items[key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Oracle({self._items!r})"

    def collection_name(self, cid: int) -> tuple[str, str]:
        """(scope, collection) of collection id ``cid``."""
        return self._names.get(cid) or ("_unknown", f"{cid:#x}")

    def rows(self) -> list[dict[str, Any]]:
        """One row per document (``value`` as bytes), sorted by (scope, collection, key)."""
        rows = []
        for (cid, key), item in self._items.items():
            scope, collection = self.collection_name(cid)
            rows.append(
                {
                    "scope": scope,
                    "collection": collection,
                    "key": key.decode("utf-8", "backslashreplace"),
                    "value": item.value,
                    "datatype": item.datatype,
                    "flags": item.flags,
                    "expiry": item.expiry,
                    "rev": item.rev_seqno,
                    "seqno": item.seqno,
                    "vbucket": item.vbucket,
                    "cas": item.cas if item.cas < 1 << 63 else item.cas - (1 << 64),
                }
            )
        rows.sort(key=lambda r: (r["scope"], r["collection"], r["key"]))
        return rows

    def to_json(self) -> dict[str, Any]:
        """The body of ``GET /mock/oracle``: ``{"rows": [row, ...]}`` (see ``json_row``)."""
        return {"rows": [json_row(row) for row in self.rows()]}


def json_row(row: dict[str, Any]) -> dict[str, Any]:
    """One oracle row for JSON: ``value`` as text when it is UTF-8, else ``value_base64``."""
    out = dict(row)
    value = out.pop("value")
    try:
        out["value"] = value.decode("utf-8")
    except UnicodeDecodeError:
        out["value_base64"] = base64.b64encode(value).decode()
    return out
