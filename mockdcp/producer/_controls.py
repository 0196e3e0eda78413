"""DCP_CONTROL: which keys a producer accepts, with which statuses.

Source: kv_engine ``DcpProducer::control`` (``engines/ep/src/dcp/producer.cc``). Any key
not in the table, or not known to the node's server version (``ServerProfile.controls``),
is EINVAL; a listed key with a value the server does not recognise is EINVAL unless the
rule says otherwise. ``DcpSettings`` holds what a connection negotiated;
``apply_control`` is the one function that changes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

from mockdcp.protocol import DEFAULT_PROFILE, DcpOpenFlag, ServerProfile, Status

#: kv_engine ``DcpProducer::defaultDcpNoopTxInterval``: noop interval default until
#: ``set_noop_interval``.
DEFAULT_NOOP_INTERVAL = 20.0
#: Smallest interval accepted (the connection manager's tick, 0.1 s).
MIN_NOOP_INTERVAL = 0.1
#: Largest: a u32 count of seconds, as the setting is kept on a node.
MAX_NOOP_INTERVAL = float(0xFFFFFFFF)
#: ``connection_buffer_size`` is a u32 byte count (kv_engine parses it with
#: ``safe_strtoul`` into a 32-bit size).
MAX_BUFFER_SIZE = 0xFFFFFFFF

#: The one spelling of a number a control value may take: ASCII digits, at most 20 of
#: them, and (where a fraction is allowed) one point and at most 9 more digits. ``[0-9]``
#: matches ASCII only (``str.isdigit`` is true for "²" and "٣", and ``int``/``float``
#: take "1_0", " 1", "+1", "1e309" and "inf"): none of those is a number here.
_DECIMAL = re.compile(r"([0-9]{1,20})(\.[0-9]{1,9})?")


def parse_number(text: str, low: float, high: float, *, fraction: bool = False) -> float | None:
    """The value of ``text`` if it is a plain decimal in ``[low, high]``, else None.

    Integers come back as ``int``; with ``fraction``, "2.5" is allowed and a float
    returned. Never raises: the length cap keeps the conversion cheap and in range.
    """
    match = _DECIMAL.fullmatch(text)
    if match is None or (match.group(2) and not fraction):
        return None
    number: float = float(text) if match.group(2) else int(text)
    return number if low <= number <= high else None


@attrs.define(slots=True)
class DcpSettings:
    """What DCP_OPEN, HELLO and DCP_CONTROL negotiated for one connection."""

    open_flags: DcpOpenFlag = attrs.field(factory=lambda: DcpOpenFlag(0))
    collections: bool = False
    snappy: bool = False
    noop_enabled: bool = False
    noop_interval: float = DEFAULT_NOOP_INTERVAL
    buffer_size: int = 0
    priority: str = "medium"
    cursor_dropping: bool = True
    stream_end_on_close: bool = False
    expiry_opcode: bool = False
    stream_ids: bool = False
    sync_writes: bool = False
    consumer_name: str = ""
    oso: str = ""
    v7_status_codes: bool = False
    flatbuffers_events: bool = False
    max_marker_version: str = "1"
    backfill_order: str = "round-robin"
    force_compression: bool = False
    include_deleted_user_xattrs: bool = False
    #: history snapshots on this connection's streams (``change_streams``)
    change_streams: bool = False
    #: the bucket's storage can retain history (Magma, whatever its retention): set by
    #: the connection before a ``change_streams`` control is applied
    history_capable: bool = False

    @property
    def sync_replication(self) -> bool:
        """Sync writes with a consumer name: kv_engine's ``SyncReplication`` level (v2.0
        markers with the max visible and high completed seqnos, seqno acks); sync writes
        alone (``SyncWrites``) send prepares, commits and aborts with v1 markers."""
        return self.sync_writes and bool(self.consumer_name)

    @property
    def delete_times(self) -> bool:
        return bool(self.open_flags & DcpOpenFlag.INCLUDE_DELETE_TIMES)


_Rule = Callable[[DcpSettings, str], Status]


def _enable_noop(s: DcpSettings, v: str) -> Status:
    s.noop_enabled = v == "true"  # anything else: success, noop off
    return Status.SUCCESS


def _set_noop_interval(s: DcpSettings, v: str) -> Status:
    interval = parse_number(v, MIN_NOOP_INTERVAL, MAX_NOOP_INTERVAL, fraction=True)
    if interval is None:
        return Status.EINVAL
    s.noop_interval = float(interval)
    return Status.SUCCESS


def _connection_buffer_size(s: DcpSettings, v: str) -> Status:
    size = parse_number(v, 0, MAX_BUFFER_SIZE)
    if size is None:
        return Status.EINVAL
    s.buffer_size = int(size)
    return Status.SUCCESS


def _set_priority(s: DcpSettings, v: str) -> Status:
    if v not in ("high", "medium", "low"):
        return Status.EINVAL
    s.priority = v
    return Status.SUCCESS


def _cursor_dropping(s: DcpSettings, v: str) -> Status:
    s.cursor_dropping = v == "true"
    return Status.SUCCESS


def _stream_end_on_close(s: DcpSettings, v: str) -> Status:
    if v == "true":  # cannot be turned off again
        s.stream_end_on_close = True
    return Status.SUCCESS


def _expiry_opcode(s: DcpSettings, v: str) -> Status:
    # Takes effect only with INCLUDE_DELETE_TIMES on DCP_OPEN; always answers success.
    s.expiry_opcode = v == "true" and s.delete_times
    return Status.SUCCESS


def _enable_stream_id(s: DcpSettings, v: str) -> Status:
    if v != "true":
        return Status.EINVAL
    if s.sync_writes:
        return Status.NOT_SUPPORTED
    s.stream_ids = True
    return Status.SUCCESS


def _enable_sync_writes(s: DcpSettings, v: str) -> Status:
    """kv_engine ``DcpProducer::control``: "true" only, NOT_SUPPORTED once stream ids
    are on (MB-32318); with ``consumer_name`` (before or after) sync replication."""
    if v != "true":
        return Status.EINVAL
    if s.stream_ids:
        return Status.NOT_SUPPORTED
    s.sync_writes = True
    return Status.SUCCESS


def _consumer_name(s: DcpSettings, v: str) -> Status:
    if not v:  # kv_engine takes a non-empty name only
        return Status.EINVAL
    s.consumer_name = v
    return Status.SUCCESS


def _oso(s: DcpSettings, v: str) -> Status:
    if v not in ("true", "true_with_seqno_advanced"):
        return Status.EINVAL
    s.oso = v
    return Status.SUCCESS


def _include_deleted_user_xattrs(s: DcpSettings, v: str) -> Status:
    if v != "true" or not s.open_flags & DcpOpenFlag.INCLUDE_DELETED_USER_XATTRS:
        return Status.EINVAL
    s.include_deleted_user_xattrs = True
    return Status.SUCCESS


def _v7_status_codes(s: DcpSettings, v: str) -> Status:
    if v != "true":
        return Status.EINVAL
    s.v7_status_codes = True
    return Status.SUCCESS


def _flatbuffers(s: DcpSettings, v: str) -> Status:
    if v != "true":
        return Status.EINVAL
    s.flatbuffers_events = True
    return Status.SUCCESS


def _change_streams(s: DcpSettings, v: str) -> Status:
    """kv_engine ``DcpProducer::control``: "true" succeeds only when the bucket's storage
    can retain history (``StorageProperties::canRetainHistory``: Magma, even with no
    retention configured; its snapshots are then plain), else NOT_SUPPORTED; "false" is
    invalid (``docs/dcp/documentation/commands/control.md``)."""
    if v != "true":
        return Status.EINVAL
    if not s.history_capable:
        return Status.NOT_SUPPORTED
    s.change_streams = True
    return Status.SUCCESS


def _max_marker_version(s: DcpSettings, v: str) -> Status:
    if v != "2.2":
        return Status.EINVAL
    if not s.collections:
        return Status.NOT_SUPPORTED
    s.max_marker_version = "2.2"
    return Status.SUCCESS


def _backfill_order(s: DcpSettings, v: str) -> Status:
    if v not in ("round-robin", "sequential"):
        return Status.EINVAL
    s.backfill_order = v
    return Status.SUCCESS


def _force_value_compression(s: DcpSettings, v: str) -> Status:
    if not s.snappy:
        return Status.EINVAL
    s.force_compression = v == "true"
    return Status.SUCCESS


def _accept(s: DcpSettings, v: str) -> Status:
    return Status.SUCCESS


def _not_supported(s: DcpSettings, v: str) -> Status:
    return Status.NOT_SUPPORTED


CONTROL_RULES: dict[str, _Rule] = {
    "enable_noop": _enable_noop,
    "set_noop_interval": _set_noop_interval,
    "connection_buffer_size": _connection_buffer_size,
    "stream_buffer_size": _not_supported,  # per-stream flow control was never implemented
    "set_priority": _set_priority,
    "supports_cursor_dropping": _cursor_dropping,
    "supports_cursor_dropping_vulcan": _cursor_dropping,
    "supports_hifi_MFU": _accept,
    "send_stream_end_on_client_close_stream": _stream_end_on_close,
    "enable_expiry_opcode": _expiry_opcode,
    "enable_stream_id": _enable_stream_id,
    "enable_sync_writes": _enable_sync_writes,
    "consumer_name": _consumer_name,
    "enable_out_of_order_snapshots": _oso,
    "include_deleted_user_xattrs": _include_deleted_user_xattrs,
    "v7_dcp_status_codes": _v7_status_codes,
    "flatbuffers_system_events": _flatbuffers,
    "change_streams": _change_streams,
    "max_marker_version": _max_marker_version,
    "backfill_order": _backfill_order,
    "force_value_compression": _force_value_compression,
}


def unknown_to_version(profile: ServerProfile, key: str, value: str) -> bool:
    """The control is one the node's release does not know: EINVAL, as for any unknown
    key (kv_engine ``DcpProducer::control`` at the release's tag falls through to
    ``invalid_arguments``): ``change_streams`` and ``flatbuffers_system_events`` before
    7.2, ``max_marker_version`` before 8.0, and OSO's ``true_with_seqno_advanced`` value
    before 7.1 (``v7.0.0`` takes only "true"). The table is ``ServerProfile.controls``."""
    if key not in profile.controls:
        return True
    return (
        key == "enable_out_of_order_snapshots"
        and value == "true_with_seqno_advanced"
        and not profile.oso_seqno_advanced
    )


def apply_control(
    settings: DcpSettings, key: str, value: str, profile: ServerProfile = DEFAULT_PROFILE
) -> Status:
    """Apply one DCP_CONTROL; return the status a producer of ``profile``'s version
    answers.

    Source: kv_engine ``DcpProducer::control``. Unknown keys are EINVAL.
    ``connection_buffer_size`` changes the window immediately (the caller resets the
    outstanding count when it becomes 0).
    """
    rule = CONTROL_RULES.get(key)
    if rule is None or unknown_to_version(profile, key, value):
        return Status.EINVAL
    return rule(settings, value)
