"""``Part``: an attribute of a composed object that is its part's (``VBucket``'s
``persisted_seqno`` is its ``DiskStore``'s), read and written through it."""

from __future__ import annotations

from typing import Generic, TypeVar, overload

T = TypeVar("T")


class Part(Generic[T]):
    """``name: Part[int] = Part("store")``: ``obj.name`` is ``obj.store.name`` (or
    ``attribute``'s value there)."""

    __slots__ = ("attribute", "name", "part")

    def __init__(self, part: str, attribute: str = "") -> None:
        self.part = part
        self.attribute = attribute
        self.name = attribute

    def __set_name__(self, owner: type, name: str) -> None:
        if not self.attribute:
            self.attribute = name

    @overload
    def __get__(self, obj: None, owner: type) -> Part[T]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> T: ...
    def __get__(self, obj: object | None, owner: type) -> Part[T] | T:
        if obj is None:
            return self
        value: T = getattr(getattr(obj, self.part), self.attribute)
        return value

    def __set__(self, obj: object, value: T) -> None:
        setattr(getattr(obj, self.part), self.attribute, value)
