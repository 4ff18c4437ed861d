"""The kernel table: ``@kernel("pd_op.slice")`` registers a function ``fn(rt, op, vals) -> list``
computing an op's results on one rank (``rt`` is the rank's runner: ``rt.rank``, ``rt.err``,
``rt.sim``; ``vals`` the operands' local values).  A communication kernel is a generator: it
yields a request to the scheduler and returns the results when the reply arrives.

A kernel registered with ``absent_ok=True`` also runs when some operands do not exist on the
rank (they are passed as :data:`.values.ABSENT`): ops joining values of several sub-meshes.

Lookup is by the op's full name, then without the trailing ``_`` of an in-place variant
(``pd_op.add_`` runs ``pd_op.add``)."""

from __future__ import annotations

import inspect
from typing import Callable

from ...ir.records import record


@record(frozen=True)
class Kernel:
    name: str
    fn: Callable
    comm: bool  # a generator talking to the scheduler
    absent_ok: bool = False  # runs although some operands do not exist on the rank


KERNELS: dict[str, Kernel] = {}


def kernel(*names: str, absent_ok: bool = False) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the kernel of every op name in ``names``."""

    def deco(fn: Callable) -> Callable:
        comm = inspect.isgeneratorfunction(fn)
        for n in names:
            if n in KERNELS:
                raise ValueError(f"two kernels for {n}")
            KERNELS[n] = Kernel(n, fn, comm, absent_ok)
        return fn

    return deco


def lookup(name: str) -> Kernel | None:
    k = KERNELS.get(name)
    if k is None and name.endswith("_") and not name.endswith("__"):
        k = KERNELS.get(name[:-1])
    return k
