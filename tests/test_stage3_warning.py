"""distc lowering a stage Paddle 3.3.1 refuses is said by a one-line warning on stderr, not only
under --explain, located where Paddle refuses (FILE:LINE:COL, the line, a caret); the exit status
is unchanged.  A new user's BERT dp2 x mp2 at stage 3 (tests/data/oracle/bert: Paddle fails it in
its embedding rule, ``bert_dp2mp2_adamw.s3.r*.error.txt``): at the ``pd_op.embedding`` line, with
Paddle's message.  The MoE (an expert on each of two sub-meshes) and the pp2 x dp2 LLaMA at stage
3, where Paddle segfaults on every rank (ShardingStage3's eager reshard of a parameter on a mesh
without the rank): at that parameter's line, naming the ranks."""

from __future__ import annotations

import re

from click.testing import CliRunner

import llmdata as L
import modelsdata as M
from distc.cli import main


def _warnings(args) -> list[str]:
    r = CliRunner().invoke(main, ["shard", *map(str, args), "-q"])
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    return [ln for i, ln in enumerate(lines) for ln in [ln, *lines[i + 1:i + 3]] if "warning:" in lines[i]]


def test_a_stage_paddle_refuses_is_a_warning(tmp_path):
    src = M.write(tmp_path, "bert", "bert_dp2mp2_adamw", "s0", 0, "before_partition")
    paddle = M.error("bert", "bert_dp2mp2_adamw", "s3", 0)  # Paddle's refusal, stored
    w = _warnings([src, "--stage", "3", "--rank", "0", "-o", tmp_path / "o.ir"])
    assert len(w) == 3, w
    at = next(i for i, x in enumerate(src.read_text().splitlines(), 1) if '"pd_op.embedding"' in x)
    assert w[0].startswith(f"{src}:{at}:5: warning: ZeRO stage 3: Paddle 3.3.1 fails to build this program "
                           "('pd_op.embedding': Multiple Tensor Axes [a,k] is sharded by same mesh dimension [0])"), w
    assert "Multiple Tensor Axes [a,k] is sharded by same mesh dimension [0]" in paddle
    assert "(--verify proves it, --explain says more)" in w[0]
    assert w[1].lstrip().startswith('(%') and '"pd_op.embedding"' in w[1] and w[2] == "    ^", w
    assert _warnings([src, "--stage", "1", "--rank", "0", "-o", tmp_path / "o.ir"]) == []


def test_paddle_segfaults_on_a_parameter_outside_the_rank_is_a_warning(tmp_path):
    """Paddle 3.3.1 segfaults at stage 3 on every rank of the MoE and of the pp2 x dp2 LLaMA."""
    for name, store, case in (("moe/moe_dp2ep2", L.FUSION, "moe"), ("clip/llama_pp2dp2", L.PP, "pp")):
        assert all(L.text(f"{name}.s3.r{r}.error.txt", store).startswith("CRASH: FatalError: `Segmentation fault`")
                   for r in range(4))
        src = tmp_path / f"{case}.ir"
        src.write_text(L.text(f"{name}.s0.r0.before_partition.ir", store))
        w = _warnings([src, "--stage", "3", "--rank", "0", "-o", tmp_path / "o.ir"])
        m = re.match(rf"{re.escape(str(src))}:(\d+):5: warning: ZeRO stage 3: Paddle 3.3.1 crashes on rank\(s\) "
                     r"0,1,2,3 \(a segmentation fault: ShardingStage3 reshards each parameter eagerly on every rank, "
                     r"and (\S+) is on mesh \[([0-9, ]+)\], without rank (\d)\); distc's program is its own", w[0])
        assert m and len(w) == 3, w
        line = src.read_text().splitlines()[int(m.group(1)) - 1]
        assert '"builtin.parameter"' in line and f'parameter_name:"{m.group(2)}"' in line, line
        assert f"process_ids:[{m.group(3).replace(' ', '')}]" in line and m.group(4) not in m.group(3)
        assert w[1] == line[:len(w[1]) - 3] + "..." and w[2] == "    ^", w  # (the line, cut for the terminal)
        if case == "moe":  # the first expert's mesh in the program, [[1],[3]]: Paddle crashes on ranks 0 and 2 there
            assert m.group(2, 3) == ("linear_2.w_0.dist", "1, 3"), w[0]
        s1 = _warnings([src, "--stage", "1", "--rank", "0", "-o", tmp_path / "o.ir"])
        assert not any("ZeRO stage 3" in x for x in s1), s1
