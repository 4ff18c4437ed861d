"""The proofs: :func:`verify_step` (a whole training step), :func:`verify_reshard_step` (a
one-reshard program), :func:`verify_startup` (startup programs: each rank's initial parameters and
optimizer states are its piece of what the serial startup program makes).  See :mod:`.step` for
inputs, what a step leaves behind, and how values are compared."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

import numpy as np

from .coverage import Missing, missing_kernels
from .reshard import final_value
from .scheduler import simulate_ranks, simulate_serial
from ...dialects.fusion import SLICE
from .step import Divergence, StepReport, Compare, input_name, make_inputs, step_state
from .values import NoKernel, RankValues, SimulationError, Undecidable, attr
from ...ir.core import Operation, Program, Value
from ...ir.dist import TensorDistAttr
from ...ir.types import DistTensorType
from ...dialects import ops



def _where(e: SimulationError, programs: Mapping[int, Program], serial: Program) -> str | None:
    """The file of the rank program a failure happened in, else the serial program's."""
    return programs[e.rank].filename if e.rank in programs else serial.filename


def _file(report: StepReport, e: SimulationError, d: Divergence) -> StepReport:
    """File a simulation failure in ``report``: an op without a kernel is not a verdict."""
    if isinstance(e, NoKernel):
        loc = e.op.loc if e.op is not None and e.op.loc else (None, None)
        report.missing = [Missing(e.op.name if e.op is not None else "?", 1, [(d.rank, d.filename, loc[0], loc[1])])]
    elif isinstance(e, Undecidable):
        report.undecided = d
    else:
        report.divergence = d
    return report


def _unprovable(report: StepReport, serial: Program, programs: Mapping[int, Program]) -> bool:
    """List every op without a kernel, in the serial program and each rank's, before simulating."""
    report.missing = missing_kernels([(None, serial)] + sorted(programs.items()))
    return bool(report.missing)

def _role(op: Operation) -> int:
    r = attr(op, "op_role", 0)
    return int(r) if r is not None else 0


def _trace(serial: Program, sv: RankValues, programs: Mapping[int, Program], rv: Mapping[int, RankValues],
           rtol: float, atol: float) -> Divergence | None:
    """The earliest paired forward/optimizer op whose result is not its piece of the serial one
    (ops paired by name and position, inputs by the name they read; not a fused program's
    ``slice@NAME`` pieces or the parameters in its buffers: views the step updates in place,
    compared after it)."""
    from .fused_inputs import in_buffer, is_fused

    by_name: dict[str, list[Operation]] = {}
    inputs: dict[str, Operation] = {}
    for op in serial.ops:
        n = input_name(op)
        if n is not None:
            inputs.setdefault(str(n), op)
        else:
            by_name.setdefault(op.name, []).append(op)
    cmp = Compare(StepReport([], rtol, atol))
    best: tuple[int, int, Divergence] | None = None
    for r, prog in sorted(programs.items()):
        mine: dict[str, list[Operation]] = {}
        pairs = []
        fused = is_fused(prog)
        for op in prog.ops:
            n = input_name(op)
            if n is None:
                mine.setdefault(op.name, []).append(op)
            elif str(n) in inputs and not (fused and in_buffer(prog, str(n))):
                pairs.append((op, inputs[str(n)]))
        pos = {op: i for i, op in enumerate(prog.ops)}
        pairs += [(rop, sop) for name, rops in mine.items() if len(by_name.get(name, ())) == len(rops)
                  for rop, sop in zip(rops, by_name[name])]
        pairs.sort(key=lambda p: pos[p[0]])
        for rop, sop in pairs:
            if best is not None and pos[rop] >= best[0]:
                break
            if _role(rop) not in (0, 2) or rop.num_results != sop.num_results or (fused and _reads_view(rop)):
                continue
            for i, res in enumerate(rop.results):
                want, got = sv.get_value(sop.results[i]), rv[r].get_value(res)
                if not isinstance(want, np.ndarray) or not isinstance(got, np.ndarray):
                    continue
                t = res.type
                if isinstance(t, DistTensorType) and t.dist.partial:
                    continue
                bad = cmp.value(want, {r: (res, got)})
                if bad is not None:
                    _, a, rel, msg = bad
                    d = Divergence(r, rop, msg or f"result {i} is not its piece of the serial value", _vname(res),
                                   a, rel, prog.filename)
                    best = (pos[rop], r, d)
                    break
    return None if best is None else best[2]


