"""``make test-paddle``: ``distc capture`` on the shipped sample scripts under real Paddle 3.3.1.

``DISTC_PADDLE_PYTHON`` is an interpreter with paddlepaddle==3.3.1 (the Makefile makes its own
virtualenv).  For each sample: every captured file equals the committed test data byte for byte
(ring ids aside: the number of byte-identical files is checked too), and ``distc shard`` on the
captured inputs gives Paddle's captured programs (main, dense, startup) on every rank.  Not part of
``make test`` (tests/conftest.py leaves this folder out unless DISTC_PADDLE_PYTHON is set).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import llmdata as L
from irutil import normalize_rings as canon

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
PY = os.environ.get("DISTC_PADDLE_PYTHON", "")


def run(*args, cwd=ROOT, check=True):
    p = subprocess.run([sys.executable, "-m", "distc", *map(str, args)], capture_output=True, text=True, cwd=cwd)
    if check:
        assert p.returncode == 0, (args, p.stderr[-3000:])
    return p


def capture(out: Path, script: str, *args, world: int | None = None, ranks: str | None = None) -> dict:
    extra = (["--world-size", str(world)] if world else []) + (["--ranks", ranks] if ranks else [])
    p = run("capture", "-o", out, "-q", "--json", *extra, "--", PY, ROOT / "samples" / script, *args)
    return json.loads(p.stdout)


def compare(cap: Path, stored) -> tuple[int, int, list[str]]:
    """Every captured program file against ``stored(name)`` (text or None): (compared, byte-identical,
    names with no stored counterpart)."""
    man = json.loads((cap / "manifest.json").read_text())
    n = same = 0
    missing = []
    for name in man["files"]:
        want = stored(name)
        if want is None:
            missing.append(name)
            continue
        got = (cap / name).read_text()
        assert canon(got) == canon(want), f"{name} differs from the stored file"
        n += 1
        same += got == want
    return n, same, missing


def shard_all(cap: Path, out: Path, man: dict, dense: bool) -> None:
    """``distc shard`` of every captured rank from the folder's inputs, as the capture's summary says."""
    from distc.capture.folder import shard_options

    out.mkdir(exist_ok=True)
    main = cap / man["inputs"]["main"].replace("{rank}", str(man["ranks"][0]))
    args = ["shard", main, *shard_options(man), "--ranks", ",".join(map(str, man["ranks"])), "-q",
            "-o", out / "main.r{rank}.ir", "--startup", cap / man["inputs"]["startup"],
            "--startup-out", out / "startup.r{rank}.ir"]
    run(*args, *(["--dense"] if dense else []))


def check_shard(cap: Path, tmp: Path) -> int:
    """distc's programs for every rank equal Paddle's captured ones; the number compared."""
    man = json.loads((cap / "manifest.json").read_text())
    st = man["stage"]
    shard_all(cap, tmp / "dist", man, dense=False)
    shard_all(cap, tmp / "dense", man, dense=True)
    n = 0
    for r in man["ranks"]:
        for got, snap in ((tmp / "dist" / f"main.r{r}.ir", "after_reshard"), (tmp / "dense" / f"main.r{r}.ir", "dense"),
                          (tmp / "dist" / f"startup.r{r}.ir", "startup_final")):
            want = (cap / f"s{st}.r{r}.{snap}.ir").read_text()
            assert canon(got.read_text()) == canon(want), f"rank {r}: distc shard != Paddle's {snap}"
            n += 1
    return n


# ------------------------------------------------------------------------------------- the MLP
def stage1_file(name: str) -> str | None:
    """tests/data: corpus (rank 0) and oracle (ranks 1-3) files of mlp_dp2mp2_adamw."""
    rank = int(name.split(".")[1][1:])
    sub = "corpus/paddle-3.3.1/stage1" if rank == 0 else "oracle/stage1"
    p = DATA / sub / f"mlp_dp2mp2_adamw.{name}"
    return p.read_text() if p.exists() else None


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Path:
    cap = tmp_path_factory.mktemp("mlp") / "cap"
    doc = capture(cap, "train_mlp.py", "--stage", "1", world=4)
    assert doc["stage"] == 1 and doc["ranks"] == [0, 1, 2, 3] and doc["paddle"] == "3.3.1"
    return cap


def test_mlp_capture_equals_stored(mlp):
    n, same, missing = compare(mlp, stage1_file)
    assert missing == [] and n == 28 and same == 28


def test_mlp_inputs_are_the_shipped_sample(mlp):
    assert (mlp / "s0.r0.before_partition.ir").read_bytes() == (ROOT / "samples/mlp_dp2mp2_adamw.ir").read_bytes()
    assert (mlp / "s0.r0.startup_after_remove.ir").read_bytes() == \
        (ROOT / "samples/mlp_dp2mp2_adamw.startup.ir").read_bytes()


def test_mlp_shard_equals_paddle(mlp, tmp_path):
    assert check_shard(mlp, tmp_path) == 12


# ----------------------------------------------------------------------------------- the LLaMA
def llm_file(name: str) -> str | None:
    """tests/data/oracle/llm (gen_llm.py's store): clip/llama_dp2mp2.*"""
    key = f"clip/llama_dp2mp2.{name}"
    return L.text(key) if key in L.manifest() else None


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    cap = tmp_path_factory.mktemp("llama") / "cap"
    doc = capture(cap, "train_llama.py", "--stage", "1", world=4, ranks="0,3")
    assert doc["stage"] == 1 and doc["ranks"] == [0, 3]
    return cap


def test_llama_capture_equals_stored(llama):
    n, same, missing = compare(llama, llm_file)
    assert missing == [] and n == 14 and same == 14


def test_llama_shard_equals_paddle(llama, tmp_path):
    assert check_shard(llama, tmp_path) == 6


# ------------------------------------------------------------------------------- Paddle fails
def test_script_failing_under_paddle(tmp_path):
    """Paddle's own error, the rank and the line of the script; nothing written."""
    script = tmp_path / "train_adam.py"
    script.write_text((ROOT / "samples/train_mlp.py").read_text().replace("optimizer.AdamW(", "optimizer.Adam("))
    p = run("capture", "-o", tmp_path / "cap", "--world-size", "4", "--", PY, script, check=False)
    assert p.returncode == 1
    assert f"{script}:" in p.stderr and "error: rank 0: the script failed" in p.stderr
    assert "only supports AdamW and SGD optimizer for now" in p.stderr
    assert "opt = dist.shard_optimizer(opt, stage(\"dp\", mesh))" in p.stderr
    assert not (tmp_path / "cap").exists()
    assert [x for x in tmp_path.iterdir() if x.name.startswith(".distc")] == []


# -------------------------------------------------------------------- a pipeline schedule (1F1B)
SCHED = DATA / "oracle/sched/llama_pp2dp2.tar.xz"  # gen_pp.py --sched (pipeline schedules' test data)


@pytest.fixture(scope="module")
def pp(tmp_path_factory) -> Path:
    """pp2 x dp2, 1F1B over 4 micro batches, stage 1, a rank of each pipeline stage; the world size
    is the program's (4: with 8, Paddle would put ranks 0-3 on the first stage; the first rank ran
    with 3, then again with 4)."""
    cap = tmp_path_factory.mktemp("pp") / "cap"
    doc = capture(cap, "train_llama_pp.py", ranks="1,2")
    assert doc["stage"] == 1 and doc["ranks"] == [1, 2] and doc["world_size"] == 4
    return cap


def test_pp_jobs_per_stage(pp):
    """Ranks of the two stages run different 1F1B orders (so each rank ran on its own stage)."""
    first = (pp / "s1.r1.jobs.txt").read_text().split("\n")
    last = (pp / "s1.r2.jobs.txt").read_text().split("\n")
    assert first[:4] == ["recv_forward 0", "forward 0", "recv_forward 1", "forward 1"]
    assert last[:3] == ["recv_forward 0", "forward 0", "backward 0"]


def test_pp_capture_equals_stored(pp, tmp_path):
    import tarfile

    with tarfile.open(SCHED) as tar:
        tar.extractall(tmp_path, filter="data")
    ref = {p.name: p for p in tmp_path.rglob("llama_pp2dp2.1F1B.a4.*")}

    def stored(name):
        p = ref.get(f"llama_pp2dp2.1F1B.a4.{name}")
        return p.read_text() if p else None

    n, same, missing = compare(pp, stored)
    assert sorted(missing) == ["s1.r1.after_reshard.ir", "s1.r2.after_reshard.ir"]  # not kept there
    assert n == 26 and same == 26


def test_pp_shard_equals_paddle(pp, tmp_path):
    """distc shard on the captured inputs gives Paddle's program after reshard on every rank."""
    man = json.loads((pp / "manifest.json").read_text())
    shard_all(pp, tmp_path, man, dense=False)
    for r in man["ranks"]:
        want = (pp / f"s1.r{r}.after_reshard.ir").read_text()
        assert canon((tmp_path / f"main.r{r}.ir").read_text()) == canon(want), r
