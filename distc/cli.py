"""The ``distc`` command line: a thin layer over parse → passes → print."""

from __future__ import annotations

import gc
import sys

# A program is hundreds of thousands of small objects that live until the command ends: the default
# collector thresholds would rescan them over and over (3/4 of the time of `distc shard` on a 15 MB
# program), so the command collects far less often.  Set before the imports below: theirs are ~30
# collections otherwise (~7% of a shard run's start-up).  (``import distc`` itself imports nothing.)
gc.set_threshold(100_000, 50, 100)

from . import __version__, cmdline
from .driver import (compressed, err_console, error_doc, json_requested, load_inputs, load_kept, parse_text, print_error_json,
                     program_option, read_text, reporting, warn_unknown_ops)
from .outputs import Outputs
from .syntax.diagnostics import DiagnosticError
from .syntax.parser import parse_programs
from .syntax.printer import print_pieces, print_program

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


EXIT_STATUS = """\b
Exit status:
  0   success
  1   bad input (FILE:LINE:COL: error: with the line and a caret), an output that cannot be
      written, or a failed check (fmt --check, verify; diff: the programs differ; the error
      on stderr, or --json's "status", tells a failed check from bad input)
  2   usage error (unknown option, options that exclude each other, a bad -o pattern ...)
  3   verify: an op the simulator has no kernel for
  4   verify: not provable (the programs do not say what the proof needs, e.g. a ring's group)
  70  internal error (a bug in distc: please report it; DISTC_DEBUG=1 shows the traceback)
  130, 143, 129  stopped by SIGINT, SIGTERM, SIGHUP (128 + the signal; also a worker process
      killed from outside: 137 for SIGKILL); outputs are left as they were
Outputs are one transaction: all written (renamed into place at the end), or none changed.
With --json, a command that fails also prints one JSON object on stdout:
  {"status": "error", "kind": "input"|"usage"|"output"|"internal"|"interrupted"|"killed", "exit": N,
   "file", "line", "col", "message", ...}
"""


class _Group(cmdline.Group):
    """The pipeline commands (:mod:`distc.commands`) are imported when they run, not at start."""

    def list_commands(self, ctx: cmdline.Context) -> list[str]:
        from .commands import NAMES

        return sorted(set(super().list_commands(ctx)) | set(NAMES))

    def format_commands(self, ctx: cmdline.Context, formatter) -> None:
        """``distc --help``'s list: a pipeline command not imported yet by its summary line
        (:data:`distc.commands.SUMMARY`), so that the list imports none of them."""
        from .commands import SUMMARY

        rows = [(n, super(_Group, self).get_command(ctx, n) or cmdline.Command(n, help=SUMMARY[n]))
                for n in self.list_commands(ctx)]
        limit = formatter.width - 6 - max(len(n) for n, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(n, c.get_short_help_str(limit)) for n, c in rows if not c.hidden])

    def get_command(self, ctx: cmdline.Context, name: str) -> cmdline.Command | None:
        from .commands import load

        return super().get_command(ctx, name) or load(name)

    def invoke(self, ctx: cmdline.Context):
        """A usage error of a command given ``--json`` is also one JSON object on stdout."""
        args = [*ctx.protected_args, *ctx.args]
        try:
            return super().invoke(ctx)
        except cmdline.CommandLineError as e:
            if args and json_requested(args[1:], self.get_command(ctx, args[0])):
                print_error_json(error_doc("usage" if e.exit_code == 2 else "input", e.exit_code, e.format_message()),
                                 args[0])
            raise


@cmdline.group(cls=_Group, context_settings=CONTEXT, epilog=EXIT_STATUS)
@cmdline.version_option(__version__, "-V", "--version", prog_name="distc")
def main() -> None:
    """distc: read, rewrite and print PaddlePaddle's distributed PIR programs."""
    gc.set_threshold(100_000, 50, 100)  # (again: main() may run in a process that changed it since)


