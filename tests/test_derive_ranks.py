"""``distc shard --all-ranks`` derives the ranks' texts from the first rank's
(:mod:`distc.pipeline.derive`): each derived text, startup program, collective records, ring ids
and notes equal a whole lowering of that rank, byte for byte, on several models and meshes (dp,
dp x mp, a 3-D mesh, pipeline-stage meshes, MoE sub-meshes, ZeRO stages 0-3, AMP); a rank that
cannot be derived (another pipeline stage: other ops) is lowered whole."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

import llmdata
import modelsdata as M
from conftest import DATA
from distc.cli import main
from distc.workers import fork_each
from distc.pipeline import ShardOptions, ShardPipeline
from distc.pipeline.derive import derivable
from distc.syntax.parser import parse

CORPUS = DATA / "corpus/paddle-3.3.1/stage1"
ORACLE = DATA / "oracle/stage1"


def _file(d, name: str, snap: str) -> str:
    return (d / f"{name}.s0.r0.{snap}.ir").read_text()


def _inputs(case: str) -> tuple[str, str | None]:
    """(main, startup) texts of a case."""
    if case in ("mlp_dp2mp2_adamw",):
        return _file(CORPUS, case, "before_partition"), _file(CORPUS, case, "startup_after_remove")
    if case.startswith("mlp"):
        return _file(ORACLE, case, "before_partition"), _file(ORACLE, case, "startup_after_remove")
    if case.startswith("llama_pp"):
        return llmdata.text(f"clip/{case}.s0.r0.before_partition.ir", llmdata.PP), None
    if case.startswith("llama"):
        return (llmdata.get("amp", case, "s0", 0, "before_partition"),
                llmdata.get("amp", case, "s0", 0, "startup_after_remove"))
    if case.startswith("moe"):
        return (llmdata.text(f"moe/{case}.s0.r0.before_partition.ir", llmdata.FUSION),
                llmdata.text(f"moe/{case}.s0.r0.startup_after_remove.ir", llmdata.FUSION))
    model = case.split("_", 1)[0]
    return M.get(model, case, "s0", 0, "before_partition"), M.get(model, case, "s0", 0, "startup_after_remove")


CASES = [  # (case, options, ranks derived at least)
    ("mlp_dp2mp2_adamw", dict(stage=1), 3),
    ("mlp_dp2mp2_adamw", dict(stage=3), 3),
    ("mlp_dp2mp4_adamw", dict(stage=1), 7),
    ("mlp_dp2mp2x2_adamw", dict(stage=3), 7),
    ("mlp15_dp4_adamw", dict(stage=3), 0),  # uneven: the pieces differ per rank, lowered whole
    ("llama_dp2mp2", dict(stage=1, amp=True, axis="dp", mesh_dims=("dp", "mp")), 3),
    ("llama_pp2dp2", dict(stage=1), 1),  # two pipeline stages: the other stage's ranks lowered whole
    ("moe_dp2ep2", dict(stage=1), 1),
]
# the written models (bigger: make test-oracle, tests/oracle/test_derive_models.py)
MODEL_CASES = [
    ("mlp_dp2mp2_adamw", dict(stage=0), 3),
    ("llama_dp2mp4", dict(stage=1, amp=True, axis="dp", mesh_dims=("dp", "mp")), 7),
    ("moe_dp2ep2", dict(stage=1, moe_all_to_all=True), 0),
    ("gpt2_dp2mp2_adamw", dict(stage=1, mesh_dims=("dp", "mp")), 3),
    ("vit_dp4_adamw", dict(stage=3), 0),  # two reshards lowered one by one (not replayable): lowered whole
    ("pfllama_dp2mp2_adamw", dict(stage=1, mesh_dims=("dp", "mp")), 3),
]


def ids(cases) -> list[str]:
    return [f"{c}-{'-'.join(f'{k}={v}' for k, v in o.items())}" for c, o, _ in cases]


def _work(lower):
    def work(r):
        res = lower(r)
        if res is None:
            return None
        for x in (res, *(res.derived or {}).values()):
            x.text, x.startup_text  # noqa: B018  (printed in the worker, as the command does)
        return res.detached(texts=True)

    return work


@pytest.mark.parametrize("case,opts,least", CASES, ids=ids(CASES))
def test_derived_ranks_equal_whole_lowerings(case, opts, least):
    check(case, opts, least)


def _kw_header() -> str:
    """The ``^kw:`` arguments of Paddle's own pipeline job program (gradient-merge buffers)."""
    text = (DATA / "oracle/dumps/engine_pipeline.r0.job0.ir").read_text()
    lines = text.split("\n")
    i = lines.index("    ^kw:")
    j = i + 1
    while lines[j].startswith("        %kwarg_"):
        j += 1
    assert j > i + 1
    return "\n".join(lines[i:j]) + "\n"


@pytest.mark.parametrize("case,opts,least", [CASES[0], CASES[5]], ids=ids([CASES[0], CASES[5]]))
def test_kw_arguments_derived(case, opts, least):
    """A program with ``^kw:`` arguments (as Paddle prints job programs and tensor fusion's buffers)
    is derived too, byte-identical to whole lowerings: the inserted ops' lines are where the printer
    put them (the ``^kw:`` lines counted), not counted again from the program's head."""
    main_text, startup_text = _inputs(case)
    assert "^kw:" not in main_text
    check(case, opts, least, main_text.replace("{\n", "{\n" + _kw_header(), 1))


