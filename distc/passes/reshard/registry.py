"""The registry of reshard functions (see the package docstring for the API)."""

from __future__ import annotations

from collections.abc import Callable

from ...ir.dist import TensorDistAttr
from ...ir.records import record

Shape = tuple[int, ...]

PADDLE_PRIORITY_STEP = 10
EXTRA_DEFAULT_PRIORITY = 1000

# Paddle 3.3.1's functions in the order ``choose_reshard_func`` tries them (priorities 10, 20, ...)
PADDLE_ORDER = (
    "p_to_r", "p_to_r_cross_mesh", "p_to_s", "r_to_s", "r_to_s_cross_mesh", "r_to_p", "same_status",
    "s_to_r", "s_to_r_cross_mesh", "nd_mesh", "nd_mesh_cross_mesh", "global_to_sub_mesh",
    "sub_to_global_mesh", "s_to_s",
)


def paddle_priority(name: str) -> int:
    """The priority of Paddle's function ``name`` (its place in Paddle's order)."""
    return PADDLE_PRIORITY_STEP * (PADDLE_ORDER.index(name) + 1)


def before(name: str, by: int = 1) -> int:
    """A priority ``by`` steps before Paddle's function ``name`` (``by`` < 10: after the one before it)."""
    if not 0 < by < PADDLE_PRIORITY_STEP:
        raise ValueError(f"before({name!r}, {by}): by must be 1..{PADDLE_PRIORITY_STEP - 1}")
    return paddle_priority(name) - by


def after(name: str, by: int = 1) -> int:
    """A priority ``by`` steps after Paddle's function ``name`` (the last one: any ``by``)."""
    if by < 1 or (name != PADDLE_ORDER[-1] and by >= PADDLE_PRIORITY_STEP):
        raise ValueError(f"after({name!r}, {by}): by must be 1..{PADDLE_PRIORITY_STEP - 1}")
    return paddle_priority(name) + by


class ReshardFunction:
    """Base class of reshard functions.

    Matching has no side effects: ``is_suitable(src, dst, shape)`` decides on the two layouts
    and the value's global shape whether the function applies (Paddle's own functions look at
    the layouts alone, as Paddle does); ``refuses(src, dst, shape)`` names why Paddle 3.3.1, having
    chosen this function, raises while lowering (``None`` when it does not): the case goes on to
    the next function, or fails with only Paddle's functions.  ``reshard(ctx, src, dst, value,
    dst_type)`` then always lowers: it inserts ops through ``ctx`` (a
    :class:`~distc.passes.reshard.context.ReshardContext` positioned before the reshard op) and
    returns the value that replaces the reshard's result, or ``None`` when this rank has nothing
    to replace it with.
    """

    name: str = ""
    paddle: bool = False  # one of Paddle 3.3.1's own functions
    optin: bool = False  # used only when asked for by name (``enable``)
    priority: int = EXTRA_DEFAULT_PRIORITY

    def is_suitable(self, src: TensorDistAttr, dst: TensorDistAttr, shape: Shape) -> bool:  # pragma: no cover
        raise NotImplementedError

    def refuses(self, src: TensorDistAttr, dst: TensorDistAttr, shape: Shape) -> str | None:
        """Paddle's message when its lowering of a case this function is suitable for fails."""
        return None

    def reshard(self, ctx, src: TensorDistAttr, dst: TensorDistAttr, value, dst_type):  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<reshard function {self.name} priority={self.priority}>"


@record
class _Entry:
    priority: int
    seq: int
    func: ReshardFunction


# filled while the package is imported (each function's module registers it; ``distc.passes.reshard``
# imports them all, under the import lock): complete and read-only once the package is imported
_ENTRIES: list[_Entry] = []


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


PADDLE_MODULES = (
    "p_to_r", "p_to_s", "r_to_s", "r_to_p", "same_status", "s_to_r", "nd_mesh", "global_to_sub",
    "sub_to_global", "s_to_s",
)


def function_modules() -> list[str]:
    """The modules defining reshard functions (relative names): Paddle's, then every ``x_*.py``
    of this package; importing ``distc.passes.reshard`` imports them all (so they register)."""
    import os  # (not pkgutil/pathlib: they cost a plain run's start-up ~10 ms)

    extra = sorted(f[:-3] for f in os.listdir(os.path.dirname(__file__)) if f.startswith("x_") and f.endswith(".py"))
    return [*PADDLE_MODULES, *extra]


def unregister(name: str) -> None:
    """Forget the function ``name`` (a test's own function, registered for the test)."""
    _ENTRIES[:] = [e for e in _ENTRIES if e.func.name != name]


def functions(*, paddle_only: bool = False, enable=(), disable=()) -> list[ReshardFunction]:
    """The functions tried, in order: Paddle's alone with ``paddle_only``; opt-in extras only
    when named in ``enable``; none named in ``disable``."""
    if paddle_only:
        return [e.func for e in _ENTRIES if e.func.paddle and (not e.func.optin or e.func.name in enable)]
    return [e.func for e in _ENTRIES
            if (not e.func.optin or e.func.name in enable) and e.func.name not in disable]


def candidates(src: TensorDistAttr, dst: TensorDistAttr, shape: Shape, *, paddle_only: bool = False,
               where: Callable[[ReshardFunction], bool] | None = None, enable=(),
               disable=()) -> list[ReshardFunction]:
    """Every registered function suitable for ``src -> dst`` of a value of ``shape``, in the order
    they are tried (refusing ones included)."""
    shape = tuple(shape)
    out = []
    for f in functions(paddle_only=paddle_only, enable=enable, disable=disable):
        if where is not None and not where(f):
            continue
        if f.is_suitable(src, dst, shape):
            out.append(f)
    return out


def select(src: TensorDistAttr, dst: TensorDistAttr, shape: Shape, *, paddle_only: bool = False,
           enable=(), disable=()) -> tuple[ReshardFunction | None, list[str]]:
    """The function that lowers ``src -> dst`` and why the suitable ones before it did not (Paddle
    uses the first suitable function only: with ``paddle_only`` a refusal ends the search)."""
    reasons: list[str] = []
    for f in candidates(src, dst, shape, paddle_only=paddle_only, enable=enable, disable=disable):
        why = f.refuses(src, dst, tuple(shape))
        if why is None:
            return f, reasons
        reasons.append(f"'{f.name}' declined: {why}")
        if paddle_only:
            break
    return None, reasons


def choose(src: TensorDistAttr, dst: TensorDistAttr, shape: Shape, *, paddle_only: bool = False,
           enable=(), disable=()) -> ReshardFunction | None:
    """The function that lowers ``src -> dst`` (Paddle's ``choose_reshard_func``, refusals skipped)."""
    return select(src, dst, shape, paddle_only=paddle_only, enable=enable, disable=disable)[0]


def by_name(name: str) -> ReshardFunction:
    for f in functions(enable=(name,)):
        if f.name == name:
            return f
    raise KeyError(name)


def coshard_on(paddle_only: bool = False, disable=()) -> bool:
    """Whether co-sharded placements are lowered as nested splits (``x_coshard``): by default, not
    with Paddle's functions alone (Paddle lowers them by the dims mapping) nor when disabled."""
    return not paddle_only and "x_coshard" not in disable
