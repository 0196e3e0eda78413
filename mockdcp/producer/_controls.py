"""DCP_CONTROL: which keys a current producer accepts, with which statuses.

Source: producer.md §2 (kv_engine ``DcpProducer::control``). Any key not in the table is
EINVAL; a listed key with a value the server does not recognise is EINVAL unless the rule
says otherwise. ``DcpSettings`` holds what a connection negotiated; ``apply_control`` is
the one function that changes it.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from mockdcp.protocol import DcpOpenFlag, Status

#: producer.md §7: noop interval default until ``set_noop_interval``.
DEFAULT_NOOP_INTERVAL = 20.0
#: Smallest interval accepted (the connection manager's tick, 0.1 s).
MIN_NOOP_INTERVAL = 0.1


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

    @property
    def delete_times(self) -> bool:
        return bool(self.open_flags & DcpOpenFlag.INCLUDE_DELETE_TIMES)


_Rule = Callable[[DcpSettings, str], Status]


def _enable_noop(s: DcpSettings, v: str) -> Status:
    s.noop_enabled = v == "true"  # anything else: success, noop off
    return Status.SUCCESS


def _set_noop_interval(s: DcpSettings, v: str) -> Status:
    try:
        interval = float(v)
    except ValueError:
        return Status.EINVAL
    if not interval >= MIN_NOOP_INTERVAL:  # also rejects NaN
        return Status.EINVAL
    s.noop_interval = interval
    return Status.SUCCESS


def _connection_buffer_size(s: DcpSettings, v: str) -> Status:
    if not v.isdigit() or int(v) > 0xFFFFFFFF:
        return Status.EINVAL
    s.buffer_size = int(v)
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
    if v != "true":
        return Status.EINVAL
    if s.stream_ids:
        return Status.NOT_SUPPORTED
    s.sync_writes = True
    return Status.SUCCESS


def _consumer_name(s: DcpSettings, v: str) -> Status:
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
    # The mock models a couchstore bucket, which cannot retain history.
    return Status.NOT_SUPPORTED if v == "true" else Status.EINVAL


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
    "cache_transfer": _accept,
}


def apply_control(settings: DcpSettings, key: str, value: str) -> Status:
    """Apply one DCP_CONTROL; return the status a current producer answers.

    Source: producer.md §2. Unknown keys are EINVAL. ``connection_buffer_size`` changes
    the window immediately (the caller resets the outstanding count when it becomes 0).
    """
    rule = CONTROL_RULES.get(key)
    if rule is None:
        return Status.EINVAL
    return rule(settings, value)
