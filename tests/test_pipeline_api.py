"""The library pipeline (``distc.shard``, ``distc.shard_ranks``, ``ShardPipeline``): the README's
example runs and prints what the README shows; the library gives byte for byte what ``distc shard``
writes; the input is left alone; options and wrong input are errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import distc
from distc.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples/mlp_dp2mp2_adamw.ir"
STARTUP = ROOT / "samples/mlp_dp2mp2_adamw.startup.ir"


def _readme_example() -> tuple[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    sec = text.split("## Library: `distc.shard`", 1)[1]
    code = re.search(r"```python\n(.*?)```", sec, re.S).group(1)
    out = re.search(r"prints\n\n```text\n(.*?)```", sec, re.S).group(1)
    return code, out


def test_readme_library_example_runs_and_prints_what_the_readme_shows():
    code, want = _readme_example()
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == want


def _parse(path: Path) -> distc.Program:
    return distc.parse(path.read_text(encoding="utf-8"), str(path))


@pytest.mark.parametrize("args,kw", [
    ([], {}),
    (["--stage", "3", "--dense"], {"stage": 3, "dense": True}),
    (["--stage", "0"], {"stage": 0}),
    (["--annotate-only"], {"annotate_only": True}),
    (["--amp", "--axis", "dp", "--mesh-dims", "dp,mp"], {"amp": True, "axis": "dp", "mesh_dims": ("dp", "mp")}),
])
def test_library_equals_the_command_on_every_rank(tmp_path, args, kw):
    main, startup = _parse(SAMPLE), _parse(STARTUP)
    before = str(main), str(startup)
    every = distc.shard_ranks(main, startup=startup, **kw)
    assert (str(main), str(startup)) == before  # copy=True: the inputs are left as they are
    assert list(every) == [0, 1, 2, 3]
    for r in every:
        one = distc.shard(main, rank=r, startup=startup, **kw)
        res = CliRunner().invoke(cli, ["shard", str(SAMPLE), "--rank", str(r), "-o", str(tmp_path / "m.ir"), "-q",
                                       "--startup", str(STARTUP), "--startup-out", str(tmp_path / "s.ir"), *args])
        assert res.exit_code == 0, res.output
        assert one.text == every[r].text == (tmp_path / "m.ir").read_text()
        assert one.startup_text == every[r].startup_text == (tmp_path / "s.ir").read_text()
        assert one.bytes_sent == every[r].bytes_sent and one.notes == every[r].notes


def test_results_count_the_records_once():
    res = distc.shard(_parse(SAMPLE), rank=0)
    assert res.bytes_sent == sum(t["bytes_sent"] for t in res.totals().values()) == 2560
    assert res.totals(by_group=False) == {"all_gather": {"count": 6, "bytes_sent": 1312},
                                          "all_reduce": {"count": 1, "bytes_sent": 128},
                                          "reduce_scatter": {"count": 4, "bytes_sent": 1120}}
    assert res.memory_before.total - res.memory_after.total == res.saved == 2240
    assert res.ran == ["reshard"] and res.notes == []  # (the shared passes decided; reshard noted nothing)
    small = res.detached()
    assert small.program is None and small.collectives[0].layouts is None and small.bytes_sent == 2560
    assert res.num_collectives == 11 and len(res.steps) == 16 and sorted(res.rings.items())[0] == (12, (0, 2))


def test_wrong_input_and_options():
    main, startup = _parse(SAMPLE), _parse(STARTUP)
    with pytest.raises(distc.DiagnosticError, match="looks like a startup program"):
        distc.shard(startup)
    with pytest.raises(distc.DiagnosticError, match="rank 9 is in none of the program's meshes"):
        distc.shard(main, rank=9)
    with pytest.raises(distc.DiagnosticError, match=r"holds an optimizer update.*swapped") as e:
        distc.shard(main, startup=main)
    assert "error:" in str(e.value)
    with pytest.raises(ValueError, match="exclude each other"):
        distc.shard(main, annotate_only=True, dense=True)
    with pytest.raises(ValueError, match="stage 0 shards nothing"):
        distc.ShardOptions(stage=0, axis="dp")
    with pytest.raises(TypeError, match="not both"):
        distc.shard(main, options=distc.ShardOptions(), stage=2)
    # mesh_dims as --mesh-dims takes them (it was read letter by letter: "names 5 dim(s) (d,p,,,m,p)")
    assert distc.ShardOptions(mesh_dims="dp, mp").mesh_dims == distc.ShardOptions(mesh_dims=["dp", "mp"]).mesh_dims \
        == ("dp", "mp")
    assert distc.shard(main, axis="dp", mesh_dims="dp,mp").text == distc.shard(main, axis="dp", mesh_dims=("dp", "mp")).text


def test_warnings_belong_to_the_run(tmp_path):
    text = SAMPLE.read_text().replace('"pd_op.matmul"', '"pd_op.matmull"', 1)
    res = distc.shard(distc.parse(text, "typo.ir"), rank=0)
    assert len(res.warnings) == 1 and "'pd_op.matmull' is not an op of Paddle 3.3.1" in res.warnings[0]
    assert distc.shard(_parse(SAMPLE)).warnings == []  # the next run starts clean


def test_pipeline_steps_and_in_place_once():
    pipe = distc.ShardPipeline(_parse(SAMPLE), distc.ShardOptions(stage=1))
    pipe.check_inputs([0, 1])
    sh = pipe.prepare()
    assert pipe.prepare() is sh and sh.ran == ["shard-optimizer", "partition"]
    copy1 = pipe.lower(1, copy=True)
    last = pipe.lower(1, copy=False)
    assert copy1.text == last.text
    with pytest.raises(RuntimeError, match="in place already"):
        pipe.lower(2, copy=False)


def test_the_startup_program_goes_through_passes_like_the_main_program():
    """Each rank's startup stage is a list of pass objects the pass manager runs (with the main
    program's passes' records in the same pass context), not functions called by hand."""
    from distc.passes.shard_startup import MainLayouts

    main = _parse(SAMPLE)
    layouts = MainLayouts.of(main)

    def names(**kw):
        return [p.name for p in distc.ShardPipeline(main, distc.ShardOptions(**kw)).startup_passes(1, layouts)]

    assert names() == ["shard-startup"]
    assert names(tensor_fusion=True) == ["fuse-startup", "shard-startup"]
    assert names(acc_steps=2) == ["shard-startup", "zero-accumulators"]
    res = distc.shard(main, rank=1, startup=_parse(STARTUP))
    assert res.ran[-1] == f"shard-startup{{rank=1}} (on {STARTUP})"