def test_print_lines_is_the_printers_layout():
    """print_lines gives each op the line the printer put it on: ``^kw:`` arguments, regions
    (if/while bodies, their block arguments and closing braces) and the head counted."""
    from distc.syntax.printer import print_lines

    for name in ("syntax/block_kwargs.ir", "dumps/engine_pipeline.r0.job1.ir", "dumps/cond_nested.ir",
                 "dumps/while_grad_nested.ir", "dumps/dist_cond_while.ir", "dumps/pylayer_multi.ir"):
        src = (DATA / "oracle" / name).read_text()
        prog = parse(src, name)
        ops = list(prog.walk())
        text, lines = print_lines(prog, map(id, ops))
        assert text == src == str(prog), name
        rows = text.split("\n")
        at = [lines[id(op)] for op in ops]
        assert at == sorted(set(at)), name  # one line each, in print order
        for op, i in zip(ops, at):
            assert rows[i].lstrip().startswith("(") and f'"{op.name}"' in rows[i], (name, i, rows[i])


def check(case: str, opts: dict, least: int, main_text: str | None = None) -> None:
    """Every rank of ``case`` under ``opts`` by ``--all-ranks``'s path, against its whole lowering;
    at least ``least`` ranks derived (``main_text``: the main program's text, if not the case's)."""
    main_text, startup_text = main_text or _inputs(case)[0], _inputs(case)[1]
    options = ShardOptions(**opts)

    def pipeline():
        startup = parse(startup_text, "startup.ir") if startup_text is not None else None
        pipe = ShardPipeline(parse(main_text, "main.ir"), options, startup=startup)
        pipe.prepare()
        return pipe

    pipe = pipeline()
    assert derivable(pipe, pipe.ranks())
    got = pipe.run(each=lambda rs, lower: fork_each(rs, _work(lower), 2))
    derived = [r for r, res in got.items() if res.derived_from is not None]
    assert len(derived) >= least, (case, derived)
    whole = pipeline()
    for r, res in got.items():
        w = whole.lower(r, copy=True)
        assert res.text == w.text, f"rank {r} (derived from {res.derived_from})"
        assert res.startup_text == w.startup_text, f"rank {r}"
        assert res.collectives == [dataclasses.replace(c, layouts=None) for c in w.collectives], f"rank {r}"
        assert (res.rings, res.notes, res.ran) == (w.rings, w.notes, w.ran), f"rank {r}"
        assert res.derived is None


def test_command_writes_derived_ranks(tmp_path):
    """The command writes the derived texts (made in the parent process) with the others, each
    equal to ``--rank R`` alone, startup programs too."""
    d = CORPUS
    main_in = d / "mlp_dp2mp2_adamw.s0.r0.before_partition.ir"
    startup_in = d / "mlp_dp2mp2_adamw.s0.r0.startup_after_remove.ir"

    def run(*args):
        r = CliRunner().invoke(main, ["shard", *map(str, args)])
        assert r.exit_code == 0, r.output
        return r

    run(main_in, "--all-ranks", "-q", "-o", tmp_path / "m.r{rank}.ir", "--startup", startup_in,
        "--startup-out", tmp_path / "s.r{rank}.ir")
    for k in range(4):
        run(main_in, "--rank", k, "-q", "-o", tmp_path / "one.ir", "--startup", startup_in,
            "--startup-out", tmp_path / "one_s.ir")
        assert (tmp_path / f"m.r{k}.ir").read_text() == (tmp_path / "one.ir").read_text(), k
        assert (tmp_path / f"s.r{k}.ir").read_text() == (tmp_path / "one_s.ir").read_text(), k


def test_derived_pieces_are_the_derived_text_in_utf8():
    """An ASCII base text: each derived rank is views of its encoding and the rank's line ends
    (no copy of the text), the same bytes as the text derived as a string; RankResult.text joins them."""
    from distc.dialects.rings import RingAllocator
    from distc.passes.reshard.lower import lower_reshard
    from distc.passes.reshard.replay import Replayer
    from distc.pipeline.derive import derive, line_ends, sketch_alone, sketch_of
    from distc.pipeline.results import RankResult

    pipe = ShardPipeline(parse(_inputs("mlp_dp2mp2_adamw")[0], "main.ir"), ShardOptions(stage=1))
    rp = Replayer(lower_reshard, log=[])
    res, ctx, _ = pipe.lower_main(0, copy=False, replayer=rp)
    base, text = sketch_of(rp, res.program.style, res.program)
    assert text.isascii()
    data, ends = memoryview(text.encode()), line_ends(text)
    for r in (1, 2, 3):
        other = sketch_alone(rp, base, r, RingAllocator(ctx.rings.first, reserved=set(ctx.rings.reserved)),
                             res.program.style)
        s, recs = derive(base, text, other, ends, False)
        pieces, _ = derive(base, text, other, ends, False, data)
        assert isinstance(s, str) and s != text and recs is None
        assert b"".join(pieces) == s.encode() and all(isinstance(p, (bytes, memoryview)) for p in pieces)
        x = RankResult(r, None, None, _pieces=pieces)
        assert x.text_pieces() is pieces and x.text == s


def test_a_derived_rank_pickles_and_copies_with_its_text():
    """A library run's derived ranks hold views of the base rank's encoding (73490cb): pickle and
    deepcopy of their RankResult still work (the text joined), and give the same text."""
    import copy
    import pickle

    pipe = ShardPipeline(parse(_inputs("mlp_dp2mp2_adamw")[0], "main.ir"), ShardOptions(stage=1))
    res = pipe.run(None, each=lambda rs, work: {r: work(r) for r in rs})
    views = [r for r in res if res[r]._pieces is not None and isinstance(res[r]._pieces[0], memoryview)]
    assert views
    for r in views:
        x = res[r]
        for y in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x)):
            assert y._pieces is None and y.text == x.text

