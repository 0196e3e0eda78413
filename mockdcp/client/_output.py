"""What the reference consumer holds, written for ``mockdcp check`` to verify.

``mockdcp check`` (and ``mockdcp run``) give a consumer command ``MOCKDCP_OUTPUT``: a
path where it may write what it holds. The reference consumer writes its final
documents there as JSON lines, one per live document, in the columns the pipeline's
verify reads (docs/pipeline.md): ``scope``, ``collection``, ``key``, ``value``,
``seqno``, ``rev``, ``cas``, ``vbucket``. The file is replaced whole (written beside it,
then renamed), so a reader never sees half of one.

They also give ``MOCKDCP_PROGRESS``: a path where a consumer may say how far that output
goes, a JSON object ``{"vbuckets": {"VB": {"uuid": U, "seqno": S}}}``: for each vbucket,
the branch (the vbucket uuid its stream request was answered with, the newest entry of
the failover log) and the seqno through which the output holds what it received. It is
written after the output it describes, so a reader that reads it first and the output
after sees an output at least that far. ``mockdcp check`` then knows the consumer has
read everything, where a matching output alone cannot tell it: a write and its deletion
leave the final documents as they were.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

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


def stream_progress(state: ConsumerState) -> dict[int, tuple[int, int]]:
    """vbucket -> (uuid, seqno): how far ``state`` holds each vbucket's stream. With
    several streams of a vbucket (stream ids, each filtered) the one least far: a
    filtered stream may never reach the vbucket's high seqno, and then the vbucket is
    not reported as read through it."""
    progress: dict[int, tuple[int, int]] = {}
    for (vb, _sid), pos in state.positions.items():
        held = progress.get(vb)
        if held is None or pos.seqno < held[1]:
            progress[vb] = (pos.uuid, pos.seqno)
    return progress


def write_progress(state: ConsumerState, path: str | os.PathLike[str]) -> None:
    """Replace ``path`` with ``stream_progress(state)`` as ``MOCKDCP_PROGRESS`` says
    (after the documents of the same state were written)."""
    vbuckets = {
        str(vb): {"uuid": uuid, "seqno": seqno}
        for vb, (uuid, seqno) in sorted(stream_progress(state).items())
    }
    _replace(Path(path), [json.dumps({"vbuckets": vbuckets}, separators=(",", ":"))])


def _replace(target: Path, lines: Iterable[str]) -> None:
    """``target`` replaced whole by ``lines``: written beside it, then renamed."""
    temporary = target.with_name(f".{target.name}.writing")
    with open(temporary, "w", encoding="utf-8") as f:
        f.writelines(lines)
    os.replace(temporary, target)


def write_documents(state: ConsumerState, path: str | os.PathLike[str]) -> int:
    """Replace ``path`` with the live documents of ``state`` as JSON lines; returns how
    many. Raises ``OSError`` when the file (or its directory) cannot be written."""
    rows = document_rows(state)
    _replace(Path(path), (json.dumps(row, separators=(",", ":")) + "\n" for row in rows))
    return len(rows)
