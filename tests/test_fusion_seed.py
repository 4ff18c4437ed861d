"""The seed program (samples/seed_stage1_eraB.ir: one AdamW update of a 32000x1024 embedding,
mp-sharded on a 2x2 mesh, whose gradient is an input — an optimizer-role ``pd_op.data`` — not a
backward op's result) under ``--tensor-fusion``: it exited 70 (the clip walk took the gradient's
own ``pd_op.data`` for part of a global-norm clip and erased it).  Paddle cannot be given this
program (its fusion is in the optimizer's Python, over a model it builds), so the fused programs
are proven by the simulator on every rank: the seed's dims cut to 64x16, the same ops.

Its fused collectives carry the whole [2,2] mesh with nranks 2, as Paddle prints them, and no
other op names their ring's 1-D group: ``shard --verify`` hands the proof each rank's ring table
(``verify_step(rank_rings=)``); a wrong table diverges; without one (``distc verify`` of the saved
files: tests/test_verify_fused_files.py) the group is the sub-mesh along the mesh dim the reduced
gradients are partial on.  And ``--ranks R --verify`` for one rank
(lowered in place in this process) proves the other ranks from copies made before it."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

import llmdata
from conftest import DATA
from distc.analysis.simulate.proof import verify_step
from distc.cli import main
from distc.pipeline import ShardOptions, shard_ranks
from distc.syntax.parser import parse_program

SEED = DATA / "corpus/seed/seed_stage1_eraB.ir"
SAMPLE = DATA.parent.parent / "samples/mlp_dp2mp2_adamw.ir"


def small_seed() -> str:
    """The seed with its 32000x1024 tensors 64x16 (a 1 GB proof made small; nothing else changes)."""
    return SEED.read_text().replace("32000x1024", "64x16").replace("[32000,1024]", "[64,16]")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_seed_fuses_on_every_rank(tmp_path):
    """The stored seed itself (no proof: its tensors are 128 MB): every rank exits 0; the gradient
    input stays and is what the buffer coalesces and reduce-scatters over the sharding group."""
    r = run("shard", SEED, "--tensor-fusion", "--all-ranks", "-q", "-o", tmp_path / "r{rank}.ir")
    assert r.exit_code == 0, r.output
    for k in range(4):
        text = (tmp_path / f"r{k}.ir").read_text()
        g = re.search(r'\(%(\w+)\) = "pd_op\.data" \(\) \{[^\n]*name:"embedding_0\.w_0\.dist@GRAD"', text)
        assert g, text
        assert re.search(r'"builtin\.combine" \(%' + g.group(1) + r'\)', text)
        assert text.count('"pd_op.reduce_scatter"') == 1 and text.count('"pd_op.all_gather"') == 1
        assert 'name:"slice@embedding_0.w_0.dist_moment1_0"' in text


def test_only_an_input_gradient_is_left_out_of_the_clip(tmp_path):
    """The walk stops at a gradient that is an input (an op without operands), not at any
    optimizer-role op: Paddle's ClipGradByNorm (a clip_by_norm per gradient) is still refused
    under --tensor-fusion, as before (only ClipGradByGlobalNorm is rewritten for fusion)."""
    m = tmp_path / "clipnorm.ir"
    m.write_text(llmdata.get("clipnorm", "llama_dp4", "s0", 0, "before_partition"))
    r = run("shard", m, "--tensor-fusion", "--rank", "1", "-q", "-o", tmp_path / "o.ir")
    assert r.exit_code == 1, r.output
    assert "only Paddle's ClipGradByGlobalNorm is rewritten for fusion" in r.output
    assert not (tmp_path / "o.ir").exists()


@pytest.mark.parametrize("ranks", [["--all-ranks"], ["--ranks", "1"]])
def test_seed_fused_proven_every_rank(tmp_path, ranks):
    m = tmp_path / "seed.ir"
    m.write_text(small_seed())
    r = run("shard", m, "--tensor-fusion", *ranks, "--verify", "-q", "-o", tmp_path / "r{rank}.ir")
    assert r.exit_code == 0, r.output
    assert re.search(r"^verify: EQUAL: \d+ values .* on ranks \[0, 1, 2, 3\]", r.stderr, re.M), r.stderr


def test_seed_proof_with_and_without_the_ring_table():
    """No op of the programs names ring 12's group: the sharding group [0,2] and the mp group
    [0,1] are both 1-D sub-meshes of 2 through rank 0.  With the builder's ring table, EQUAL;
    without it (the files alone: distc verify), the group the partial gradients must be summed
    over (mesh dim 0) is taken, said in a note: EQUAL too (it was 'cannot tell which sub-mesh is
    the group': DIVERGED); with the mp group for the ring in the table (the table comes first),
    the gradients are reduced over the wrong ranks: DIVERGED."""
    serial = parse_program(small_seed())
    res = shard_ranks(parse_program(small_seed()), (0, 1, 2, 3), options=ShardOptions(tensor_fusion=True))
    progs = {r: parse_program(x.text) for r, x in res.items()}
    rings = {r: x.rings for r, x in res.items()}
    assert rings[0] == {12: (0, 2), 13: (0, 1)} and rings[3] == {12: (1, 3), 13: (2, 3)}
    rep = verify_step(serial, progs, rank_rings=rings)
    assert rep.status == 0 and rep.tensors >= 20 and not rep.assumed, rep.divergence
    rep = verify_step(serial, progs)
    assert rep.status == 0 and rep.tensors == 28, rep.divergence
    assert rep.assumed == ["ring 12: no file names its group; taken as the sub-mesh along mesh dim 0 of [2, 2] on "
                           "ranks [0, 1, 2, 3] ([0, 2], [1, 3]): what it reduces is partial on mesh dim(s) [0]"]
    assert rep.assumed[0] in rep.notes
    wrong = {r: {12: t[13], 13: t[12]} for r, t in rings.items()}
    assert verify_step(serial, progs, rank_rings=wrong).status == 1


@pytest.mark.parametrize("args", [[], ["--stage", "3"], ["--tensor-fusion"]])
def test_one_rank_of_ranks_verify(tmp_path, args):
    """``--ranks 1 --verify``: rank 1 alone is lowered in place, after the proof has built every
    rank from copies (it proved ranks 0, 2, 3 from rank 1's lowered program: DIVERGED, or
    tensor fusion's 'no squared_l2_norm')."""
    r = run("shard", SAMPLE, *args, "--ranks", "1", "--verify", "-q", "-o", tmp_path / "r{rank}.ir")
    assert r.exit_code == 0, r.output
    assert re.search(r"^verify: EQUAL: \d+ values .* on ranks \[0, 1, 2, 3\]", r.stderr, re.M), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r1.ir"]


@pytest.mark.parametrize("args", [["--rank", "1"], ["--all-ranks", "-o", "r{rank}.ir"], ["--tensor-fusion", "--rank", "0"]])
def test_dense_verify_is_a_usage_error(tmp_path, args):
    """``--dense --verify`` without a schedule: a dense program holds no layout to prove (it was
    'DIVERGED: nothing written' on every program, and exit 70 under --tensor-fusion); with a
    schedule the whole pipelined step is proven (tests/test_sched_verify.py)."""
    args = [str(tmp_path / a) if "{rank}" in a else a for a in args]
    r = run("shard", SAMPLE, "--dense", "--verify", "-q", *args)
    assert r.exit_code == 2, r.output
    assert "--dense programs do not" in r.output and "Traceback" not in r.output
    assert list(tmp_path.iterdir()) == []
