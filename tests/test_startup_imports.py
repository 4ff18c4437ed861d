"""What a ``distc shard`` run imports (issue 23: its start-up).

A timing would be noise in a unit test on a shared machine; the modules a run imports are not.
``distc shard MAIN --rank 0`` and ``--all-ranks`` on the shipped sample, in a fresh interpreter,
must not import what they do not run: no numpy or Lark (the simulator and the grammar path), no
other command, no pass of an option not given (tensor fusion, schedules, dense), no pathlib
(urllib and ipaddress come with it), no dataclasses (distc.ir.records); no other distribution
(click neither: distc.cmdline is the command line); and no more of distc's own modules than ``DISTC_MODULES`` (a new import on this path
is a decision: raise the budget in the same change, with its cost from ``bench/bench_startup.py``,
which times the start-up: interpreter, imports, work; ``bench/bench_shard.py`` reports
``import_s`` beside Paddle).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "mlp_dp2mp2_adamw.ir"

CHILD = r"""
import sys
sys.argv = ["distc", *sys.argv[1:]]
from distc.cli import main
try:
    main()
except SystemExit as e:
    code = e.code
modules = sorted(sys.modules)
import json  # (after: json imports re)
print(json.dumps({"exit": code, "modules": modules}), file=sys.__stdout__)
"""

# what a plain shard run must not import: (module name prefix, why it is not needed)
NOT_NEEDED = {
    "numpy": "the simulator's (verify)",
    "lark": "the grammar path (the fast parser reads Paddle's dumps)",
    "distc.analysis.simulate": "--verify",
    "distc.syntax.grammar": "the grammar path",
    "distc.passes.tensor_fusion": "--tensor-fusion",
    "distc.passes.fusion_startup": "--tensor-fusion",
    "distc.passes.fusion_layout": "--tensor-fusion",
    "distc.passes.pipeline_schedule": "--pp-schedule / --acc-steps",
    "distc.passes.pipeline_jobs": "--pp-schedule / --acc-steps",
    "distc.passes.gradient_merge": "--acc-steps",
    "distc.passes.dist_to_dense": "--dense / --startup",
    "distc.passes.remove_other_rank": "--dense",
    "distc.commands.verify": "another command",
    "distc.commands.diff": "another command",
    "distc.commands.report": "another command",
    "distc.capture": "a capture folder as MAIN",
    "pathlib": "imports urllib.parse and ipaddress (~10 ms)",
    "pkgutil": "listing modules: os.listdir does",
    "gzip": "the op list is plain text",
    "zlib": "the op list is plain text (zlib's import and the decompression: ~1.5 ms)",
    "distc.passes.zero3": "--stage 3",
    "distc.passes.reshard.extra_lower": "a reshard lowered by one of distc's own functions (x_table, x_via_replicate)",
    "dataclasses": "distc.ir.records builds the classes with fields (a fifth of the cost)",
    "distc.passes.shard_startup": "--startup",
    "distc.analysis.memory": "the summary's memory tables (-q shows none)",
    "copy": "weakref and a failing import of org.python.core with it (~1.5 ms): with_value copies a dict",
    "typing": "names in annotations only (TYPE_CHECKING = False): ~3.5 ms of imports",
    "signal": "distc.outputs uses its C module _signal (signal builds three enums: ~1 ms)",
}
# ... nor, on one rank, these (--all-ranks imports pickle for its workers' results, and pickle imports re)
NOT_NEEDED_ONE_RANK = {
    "re": "the parser's patterns come compiled from distc.syntax.regex_table (re's compiler: ~7 ms, its import ~4 ms)",
    "enum": "re's and signal's (~2 ms)",
}


# distc's own modules a `distc shard MAIN --rank 0` run imports (81 at 3adbf14: the command, the
# pipeline, its four passes, the 19 modules of reshard lowering, the IR, parser and printer; 82 with
# analysis.op_index, the input checks' index of ops by name: 0.36 ms of -X importtime, its compiled
# bytecode; it saves walks of the whole program worth ~20 ms of CPU on mlp256; 82 again since
# pipeline.reshard is imported first by the pipeline package (0.35 ms of -X importtime): imported when
# used, 8 library threads making their first imports at once deadlocked in Python 3.11's package-init
# locks (tests/test_pipeline_threads.py failed 2/2 at d0a682c, passes 6/6 with it); 81 since
# passes.shard_startup and analysis.memory load only with a startup program / memory figures (and
# pipeline.options holds ShardOptions): -0.9 and -0.7 ms of -X importtime); 78 since passes.zero3
# loads at stage 3 only and reshard.extra_lower (with extra_ops) with the first reshard a distc function lowers;
# 80 with ir.record_templates, the records' precompiled methods (~0.4 ms to load; the 3 records compiled during
# the imports, ~1 ms, and 22 more during a mlp96 run, ~6 ms, are not compiled now) and syntax.parser.lines, the
# op-line regexes split from parser.fast (at 500 lines; the regexes were compiled there: ~0.1 ms more a module);
# 82 with syntax.regex and syntax.regex_table, the parser's patterns without re (~0.1 ms to load the table, ~0.4 ms
# to make the patterns from it; compiling them was ~7 ms and importing re ~4 ms);
# 83 with ir.program, the containers (Block, Region, Program) split from ir.core at 499 lines (core + program
# ~0.85 ms of -X importtime self against core's ~0.7 ms, best of 12 at load 10)
DISTC_MODULES = 83
# the distributions other than distc and the standard library it imports (click is a test dependency only)
OTHERS: set[str] = set()


def run_modules(args: list[str], tmp_path: Path) -> list[str]:
    r = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["exit"] in (0, None), r.stderr
    return doc["modules"]


@pytest.mark.parametrize("many", [False, True], ids=["rank0", "all-ranks"])
def test_shard_imports_only_what_it_runs(tmp_path, many):
    out = ["--all-ranks", "-o", str(tmp_path / "main.r{rank}.ir")] if many else ["--rank", "0", "-o",
                                                                                  str(tmp_path / "main.ir")]
    mods = run_modules(["shard", str(SAMPLE), *out, "-q"], tmp_path)
    not_needed = NOT_NEEDED if many else {**NOT_NEEDED, **NOT_NEEDED_ONE_RANK}
    bad = {m: why for p, why in not_needed.items() for m in mods if m == p or m.startswith(p + ".")}
    assert not bad, f"a plain `distc shard` run imports modules it does not need: {bad}"
    # and it did run: the pipeline and the reshard functions were imported
    assert "distc.pipeline.shard" in mods and "distc.passes.reshard.s_to_r" in mods
    if not many:
        own = [m for m in mods if m == "distc" or m.startswith("distc.")]
        assert len(own) <= DISTC_MODULES, (
            f"a plain `distc shard --rank 0` imports {len(own)} of distc's modules, over the budget of "
            f"{DISTC_MODULES}: import the new ones where they are used, or raise the budget (with the cost)")
        stdlib = set(sys.stdlib_module_names)
        others = {m.split(".")[0] for m in mods} - stdlib - {"distc", "__main__", "_distutils_hack", "sitecustomize"}
        assert others <= OTHERS, f"a plain `distc shard` imports other distributions: {sorted(others - OTHERS)}"


def test_import_distc_imports_nothing_yet():
    """`import distc` loads no module of its own (the command sets up its process first, see distc.cli);
    the library's names and subpackages load when first used."""
    code = ("import sys, distc; before = sorted(m for m in sys.modules if m.startswith('distc.')); "
            "p = distc.parse('{\\n}\\n'); print(before, type(p).__name__, distc.ir.ProcessMesh.__name__, "
            "distc.print_program(p) == '{\\n}\\n', distc.ShardOptions.__name__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["[]", "Program", "ProcessMesh", "True", "ShardOptions"], r.stderr
    import distc

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        distc.nope  # noqa: B018


def test_a_program_built_from_distc_alone_prints():
    """A program made through the library's names (``distc.Program``, no parse yet) prints, as it did
    when ``import distc`` loaded the printer; ``dir(distc)`` lists the library's names (completion)."""
    code = ("import distc; p = distc.Program(); print(repr(str(p)), 'parse' in dir(distc), "
            "'shard' in dir(distc))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["'{\\n}\\n'", "True", "True"], (r.stdout, r.stderr)


def test_help_imports_no_command(tmp_path):
    """`distc --help` lists the commands from their summary lines, importing none of them."""
    mods = run_modules(["--help"], tmp_path)
    loaded = [m for m in mods if m.startswith("distc.commands.") or m.startswith("distc.capture")
              or m in ("numpy", "lark", "jinja2", "pygal")]
    assert not loaded, f"`distc --help` imports {loaded}"


@pytest.mark.parametrize("width", [30, 45, 80, 400])
def test_summaries_are_the_commands_help(width):
    """distc.commands.SUMMARY gives the list of `distc --help` what each command's own help gives."""
    from distc.cmdline import Command
    from distc.commands import SUMMARY, load

    for name, line in SUMMARY.items():
        assert (Command(name, help=line).get_short_help_str(width)
                == load(name).get_short_help_str(width)), name


def test_options_still_import_their_passes(tmp_path):
    """The deferred imports are taken where the options need them."""
    mods = run_modules(["shard", str(SAMPLE), "--rank", "1", "--dense", "-o", str(tmp_path / "d.ir"), "-q"],
                       tmp_path)
    assert "distc.passes.dist_to_dense" in mods and "distc.passes.remove_other_rank" in mods
