"""``distc shard`` on the LLaMA programs through the command line: ``--amp``, ``--stage 2``,
``--stage 3``, what ``--explain`` and the summary say, and wrong input (never a silent success)."""

from __future__ import annotations

import re

from click.testing import CliRunner

import llmdata as L
from conftest import DATA
from distc.cli import main
from test_shard_passes import canon

STAGE1 = DATA / "corpus/paddle-3.3.1/stage1"


def shard(*args, code: int = 0):
    r = CliRunner().invoke(main, ["shard", *map(str, args)])
    assert r.exit_code == code, r.stderr + (repr(r.exception) if r.exception else "")
    return r


def test_help_names_stage3_and_amp():
    out = CliRunner().invoke(main, ["shard", "--help"]).stdout
    assert "--amp" in out and "3 shards" in out.replace("\n", " ")


def test_amp_stage1_corpus(tmp_path):
    """The corpus's amp/llama_dp2mp2 rank 0: main, dense, startup through the CLI."""
    src = L.write(tmp_path, "amp", "llama_dp2mp2", "s0", 0, "before_partition")
    st = L.write(tmp_path, "amp", "llama_dp2mp2", "s0", 0, "startup_after_remove")
    common = [src, "--amp", "--axis", "dp", "--mesh-dims", "dp,mp", "-q"]
    shard(*common, "-o", tmp_path / "m.ir")
    assert canon((tmp_path / "m.ir").read_text()) == canon(L.get("amp", "llama_dp2mp2", "s1", 0, "after_reshard"))
    shard(*common, "--dense", "-o", tmp_path / "d.ir", "--startup", st, "--startup-out", tmp_path / "s.ir")
    assert canon((tmp_path / "d.ir").read_text()) == canon(L.get("amp", "llama_dp2mp2", "s1", 0, "dense"))
    assert canon((tmp_path / "s.ir").read_text()) == canon(L.get("amp", "llama_dp2mp2", "s1", 0, "startup_final"))
    # without --amp it is the plain (clip) path: not Paddle's AMP program
    shard(src, "--axis", "dp", "--mesh-dims", "dp,mp", "-q", "-o", tmp_path / "n.ir")
    assert canon((tmp_path / "n.ir").read_text()) != canon(L.get("amp", "llama_dp2mp2", "s1", 0, "after_reshard"))


def test_amp_detected_from_the_program(tmp_path):
    """Master weights (multi_precision) show AMP: the path is taken without --amp and said."""
    text = L.get("amp", "llama_dp2mp2", "s0", 0, "before_partition")
    src = tmp_path / "mp.ir"
    src.write_text(text.replace("multi_precision:false", "multi_precision:true", 1))
    r = shard(src, "--axis", "dp", "--mesh-dims", "dp,mp", "--annotate-only", "--explain", "-o", tmp_path / "a.ir")
    assert "AMP optimizer path (detected: master weights" in r.stderr
    got = (tmp_path / "a.ir").read_text().replace("multi_precision:true", "multi_precision:false", 1)
    assert canon(got) == canon(L.get("amp", "llama_dp2mp2", "s1", 0, "before_partition"))


def test_stage2_is_stage1_and_says_so(tmp_path):
    src = L.write(tmp_path, "clip", "llama_dp2mp2", "s0", 0, "before_partition")
    r = shard(src, "--stage", "2", "--axis", "dp", "--mesh-dims", "dp,mp", "--explain", "-o", tmp_path / "m.ir")
    assert "stage 2 = stage 1" in r.stderr  # --explain
    assert "(stage 2 = stage 1, as in Paddle's static mode" in r.stderr  # the summary
    assert canon((tmp_path / "m.ir").read_text()) == canon(L.get("clip", "llama_dp2mp2", "s2", 0, "after_reshard"))


def test_stage3_dp4_corpus_and_summary(tmp_path):
    src = L.write(tmp_path, "clip", "llama_dp4", "s0", 0, "before_partition")
    st3 = L.write(tmp_path, "clip", "llama_dp4", "s3", 0, "startup_after_remove")
    r = shard(src, "--stage", "3", "--dense", "-o", tmp_path / "d.ir", "--startup", st3,
              "--startup-out", tmp_path / "s.ir")
    assert canon((tmp_path / "d.ir").read_text()) == canon(L.get("clip", "llama_dp4", "s3", 0, "dense"))
    assert canon((tmp_path / "s.ir").read_text()) == canon(L.get("clip", "llama_dp4", "s3", 0, "startup_final"))
    # parameters, gradients and optimizer states all drop to a quarter on rank 0
    rows = {k: [c.strip() for c in v.split("│")[:2]] for k, v in
            re.findall(r"│ (parameters|gradients|optimizer states|total)\s+│([^\n]*)", r.stderr)}
    assert rows["parameters"] == ["96.6 KiB", "24.2 KiB"]
    assert rows["gradients"] == ["96.6 KiB", "24.2 KiB"]
    assert rows["optimizer states"] == ["193.4 KiB", "48.5 KiB"]
    assert "ZeRO-3 saving on rank 0" in r.stderr and "parameters, gradients and optimizer states" in r.stderr


