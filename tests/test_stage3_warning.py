"""distc lowering a stage Paddle 3.3.1 refuses is said by a one-line warning on stderr, not only
under --explain (a new user's BERT dp2 x mp2 at stage 3, tests/data/oracle/bert: Paddle fails it,
``bert_dp2mp2_adamw.s3.r*.error.txt``); the exit status is unchanged."""

from __future__ import annotations

from click.testing import CliRunner

import modelsdata as M
from distc.cli import main


def test_a_stage_paddle_refuses_is_a_warning(tmp_path):
    src = M.write(tmp_path, "bert", "bert_dp2mp2_adamw", "s0", 0, "before_partition")
    assert M.error("bert", "bert_dp2mp2_adamw", "s3", 0)  # Paddle's refusal, stored
    r = CliRunner().invoke(main, ["shard", str(src), "--stage", "3", "--rank", "0", "-q", "-o", str(tmp_path / "o.ir")])
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stderr.splitlines() if "warning:" in ln]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"{src}: warning: ZeRO stage 3: Paddle 3.3.1 fails to build this program "
                               "('pd_op.add': Tensor Axis[2] is Sharded by two different mesh dimension"), lines
    assert "(--verify proves it, --explain says more)" in lines[0]
    r = CliRunner().invoke(main, ["shard", str(src), "--stage", "1", "--rank", "0", "-q", "-o", str(tmp_path / "o.ir")])
    assert r.exit_code == 0 and "warning" not in r.stderr, r.stderr
