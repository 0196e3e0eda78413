"""Named anomalies, as Jepsen names them, from what judged one schedule's run: the
oracle (the consumer's ``$MOCKDCP_OUTPUT`` against the final state), the protocol
checker (its rules, ``mockdcp.producer``'s checker), liveness (a wait for the consumer's
progress that timed out, the schedule's time limit) and the consumer process itself.

``anomalies(result)`` reads a ``mockdcp check`` scenario result as a dictionary
(``ScenarioResult.as_dict()``), so this stays below the command layer. Each anomaly has
a witness: the vbucket, keys and seqnos that show it, and the frames (the evidence lines
around it). An error of mockdcp's own (a server exception, a step the server could not
apply) is ``server error``: a bug of ours, never the consumer's.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import attrs

from mockdcp.scenario import STEPS_BY_NAME


class Anomaly(enum.StrEnum):
    """What a run found wrong, causes before their consequences: a failing run is filed
    under the first it shows (a stream never re-opened before the writes it then lost)."""

    SERVER_ERROR = "server error"
    CONSUMER_EXIT = "consumer exit"
    ROLLBACK_IGNORED = "rollback ignored"
    BAD_RESUME = "bad resume"
    VBUCKET_ABANDONED = "vbucket abandoned"
    STUCK = "stuck"
    PROTOCOL = "protocol violation"
    LOST_WRITE = "lost write"
    PHANTOM = "phantom"
    STALE_VALUE = "stale value"


#: protocol checker rule (or its prefix) -> anomaly
RULES: dict[str, Anomaly] = {
    "resume.": Anomaly.BAD_RESUME,
    "rollback.ignored": Anomaly.ROLLBACK_IGNORED,
    "stream_end.not_reopened": Anomaly.VBUCKET_ABANDONED,
    "flow.stall": Anomaly.STUCK,
}
#: expectation (the start of its report name, ``ExpectationCheck.name``) -> anomaly
EXPECTATIONS: dict[str, Anomaly] = {
    "rollback of": Anomaly.ROLLBACK_IGNORED,
    "resume of": Anomaly.BAD_RESUME,
    "reconnected": Anomaly.VBUCKET_ABANDONED,
}
#: evidence lines kept in a witness
FRAMES = 12


@attrs.frozen
class Finding:
    """One anomaly of one run, and its witness."""

    anomaly: Anomaly
    #: one line: what shows it
    detail: str
    vbucket: int | None = None
    keys: tuple[str, ...] = ()
    seqnos: tuple[int, ...] = ()
    #: the evidence lines (requests and frames) around it
    frames: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "anomaly": str(self.anomaly)}


def _rule_anomaly(rule: str) -> Anomaly:
    for prefix, anomaly in RULES.items():
        if rule == prefix or (prefix.endswith(".") and rule.startswith(prefix)):
            return anomaly
    return Anomaly.PROTOCOL


_VB_SEQNO = re.compile(r"vb (\d+) seqno (\d+)")


def anomalies(result: dict[str, Any]) -> list[Finding]:
    """Every anomaly a ``check`` result shows (none for a pass)."""
    if result["verdict"] != "fail":
        return []
    frames = tuple(result.get("evidence", [])[-FRAMES:])
    found: list[Finding] = []
    reason = result["reason"]
    if reason.startswith("mockdcp error:"):
        return [Finding(Anomaly.SERVER_ERROR, reason, frames=frames)]
    step = reason.split(":")[0]
    if step in STEPS_BY_NAME and not step.startswith("wait"):
        # a step the server could not apply: the schedule was checked whole, so ours
        return [Finding(Anomaly.SERVER_ERROR, f"a step failed: {reason}", frames=frames)]
    if reason.startswith(("the consumer never connected", "the consumer never opened")):
        found.append(Finding(Anomaly.STUCK, reason.split(" (+")[0], frames=frames))
    elif reason.startswith("the consumer"):
        found.append(Finding(Anomaly.CONSUMER_EXIT, reason.split(" (+")[0], frames=frames))
    elif reason.startswith("the scenario did not finish"):
        found.append(Finding(Anomaly.STUCK, reason.split(" (+")[0], frames=frames))
    for v in result.get("violations", []):
        vb = v.get("vbucket")
        found.append(
            Finding(
                _rule_anomaly(v["rule"]),
                f"{v['rule']}: {v['message']}",
                vbucket=vb,
                frames=(*frames[-FRAMES // 2 :], str(v.get("summary", ""))),
            )
        )
    for e in result.get("expectations", []):
        if not e["passed"]:
            if e["name"] == "no protocol violations":
                continue  # the checker's violations are reported one by one above
            kind = next(
                (a for start, a in EXPECTATIONS.items() if e["name"].startswith(start)),
                Anomaly.PROTOCOL,
            )
            found.append(Finding(kind, f"{e['name']}: {e['detail']}", frames=frames))
    failure = _step_failure(reason)
    if failure is not None:
        found.append(attrs.evolve(failure, frames=frames))
    found += _output(result.get("verification"), frames)
    return _dedup(found)


def _step_failure(reason: str) -> Finding | None:
    """A wait that timed out (liveness), or a step the server could not apply (ours)."""
    if "wait timed out" not in reason:
        return None
    text = reason.split(" (+")[0]
    pairs = _VB_SEQNO.findall(text)
    vb = int(pairs[0][0]) if pairs else None
    seqnos = tuple(int(s) for _, s in pairs)
    connected = re.search(r"connections (\d+)", text)
    # connected, and vbuckets never brought up to date: abandoned; else stuck
    alive = connected is not None and int(connected.group(1)) > 0
    anomaly = Anomaly.VBUCKET_ABANDONED if alive and pairs else Anomaly.STUCK
    return Finding(anomaly, text, vbucket=vb, seqnos=seqnos)


def _output(ver: dict[str, Any] | None, frames: tuple[str, ...]) -> list[Finding]:
    """The oracle's verdict on what the consumer holds."""
    if not ver:
        return []
    kinds = (
        ("missing", Anomaly.LOST_WRITE),
        ("phantom", Anomaly.PHANTOM),
        ("stale", Anomaly.STALE_VALUE),
        ("wrong_value", Anomaly.STALE_VALUE),
        ("duplicates", Anomaly.STALE_VALUE),
    )
    out = []
    for field, anomaly in kinds:
        if ver.get(field):
            examples = ver.get("examples", {}).get(field, [])
            keys = tuple(str(x.get("key")) for x in examples[:5])
            vbs = [x["vbucket"] for x in examples if isinstance(x.get("vbucket"), int)]
            seqnos = tuple(x["seqno"] for x in examples[:5] if isinstance(x.get("seqno"), int))
            detail = f"{ver[field]} {field.replace('_', ' ')} of {ver['expected']} documents"
            out.append(
                Finding(
                    anomaly,
                    detail,
                    vbucket=vbs[0] if vbs else None,
                    keys=keys,
                    seqnos=seqnos,
                    frames=frames,
                )
            )
    return out


def _dedup(found: list[Finding]) -> list[Finding]:
    seen: set[tuple[Anomaly, str]] = set()
    out = []
    for f in found:
        if (f.anomaly, f.detail) not in seen:
            seen.add((f.anomaly, f.detail))
            out.append(f)
    order = list(Anomaly)
    return sorted(out, key=lambda f: order.index(f.anomaly))


def headline(findings: list[Finding]) -> Anomaly | None:
    """The anomaly a failing run is filed under (the most telling)."""
    return findings[0].anomaly if findings else None


__all__ = ["EXPECTATIONS", "RULES", "Anomaly", "Finding", "anomalies", "headline"]
