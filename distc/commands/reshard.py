"""``distc reshard``: lower the reshards of a program for one rank, or explore one reshard.

    distc reshard prog.ir --rank 1 -o prog.r1.ir      # same as: distc opt -p 'reshard{rank=1}'
    distc reshard --from s1 --to r                    # explorer: Paddle's one-reshard program
    distc reshard --from s0,r --to r,s1 --mesh 2,2 --shape 8x12 --all-ranks --verify

The lowered program goes to stdout (or ``-o``); stderr gets a summary of the communication each
rank does (op, group, ring id, buffer, bytes sent per rank), ``--explain`` adds which reshard
function lowered what and why.
"""

from __future__ import annotations

import os
import re
import sys
from math import prod

from .. import cmdline
from ..analysis.verify import INT64_MAX
from ..dialects import ops
from ..driver import (check_pattern, check_values, err_console, program_option, read_text, reporting,
                      warn_unknown_ops)
from ..outputs import Outputs
from ..syntax.diagnostics import DiagnosticError
from . import reshard_report as report

EPILOG = """\b
Placements, one per mesh dim, comma-separated: r, p (= p:sum), p:avg, p:max, p:min,
s (= s0), s0, s1, ... (Shard of that tensor axis).
\b
Examples:
  distc reshard --from p --to s                       1-D mesh [0,1], 4x8 f32, rank 0
  distc reshard --from s0,s1 --to s1,s0 --mesh 2,2 --shape 8x12 --rank 3
  distc reshard --from s0 --to r --mesh-ids 0,1 --to-mesh-ids 2,3 --all-ranks
  distc reshard --from p --to s1 --shape 5x7 --all-ranks --verify
"""


MAX_RANKS = 1 << 20  # the explorer's meshes (a whole program's are as big as it says)


def _ints(text: str | None, what: str, sep: str = ",") -> list[int] | None:
    if text is None:
        return None
    try:
        vals = [int(t) for t in text.strip().split(sep)]
    except ValueError:
        raise cmdline.BadParameter(f"{what}: expected integers separated by '{sep}', got {text!r}") from None
    if not vals:
        raise cmdline.BadParameter(f"{what}: empty")
    return vals


def _mesh(shape_text, ids_text, what: str, default=None):
    from ..passes.reshard.explore import make_mesh

    shape = _ints(shape_text, f"--{what}")
    ids = _ints(ids_text, f"--{what}-ids")
    if shape is None and ids is None:
        return default
    if shape is None:
        shape = [len(ids)]
    if any(s < 1 for s in shape):
        raise cmdline.BadParameter(f"--{what}: dims must be positive")
    if prod(shape) > MAX_RANKS or any(i < 0 or i > INT64_MAX for i in ids or ()):
        raise cmdline.BadParameter(f"--{what}: at most {MAX_RANKS:,} ranks, process ids from 0 to int64's largest")
    return make_mesh(shape, ids)


def _output_path(out: str, rank: int) -> str:
    if "{rank}" in out:
        return out.replace("{rank}", str(rank))
    root, ext = os.path.splitext(out)
    return f"{root}.r{rank}{ext or '.ir'}"


@cmdline.command("reshard", epilog=EPILOG)
@cmdline.argument("file", required=False)
@cmdline.option("--rank", type=int, default=0, show_default=True, help="the rank to lower for")
@cmdline.option("--all-ranks", is_flag=True, help="lower for every rank of the meshes (output per rank)")
@cmdline.option("-o", "--output", default=None,
                help="output file (with --all-ranks: NAME.rR.ir per rank, or a '{rank}' pattern)")
@cmdline.option("--from", "src", default=None, help="explorer: source placements, e.g. 's0' or 'p,s1'")
@cmdline.option("--to", "dst", default=None, help="explorer: destination placements")
@cmdline.option("--mesh", default=None, help="explorer: mesh shape, e.g. '2,2' (default 2)")
@cmdline.option("--mesh-ids", default=None, help="explorer: process ids of the mesh (default 0..n-1)")
@cmdline.option("--to-mesh", default=None, help="explorer: destination mesh shape (default: --mesh)")
@cmdline.option("--to-mesh-ids", default=None, help="explorer: destination process ids (cross-mesh)")
@cmdline.option("--shape", default="4x8", show_default=True, help="explorer: global tensor shape")
@cmdline.option("--dtype", default="float32", show_default=True, help="explorer: tensor dtype")
@cmdline.option("--paddle", "paddle_only", is_flag=True,
                help="only Paddle 3.3.1's own reshard functions (fail exactly where Paddle fails)")