# ----------------------------------------------------------------------------------------- fmt
@main.command()
@cmdline.argument("files", nargs=-1, required=True)
@cmdline.option("-o", "--output", default=None, help="write here instead of stdout (one input only)")
@cmdline.option("--check", is_flag=True, help="exit 1 with a diff if printing would change a file")
@cmdline.option("--canonical", is_flag=True, help="print every op anew instead of keeping source lines")
@program_option("print only the K-th program of files holding several (1 = first)")
def fmt(files: tuple[str, ...], output: str | None, check: bool, canonical: bool, program: int | None) -> None:
    """Parse FILES and print them back (byte for byte for Paddle's own dumps; files holding
    several programs, such as GLOG logs, print back whole)."""
    with reporting():
        if output is not None and len(files) > 1:
            raise cmdline.UsageError("-o takes one input file")
        if output is not None and check:
            raise cmdline.UsageError("--check writes nothing: it compares; drop -o")
        # in place (-o FILE of its one input) only when the output holds all of it, as it was (text, not gzip/xz)
        in_place = program is None and not check and not (output is not None and any(map(compressed, files)))
        with Outputs(inputs=list(files), in_place=in_place) as out:
            target = None if check else out.add("-o", output or "-")
            changed = 0
            outs = []
            for path in files:
                text = read_text(path)
                name = "<stdin>" if path == "-" else path
                progs = [parse_text(text, name, program)] if program is not None else parse_programs(text, name)
                if check:
                    res = "".join(print_program(p, canonical=canonical) for p in progs)
                    if res != text:
                        changed += 1
                        import difflib

                        diff = difflib.unified_diff(
                            text.splitlines(keepends=True), res.splitlines(keepends=True),
                            fromfile=name, tofile=name + " (distc fmt)")
                        sys.stdout.writelines(diff)
                else:  # (the printer's pieces, written without a string of the whole text)
                    for p in progs:
                        outs += print_pieces(p, canonical=canonical)
            if check:
                if changed:
                    err_console().print(f"{changed} file(s) would change", markup=False)
                    sys.exit(1)
                return
            out.write(target, outs)
            out.commit()


# ----------------------------------------------------------------------------------------- opt
@main.command()
@cmdline.argument("file", default="-")
@cmdline.option("-p", "--pass-pipeline", "pipeline", required=True, help="e.g. 'shard-optimizer{axis=0},partition,reshard{rank=0}'")
@cmdline.option("-o", "--output", default=None, help="output file (default stdout)")
@cmdline.option("--time-passes", is_flag=True, help="print a table of pass timings on stderr")
@cmdline.option("--no-verify-each", is_flag=True, help="skip the verifier between passes")
@cmdline.option("--print-ir-after-all", is_flag=True, help="print the program after each pass on stderr")
@cmdline.option("--json", "as_json", is_flag=True,
                help="pass timings, collectives and decisions as one line of JSON on stderr")
@program_option("the K-th program of a file holding several (1 = first)")
def opt(file: str, pipeline: str, output: str | None, time_passes: bool, no_verify_each: bool,
        print_ir_after_all: bool, as_json: bool, program: int | None) -> None:
    """Run a pass pipeline over FILE (mlir-opt style)."""
    import time

    from .passes.base import PassContext, PassManager, parse_pipeline

    with reporting() as diags:
        with Outputs(inputs=[file]) as out:
            target = out.add("-o", output or "-")
            t0 = time.perf_counter()
            try:
                passes = parse_pipeline(pipeline)
            except DiagnosticError as e:  # the -p text is an option, not an input file: usage (exit 2)
                raise cmdline.BadParameter(e.message, param_hint="'-p' / '--pass-pipeline'") from None
            if not passes:
                raise cmdline.BadParameter("names no pass (`distc passes` lists them; `distc fmt` prints a program "
                                           "back unchanged)", param_hint="'-p' / '--pass-pipeline'")
            for p in passes:  # the programs pass options name are inputs too
                for option in type(p).inputs:
                    out.add_input(getattr(p, option) or None)
            load_inputs(passes)
            ctx = PassContext(diagnostics=diags)
            prog = load_kept(file, ctx.sources, program)
            t_parse = time.perf_counter() - t0
            if any(p.name != "verify" for p in passes):  # a pass rewrites the program
                warn_unknown_ops(prog, diags)
            _check_ranks(passes, prog)

            def after(p, prg) -> None:
                err_console().print(f"// ----- IR after {p.spec()} -----\n" + str(prg), markup=False)

            pm = PassManager(passes, verify_each=not no_verify_each, callback=after if print_ir_after_all else None)
            try:
                pm.run(prog, ctx)
            except DiagnosticError as e:
                raise ctx.located(e, prog.filename) from None
            t0 = time.perf_counter()
            text = str(prog)
            t_print = time.perf_counter() - t0
            out.write(target, text)
            out.commit()
        if as_json:
            _opt_json(pipeline, [("(parse)", t_parse), *((t.name, t.seconds) for t in pm.timings),
                                 ("(print)", t_print)], ctx, diags.warnings)
        elif time_passes:
            _timing_table([("(parse)", t_parse), *((t.name, t.seconds) for t in pm.timings), ("(print)", t_print)])