def _reads_view(op: Operation) -> bool:
    """``op`` (of a fused program) reads a buffer, a view of one or a ``slice@`` piece: its results
    are pieces of the buffers' layout, not of the serial op's results."""
    for v in op.operands:
        if v is None:
            continue
        o = v.owner
        if o is None or o.name in ("pd_op.view_slice", "pd_op.view_shape") or \
                (input_name(o) or "").startswith(SLICE):
            return True
    return False


def _earlier(report: StepReport, e: SimulationError, serial: Program, sv: RankValues,
             programs: Mapping[int, Program], rtol: float, atol: float) -> None:
    """A rank failed (ranks disagree at a collective, a kernel cannot compute): if a forward or
    optimizer value computed before the failure is already not its piece of the serial one, that
    op is where the programs first differ -- reported there, the failure after it in the message
    (a wrong top-k routes other tokens, and only a later all_reduce sees different shapes)."""
    with np.errstate(invalid="ignore", over="ignore"):  # values of a failed run: inf - inf, overflow
        first = _trace(serial, sv, programs, e.partial or {}, rtol, atol)
    if first is None or first.op is None:
        return
    d = report.divergence
    if d is not None and d.op is first.op:
        return
    then = ""
    if e.op is not None:
        at = f" line {e.op.loc[0]}" if e.op.loc else ""
        then = f" (then {e.op.name}{at}{f' on rank {e.rank}' if e.rank is not None else ''} fails: {e.message})"
    first.message += then
    report.divergence = first


def _vname(v: Value) -> str:
    return f"%{v.name}" if v.name is not None else f"result {v.index}"


def verify_step(serial: Program, programs: Mapping[int, Program], *, seed: int = 0, rtol: float = 1e-6,
                atol: float = 1e-8, progress: Callable[[int], None] | None = None,
                rank_rings: Mapping[int, Mapping[int, Iterable[int]]] | None = None) -> StepReport:
    """Run ``serial`` and every rank of ``programs`` on the same seeded inputs and compare what the
    step leaves behind (see the module docstring).  Raises nothing for a wrong program: the
    report's :attr:`StepReport.status` says 0 (equal), 1 (divergence) or 3 (no kernel).
    ``rank_rings``: each rank's ring table, when its builder knows it (:func:`simulate_ranks`)."""
    report = StepReport(sorted(programs), rtol, atol)
    if _unprovable(report, serial, programs):
        return report
    inputs = make_inputs(serial, seed)
    # (a fused ZeRO program's slice@NAME pieces are cut from the serial NAME: .fused_inputs)
    for r, prog in sorted(programs.items()):
        for op in prog.ops:
            n = input_name(op)
            if n is not None and n not in inputs and not (n.startswith(SLICE) and n[len(SLICE):] in inputs):
                report.divergence = Divergence(r, op, f"input {n!r} does not exist in the serial program",
                                               filename=prog.filename)
                return report

    def failed(e: SimulationError, files: Mapping[int, str | None], serial_run: bool) -> StepReport:
        d = Divergence(None if serial_run else e.rank, e.op, e.message,
                       filename=files.get(e.rank) if e.rank is not None else None)
        if d.filename is None and e.op is not None:
            d.filename = next((f for r, f in files.items() if e.op in set(programs[r].ops)), None) \
                if not serial_run else serial.filename
        return _file(report, e, d)

    try:
        sv = simulate_serial(serial, inputs, progress=progress, seed=seed)
    except SimulationError as e:
        return failed(e, {0: serial.filename}, True)
    try:
        rv = simulate_ranks(programs, inputs, seed=seed, progress=progress, rank_rings=rank_rings)
    except SimulationError as e:
        report = failed(e, {r: p.filename for r, p in programs.items()}, False)
        if e.partial and not isinstance(e, (NoKernel, Undecidable)):
            _earlier(report, e, serial, sv, programs, rtol, atol)
        return report
    report.ops = len(sv.executed) + sum(len(v.executed) for v in rv.values())
    report.assumed = list(dict.fromkeys(n for _, v in sorted(rv.items()) for n in v.assumed))  # (groups no file names)
    report.notes.extend(report.assumed)
    sstate = step_state(serial)
    rstate = {r: step_state(p) for r, p in programs.items()}
    cmp = Compare(report)
    first: Divergence | None = None
    for name, v in sstate.items():
        want = sv.get_value(v)
        if not isinstance(want, np.ndarray):
            continue
        found = {r: (st[name], rv[r].get_value(st[name])) for r, st in rstate.items() if name in st}
        if not found and _fused_states(cmp, name, want, programs, rstate, rv):
            continue
        if not found:
            report.notes.append(f"{name}: no rank program has it")
            continue
        bad = cmp.value(want, found)
        if bad is not None and first is None:
            r, a, rel, msg = bad
            val = found[r][0]
            op = val.owner if hasattr(val, "owner") else None
            first = Divergence(r, op, msg or f"{name} after the step is not its piece of the serial value",
                               name, a, rel, programs[r].filename)
    if first is not None:  # (a fused rank's own slice@ piece updated wrong, if one is: before what the
        # buffers' all-gather spreads to every rank's parameters)
        report.divergence = _trace(serial, sv, programs, rv, rtol, atol) or report.divergence or first
        if report.divergence is not first:
            report.notes.append(f"first wrong value left by the step: {first.value} on rank {first.rank}")
    return report


