"""``fields_repr``, ``fields_eq`` and ``fields_hash``: the methods the classes on
``import mockdcp.server``'s path share instead of those attrs compiles for each (issue
44) do what attrs' would."""

from __future__ import annotations

import attrs
import pytest

from mockdcp.util import fields_eq, fields_hash, fields_repr


def _hex(value: int) -> str:
    return f"0x{value:x}"


@attrs.define
class Generated:
    name: str
    cas: int = attrs.field(repr=_hex)
    secret: str = attrs.field(default="", repr=False)
    later: int = attrs.field(init=False)
    child: object = None


@attrs.define
class Shared:
    __repr__ = fields_repr
    __eq__ = fields_eq

    name: str
    cas: int = attrs.field(repr=_hex)
    secret: str = attrs.field(default="", repr=False)
    later: int = attrs.field(init=False)
    child: object = None


@attrs.frozen
class Record:
    """A frozen record's docstring."""

    __repr__ = fields_repr
    __eq__ = fields_eq
    __hash__ = fields_hash

    seqno: int
    key: str = attrs.field(default="", eq=str.lower)
    note: str = attrs.field(default="", eq=False)


@attrs.frozen
class Other:
    __eq__ = fields_eq
    __hash__ = fields_hash

    seqno: int


def test_fields_repr_shows_what_the_generated_repr_shows() -> None:
    generated, shared = Generated("a", 255, "pw"), Shared("a", 255, "pw")
    assert repr(shared) == repr(generated).replace("Generated", "Shared")
    assert repr(shared) == "Shared(name='a', cas=0xff, later=NOTHING, child=None)"
    generated.later = shared.later = 3
    generated.child, shared.child = Generated("b", 1), Shared("b", 1)
    assert repr(shared) == repr(generated).replace("Generated", "Shared")


def test_an_object_inside_itself_is_shown_as_an_ellipsis() -> None:
    generated, shared = Generated("a", 1), Shared("a", 1)
    generated.child, shared.child = [generated], [shared]
    assert repr(shared) == repr(generated).replace("Generated", "Shared")
    assert repr(shared).endswith("child=[...])")
    assert repr([shared, shared]).count("Shared(") == 2  # shown again once it is done


def test_attrs_makes_none_of_the_methods_a_class_sets() -> None:
    assert Record.__dict__["__repr__"] is fields_repr
    assert Record.__dict__["__eq__"] is fields_eq
    assert Record.__dict__["__hash__"] is fields_hash
    assert Shared.__dict__["__eq__"] is fields_eq
    assert repr(Record(7)) == "Record(seqno=7, key='', note='')"


def test_fields_eq_compares_what_attrs_compares() -> None:
    assert Record(1, "Key", "a") == Record(1, "kEY", "b")  # its eq_key; ``note`` not compared
    assert Record(1, "a") != Record(1, "b")
    assert Record(1) != Record(2)
    assert Record(1) != Other(1)  # another class: never equal
    assert Record(1).__eq__(Other(1)) is NotImplemented
    nan = float("nan")
    first, second = Shared("a", 1, child=nan), Shared("a", 1, child=nan)
    first.later = second.later = 2
    assert first != second  # each field ``==``, as attrs's (a tuple's ``is`` would not)
    generated, again = Generated("a", 1, child=nan), Generated("a", 1, child=nan)
    generated.later = again.later = 2
    assert generated != again
    first.child = second.child = None
    assert first == second
    second.later = 3
    assert first != second


def test_fields_hash_hashes_what_fields_eq_compares() -> None:
    assert hash(Record(1, "Key", "a")) != hash(Record(1, "other"))
    assert hash(Record(1, "k", "a")) == hash(Record(1, "k", "b"))  # ``note`` not compared
    assert len({Record(1), Record(1), Record(2)}) == 2
    assert hash(Record(1)) != hash(Other(1))
    with pytest.raises(TypeError, match="unhashable"):
        hash(Shared("a", 1))  # a mutable class with its own __eq__, as attrs makes it
