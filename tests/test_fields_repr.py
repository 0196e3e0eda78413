"""``fields_repr``: the ``__repr__`` the classes on ``import mockdcp.server``'s path share
instead of one attrs compiles for each (issue 44) shows what attrs' would."""

from __future__ import annotations

import attrs

from mockdcp.util import fields_repr


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

    name: str
    cas: int = attrs.field(repr=_hex)
    secret: str = attrs.field(default="", repr=False)
    later: int = attrs.field(init=False)
    child: object = None


@attrs.frozen
class Record:
    """A frozen record's docstring."""

    __repr__ = fields_repr

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


def test_attrs_makes_no_repr_of_its_own_for_a_class_that_sets_it() -> None:
    assert Record.__dict__["__repr__"] is fields_repr
    assert Shared.__dict__["__repr__"] is fields_repr
    assert repr(Record(7)) == "Record(seqno=7)"
