"""What the reference consumer holds, written for ``mockdcp check`` to verify.

``mockdcp check`` (and ``mockdcp run``) give a consumer command ``MOCKDCP_OUTPUT``: a
path where it may write what it holds. The reference consumer writes its final
documents there as JSON lines, one per live document, in the columns the pipeline's
verify reads (docs/pipeline.md): ``scope``, ``collection``, ``key``, ``value``,
``seqno``, ``rev``, ``cas``, ``vbucket``. The file is replaced whole (written beside it,
then renamed), so a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mockdcp.client._state import ConsumerState, Version


def document_rows(state: ConsumerState) -> list[dict[str, object]]:
    """One row per live document of ``state``, sorted by (scope, collection, key).

    Collections are named from the system events the streams saw; a collection id no
    stream named (a consumer without collections holds only ``_default``) is given in
    hex, as the oracle gives an id it does not know.
    """
    names = _collection_names(state)
    rows = [
        _row(names.get(cid, ("_unknown", f"{cid:#x}")), key, version)
        for (cid, key), version in state.documents().items()
    ]
    rows.sort(key=lambda r: (str(r["scope"]), str(r["collection"]), str(r["key"])))
    return rows


def _collection_names(state: ConsumerState) -> dict[int, tuple[str, str]]:
    names = {0: ("_default", "_default")}
    for view in state.manifests.values():
        for cid, info in view.collections.items():
            names[cid] = (view.scopes.get(info.scope_id, f"{info.scope_id:#x}"), info.name)
    return names


def _row(names: tuple[str, str], key: bytes, version: Version) -> dict[str, object]:
    return {
        "scope": names[0],
        "collection": names[1],
        "key": key.decode("utf-8", "backslashreplace"),
        "value": version.value.decode("utf-8", "replace"),
        "seqno": version.seqno,
        "rev": version.rev,
        "cas": version.cas if version.cas < 1 << 63 else version.cas - (1 << 64),
        "vbucket": version.vbucket,
    }


def write_documents(state: ConsumerState, path: str | os.PathLike[str]) -> int:
    """Replace ``path`` with the live documents of ``state`` as JSON lines; returns how
    many. Raises ``OSError`` when the file (or its directory) cannot be written."""
    target = Path(path)
    rows = document_rows(state)
    temporary = target.with_name(f".{target.name}.writing")
    with open(temporary, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, separators=(",", ":")) + "\n" for row in rows)
    os.replace(temporary, target)
    return len(rows)
