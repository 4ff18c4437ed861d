"""``distc diff A B``: are two programs the same up to value names and ring ids?  If not, which
ops differ, how, and what that changes in communication and memory per rank."""

from __future__ import annotations

import json
import sys

from .. import cmdline
from ..driver import load, program_option, read_text, reporting
from ..outputs import Outputs, write_stdout

EPILOG = """\b
Exit status:
  0  the programs are the same (up to value names, and ring ids unless --exact-rings)
  1  the programs differ, or an input cannot be read or parsed (as in every distc command:
     FILE:LINE:COL: error: with the line and a caret on stderr, and no report on stdout;
     with --json the report's "status" says "different" or "error")
  2  a usage error
\b
Examples:
  distc diff golden/main.r0.ir out/main.r0.ir
  distc diff a.ir b.ir --ignore-attr op_role --ignore-attr stop_gradient
  distc diff a.ir b.ir --json | jq .counts
"""


@cmdline.command("diff", epilog=EPILOG)
@cmdline.argument("file_a", metavar="A")
@cmdline.argument("file_b", metavar="B")
@cmdline.option("--exact-rings", is_flag=True,
                help="compare ring_id attributes as numbers (default: up to a consistent renaming)")
@cmdline.option("--ignore-attr", "ignore", multiple=True, metavar="NAME",
                help="ignore this attribute (repeatable), e.g. op_role, stop_gradient")
@cmdline.option("--json", "as_json", is_flag=True, help="print the report as one JSON object")
@cmdline.option("--rank", type=cmdline.IntRange(0), default=None,
                help="the rank the summary counts for (default: from a file name like main.r3.ir, "
                     "else the lowest rank of the first mesh)")
@cmdline.option("--no-summary", is_flag=True, help="no collectives/memory summary")
@program_option("compare the K-th program of each file (files holding several, e.g. GLOG logs or "
                "reshard --all-ranks output; default: each program with the one in the same place)")
@cmdline.option("-q", "--quiet", is_flag=True, help="print nothing; only the exit status")
@cmdline.option("--html", "html", default=None, metavar="PAGE",
                help="also write the diff as a self-contained HTML page: the ops side by side, the summary as charts")
def command(file_a: str, file_b: str, exact_rings: bool, ignore: tuple[str, ...], as_json: bool,
            rank: int | None, no_summary: bool, program: int | None, quiet: bool, html: str | None) -> None:
    """Compare programs A and B op by op (- is stdin); exit 0 same, 1 different or bad input, 2 usage.

    Files holding several programs are compared program by program."""
    if file_a == "-" and file_b == "-":
        raise cmdline.UsageError("only one of A and B can be stdin")
    if quiet and as_json:
        raise cmdline.UsageError("--quiet prints nothing; drop --json")
    if html == "-":
        raise cmdline.UsageError("--html writes a file (stdout has the text report)")
    with reporting(), Outputs(inputs=[file_a, file_b]) as out:
        page = out.add("--html", html)  # checked before any work (None: no page)
        file_a, file_b, progs_a, progs_b = _inputs(file_a, file_b, program, rank)
        out.add_input(file_a)  # (a capture folder's file: never the page either)
        out.add_input(file_b)
        if rank is not None:
            _check_rank(rank, progs_a + progs_b)
        pages: list | None = [] if html is not None else None
        equal, text = _compare(progs_a, progs_b, file_a, file_b, exact_rings, ignore, as_json, rank,
                               no_summary, quiet, pages)
        if page is not None:
            from .report import command_line
            from .report.diff_page import diff_page

            name = (lambda f: "<stdin>" if f == "-" else f)
            out.write(page, diff_page(name(file_a), name(file_b), pages, equal, command_line(),
                                      (len(progs_a), len(progs_b))))
            out.commit()
        if not quiet:
            write_stdout(text)
        sys.exit(0 if equal else 1)


def _inputs(file_a: str, file_b: str, program: int | None, rank: int | None):
    """(A, B, A's programs, B's programs); a `distc capture` folder stands for Paddle's program of
    the other side's rank (:func:`.capture_files.diff_file`)."""
    from .capture_files import diff_file, is_capture

    ca, cb = is_capture(file_a), is_capture(file_b)
    if not ca and not cb:
        return file_a, file_b, _programs(file_a, program), _programs(file_b, program)
    if ca and cb:
        file_a, file_b = diff_file(file_a, rank, False), diff_file(file_b, rank, False)
        return file_a, file_b, _programs(file_a, program), _programs(file_b, program)
    from ..analysis.diff import infer_rank
    from ..passes.sharding_util import is_distributed

    folder, other = (file_a, file_b) if ca else (file_b, file_a)
    progs = _programs(other, program)
    r = rank
    if r is None and progs:
        found, how = infer_rank(progs[0], None if other == "-" else other, None)
        r = found if how in ("file name", "its banner") else None
    dense = bool(progs) and not is_distributed(progs[0])
    path = diff_file(folder, r, dense)
    theirs = _programs(path, program)
    return (path, file_b, theirs, progs) if ca else (file_a, path, progs, theirs)


