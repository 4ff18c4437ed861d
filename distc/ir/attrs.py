"""Attribute values: immutable, comparable, and printed exactly as they were spelt.

Paddle's printer changed twice: 2023/2024 dumps tag scalars with their C++ kind
(``(Int32)36``, ``(Double)0.9``, ``(pd_op.DataType)float32``), current dumps print them bare
(``36``, ``0.9``, ``float32``).  Every class here remembers which form it came in.
"""

from __future__ import annotations

import math

from .dist import OperationDistAttr
from .records import record


@record(frozen=True, slots=True)
class BoolAttr:
    value: bool

    def __str__(self) -> str:
        return "true" if self.value else "false"


@record(frozen=True, slots=True)
class IntAttr:
    value: int
    tag: str | None = None  # "Int32", "Int64", "Index" ...

    def __str__(self) -> str:
        return f"({self.tag}){self.value}" if self.tag else str(self.value)


@record(frozen=True, slots=True)
class FloatAttr:
    """A float kept as its source spelling (C++ ``%g`` style: ``1e-08``, ``0.999``, ``inf``)."""

    text: str
    tag: str | None = None  # "Float", "Double"

    @property
    def value(self) -> float:
        return float(self.text)

    def __str__(self) -> str:
        return f"({self.tag}){self.text}" if self.tag else self.text

    @staticmethod
    def of(value: float, tag: str | None = None) -> "FloatAttr":
        return FloatAttr(format_float(value), tag)


def format_float(value: float) -> str:
    """C++ ostream default formatting (6 significant digits), as Paddle prints floats."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:g}"


def escape_string(s: str) -> str:
    """Paddle's printer escapes only the double quote; backslashes, newlines, tabs stay raw."""
    return s.replace('"', '\\"')


def unescape_string(raw: str) -> str:
    return raw.replace('\\"', '"')


@record(frozen=True, slots=True)
class StrAttr:
    raw: str  # between the quotes, escapes kept

    @property
    def value(self) -> str:
        return unescape_string(self.raw) if "\\" in self.raw else self.raw

    @staticmethod
    def of(value: str) -> "StrAttr":
        return StrAttr(escape_string(value))

    def __str__(self) -> str:
        return f'"{self.raw}"'


class ArrayAttr:
    """``[a,b,...]``: a tuple of attributes.  A long list of plain numbers is kept as the text it
    was read from (:meth:`packed`) and its elements are made each time they are asked for: a
    10 MB integer array costs 10 MB, not the 200 MB of a million attribute objects."""

    __slots__ = ("_elements", "_text", "_kind", "_hash")
    PACK = 4096  # lists read from texts at least this long are kept packed

    def __init__(self, elements: tuple["Attribute", ...] = ()) -> None:
        object.__setattr__(self, "_elements", tuple(elements))
        object.__setattr__(self, "_text", None)
        object.__setattr__(self, "_kind", None)
        object.__setattr__(self, "_hash", None)

    @classmethod
    def packed(cls, text: str, kind: str) -> "ArrayAttr":
        """The list ``[text]`` of numbers as spelt (``kind``: ``int``, each an IntAttr; ``number``,
        each what :func:`number_attr` makes of it)."""
        a = cls.__new__(cls)
        for k, v in (("_elements", None), ("_text", text), ("_kind", kind), ("_hash", None)):
            object.__setattr__(a, k, v)
        return a

    def __setattr__(self, key, value) -> None:
        raise AttributeError(f"ArrayAttr is immutable ({key})")

    @property
    def elements(self) -> tuple["Attribute", ...]:
        if self._elements is not None:
            return self._elements
        parts = self._text.split(",")
        if self._kind == "int":
            return tuple(IntAttr(int(x)) for x in parts)
        return tuple(number_attr(x) for x in parts)

    @property
    def is_packed(self) -> bool:
        return self._text is not None

    def __len__(self) -> int:
        return len(self._elements) if self._elements is not None else self._text.count(",") + 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayAttr):
            return NotImplemented
        if self._text is not None and other._text is not None and self._kind == other._kind:
            return self._text == other._text
        if len(self) != len(other):
            return False
        return self.elements == other.elements

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(self.elements)
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        return f"ArrayAttr({self.elements!r})" if self._text is None else f"ArrayAttr.packed({len(self)} numbers)"

    def __str__(self) -> str:
        if self._text is not None:
            return "[" + self._text + "]"
        return "[" + ",".join(str(e) for e in self.elements) + "]"

    @property
    def value(self) -> list:
        if self._text is not None:
            if self._kind == "int":
                return list(map(int, self._text.split(",")))
            return [e.value for e in self.elements]
        return [getattr(e, "value", e) for e in self.elements]