@cmdline.option("--coshard/--no-coshard", default=None,
                help="co-sharded placements ([Shard(0), Shard(0)]) as nested splits, proven right (default; "
                     "not with --paddle), or by their dims mapping as Paddle does (half the rows where a quarter is due)")
@cmdline.option("--verify", is_flag=True, help="check the lowering numerically on every rank (simulator)")
@cmdline.option("--explain", is_flag=True, help="say which reshard function lowered what, and why")
@cmdline.option("-q", "--quiet", is_flag=True, help="no communication summary on stderr")
@cmdline.option("--json", "as_json", is_flag=True,
                help="the summary (collectives, bytes per rank, decisions) as one line of JSON on stderr")
@program_option("the K-th program of a file holding several, e.g. a GLOG log (1 = first)")
def command(file, rank, all_ranks, output, src, dst, mesh, mesh_ids, to_mesh, to_mesh_ids, shape, dtype,
            paddle_only, coshard, verify, explain, quiet, as_json, program) -> None:
    """Lower dist_op.reshard ops for a rank as Paddle 3.3.1 does, or explore one reshard.

    With FILE: lower every reshard of the program (same as `distc opt -p 'reshard{rank=R}'`).
    Without FILE: build the program Paddle prints for one reshard (--from/--to, --mesh, --shape)
    and lower that.
    """
    with reporting() as diags, Outputs(inputs=[file] if file is not None else []) as out:
        explorer = src is not None or dst is not None
        if file is not None and explorer:
            raise cmdline.UsageError("give either FILE or --from/--to (explorer), not both")
        if file is None and not explorer:
            raise cmdline.UsageError("give a FILE to lower, or --from/--to to explore one reshard")
        if coshard and paddle_only:
            raise cmdline.UsageError("--coshard is distc's lowering, not Paddle's: drop --paddle or --coshard")
        coshard = not paddle_only if coshard is None else coshard
        if explorer:
            if src is None or dst is None:
                raise cmdline.UsageError("--from and --to go together")
            try:
                make = _explorer(src, dst, mesh, mesh_ids, to_mesh, to_mesh_ids, shape, dtype, coshard)
                source = make()
            except DiagnosticError as e:  # an explorer option Paddle's program cannot have: usage
                raise cmdline.BadParameter(e.message) from None
            filename = "<explorer>"
        else:
            for opt, v in (("--mesh", mesh), ("--mesh-ids", mesh_ids), ("--to-mesh", to_mesh),
                           ("--to-mesh-ids", to_mesh_ids), ("--shape", shape if shape != "4x8" else None),
                           ("--dtype", dtype if dtype != "float32" else None)):
                if v is not None:
                    raise cmdline.UsageError(f"{opt} only applies to the explorer (--from/--to)")
            source = read_text(file)
            filename = "<stdin>" if file == "-" else file

        if rank < 0:
            raise cmdline.BadParameter("--rank must be 0 or more")
        check_pattern(output, "-o", many=all_ranks)
        per_rank = all_ranks and output is not None and output != "-"  # one file a rank
        target = None if per_rank else out.add("-o", output or "-")
        from ..syntax.parser import parse_program
        from ..analysis.cost import program_ranks, require_rank

        before = parse_program(source, filename, program)
        check_values(before, filename, source)
        if not explorer:
            warn_unknown_ops(before, diags)
            if not any(op.name == ops.RESHARD for op in before.walk()):
                diags.warn(DiagnosticError(
                    "no dist_op.reshard in the program: nothing to lower (a program before partition? "
                    "`distc shard`, or `distc opt FILE -p partition,reshard{rank=R}`)", filename=filename,
                    severity="warning"))
        known = program_ranks(before)
        whole = verify and not explorer and not _one_reshard(before)
        if not all_ranks and not whole:
            require_rank(before, rank, known=known, hint="; choose one with --rank", filename=filename)
        if whole:  # a whole program: every rank lowered and proven against FILE (distc verify)
            from .verify import verify_built

            status = verify_built(before, lambda r: (_lower(before, source, filename, r, paddle_only, coshard).text, None),
                                  names=lambda r: f"<rank {r} of {filename}>")
            if status:
                cmdline.echo(f"verify: {'DIVERGED' if status == 1 else 'not proven'}: nothing written", err=True)
                sys.exit(status)
            verify = False
        # --all-ranks: every rank of the program (a rank no reshard involves gets its program too:
        # no stale file of an earlier run is left beside the new ones)
        ranks = (known if whole or all_ranks else _ranks_of(before)) if (all_ranks or verify) else [rank]
        if all_ranks and not ranks:
            ranks = [rank]
        if verify and rank not in ranks and not all_ranks:
            ranks = sorted(set(ranks) | {rank})
        if per_rank:  # every output planned (writable, not an input), before any work
            targets = {r: out.add("-o", _output_path(output, r)) for r in ranks}
        results = {}
        for r in ranks if (all_ranks or verify) else [rank]:
            results[r] = _lower(before, source, filename, r, paddle_only, coshard)
        shown = ranks if all_ranks else [rank]

        con = err_console()
        ctxs = {r: results[r] for r in shown}
        if explain and not as_json:
            report.explain(con, ctxs)
        if as_json:
            con.print(report.to_json(ctxs, diags.warnings), markup=False, highlight=False, soft_wrap=True)
        elif not quiet:
            report.summary(con, ctxs)
        if verify:
            _verify(con, before, {r: results[r].program for r in results})

        if per_rank:  # every file, or none
            for r in shown:
                out.write(targets[r], results[r].text)
        elif all_ranks:
            out.write(target, "".join(f"// ----- rank {r} -----\n{results[r].text}" for r in shown))
        else:
            out.write(target, results[rank].text)
        out.commit()


