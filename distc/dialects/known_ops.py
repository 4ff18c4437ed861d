"""Which op names Paddle knows: Paddle 3.3.1's registered ops, and the earlier names distc reads.

``paddle_ops.txt`` (beside this module) lists every op name of Paddle 3.3.1's ``libpaddle.so``
(1,965: ``pd_op``, ``dist_op``, ``builtin``, ``cf``, ``onednn_op`` ...), made by
``tests/data/oracle/paddle_op_names.py`` with the real Paddle.  To those come the names of earlier print eras
that 3.3.1 no longer has (2024's ``c_allgather``, ``c_reducescatter``, ``c_allreduce_max_`` ...,
from :mod:`.collectives`), and the ops of :mod:`.optimizers` and :mod:`.ops`.

:func:`unknown_ops` finds the ops of a program whose name none of these has, in the dialects
whose every op is known (``pd_op``, ``dist_op``, ``builtin``, ``cf``) or in a dialect Paddle does
not have (``pd_opp.matmul``); kernel-dialect ops (``"add(phi_kernel)"``) and custom ops are not
checked.
"""

from __future__ import annotations

import functools
import os

from ..ir.core import Operation, Program
from ..syntax.diagnostics import DiagnosticError
from . import collectives, ops, optimizers

PADDLE_VERSION = "3.3.1"
CHECKED_DIALECTS = frozenset({"pd_op", "dist_op", "builtin", "cf"})
# dialects Paddle registers whose ops are not all in the list (user-defined, compiler-made), and
# the 2023 name of pd_op
UNCHECKED_DIALECTS = frozenset({"custom_op", "pd_kernel", "onednn_op", "onednn_kernel", "custom_kernel",
                                "cinn_op", "cinn_runtime", "shape", "pd"})
# 2024-era communication ops (Paddle 2.6 - 3.0 auto-parallel dumps) that 3.3.1 dropped
EARLIER = frozenset({
    *(f"pd_op.c_{k}_{r}{ip}" for k in ("allreduce", "reduce") for r in ("sum", "max", "min", "prod", "avg")
      for ip in ("", "_")),
    "pd_op.c_allgather", "pd_op.c_allgather_", "pd_op.c_reducescatter", "pd_op.c_reducescatter_",
    "pd_op.c_broadcast", "pd_op.c_broadcast_", "pd_op.c_scatter", "pd_op.alltoall", "pd_op.alltoall_",
    "pd_op.c_sync_calc_stream", "pd_op.c_sync_calc_stream_", "pd_op.c_sync_comm_stream",
    "pd_op.c_sync_comm_stream_", "pd_op.c_wait_comm", "pd_op.c_wait_compute",
    # communicator set-up in 2024 startup programs
    "pd_op.c_gen_nccl_id", "pd_op.c_comm_init", "pd_op.c_comm_init_all",
})


@functools.lru_cache(maxsize=1)
def _listed() -> str:
    """``paddle_ops.txt`` as one string, a newline before its first line and after its last: a
    name is listed where ``"\\n" + name + "\\n"`` occurs in it (a whole line; a comment line starts
    with '#', which no op name does).  (Plain text, read whole: 42 KB; gzipped, zlib's import and
    the decompression cost every run ~1.5 ms.)"""
    with open(os.path.join(os.path.dirname(__file__), "paddle_ops.txt"), encoding="utf-8") as f:
        return "\n" + f.read() + "\n"


@functools.lru_cache(maxsize=1)
def _others() -> frozenset[str]:
    """The known names not in ``paddle_ops.txt``'s list: earlier eras', distc's tables'."""
    names = EARLIER | set(collectives.COLLECTIVE_OPS)
    names |= {name for name, _ in optimizers.OPTIMIZERS}
    names |= {v for k, v in vars(ops).items() if k.isupper() and isinstance(v, str) and "." in v}
    return frozenset(names)


@functools.lru_cache(maxsize=1)
def known_names() -> frozenset[str]:
    """Every known name, as a set (:func:`suggestion`'s pool; :func:`is_known` searches the list's
    text instead: a program has a few dozen names, and the set of ~2,000 cost a run ~0.6 ms)."""
    return frozenset({n for n in _listed().split("\n") if n and n[0] != "#"} | _others())


