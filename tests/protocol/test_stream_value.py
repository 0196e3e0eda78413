from __future__ import annotations

import json

import pytest

from mockdcp import RemoteProtocolError
from mockdcp.protocol import Status, StreamRequestValue
from mockdcp.protocol._stream_value import json_depth, load_json


def rejected(value: object | bytes) -> RemoteProtocolError:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    with pytest.raises(RemoteProtocolError) as info:
        StreamRequestValue.parse(raw)
    return info.value


def test_full_value_parses_every_key() -> None:
    raw = b'{"uid":"1f","sid":7,"collections":["0","8a"],"purge_seqno":"1000"}'
    assert StreamRequestValue.parse(raw) == StreamRequestValue(
        uid=0x1F, sid=7, collections=(0, 0x8A), purge_seqno=1000
    )


def test_unknown_keys_are_ignored() -> None:
    assert StreamRequestValue.parse(b'{"uid":"0","future":[1,2]}') == StreamRequestValue(uid=0)


def test_document_with_only_unknown_keys_is_rejected() -> None:
    error = rejected({"future": 1})
    assert (error.status, error.field) == (Status.EINVAL, "value")


def test_empty_object_is_rejected() -> None:
    assert rejected({}).field == "value"


@pytest.mark.parametrize("raw", [b"not json", b"[1]", b'"uid"', b"\xff"])
def test_value_that_is_not_a_json_object_is_rejected(raw: bytes) -> None:
    error = rejected(raw)
    assert (error.status, error.field) == (Status.EINVAL, "value")


def test_stream_request_with_both_collections_and_scope_is_rejected() -> None:
    error = rejected({"collections": ["8"], "scope": "0"})
    assert error.status == Status.EINVAL
    assert error.field == "scope"


@pytest.mark.parametrize("uid", [180, None, ["b4"], "xyz", ""])
def test_uid_that_is_not_a_hex_string_is_rejected(uid: object) -> None:
    error = rejected({"uid": uid})
    assert (error.status, error.field) == (Status.EINVAL, "uid")


def test_stream_request_with_sid_zero_is_rejected() -> None:
    error = rejected({"sid": 0})
    assert (error.status, error.field) == (Status.DCP_STREAMID_INVALID, "sid")
    assert error.status == 0x8D


@pytest.mark.parametrize("sid", ["71", 7.5, True, None, -1, 0x10000])
def test_sid_that_is_not_a_u16_json_integer_is_rejected(sid: object) -> None:
    error = rejected({"sid": sid})
    assert (error.status, error.field) == (Status.EINVAL, "sid")


def test_sid_at_u16_limit_is_accepted() -> None:
    assert StreamRequestValue.parse(b'{"sid":65535}').sid == 65535


@pytest.mark.parametrize("collections", ["8", {"8": 1}, 8, [8], ["zz"], ["100000000"]])
def test_collections_that_is_not_an_array_of_hex_strings_is_rejected(collections: object) -> None:
    error = rejected({"collections": collections})
    assert (error.status, error.field) == (Status.EINVAL, "collections")


def test_empty_collections_array_is_accepted() -> None:
    assert StreamRequestValue.parse(b'{"collections":[]}').collections == ()


@pytest.mark.parametrize("scope", [9, ["9"], "nine"])
def test_scope_that_is_not_a_hex_string_is_rejected(scope: object) -> None:
    error = rejected({"scope": scope})
    assert (error.status, error.field) == (Status.EINVAL, "scope")


@pytest.mark.parametrize("purge", [1000, None, "", "abc", "  ", "18446744073709551616"])
def test_purge_seqno_that_strtoull_cannot_convert_is_rejected(purge: object) -> None:
    error = rejected({"purge_seqno": purge})
    assert (error.status, error.field) == (Status.EINVAL, "purge_seqno")


@pytest.mark.parametrize(
    ("purge", "expected"),
    [
        ("0", 0),
        (" 42", 42),
        ("+7", 7),
        ("12abc", 12),
        ("-1", 2**64 - 1),
        ("18446744073709551615", 2**64 - 1),
    ],
)
def test_purge_seqno_is_read_like_strtoull(purge: str, expected: int) -> None:
    assert (
        StreamRequestValue.parse(json.dumps({"purge_seqno": purge}).encode()).purge_seqno
        == expected
    )


def test_cts_is_a_known_key_but_must_be_an_object() -> None:
    assert StreamRequestValue.parse(b'{"cts":{"all_keys":true}}') == StreamRequestValue()
    assert rejected({"cts": 1}).field == "cts"


def test_encode_writes_ids_as_lower_case_hex_and_purge_as_decimal_string() -> None:
    value = StreamRequestValue(uid=0xB4, sid=71, collections=(0, 0x8A), purge_seqno=81021)
    assert value.encode() == b'{"uid":"b4","sid":71,"collections":["0","8a"],"purge_seqno":"81021"}'
    assert StreamRequestValue(scope=0x1E).encode() == b'{"scope":"1e"}'


def test_encode_of_empty_value_is_empty_bytes() -> None:
    assert StreamRequestValue().encode() == b""


def test_encode_then_parse_round_trips() -> None:
    value = StreamRequestValue(uid=2, scope=9, sid=3, purge_seqno=0)
    assert StreamRequestValue.parse(value.encode()) == value


class TestLimits:
    def test_nesting_beyond_the_depth_limit_is_einval_not_recursion(self) -> None:
        err = rejected(b"[" * 3000)
        assert (err.status, err.field) == (Status.EINVAL, "value")
        assert "nested" in str(err)

    def test_brackets_inside_strings_do_not_count(self) -> None:
        raw = json.dumps({"uid": "0", "note": "[" * 100 + '\\"{' * 50}).encode()
        assert StreamRequestValue.parse(raw) == StreamRequestValue(uid=0)

    def test_value_beyond_the_size_limit_is_einval(self) -> None:
        err = rejected({"uid": "0", "pad": "a" * 70_000})
        assert "byte limit" in str(err)

    def test_purge_seqno_of_thousands_of_digits_exceeds_a_u64(self) -> None:
        err = rejected({"purge_seqno": "1" * 5000})
        assert err.field == "purge_seqno"

    def test_purge_seqno_with_leading_zeros_still_parses(self) -> None:
        value = StreamRequestValue.parse(b'{"purge_seqno":"' + b"0" * 40 + b'12"}')
        assert value.purge_seqno == 12


class TestLoadJson:
    def test_depth_counts_brackets_outside_strings_only(self) -> None:
        assert json_depth(b'{"a":[[1]],"b":"[[[["}', 16) == 3

    def test_depth_stops_counting_past_the_limit(self) -> None:
        assert json_depth(b"[" * 10_000, 4) == 5

    def test_load_json_refuses_with_the_callers_name(self) -> None:
        with pytest.raises(RemoteProtocolError, match=r"^subdoc value: nested deeper"):
            load_json(b"[" * 100, max_size=1000, max_depth=8, what="subdoc value")
