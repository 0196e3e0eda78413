from __future__ import annotations

import json

import pytest

from mockdcp.model._subdoc import SubdocError, lookup, mutate, parse_path
from mockdcp.protocol import Status
from mockdcp.protocol._document_requests import SubdocOpcode as Op


@pytest.mark.parametrize(
    ("path", "components"),
    [
        ("", []),
        ("a", ["a"]),
        ("a.b.c", ["a", "b", "c"]),
        ("a[0]", ["a", 0]),
        ("a[-1].b", ["a", -1, "b"]),
        ("[2]", [2]),
        ("`a.b`", ["a.b"]),
        ("`_connector:cbgo:g:instance:1`", ["_connector:cbgo:g:instance:1"]),
        ("`a``b`.c", ["a`b", "c"]),
        ("m[0][1]", ["m", 0, 1]),
    ],
)
def test_parse_path(path: str, components: list[object]) -> None:
    assert parse_path(path) == components


@pytest.mark.parametrize("path", ["a.", ".a", "a..b", "a[x]", "a[0", "`open", "a[-2]", "a]b"])
def test_a_malformed_path_is_path_einval(path: str) -> None:
    with pytest.raises(SubdocError) as info:
        parse_path(path)
    assert info.value.status == Status.SUBDOC_PATH_EINVAL


def test_a_path_deeper_than_32_levels_is_path_e2big() -> None:
    with pytest.raises(SubdocError) as info:
        parse_path(".".join(["a"] * 33))
    assert info.value.status == Status.SUBDOC_PATH_E2BIG


DOC = {"a": {"b": [1, 2, 3]}, "n": 5, "s": "x"}


@pytest.mark.parametrize(
    ("op", "path", "result"),
    [
        (Op.GET, "a.b[1]", b"2"),
        (Op.GET, "a.b[-1]", b"3"),
        (Op.GET, "a", b'{"b":[1,2,3]}'),
        (Op.EXISTS, "n", b""),
        (Op.GET_COUNT, "a.b", b"3"),
    ],
)
def test_lookup(op: int, path: str, result: bytes) -> None:
    assert lookup(DOC, op, path) == result


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("missing", Status.SUBDOC_PATH_ENOENT),
        ("a.b[7]", Status.SUBDOC_PATH_ENOENT),
        ("a[0]", Status.SUBDOC_PATH_MISMATCH),
        ("n.x", Status.SUBDOC_PATH_MISMATCH),
        ("a.b.c", Status.SUBDOC_PATH_MISMATCH),
    ],
)
def test_lookup_failures(path: str, status: Status) -> None:
    with pytest.raises(SubdocError) as info:
        lookup(DOC, Op.GET, path)
    assert info.value.status == status


def doc() -> dict[str, object]:
    return json.loads(json.dumps(DOC))  # type: ignore[no-any-return]


def test_dict_upsert_sets_and_dict_add_refuses_an_existing_member() -> None:
    d, _ = mutate(doc(), Op.DICT_UPSERT, "n", b"6", mkdir=False)
    assert d["n"] == 6  # type: ignore[index]
    with pytest.raises(SubdocError) as info:
        mutate(doc(), Op.DICT_ADD, "n", b"6", mkdir=False)
    assert info.value.status == Status.SUBDOC_PATH_EEXISTS


def test_dict_upsert_on_a_missing_parent_needs_mkdir_p() -> None:
    with pytest.raises(SubdocError) as info:
        mutate(doc(), Op.DICT_UPSERT, "x.y", b"1", mkdir=False)
    assert info.value.status == Status.SUBDOC_PATH_ENOENT
    d, _ = mutate(doc(), Op.DICT_UPSERT, "x.y", b"1", mkdir=True)
    assert d["x"] == {"y": 1}  # type: ignore[index]


def test_a_value_that_is_not_json_cannot_be_inserted() -> None:
    with pytest.raises(SubdocError) as info:
        mutate(doc(), Op.DICT_UPSERT, "n", b"{nope", mkdir=False)
    assert info.value.status == Status.SUBDOC_VALUE_CANTINSERT


def test_replace_and_delete_need_an_existing_path() -> None:
    d, _ = mutate(doc(), Op.REPLACE, "a.b[0]", b'"z"', mkdir=False)
    assert d["a"]["b"][0] == "z"  # type: ignore[index]
    d, _ = mutate(doc(), Op.DELETE, "s", b"", mkdir=False)
    assert "s" not in d  # type: ignore[operator]
    for op in (Op.REPLACE, Op.DELETE):
        with pytest.raises(SubdocError) as info:
            mutate(doc(), op, "nope", b"1", mkdir=False)
        assert info.value.status == Status.SUBDOC_PATH_ENOENT


def test_array_operations() -> None:
    d, _ = mutate(doc(), Op.ARRAY_PUSH_LAST, "a.b", b"4,5", mkdir=False)
    d, _ = mutate(d, Op.ARRAY_PUSH_FIRST, "a.b", b"0", mkdir=False)
    d, _ = mutate(d, Op.ARRAY_INSERT, "a.b[1]", b'"i"', mkdir=False)
    d, _ = mutate(d, Op.ARRAY_ADD_UNIQUE, "a.b", b"9", mkdir=False)
    assert d["a"]["b"] == [0, "i", 1, 2, 3, 4, 5, 9]  # type: ignore[index]
    with pytest.raises(SubdocError) as info:
        mutate(d, Op.ARRAY_ADD_UNIQUE, "a.b", b"9", mkdir=False)
    assert info.value.status == Status.SUBDOC_PATH_EEXISTS
    d, _ = mutate(doc(), Op.ARRAY_PUSH_LAST, "new", b"1", mkdir=True)
    assert d["new"] == [1]  # type: ignore[index]


def test_counter_returns_the_new_value_and_checks_its_delta() -> None:
    d, out = mutate(doc(), Op.COUNTER, "n", b"3", mkdir=False)
    assert (d["n"], out) == (8, b"8")  # type: ignore[index]
    _, out = mutate(doc(), Op.COUNTER, "fresh", b"-2", mkdir=False)
    assert out == b"-2"
    for delta, status in [(b"0", Status.SUBDOC_DELTA_EINVAL), (b"x", Status.SUBDOC_DELTA_EINVAL)]:
        with pytest.raises(SubdocError) as info:
            mutate(doc(), Op.COUNTER, "n", delta, mkdir=False)
        assert info.value.status == status
    with pytest.raises(SubdocError) as info:
        mutate(doc(), Op.COUNTER, "s", b"1", mkdir=False)
    assert info.value.status == Status.SUBDOC_PATH_MISMATCH
    with pytest.raises(SubdocError) as info:
        mutate({"n": 2**63 - 1}, Op.COUNTER, "n", b"1", mkdir=False)
    assert info.value.status == Status.SUBDOC_NUM_ERANGE