def is_known(name: str) -> bool:
    """False for a name Paddle 3.3.1 (and the earlier eras distc reads) does not have."""
    if "(" in name:  # a kernel-dialect op: "add(phi_kernel)"
        return True
    dialect, dot, _ = name.partition(".")
    if not dot:
        return False
    if dialect in UNCHECKED_DIALECTS:
        return True
    return name in _others() or ("\n" not in name and ("\n" + name + "\n") in _listed())


def suggestion(name: str) -> str | None:
    """The known op name closest to ``name`` (a typo's intended name), if one is close."""
    dialect, _, base = name.partition(".")
    pool = [n for n in known_names() if n.startswith(dialect + ".")] if dialect in CHECKED_DIALECTS else []
    import difflib

    close = difflib.get_close_matches(name, pool or known_names(), n=1, cutoff=0.8)
    if not close and dialect not in CHECKED_DIALECTS:  # a misspelt dialect: pd_opp.matmul
        close = [n for n in (f"{d}.{base}" for d in sorted(CHECKED_DIALECTS)) if n in known_names()][:1]
    return close[0] if close else None


def unknown_ops(prog: Program, by_name: dict[str, list[Operation]] | None = None) -> dict[str, list[Operation]]:
    """The ops of ``prog`` with a name Paddle does not know, by name, in program order (``by_name``:
    every op of ``prog`` by name, in that order: an index's)."""
    if by_name is not None:
        return {name: ops for name, ops in by_name.items() if not is_known(name)}
    out: dict[str, list[Operation]] = {}
    seen: dict[str, bool] = {}  # a program has few distinct names
    for op in prog.walk():
        ok = seen.get(op.name)
        if ok is None:
            ok = seen[op.name] = is_known(op.name)
        if not ok:
            out.setdefault(op.name, []).append(op)
    return out


def unknown_message(name: str) -> str:
    dialect = name.partition(".")[0]
    what = (f"'{name}' is not an op of Paddle {PADDLE_VERSION}" if dialect in CHECKED_DIALECTS or "." not in name
            else f"'{name}': Paddle {PADDLE_VERSION} has no dialect '{dialect}'")
    hint = suggestion(name)
    return what + (f" (did you mean '{hint}'?)" if hint else "")


def unknown_op_warnings(prog: Program, note: str | None = "distc passes it through unchanged",
                        by_name: dict[str, list[Operation]] | None = None) -> list[DiagnosticError | str]:
    """``file:line:col: warning:`` (the line, a caret under the name) for each op name of ``prog``
    Paddle 3.3.1 does not have, once a name; past ten names one line counts the rest (``by_name``:
    as :func:`unknown_ops` takes it)."""
    bad = unknown_ops(prog, by_name)
    out: list[DiagnosticError | str] = []
    for k, (name, uses) in enumerate(bad.items()):
        if k == 10:  # a program of some other op set: name a few, count the rest
            out.append(f"{prog.filename or '<input>'}: warning: {len(bad) - k} more op names Paddle 3.3.1 does not "
                       f"have: {', '.join(repr(n) for n in list(bad)[k:k + 5])}{', ...' if len(bad) > k + 5 else ''}")
            break
        op = uses[0]
        line, col = op.loc or (None, None)
        src = op.src.split("\n", 1)[0] if op.src else None
        if src is not None and line is not None:
            at = src.find(f'"{name}"')
            col = at + 2 if at >= 0 else col
        notes = [f"also used at line{'s' * (len(uses) > 2)} "
                 + ", ".join(str(u.loc[0]) for u in uses[1:6] if u.loc) + (", ..." if len(uses) > 6 else "")
                 ] if len(uses) > 1 else []
        notes += [note] if note else []
        out.append(DiagnosticError(unknown_message(name), line, col, filename=prog.filename, notes=notes,
                                   source=None if src is None or line is None else "\n" * (line - 1) + src,
                                   severity="warning"))
    return out
