"""partition: a ``builtin.split`` result typed unlike the list element it is (Paddle's completion
types ViT's concat_grad -> builtin.split -> expand_grad piece Replicate while it is Shard(0)) is
retyped to what it holds, so its user gets a reshard; ``partition{paddle=true}`` keeps Paddle's
typing (no reshard, each rank reduces only its own rows)."""

from __future__ import annotations

from distc import parse
from distc.analysis.simulate.proof import verify_step
from distc.passes.base import PassContext
from distc.passes.partition import PartitionPass
from distc.passes.reshard_pass import ReshardPass

M = "mesh_shape:[2],process_ids:[0,1]"
S0, R = f"{M},dims_mappings:[0,-1]", f"{M},dims_mappings:[-1,-1]"
T = "pd_dist.tensor<4x3xf32, {}>"
TEXT = f"""{{
    (%0) = "pd_op.data" () {{dtype:float32,name:"x",place:Place(undefined:0),shape:[4,3],stop_gradient:[true]}} : () -> {T.format(S0)}
    (%1) = "builtin.combine" (%0, %0) {{}} : ({T.format(S0)}, {T.format(S0)}) -> vec[{T.format(S0)},{T.format(S0)}]
    (%2, %3) = "builtin.split" (%1) {{}} : (vec[{T.format(S0)},{T.format(S0)}]) -> {T.format(R)}, {T.format(S0)}
    (%4) = "pd_op.full_int_array" () {{dtype:int64,place:Place(cpu),stop_gradient:[true],value:[0]}} : () -> pd_dist.tensor<1xi64, {M},dims_mappings:[-1]>
    (%5) = "pd_op.sum" (%2, %4) {{dtype:Undefined,keepdim:false,op_dist_attr:{{mesh:{{shape:[2],process_ids:[0,1]}},operand(0):{{{R}}},operand(1):{{{M},dims_mappings:[-1]}},result(0):{{{M},dims_mappings:[-1]}},chunk_id:-1}},stop_gradient:[true]}} : ({T.format(R)}, pd_dist.tensor<1xi64, {M},dims_mappings:[-1]>) -> pd_dist.tensor<3xf32, {M},dims_mappings:[-1]>
    () = "builtin.shadow_output" (%5) {{output_name:"y"}} : (pd_dist.tensor<3xf32, {M},dims_mappings:[-1]>) -> 
}}
"""


def lowered(paddle: bool) -> dict:
    out = {}
    for r in (0, 1):
        prog = parse(TEXT, f"r{r}.ir")
        ctx = PassContext()
        PartitionPass(paddle=paddle).apply(prog, ctx)
        ReshardPass(rank=r).apply(prog, ctx)
        out[r] = parse(str(prog), f"r{r}.ir")
    return out


def test_split_result_is_retyped_and_resharded():
    ranks = lowered(False)
    assert any(op.name == "pd_op.all_gather" for op in ranks[0].ops)
    rep = verify_step(parse(TEXT, "serial.ir"), ranks)
    assert rep.status == 0, rep.summary()


def test_paddle_typing_is_kept_and_proven_wrong():
    ranks = lowered(True)
    assert not any(op.name == "pd_op.all_gather" for op in ranks[0].ops)
    rep = verify_step(parse(TEXT, "serial.ir"), ranks)
    d = rep.divergence  # located at the split whose result is not what its type says
    assert rep.status == 1 and d.op.name == "builtin.split" and "local shape [2, 3], expected [4, 3]" in d.message


def _walk_by_hand(op):
    yield op
    for region in op.regions:
        for block in region.blocks:
            for o in block.ops:
                yield from _walk_by_hand(o)


def test_program_walk_all_ops_and_find_follow_the_nesting():
    """Program.walk / all_ops / find (their flat fast path where no op holds regions) give every
    op, nested ones after their parent, in program order."""
    from pathlib import Path

    here = Path(__file__).parent / "data" / "oracle" / "syntax"
    progs = [parse(TEXT)] + [parse((here / f).read_text(), f) for f in ("dist_with_regions.ir", "nested_if_in_while.ir")]
    for prog in progs:
        want = [o for top in prog.block.ops for o in _walk_by_hand(top)]
        assert list(prog.walk()) == want and prog.all_ops() == want
        for name in {op.name for op in want} | {"builtin.split", "no.such"}:
            assert prog.find(name) == [op for op in want if op.name == name]
    assert any(op.regions for op in progs[1].walk()) and len(progs[0].find("builtin.split")) == 1
    assert not any(op.regions for op in progs[0].ops) and progs[0].all_ops() is progs[0].block.ops
