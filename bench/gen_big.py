#!/usr/bin/env python3
"""Big benchmark programs, printed by real PaddlePaddle 3.3.1 (CPU), and Paddle's own pass times.

A deep dp x mp MLP (mesh [[0,1],[2,3]], dim names dp, mp; Linear(256,256) layers with relu,
weights alternately Shard(1) / Shard(0) over mp, MSE loss, AdamW(lr=0.01)) goes through the same
pipeline as tests/data/oracle/gen_stage1.py (whose build_and_capture() it reuses), for rank 0:

  data/mlpN.s1.r0.before_partition.ir.gz   ZeRO-1 (dist.ShardingStage1("dp", mesh))
  data/mlpN.s0.r0.before_partition.ir.gz   plain data parallel (dist.shard_optimizer(opt))
  data/mlp96.s1.r0.after_reshard.ir.gz     parity target: after apply_partition_pass +
                                           ReshardPasses.apply_reshard_pass
  results/paddle_passes.json               wall time (time.perf_counter) of Paddle's
                                           apply_partition_pass and apply_reshard_pass on the
                                           main program, each run in a fresh process

  data/gpt2_N.s0.r0.before_partition.ir.xz   `--gpt2 N`: tests/data/oracle/gen_models.py's GPT-2
                                           with N blocks on dp2 x mp4 (8 ranks), AdamW, stage 0
                                           (bench_verify.py's program; N = 48: 8.2 MB of text, 75 KB xz)

Usage:  /tmp/paddle/bin/python bench/gen_big.py [--repeat N] [LAYERS...]   (default 96 256, N=3)
        /tmp/paddle/bin/python bench/gen_big.py --gpt2 48
Each (layers, stage, repeat) is a fresh Python process with PYTHONHASHSEED=0,
PADDLE_TRAINER_ID=0, PADDLE_TRAINERS_NUM=8 set before `import paddle`.
"""
import datetime
import gzip
import json
import lzma
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True  # no __pycache__ next to the oracle data
sys.path.insert(0, os.path.join(ROOT, "tests", "data", "oracle"))

HIDDEN = 256
MESH = [[0, 1], [2, 3]]
DIMS = ["dp", "mp"]
SAVE_AFTER_RESHARD = {96}


class _Stop(Exception):
    pass


def spec(layers):
    from gen_stage1 import C
    return C(MESH, DIMS, widths=[HIDDEN] * (layers + 1), mp="mp", opt="adamw", batch=8)


def worker(layers, stage, save, out_json):
    """One process: build, snapshot, time the two passes, stop after the reshard pass."""
    from gen_stage1 import build_and_capture

    timings = {}
    wanted = {"before_partition"} | ({"after_reshard"} if save and layers in SAVE_AFTER_RESHARD
                                     and stage == "s1" else set())
    sizes = {}

    def cb(name, program):
        if save and name in wanted:
            text = str(program)
            if not text.endswith("\n"):
                text += "\n"
            sizes[name] = len(text.encode())
            path = os.path.join(HERE, "data", f"mlp{layers}.{stage}.r0.{name}.ir.gz")
            # mtime=0: byte-stable .gz files
            with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                                        mtime=0, compresslevel=9) as f:
                f.write(text.encode())
        if name == "before_partition":
            sizes["ops_before_partition"] = len(program.global_block().ops)
        if name == "after_reshard":
            sizes["ops_after_reshard"] = len(program.global_block().ops)
            raise _Stop()

    try:
        build_and_capture(spec(layers), stage, cb, timings)
    except _Stop:
        pass
    with open(out_json, "w") as f:
        json.dump(dict(timings=timings, sizes=sizes), f)


def run(layers, stage, save, tmp_json):
    env = dict(os.environ)
    env.update(PYTHONHASHSEED="0", PADDLE_TRAINER_ID="0", PADDLE_TRAINERS_NUM="8",
               GLOG_minloglevel="2")
    subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", str(layers), stage,
                    "1" if save else "0", tmp_json], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(tmp_json) as f:
        return json.load(f)