def _fused_states(cmp: Compare, name: str, want, programs, rstate, rv, mains=None) -> bool:
    """A serial value that fused ZeRO programs hold as ``slice@`` pieces (an optimizer state, of
    the parameter pieces each rank updates): each rank's piece against the serial one (the layout
    read from the rank's main program: ``mains``, else ``programs``).  False when no rank has such
    a piece."""
    from .fused_inputs import slice_piece

    seen = False
    for r, st in sorted(rstate.items()):
        v = st.get(SLICE + name)
        if v is None or (mains is not None and r not in mains):
            continue
        exp = slice_piece((mains or programs)[r], r, name, want)
        got = rv[r].get_value(v)
        if exp is None or not isinstance(got, np.ndarray):
            continue
        seen = True
        ok, a, rel = cmp.close(got, exp)
        if not ok:
            cmp.r.notes.append(f"{name}: rank {r}'s {SLICE}{name} is not its piece (max abs error {a:.3g})")
            cmp.r.divergence = cmp.r.divergence or Divergence(r, v.owner, f"{SLICE}{name} after the step is not its "
                                                              f"piece of the serial {name}", SLICE + name, a, rel,
                                                              programs[r].filename)
    return seen


def is_one_reshard(prog: Program) -> bool:
    """``data`` + ``shard_tensor`` + ``dist_op.reshard`` (and constants): a one-reshard program."""
    names = {op.name for op in prog.ops}
    return ops.RESHARD in names and names <= {ops.DATA, ops.SHARD_TENSOR, ops.RESHARD, ops.FULL,
                                              ops.FULL_INT_ARRAY, ops.SHADOW_OUTPUT}


def verify_reshard_step(serial: Program, programs: Mapping[int, Program], *, seed: int = 0, rtol: float = 1e-6,
                        atol: float = 1e-8, progress: Callable[[int], None] | None = None) -> StepReport:
    """A one-reshard SERIAL: every destination rank's final value must be its piece of the
    reshard's result (the input itself) under the destination layout."""
    report = StepReport(sorted(programs), rtol, atol)
    if _unprovable(report, serial, programs):
        return report
    rs = [op for op in serial.ops if op.name == ops.RESHARD][-1]
    dst = rs.results[0].type.dist if isinstance(rs.results[0].type, DistTensorType) else None
    inputs = make_inputs(serial, seed)
    try:
        sv = simulate_serial(serial, inputs, progress=progress, seed=seed)
        rv = simulate_ranks(programs, inputs, seed=seed, progress=progress)
    except SimulationError as e:
        return _file(report, e, Divergence(e.rank, e.op, e.message, filename=_where(e, programs, serial)))
    report.ops = len(sv.executed) + sum(len(v.executed) for v in rv.values())
    want = sv.get_value(rs.results[0])
    found = {}
    for r in (dst.mesh.process_ids if dst is not None else sorted(programs)):
        v = final_value(programs[r], r, rv[r], dst) if r in programs else None
        if v is None:
            report.divergence = Divergence(r, None, "no result value on this rank", filename=None)
            return report
        found[r] = (v, rv[r].get_value(v))
    bad = Compare(report).value(np.asarray(want), found)
    if bad is not None:
        r, a, rel, msg = bad
        v = found[r][0]
        report.divergence = Divergence(r, v.owner, msg or "the reshard's result is not its piece of the input",
                                       _vname(v), a, rel, programs[r].filename)
    return report


def program_layouts(programs: Mapping[int, Program]) -> dict[str, TensorDistAttr]:
    """``name -> layout`` of every named dist-typed input of the (main) rank programs."""
    out: dict[str, TensorDistAttr] = {}
    for _, prog in sorted(programs.items()):
        for op in prog.ops:
            n = input_name(op)
            if n is not None and n not in out and isinstance(op.results[0].type, DistTensorType):
                out[n] = op.results[0].type.dist
    return out


