"""The kernel table: ``@kernel("pd_op.slice")`` registers a function ``fn(rt, op, vals) -> list``
computing an op's results on one rank (``rt`` is the rank's runner: ``rt.rank``, ``rt.err``,
``rt.sim``; ``vals`` the operands' local values).  A communication kernel is a generator: it
yields a request to the scheduler and returns the results when the reply arrives.

Lookup is by the op's full name, then without the trailing ``_`` of an in-place variant
(``pd_op.add_`` runs ``pd_op.add``)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Kernel:
    name: str
    fn: Callable
    comm: bool  # a generator talking to the scheduler


KERNELS: dict[str, Kernel] = {}


def kernel(*names: str) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the kernel of every op name in ``names``."""

    def deco(fn: Callable) -> Callable:
        comm = inspect.isgeneratorfunction(fn)
        for n in names:
            if n in KERNELS:
                raise ValueError(f"two kernels for {n}")
            KERNELS[n] = Kernel(n, fn, comm)
        return fn

    return deco


def lookup(name: str) -> Kernel | None:
    k = KERNELS.get(name)
    if k is None and name.endswith("_") and not name.endswith("__"):
        k = KERNELS.get(name[:-1])
    return k