def _check_ranks(passes, prog) -> None:
    """A pass's ``rank`` option names a rank of the program's meshes (as ``--rank`` does)."""
    from .analysis.cost import require_rank

    known = None
    for p in passes:
        r = getattr(p, "rank", None)
        if isinstance(r, int) and not isinstance(r, bool) and r >= 0:
            known = require_rank(prog, r, known=known, prefix=f"{p.spec()}: ")


def _opt_json(pipeline: str, timings: list[tuple[str, float]], ctx, warnings: list[str]) -> None:
    import json

    colls = [c.as_dict() for c in getattr(ctx, "collectives", []) or []]
    doc = {"command": "opt", "pipeline": pipeline,
           "passes": [{"pass": n, "seconds": round(s, 6)} for n, s in timings],
           "collectives": colls, "bytes_sent": sum(c["moved"] for c in colls),
           "decisions": list(getattr(ctx, "notes", []) or []), "warnings": list(warnings)}
    sys.stderr.write(json.dumps(doc, separators=(",", ":"), default=str) + "\n")



def _timing_table(rows: list[tuple[str, float]]) -> None:
    from .console import Table

    total = sum(s for _, s in rows) or 1.0
    table = Table(title="pass timings")
    table.add_column("pass")
    table.add_column("seconds", justify="right")
    table.add_column("%", justify="right")
    for name, s in rows:
        table.add_row(name, f"{s:.4f}", f"{100 * s / total:.1f}")
    table.add_row("total", f"{total:.4f}", "100.0")
    err_console().print(table)


# ------------------------------------------------------------------------------------- passes
@main.command("passes")
def list_passes() -> None:
    """List the registered passes and their options."""
    from .passes import load_passes
    from .passes.base import REGISTRY, option_fields

    load_passes()
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        opts = ", ".join(f"{f.name}={f.default!r}" for f in option_fields(cls))
        cmdline.echo(f"{name:22s} {cls.description}" + (f"  [{opts}]" if opts else ""))


def run(prog_name: str | None = None) -> None:
    """The ``distc`` executable (``prog_name``: how usage lines name it): :func:`main`, then exit without tearing down the objects the
    command built (a big program is a million objects: freeing them one by one takes longer
    than some commands).  Outputs are closed by then; stdout and stderr are flushed here.

    SIGINT, SIGTERM and SIGHUP stop the command through its clean-up (no output changed, no
    temporary file left) with exit status 128 + the signal (130, 143, 129)."""
    import os

    from .driver import say
    from .outputs import Interrupted, catch_signals

    catch_signals()
    try:
        instruction = os.environ.get("_DISTC_COMPLETE")
        if instruction:  # shell completion, as click's was (its rc line: eval "$(_DISTC_COMPLETE=bash_source distc)")
            from .cmdline.complete import run as complete

            ctx = cmdline.Context(main, info_name="distc", **main.context_settings)
            code = complete(main, ctx, instruction, _executable(), "_DISTC_COMPLETE", sys.stdout, sys.stderr)
        else:
            main(prog_name=prog_name)
            code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            say(str(e.code))
    except Interrupted as e:
        code = e.code
        say(f"distc: stopped by {e.name}; outputs left as they were")
    except MemoryError:  # even the error report could not be made
        code = 1
        say("distc: error: out of memory")
    except OSError as e:  # a help page, the version or a usage error that cannot be written (stdout full)
        code = 1
        say(f"distc: error: cannot write: {e.strerror or e}")
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _executable() -> str:
    """The name the shell runs distc by (a completion script is for it): ``distc`` unless the
    executable was renamed."""
    import os

    name = os.path.basename(sys.argv[0]) if sys.argv else ""
    return name if name and not name.endswith(".py") and name not in ("-c", "-m") else "distc"


if __name__ == "__main__":  # pragma: no cover
    run()