# ----------------------------------------------------------------------------- GPT-2 (bench_verify)
GPT2_MESH = ([[0, 1, 2, 3], [4, 5, 6, 7]], ["dp", "mp"])


def gpt2_path(layers):
    return os.path.join(HERE, "data", f"gpt2_{layers}.s0.r0.before_partition.ir.xz")


def gpt2_worker(layers):
    """One process: tests/data/oracle/gen_models.py's GPT-2 (its builder and engine steps) with
    ``layers`` blocks on dp2 x mp4 (8 ranks), AdamW, stage 0 (distc's input); the program before
    partition, xz-compressed (11 MB of text -> ~100 KB)."""
    import gen_models

    gen_models.LAYERS = layers
    gen_models.MESHES["dp2mp4"] = GPT2_MESH

    def cb(name, program):
        if name != "before_partition":
            return
        text = str(program)
        text += "" if text.endswith("\n") else "\n"
        with lzma.open(gpt2_path(layers), "wb", preset=9) as f:
            f.write(text.encode())
        raise _Stop()

    try:
        gen_models.build_and_capture("gpt2", "dp2mp4", "adamw", "s0", cb)
    except _Stop:
        pass


def main(argv):
    if argv[:1] == ["--worker"]:
        worker(int(argv[1]), argv[2], argv[3] == "1", argv[4])
        return 0
    if argv[:1] == ["--gpt2-worker"]:
        gpt2_worker(int(argv[1]))
        return 0
    if argv[:1] == ["--gpt2"]:  # bench_verify.py's program: one Paddle process
        env = dict(os.environ, PYTHONHASHSEED="0", PADDLE_TRAINER_ID="0", PADDLE_TRAINERS_NUM="8",
                   GLOG_minloglevel="2")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--gpt2-worker", argv[1]], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(gpt2_path(int(argv[1])), os.path.getsize(gpt2_path(int(argv[1]))), "bytes")
        return 0
    repeat = 3
    if argv[:1] == ["--repeat"]:
        repeat, argv = int(argv[1]), argv[2:]
    layer_list = [int(a) for a in argv] or [96, 256]
    os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    tmp_json = os.path.join(HERE, "results", ".worker.json")
    results = []
    for layers in layer_list:
        for stage in ("s1", "s0"):
            runs = []
            sizes = {}
            for i in range(repeat):
                r = run(layers, stage, i == 0, tmp_json)
                if i == 0:
                    sizes = r["sizes"]
                runs.append(r["timings"])
                print(f"mlp{layers} {stage} run {i}: partition {r['timings']['partition']:.3f}s "
                      f"reshard {r['timings']['reshard']:.3f}s", flush=True)
            part = [t["partition"] for t in runs]
            resh = [t["reshard"] for t in runs]
            both = [a + b for a, b in zip(part, resh)]
            results.append(dict(
                program=f"mlp{layers}.{stage}.r0.before_partition.ir",
                layers=layers, stage=stage, rank=0, mesh=MESH, dim_names=DIMS, hidden=HIDDEN,
                optimizer="AdamW", **sizes,
                apply_partition_pass_s=part, apply_reshard_pass_s=resh, total_s=both,
                median_total_s=statistics.median(both), min_total_s=min(both)))
    os.remove(tmp_json)
    import importlib.metadata as md
    doc = dict(
        what="wall time (time.perf_counter) of Paddle's apply_partition_pass + "
             "ReshardPasses.apply_reshard_pass on the main program, rank 0, each run in a fresh "
             "process (Engine._parallel_pir of dist.to_static, captured by bench/gen_big.py)",
        paddle_version=md.version("paddlepaddle"),
        python=platform.python_version(),
        machine=dict(nproc=len(os.sched_getaffinity(0)), platform=platform.platform(),
                     processor=_cpu_model()),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        repeat=repeat,
        results=results,
    )
    with open(os.path.join(HERE, "results", "paddle_passes.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    return 0


def _cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
