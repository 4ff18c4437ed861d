"""Attribute values: immutable, comparable, and printed exactly as they were spelt.

Paddle's printer changed twice: 2023/2024 dumps tag scalars with their C++ kind
(``(Int32)36``, ``(Double)0.9``, ``(pd_op.DataType)float32``), current dumps print them bare
(``36``, ``0.9``, ``float32``).  Every class here remembers which form it came in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

from .dist import OperationDistAttr


@dataclass(frozen=True, slots=True)
class BoolAttr:
    value: bool

    def __str__(self) -> str:
        return "true" if self.value else "false"


@dataclass(frozen=True, slots=True)
class IntAttr:
    value: int
    tag: str | None = None  # "Int32", "Int64", "Index" ...

    def __str__(self) -> str:
        return f"({self.tag}){self.value}" if self.tag else str(self.value)


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class ArrayAttr:
    elements: tuple["Attribute", ...]

    def __str__(self) -> str:
        return "[" + ",".join(str(e) for e in self.elements) + "]"

    @property
    def value(self) -> list:
        return [getattr(e, "value", e) for e in self.elements]


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class DataTypeAttr:
    name: str  # float32, int64, Undefined ...
    tagged: bool = True

    def __str__(self) -> str:
        return "(pd_op.DataType)" + self.name if self.tagged else self.name

    @property
    def value(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class PlaceAttr:
    text: str  # Place(cpu), Place(gpu:0), Place(undefined:0)
    tagged: bool = True

    def __str__(self) -> str:
        return "(pd_op.Place)" + self.text if self.tagged else self.text

    @property
    def value(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class IdentAttr:
    """A bare word: a current-style enum (``float32``, ``NCHW``) or ``error_attribute_type``."""

    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def value(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class TypedAttr:
    """Any other tagged scalar, e.g. ``(pd_op.DataLayout)NCHW`` or ``(Pointer)0x7f..``."""

    tag: str
    text: str

    def __str__(self) -> str:
        return f"({self.tag}){self.text}"

    @property
    def value(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class RawAttr:
    """Text kept verbatim: kernel keys ``<backend:CPU|...>``, ``<#AttrNull>``, ``(0x7f...)``."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class DictAttr:
    items: tuple[tuple[str, "Attribute"], ...]

    def __str__(self) -> str:
        return "{" + ",".join(f"{k}:{v}" for k, v in self.items) + "}"


Attribute = Union[
    BoolAttr, IntAttr, FloatAttr, StrAttr, ArrayAttr, IntArrayAttr, DataTypeAttr, PlaceAttr,
    IdentAttr, TypedAttr, RawAttr, DictAttr, OperationDistAttr,
]


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
