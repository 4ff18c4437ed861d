"""The registry of reshard functions (see the package docstring for the API)."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

from ...ir.dist import TensorDistAttr

PADDLE_PRIORITY_STEP = 10
EXTRA_DEFAULT_PRIORITY = 1000


class ReshardFunction:
    """Base class of reshard functions.

    ``is_suitable(src, dst)`` decides on the two layouts alone (as Paddle's do);
    ``reshard(ctx, src, dst, value, dst_type)`` inserts ops through ``ctx`` (a
    :class:`~distc.passes.reshard.context.ReshardContext` positioned before the reshard op) and
    returns the value that replaces the reshard's result, or ``None`` when this rank has nothing
    to replace it with.  It may raise :class:`~distc.passes.reshard.context.Decline` (before or
    after inserting ops through ``ctx``: those are rolled back; changes made to existing values,
    such as retyping the input, are not) to let the next suitable function try.
    """

    name: str = ""
    paddle: bool = False  # one of Paddle 3.3.1's own functions
    optin: bool = False  # used only when asked for by name (``enable``)
    priority: int = EXTRA_DEFAULT_PRIORITY

    def is_suitable(self, src: TensorDistAttr, dst: TensorDistAttr) -> bool:  # pragma: no cover
        raise NotImplementedError

    def reshard(self, ctx, src: TensorDistAttr, dst: TensorDistAttr, value, dst_type):  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<reshard function {self.name} priority={self.priority}>"


@dataclass
class _Entry:
    priority: int
    seq: int
    func: ReshardFunction


_ENTRIES: list[_Entry] = []
_loaded = False


def reshard_function(cls=None, *, priority: int = EXTRA_DEFAULT_PRIORITY, name: str | None = None,
                     paddle: bool = False, optin: bool = False):
    """Class decorator registering a :class:`ReshardFunction` (an instance is made once).

    Lower ``priority`` is tried first.  Paddle's functions use 10, 20, ... 140 in Paddle's
    order; extra functions default to 1000, i.e. after all of Paddle's.
    """

    def wrap(c):
        if isinstance(c, type):
            c.priority, c.paddle = priority, paddle
            c.name = name or c.__dict__.get("name") or c.__name__
        inst = c() if isinstance(c, type) else c
        inst.priority = priority
        inst.paddle = paddle
        inst.optin = optin
        inst.name = name or getattr(inst, "name", "") or type(inst).__name__
        _ENTRIES.append(_Entry(priority, len(_ENTRIES), inst))
        _ENTRIES.sort(key=lambda e: (e.priority, e.seq))
        return c

    if cls is not None:
        return wrap(cls)
    return wrap


def unregister(name: str) -> None:
    _ENTRIES[:] = [e for e in _ENTRIES if e.func.name != name]


PADDLE_MODULES = (
    "p_to_r", "p_to_s", "r_to_s", "r_to_p", "same_status", "s_to_r", "nd_mesh", "global_to_sub",
    "sub_to_global", "s_to_s",
)


def load_functions() -> None:
    """Import Paddle's functions and every ``x_*.py`` module of this package (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    pkg = __name__.rsplit(".", 1)[0]
    for m in PADDLE_MODULES:
        importlib.import_module(f"{pkg}.{m}")
    path = importlib.import_module(pkg).__path__
    for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
        if info.name.startswith("x_"):
            importlib.import_module(f"{pkg}.{info.name}")


def functions(*, paddle_only: bool = False, enable=()) -> list[ReshardFunction]:
    """The functions tried, in order: Paddle's alone with ``paddle_only``; opt-in extras only
    when named in ``enable``."""
    load_functions()
    if paddle_only:
        return [e.func for e in _ENTRIES if e.func.paddle]
    return [e.func for e in _ENTRIES if not e.func.optin or e.func.name in enable]


def candidates(src: TensorDistAttr, dst: TensorDistAttr, *, paddle_only: bool = False,
               where: Callable[[ReshardFunction], bool] | None = None, enable=()) -> list[ReshardFunction]:
    """Every registered function suitable for ``src -> dst``, in the order they are tried."""
    out = []
    for f in functions(paddle_only=paddle_only, enable=enable):
        if where is not None and not where(f):
            continue
        if f.is_suitable(src, dst):
            out.append(f)
    return out


def choose(src: TensorDistAttr, dst: TensorDistAttr, *, paddle_only: bool = False,
           enable=()) -> ReshardFunction | None:
    """The first suitable function (Paddle's ``choose_reshard_func``)."""
    c = candidates(src, dst, paddle_only=paddle_only, enable=enable)
    return c[0] if c else None


def by_name(name: str) -> ReshardFunction:
    for f in functions(enable=(name,)):
        if f.name == name:
            return f
    raise KeyError(name)