def _sinks(text: str) -> dict[str, str]:
    """name -> dense type of every value the startup program hands over."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r'(?:parameter_name|output_name):"([^"]+)"\} : \((tensor<[^>]*>)\)', text)}


def test_stage3_from_a_stage0_startup_creates_only_shards(tmp_path):
    """Given the stage-0 startup (parameters initialised whole), every rank creates only its shard
    of each parameter and state: Paddle's own stage-3 ``startup_final``, program for program."""
    src = L.write(tmp_path, "amp", "llama_dp4", "s0", 2, "before_partition")
    st0 = L.write(tmp_path, "amp", "llama_dp4", "s0", 2, "startup_after_remove")
    shard(src, "--stage", "3", "--amp", "--rank", "2", "--dense", "-q", "-o", tmp_path / "d.ir",
          "--startup", st0, "--startup-out", tmp_path / "s.ir")
    got = _sinks((tmp_path / "s.ir").read_text())
    want = _sinks(L.get("amp", "llama_dp4", "s3", 2, "startup_final"))
    assert len(want) == 1 + 21 + 21 * 4 and got == want
    text = (tmp_path / "s.ir").read_text()
    assert '"pd_op.slice"' not in text
    assert canon(text) == canon(L.get("amp", "llama_dp4", "s3", 2, "startup_final"))


def test_stage3_where_paddle_refuses_says_why(tmp_path):
    assert "Sharded by two different mesh dimension" in L.error("clip", "llama_dp2mp2", "s3", 0)
    src = L.write(tmp_path, "clip", "llama_dp2mp2", "s0", 1, "before_partition")
    r = shard(src, "--stage", "3", "--rank", "1", "--axis", "dp", "--mesh-dims", "dp,mp", "--explain",
              "-o", tmp_path / "m.ir")
    # a column-parallel weight: mp splits axis 1, dp takes axis 0 -- the layout of its ZeRO states
    assert re.search(r"stage 3: linear_0\.w_0\.dist is \[R,S1\]: another mesh dim already shards tensor axis 1; "
                     r"distc shards axis 0 over dp -> \[S0,S1\]", r.stderr)
    # a row-parallel weight: mp splits axis 0, dp takes axis 1
    assert "linear_3.w_0.dist is [R,S0]: another mesh dim already shards tensor axis 0; distc shards axis 1 over dp" \
        in r.stderr
    assert "stage 3: rms_norm_0.w_0.dist [R,R] -> [S0,R]" in r.stderr
    text = (tmp_path / "m.ir").read_text()
    assert "pd_op.all_gather" in text and "pd_op.reduce_scatter" in text and "assign_out_" not in text


# ------------------------------------------------------------------------------ wrong input
def test_no_optimizer_op_is_an_error(tmp_path):
    src = DATA / "corpus/paddle-3.3.1/reshard/m2_R_to_S0.r0.before.ir"
    r = shard(src, "-o", tmp_path / "x.ir", code=1)
    assert "error: MAIN has no optimizer update op" in r.stderr
    assert not (tmp_path / "x.ir").exists()
    r = shard(src, "--stage", "0", "-q", "-o", tmp_path / "x.ir")  # stage 0: a warning
    assert "warning: MAIN has no optimizer update op" in r.stderr


def test_main_and_startup_swapped(tmp_path):
    m = STAGE1 / "mlp_dp4_adamw.s0.r0.before_partition.ir"
    s = STAGE1 / "mlp_dp4_adamw.s0.r0.startup_after_remove.ir"
    r = shard(s, "--startup", m, "--startup-out", tmp_path / "s.ir", "-o", tmp_path / "m.ir", code=1)
    assert "MAIN looks like a startup program" in r.stderr and "swapped" in r.stderr
    r = shard(m, "--startup", m, "--startup-out", tmp_path / "s.ir", "-o", tmp_path / "m.ir", code=1)
    assert re.search(r"before_partition\.ir:\d+:\d+: error: --startup holds an optimizer update", r.stderr)
    assert "swapped" in r.stderr and "^" in r.stderr


def test_startup_before_is_not_the_startup_input(tmp_path):
    m = STAGE1 / "mlp_dp4_adamw.s0.r0.before_partition.ir"
    b = STAGE1 / "mlp_dp4_adamw.s1.r0.startup.before.ir"
    r = shard(m, "--startup", b, "--startup-out", tmp_path / "s.ir", "-o", tmp_path / "m.ir", code=1)
    assert "initialises none of the 16 optimizer states MAIN reads" in r.stderr
    assert "startup_after_remove" in r.stderr
    assert not (tmp_path / "m.ir").exists() and not (tmp_path / "s.ir").exists()


def test_partial_startup_is_a_warning(tmp_path):
    m = STAGE1 / "mlp_dp4_adamw.s0.r0.before_partition.ir"
    lines = (STAGE1 / "mlp_dp4_adamw.s0.r0.startup_after_remove.ir").read_text().splitlines()
    part = tmp_path / "part.ir"
    part.write_text("\n".join(lines[:30] + ["}"]) + "\n")
    r = shard(m, "--startup", part, "--startup-out", tmp_path / "s.ir", "-q", "-o", tmp_path / "m.ir")
    assert re.search(r"warning: the startup program does not initialise 7 of the 16 optimizer states", r.stderr)


def test_detect_amp_signs():
    """The program-level signs of AMP: low-precision casts, loss scaling, master weights."""
    import distc
    from distc.passes.zero_clip import detect_amp

    plain = distc.parse(L.get("clip", "llama_dp4", "s0", 0, "before_partition"), "p")
    assert detect_amp(plain) == []
    cast = distc.parse('{\n    (%0) = "pd_op.full" () {dtype:float32,place:Place(cpu),shape:[2],stop_gradient:[true],'
                       'value:1} : () -> tensor<2xf32>\n    (%1) = "pd_op.cast" (%0) {dtype:bfloat16,stop_gradient:'
                       '[true]} : (tensor<2xf32>) -> tensor<2xbf16>\n}\n', "c")
    assert any("low-precision casts" in w for w in detect_amp(cast))