@record(frozen=True, slots=True)
class IntArrayAttr:
    """``(pd_op.IntArray)[2,4]`` (tagged) or a bare int list ``[2,4]`` where Paddle means IntArray."""

    values: tuple[int, ...]
    tagged: bool = True

    def __str__(self) -> str:
        body = "[" + ",".join(str(v) for v in self.values) + "]"
        return "(pd_op.IntArray)" + body if self.tagged else body

    @property
    def value(self) -> list[int]:
        return list(self.values)


@record(frozen=True, slots=True)
class DataTypeAttr:
    name: str  # float32, int64, Undefined ...
    tagged: bool = True

    def __str__(self) -> str:
        return "(pd_op.DataType)" + self.name if self.tagged else self.name

    @property
    def value(self) -> str:
        return self.name


@record(frozen=True, slots=True)
class PlaceAttr:
    text: str  # Place(cpu), Place(gpu:0), Place(undefined:0)
    tagged: bool = True

    def __str__(self) -> str:
        return "(pd_op.Place)" + self.text if self.tagged else self.text

    @property
    def value(self) -> str:
        return self.text


@record(frozen=True, slots=True)
class IdentAttr:
    """A bare word: a current-style enum (``float32``, ``NCHW``) or ``error_attribute_type``."""

    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def value(self) -> str:
        return self.name


@record(frozen=True, slots=True)
class TypedAttr:
    """Any other tagged scalar, e.g. ``(pd_op.DataLayout)NCHW`` or ``(Pointer)0x7f..``."""

    tag: str
    text: str

    def __str__(self) -> str:
        return f"({self.tag}){self.text}"

    @property
    def value(self) -> str:
        return self.text


@record(frozen=True, slots=True)
class RawAttr:
    """Text kept verbatim: kernel keys ``<backend:CPU|...>``, ``<#AttrNull>``, ``(0x7f...)``."""

    text: str

    def __str__(self) -> str:
        return self.text


@record(frozen=True, slots=True)
class DictAttr:
    items: tuple[tuple[str, "Attribute"], ...]

    def __str__(self) -> str:
        return "{" + ",".join(f"{k}:{v}" for k, v in self.items) + "}"


Attribute = (
    BoolAttr | IntAttr | FloatAttr | StrAttr | ArrayAttr | IntArrayAttr | DataTypeAttr | PlaceAttr
    | IdentAttr | TypedAttr | RawAttr | DictAttr | OperationDistAttr
)


def number_attr(text: str, tag: str | None = None) -> "IntAttr | FloatAttr":
    """A numeric literal: ints stay IntAttr unless the tag says float; floats keep their spelling."""
    if tag in ("Float", "Double"):
        return FloatAttr(text, tag)
    try:
        v = int(text)
    except ValueError:
        return FloatAttr(text, tag)
    # '-0' is a float Paddle printed (C++ prints -0.0 so): kept as spelled, like any other
    return IntAttr(v, tag) if str(v) == text else FloatAttr(text, tag)


def attr_value(a: Attribute | None):
    """The plain Python value of an attribute (ints, floats, strings, lists)."""
    if a is None:
        return None
    if isinstance(a, (IntAttr, BoolAttr)):
        return a.value
    if isinstance(a, FloatAttr):
        return a.value
    if isinstance(a, ArrayAttr):
        return [attr_value(e) for e in a.elements]
    return getattr(a, "value", a)


def format_attr_dict(items: dict[str, Attribute], sort: bool = True) -> str:
    keys = sorted(items) if sort else list(items)
    return "{" + ",".join(f"{k}:{items[k]}" for k in keys) + "}"
