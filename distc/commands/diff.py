"""``distc diff A B``: are two programs the same up to value names and ring ids?  If not, which
ops differ, how, and what that changes in communication and memory per rank."""

from __future__ import annotations

import json
import sys

import click

from ..driver import err_console, load, reporting, write_output
from ..syntax.diagnostics import DiagnosticError

EPILOG = """\b
Exit status (as GNU diff and cmp):
  0  the programs are the same (up to value names, and ring ids unless --exact-rings)
  1  the programs differ
  2  trouble: a usage error, or an input that cannot be read or parsed (reported as
     FILE:LINE:COL: error: with the line and a caret)
distc's other commands exit 1 on bad input; diff keeps 1 for "different" only, so that a CI
script can tell a changed program from a broken golden file.
\b
Examples:
  distc diff golden/main.r0.ir out/main.r0.ir
  distc diff a.ir b.ir --ignore-attr op_role --ignore-attr stop_gradient
  distc diff a.ir b.ir --json | jq .counts
"""


@click.command("diff", epilog=EPILOG)
@click.argument("file_a", metavar="A")
@click.argument("file_b", metavar="B")
@click.option("--exact-rings", is_flag=True,
              help="compare ring_id attributes as numbers (default: up to a consistent renaming)")
@click.option("--ignore-attr", "ignore", multiple=True, metavar="NAME",
              help="ignore this attribute (repeatable), e.g. op_role, stop_gradient")
@click.option("--json", "as_json", is_flag=True, help="print the report as one JSON object")
@click.option("--rank", type=click.IntRange(0), default=None,
              help="the rank the summary counts for (default: from a file name like main.r3.ir, "
                   "else the lowest rank of the first mesh)")
@click.option("--no-summary", is_flag=True, help="no collectives/memory summary")
@click.option("-q", "--quiet", is_flag=True, help="print nothing; only the exit status")
def command(file_a: str, file_b: str, exact_rings: bool, ignore: tuple[str, ...], as_json: bool,
            rank: int | None, no_summary: bool, quiet: bool) -> None:
    """Compare programs A and B op by op (- is stdin); exit 0 same, 1 different, 2 trouble."""
    from ..analysis.diff import diff_programs, infer_rank, render_text, summary, to_json

    if file_a == "-" and file_b == "-":
        raise click.UsageError("only one of A and B can be stdin")
    if quiet and as_json:
        raise click.UsageError("--quiet prints nothing; drop --json")
    finished = False  # the comparison ran: exit 1 from here on means "different"
    try:
        with reporting():
            try:
                prog_a, prog_b = load(file_a), load(file_b)
            except DiagnosticError as e:
                err_console().print(e.render(), markup=False)
                sys.exit(2)
            res = diff_programs(prog_a, prog_b, exact_rings=exact_rings, ignore_attrs=ignore)
            if quiet:
                finished = True
                sys.exit(0 if res.equal else 1)
            name_a = "<stdin>" if file_a == "-" else file_a
            name_b = "<stdin>" if file_b == "-" else file_b
            sums = None
            if not no_summary and (as_json or not res.equal):  # text: no summary of equal programs
                sums = (summary(prog_a, *infer_rank(prog_a, file_a, rank)),
                        summary(prog_b, *infer_rank(prog_b, file_b, rank)))
            if as_json:
                text = json.dumps(to_json(res, name_a, name_b, sums), indent=1) + "\n"
            else:
                text = render_text(res, name_a, name_b, sums)
            write_output(None, text)
            finished = True
            sys.exit(0 if res.equal else 1)
    except SystemExit as e:
        if e.code == 1 and not finished:  # reporting(): an output that cannot be written ...
            sys.exit(2)
        raise