def _explorer(src, dst, mesh, mesh_ids, to_mesh, to_mesh_ids, shape, dtype, coshard=False):
    from ..passes.reshard.explore import build_source, make_mesh, parse_placements

    m_from = _mesh(mesh, mesh_ids, "mesh", default=make_mesh([2]))
    if to_mesh is None and to_mesh_ids is None:
        m_to = m_from
    elif to_mesh_ids is None:
        m_to = _mesh(to_mesh, None, "to-mesh")
    else:
        m_to = _mesh(to_mesh, to_mesh_ids, "to-mesh")
    dims = _ints(shape, "--shape", sep="x")
    if any(d < 1 for d in dims):
        raise cmdline.BadParameter("--shape: dims must be positive")
    if prod(dims) > INT64_MAX:
        raise cmdline.BadParameter("--shape: more elements than int64 holds")
    try:
        sp = parse_placements(src, m_from.ndim)
        dp = parse_placements(dst, m_to.ndim)
    except DiagnosticError as e:
        raise cmdline.BadParameter(e.message) from None
    for p in (*sp, *dp):
        if p.is_partial() and p.reduce in ("ANY", "ALL"):
            raise cmdline.BadParameter(f"partial {p.reduce.lower()} is a boolean reduction distc does not "
                                       "lower (use sum, avg, max, min or prod)")
    return lambda: build_source(m_from, sp, m_to, dp, dims, dtype, coshard=coshard)


def _one_reshard(prog) -> bool:
    names = [op.name for op in prog.walk()]
    return names.count(ops.RESHARD) == 1 and ops.SHARD_TENSOR in names


def _ranks_of(prog) -> list[int]:
    ranks: set[int] = set()
    for op in prog.walk():
        if op.name == ops.RESHARD:
            for v in (op.operand(0), op.results[0]):
                d = v.dist_attr if v is not None else None
                if d is not None:
                    ranks |= set(d.mesh.process_ids)
    return sorted(ranks)


def _lower(before, source: str, filename: str, rank: int, paddle_only: bool, coshard: bool = True):
    """The library's reshard lowering for ``rank`` (:func:`distc.pipeline.reshard`), on a copy of
    ``before``: one fresh ring numbering per rank, as each rank is its own Paddle process."""
    from ..pipeline import reshard

    try:
        return reshard(before, rank, paddle=paddle_only, coshard=coshard)
    except DiagnosticError as e:
        e.notes.append(f"lowering for rank {rank}")
        raise e.located(filename, source) from None


def _verify(con, before, progs: dict) -> None:
    from rich.text import Text
    import importlib

    try:
        simulate = importlib.import_module("distc.analysis.simulate")
    except ImportError:
        raise DiagnosticError("--verify needs the simulator (distc.analysis.simulate), which is not "
                              "available in this build") from None
    fn = getattr(simulate, "verify_reshard", None)
    if fn is None:
        raise DiagnosticError("--verify: distc.analysis.simulate has no verify_reshard()")
    report = fn(progs, before=before)
    ok = getattr(report, "ok", bool(report))
    con.print(Text(str(report.summary() if hasattr(report, "summary") else report)))
    if not ok:
        raise DiagnosticError("--verify: the lowered programs do not compute the destination layout",
                              filename=before.filename or "<explorer>")