def _slice_index(mains: Mapping[int, Program] | None):
    """(rank, name, serial shape) -> the global flat indices of the rank's ``slice@`` piece of
    ``name`` (-1: the buffer's padding), from the rank's fused main program; None: not fused."""
    if not mains:
        return None
    from .fused_inputs import slice_piece
    from .kernels.randomness import global_index

    def index(rank: int, name: str, shape: tuple) -> np.ndarray | None:
        if rank not in mains:
            return None
        x = slice_piece(mains[rank], rank, name, global_index(shape).astype(np.float64) + 1)
        return None if x is None else np.asarray(x, dtype=np.int64) - 1

    return index


def verify_startup(serial: Program, programs: Mapping[int, Program], layouts: Mapping[str, TensorDistAttr], *,
                   seed: int = 0, rtol: float = 1e-6, atol: float = 1e-8,
                   progress: Callable[[int], None] | None = None,
                   mains: Mapping[int, Program] | None = None) -> StepReport:
    """Each rank's startup program must leave every parameter and optimizer state (by name) as its
    piece, under ``layouts`` (the main rank programs' layouts) or its own dist type, of what the
    serial startup program makes.  Constants kept under a name are filled with a pattern of that
    name's own (the same in the serial and every rank program), so a constant-initialised model
    proves which value went where.  Initializers fill the shape their result type declares
    (Paddle's per-rank startup programs keep the global ``shape`` attribute).  A fused ZeRO
    rank's ``slice@NAME`` values are compared with their piece of NAME, the buffer layout read from
    its main program (``mains``)."""
    report = StepReport(sorted(programs), rtol, atol)
    if _unprovable(report, serial, programs):
        return report
    # every named value of the serial startup program that a constant fills is told apart by name
    # (kernels.init.tagged_constant): zeros and ones kept under the wrong name are found too
    tags = {n: (tuple(v.type.shape), v.type.dist if isinstance(v.type, DistTensorType) else None)
            for n, v in step_state(serial).items() if getattr(v.type, "shape", None) is not None}
    try:
        sv = simulate_serial(serial, {}, progress=progress, shapes_from_types=True, seed=seed, tags=tags)
        rv = simulate_ranks(programs, {}, seed=seed, progress=progress, shapes_from_types=True, layouts=layouts,
                            tags=tags, slice_index=_slice_index(mains))
    except SimulationError as e:
        return _file(report, e, Divergence(e.rank, e.op, e.message, filename=_where(e, programs, serial)))
    report.ops = len(sv.executed) + sum(len(v.executed) for v in rv.values())
    cmp = Compare(report)
    rstate = {r: step_state(p) for r, p in programs.items()}
    sstate = step_state(serial)
    extra: dict[str, list[int]] = {}
    for r, st in sorted(rstate.items()):
        for name in st:  # (a gradient-merge accumulator is the pass's, never the serial program's:
            if name not in sstate and not name.endswith("@GRAD@MERGE"):  # the pipelined step starts from it)
                extra.setdefault(name, []).append(r)
    if extra:  # e.g. another pipeline stage's startup program as the serial one: not compared, said
        names = sorted(extra)
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        report.notes.append(f"{len(names)} value(s) the rank startup programs initialize are not in the serial "
                            f"startup program, not compared: {', '.join(f'{n} (rank(s) {extra[n]})' for n in names[:3])}"
                            f"{more}")
    for name, v in sstate.items():
        want = sv.get_value(v)
        if not isinstance(want, np.ndarray):
            continue
        found = {r: (st[name], rv[r].get_value(st[name])) for r, st in rstate.items() if name in st}
        # fused ZeRO: each rank's slice@ pieces of it, whether or not the rank keeps the whole value too
        if mains and _fused_states(cmp, name, want, programs, rstate, rv, mains) and not found:
            if report.divergence is not None:
                break
            continue
        if report.divergence is not None:
            break
        lay = layouts.get(name)
        lacking = sorted(r for r in rstate if r not in found and (lay is None or r in lay.mesh.process_ids))
        if mains and not found:  # fused ZeRO: a rank holding no piece of it lacks nothing
            from .fused_inputs import in_buffer

            lacking = [r for r in lacking if r not in mains or not in_buffer(mains[r], name)]
            if not lacking:
                continue
        if lacking:  # not verified there: said, never a silent success
            report.notes.append(f"{name}: not initialized by the startup program of rank(s) {lacking}"
                                if found else f"{name}: no rank's startup program initializes it")
        bad = cmp.value(want, found, lay)
        if bad is not None:
            r, a, rel, msg = bad
            val = found[r][0]
            report.divergence = Divergence(r, val.owner, msg or f"{name} is not its piece of the serial value",
                                           name, a, rel, programs[r].filename)
            break
    return report