def _comparable(pa, pb, name_a: str, name_b: str, file_a: str, file_b: str, rank: int | None):
    """(A, B, note): a dense program (Paddle's ``dense``, no dist types) against a dist-typed one is
    compared with the dist-typed one's dense form for its rank (``dist-to-dense{rank=R}``, what
    Paddle's dist2dense makes of it: local shapes, no dist attributes, one-rank collectives
    dropped) -- said in the note, a line of text and the JSON's ``dense`` object -- not op by op
    with every type and dist attribute reported changed.  Else the programs as they are, no note."""
    from ..analysis.diff import infer_rank
    from ..passes.base import PassContext
    from ..passes.dist_to_dense import DistToDensePass
    from ..passes.sharding_util import is_distributed

    da, db = is_distributed(pa), is_distributed(pb)
    if da == db:
        return pa, pb, None
    dist, path, name, dense_name = (pa, file_a, name_a, name_b) if da else (pb, file_b, name_b, name_a)
    r, how = infer_rank(dist, path, rank)
    local = dist.clone()
    DistToDensePass(rank=r).apply(local, PassContext())
    text = (f"note: {dense_name} is a dense program (no dist types), {name} is dist-typed: compared "
            f"{name}'s dense form for rank {r} ({how}; dist-to-dense: local shapes, no dist attributes, "
            f"one-rank collectives dropped)\n")
    doc = {"dense": "b" if da else "a", "converted": "a" if da else "b", "rank": r, "rank_from": how}
    return (local, pb, (text, doc)) if da else (pa, local, (text, doc))


def _check_rank(rank: int, progs: list) -> None:
    """--rank (the summary's) names a rank of each program's meshes, as --rank does in every command."""
    from ..analysis.cost import require_rank

    for p in progs:
        require_rank(p, rank)


def _programs(path: str, program: int | None) -> list:
    from ..syntax.parser import parse_programs

    if program is not None:
        return [load(path, program)]
    return parse_programs(read_text(path), "<stdin>" if path == "-" else path)


def _compare(progs_a, progs_b, file_a, file_b, exact_rings, ignore, as_json, rank, no_summary, quiet, pages=None):
    """(equal, report text) of every program of A against the one in the same place in B; with
    ``pages`` (a list), also each pair's (DiffResult, summaries) for the HTML page."""
    from ..analysis.diff import diff_programs, infer_rank, render_text, summary, to_json

    name_a = "<stdin>" if file_a == "-" else file_a
    name_b = "<stdin>" if file_b == "-" else file_b
    several = max(len(progs_a), len(progs_b)) > 1
    docs, texts, equal = [], [], len(progs_a) == len(progs_b)
    if not equal:
        texts.append(f"{name_a} holds {len(progs_a)} programs, {name_b} holds {len(progs_b)}\n")
    for k, (pa, pb) in enumerate(zip(progs_a, progs_b), 1):
        ca, cb, note = _comparable(pa, pb, name_a, name_b, file_a, file_b, rank)
        res = diff_programs(ca, cb, exact_rings=exact_rings, ignore_attrs=ignore)
        equal = equal and res.equal
        sums = None
        if not no_summary and (as_json or pages is not None or not res.equal):  # text: no summary of equal programs
            sums = (summary(pa, *infer_rank(pa, file_a, rank)), summary(pb, *infer_rank(pb, file_b, rank)))
        if pages is not None:
            pages.append((res, sums))
        if quiet:
            continue
        if as_json:
            docs.append({**to_json(res, name_a, name_b, sums), **({"dense": note[1]} if note else {})})
        else:
            texts.append((f"program {k} of {len(progs_a)}:\n" if several else "") + (note[0] if note else "")
                         + render_text(res, name_a, name_b, sums))
    if as_json:
        doc = docs[0] if not several and docs else {
            "a": name_a, "b": name_b, "equal": equal, "programs": {"a": len(progs_a), "b": len(progs_b)},
            "reports": docs}
        doc = {"status": "same" if equal else "different", **doc}
        return equal, json.dumps(doc, indent=1) + "\n"
    return equal, "".join(texts)
