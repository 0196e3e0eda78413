from __future__ import annotations

import pytest

from mockdcp.producer import DcpSettings, apply_control
from mockdcp.producer._controls import parse_number
from mockdcp.protocol import DcpOpenFlag, Status


@pytest.mark.parametrize(
    ("key", "value", "status"),
    [
        ("enable_noop", "true", Status.SUCCESS),
        ("enable_noop", "nonsense", Status.SUCCESS),
        ("set_noop_interval", "180", Status.SUCCESS),
        ("set_noop_interval", "0.5", Status.SUCCESS),
        ("set_noop_interval", "0.05", Status.EINVAL),
        ("set_noop_interval", "soon", Status.EINVAL),
        ("set_noop_interval", "nan", Status.EINVAL),
        ("connection_buffer_size", "20971520", Status.SUCCESS),
        ("connection_buffer_size", "-1", Status.EINVAL),
        ("connection_buffer_size", "4294967296", Status.EINVAL),
        ("stream_buffer_size", "1024", Status.NOT_SUPPORTED),
        ("set_priority", "low", Status.SUCCESS),
        ("set_priority", "urgent", Status.EINVAL),
        ("supports_cursor_dropping", "true", Status.SUCCESS),
        ("supports_hifi_MFU", "whatever", Status.SUCCESS),
        ("send_stream_end_on_client_close_stream", "true", Status.SUCCESS),
        ("enable_expiry_opcode", "true", Status.SUCCESS),
        ("enable_stream_id", "true", Status.SUCCESS),
        ("enable_stream_id", "yes", Status.EINVAL),
        ("enable_out_of_order_snapshots", "true_with_seqno_advanced", Status.SUCCESS),
        ("enable_out_of_order_snapshots", "false", Status.EINVAL),
        ("include_deleted_user_xattrs", "true", Status.EINVAL),
        ("v7_dcp_status_codes", "true", Status.SUCCESS),
        ("flatbuffers_system_events", "false", Status.EINVAL),
        ("change_streams", "true", Status.NOT_SUPPORTED),
        ("max_marker_version", "2.2", Status.NOT_SUPPORTED),
        ("max_marker_version", "2.0", Status.EINVAL),
        ("backfill_order", "sequential", Status.SUCCESS),
        ("backfill_order", "random", Status.EINVAL),
        ("force_value_compression", "true", Status.EINVAL),
        ("cache_transfer", "true", Status.EINVAL),  # newer than 8.0
        ("no_such_control", "true", Status.EINVAL),
    ],
)
def test_control_answers_as_a_current_producer(key: str, value: str, status: Status) -> None:
    assert apply_control(DcpSettings(), key, value) == status


def test_enable_noop_with_other_value_turns_noop_off() -> None:
    s = DcpSettings(noop_enabled=True)
    apply_control(s, "enable_noop", "false")
    assert not s.noop_enabled


def test_noop_interval_is_a_float_in_seconds() -> None:
    s = DcpSettings()
    apply_control(s, "set_noop_interval", "0.5")
    assert s.noop_interval == 0.5


def test_stream_end_on_close_cannot_be_turned_off() -> None:
    s = DcpSettings()
    apply_control(s, "send_stream_end_on_client_close_stream", "true")
    assert apply_control(s, "send_stream_end_on_client_close_stream", "false") == Status.SUCCESS
    assert s.stream_end_on_close


def test_expiry_opcode_needs_delete_times_on_open() -> None:
    plain = DcpSettings()
    apply_control(plain, "enable_expiry_opcode", "true")
    assert not plain.expiry_opcode
    with_times = DcpSettings(open_flags=DcpOpenFlag.PRODUCER | DcpOpenFlag.INCLUDE_DELETE_TIMES)
    apply_control(with_times, "enable_expiry_opcode", "true")
    assert with_times.expiry_opcode


def test_stream_ids_and_sync_writes_exclude_each_other() -> None:
    s = DcpSettings()
    assert apply_control(s, "enable_sync_writes", "true") == Status.SUCCESS
    assert apply_control(s, "enable_stream_id", "true") == Status.NOT_SUPPORTED
    other = DcpSettings()
    assert apply_control(other, "enable_stream_id", "true") == Status.SUCCESS
    assert apply_control(other, "enable_sync_writes", "true") == Status.NOT_SUPPORTED
    assert not other.sync_writes


def test_sync_replication_needs_a_consumer_name_in_either_order() -> None:
    s = DcpSettings()
    assert apply_control(s, "enable_sync_writes", "true") == Status.SUCCESS
    assert s.sync_writes
    assert not s.sync_replication
    assert apply_control(s, "consumer_name", "") == Status.EINVAL
    assert apply_control(s, "consumer_name", "replica") == Status.SUCCESS
    assert s.sync_replication
    first = DcpSettings()
    apply_control(first, "consumer_name", "replica")
    assert not first.sync_replication
    apply_control(first, "enable_sync_writes", "true")
    assert first.sync_replication
    assert apply_control(DcpSettings(), "enable_sync_writes", "false") == Status.EINVAL


def test_max_marker_version_needs_collections() -> None:
    s = DcpSettings(collections=True)
    assert apply_control(s, "max_marker_version", "2.2") == Status.SUCCESS
    assert s.max_marker_version == "2.2"


def test_force_value_compression_needs_snappy() -> None:
    s = DcpSettings(snappy=True)
    assert apply_control(s, "force_value_compression", "true") == Status.SUCCESS
    assert s.force_compression


def test_include_deleted_user_xattrs_needs_the_open_flag() -> None:
    s = DcpSettings(
        open_flags=DcpOpenFlag.PRODUCER
        | DcpOpenFlag.INCLUDE_XATTRS
        | DcpOpenFlag.INCLUDE_DELETED_USER_XATTRS
    )
    assert apply_control(s, "include_deleted_user_xattrs", "true") == Status.SUCCESS


class TestParseNumber:
    @pytest.mark.parametrize(
        "text",
        ["", "²", "٣", "1_0", "1e309", "inf", "+1", "-1", " 1", "1 ", "0x10", "1.", ".5", "1" * 21],
    )
    def test_anything_but_ascii_digits_is_no_number(self, text: str) -> None:
        assert parse_number(text, 0, float("inf"), fraction=True) is None

    def test_fraction_only_where_the_control_allows_it(self) -> None:
        assert parse_number("2.5", 0, 10) is None
        assert parse_number("2.5", 0, 10, fraction=True) == 2.5

    @pytest.mark.parametrize(("text", "number"), [("0", 0), ("007", 7), ("4294967295", 2**32 - 1)])
    def test_integers_in_range_are_ints(self, text: str, number: int) -> None:
        got = parse_number(text, 0, 0xFFFFFFFF)
        assert got == number
        assert isinstance(got, int)

    @pytest.mark.parametrize("text", ["4294967296", "99999999999999999999"])
    def test_beyond_the_range_is_no_number(self, text: str) -> None:
        assert parse_number(text, 0, 0xFFFFFFFF) is None
