"""The live view of ``mockdcp serve`` (and ``mockdcp run``) on a terminal, and JSON-lines
logs for machines.

The view is drawn with rich's ``Live`` from a snapshot function: any callable returning
the dict of ``GET /mock/state`` (``MockDcpServer.state``): the connections, the streams
per state, the seqnos sent and acknowledged against the high seqno of each vbucket, and
the scenario's progress (``state["scenario"]``: the current step, the label, the
expectations met or failed so far).

``render`` is pure (a snapshot in, a rich renderable out) so it is tested by rendering a
known snapshot into a recording console; ``run_live_view`` redraws until cancelled.
rich loads with the first view, after "ready".
"""

from __future__ import annotations

import json
import logging
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from rich.console import Console, RenderableType

#: seconds between looks at the snapshot (a redraw only when it changed: drawing the
#: tables costs rich a few milliseconds on the server's event loop)
REFRESH = 1.0
#: vbucket rows the view shows (the ones furthest behind first)
VBUCKET_ROWS = 12


def wanted(stdout: IO[str], *, json_logs: bool) -> bool:
    """The view is drawn only on a terminal, and never with ``--json``."""
    try:
        return not json_logs and stdout.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


def _size(n: int) -> str:
    """Bytes for people: ``512 B``, ``1.5 KiB``, ``20.0 MiB``."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


def _connections(state: Mapping[str, Any]) -> RenderableType:
    from rich.table import Table

    table = Table(title="connections", title_justify="left", expand=False)
    for name in ("id", "name", "state", "streams", "sent", "acked", "unacked", "noops"):
        table.add_column(name, justify="left" if name in ("name", "state") else "right")
    for conn in state["connections"]:
        buffer = conn.get("buffer_size") or 0
        unacked = _size(conn["unacked_bytes"]) + (f" / {_size(buffer)}" if buffer else "")
        table.add_row(
            str(conn["conn_id"]),
            conn["name"] or "-",
            conn["state"],
            str(len(conn["streams"])),
            _size(conn["bytes_sent"]),
            _size(conn["acked_bytes"]),
            unacked,
            f"{conn['noops_answered']}/{conn['noops_sent']}",
        )
    if not state["connections"]:
        table.add_row("-", "no connection", "", "", "", "", "", "")
    return table


def _vbuckets(state: Mapping[str, Any]) -> RenderableType:
    from rich.table import Table

    vbs = state["vbuckets"]
    sent = sum(vb["sent_seqno"] or 0 for vb in vbs)
    high = sum(vb["high_seqno"] for vb in vbs)
    caught_up = sum(1 for vb in vbs if vb["sent_seqno"] == vb["high_seqno"])
    title = f"seqnos sent {sent:,} of high {high:,}: {caught_up}/{len(vbs)} vbuckets caught up"
    table = Table(title=title, title_justify="left")
    for name in ("vb", "state", "high", "persisted", "sent", "acked", "behind", "streams"):
        table.add_column(name, justify="left" if name == "state" else "right")

    def behind(vb: Mapping[str, Any]) -> int:
        return int(vb["high_seqno"]) - int(vb["sent_seqno"] or 0)

    shown = sorted(vbs, key=lambda vb: (-behind(vb), vb["vbucket"]))[:VBUCKET_ROWS]
    for vb in sorted(shown, key=lambda vb: vb["vbucket"]):
        table.add_row(
            str(vb["vbucket"]),
            vb["state"],
            str(vb["high_seqno"]),
            str(vb["persisted_seqno"]),
            "-" if vb["sent_seqno"] is None else str(vb["sent_seqno"]),
            "-" if vb.get("acked_seqno") is None else str(vb["acked_seqno"]),
            str(behind(vb)),
            str(vb["streams"]),
        )
    return table


def _scenario(state: Mapping[str, Any]) -> RenderableType | None:
    from rich.text import Text

    progress = state.get("scenario")
    if not progress:
        return None
    text = Text()
    text.append("step: ", style="bold")
    current = progress.get("current")
    if current:
        text.append(str(current))
    else:
        text.append("finished" if progress.get("finished") else "-")
    text.append(f"  ({progress.get('applied', 0)} applied)")
    if progress.get("label"):
        text.append(f"  label {progress['label']}")
    if progress.get("failure"):
        text.append(f"\nfailed: {progress['failure']}", style="red")
    for exp in progress.get("expectations") or []:
        passed = bool(exp.get("passed"))
        text.append("\nexpect ", style="bold")
        text.append(str(exp.get("name", "")))
        text.append("  met" if passed else "  failed", style="green" if passed else "red")
        if not passed and exp.get("detail"):
            text.append(f": {exp['detail']}")
    return text


def render(state: Mapping[str, Any]) -> RenderableType:
    """One frame of the view, from a ``/mock/state`` snapshot."""
    from rich.console import Group
    from rich.text import Text

    streams = state["streams"]
    head = Text()
    head.append("mockdcp ", style="bold")
    head.append(f"bucket {state['bucket']} ({len(state['vbuckets'])} vbuckets)")
    head.append(f"  kv :{state.get('kv_port')}  http :{state.get('http_port')}")
    by_state = ", ".join(f"{k} {v}" for k, v in streams["by_state"].items() if v) or "none"
    head.append(f"\nstreams {streams['total']}: {by_state}")
    parts: list[RenderableType] = [head, _connections(state), _vbuckets(state)]
    scenario = _scenario(state)
    if scenario is not None:
        parts.append(scenario)
    return Group(*parts)


async def run_live_view(
    snapshot: Callable[[], Mapping[str, Any]],
    *,
    console: Console | None = None,
    refresh: float = REFRESH,
) -> None:
    """Redraw ``render(snapshot())`` every ``refresh`` seconds, when it changed, until
    cancelled."""
    import trio
    from rich.live import Live

    shown = snapshot()
    with Live(render(shown), console=console, auto_refresh=False) as live:
        while True:
            await trio.sleep(refresh)
            state = snapshot()
            if state != shown:
                live.update(render(state), refresh=True)
                shown = state


class JsonLinesFormatter(logging.Formatter):
    """``--json``: each log record as one JSON object per line (time, level, logger,
    message, and the exception text when there is one)."""

    def format(self, record: logging.LogRecord) -> str:
        row: dict[str, object] = {
            "time": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            row["exception"] = self.formatException(record.exc_info)
        return json.dumps(row)


def use_json_logs() -> None:
    """Switch the root logger's handlers to JSON lines."""
    for handler in logging.getLogger().handlers:
        handler.setFormatter(JsonLinesFormatter())
