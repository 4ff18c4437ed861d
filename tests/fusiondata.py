"""Paddle 3.3.1's ZeRO tensor-fusion programs (tests/data/oracle/fusion, made by gen_fusion.py):
one xz archive a case, ``CASE.VARIANT.rR.SNAPSHOT.ir`` inside; the stage-0 inputs of the LLaMA
cases are gen_llm.py's (``llm/clip/CASE.s0...``)."""

from __future__ import annotations

import functools
import io
import lzma
import tarfile

import llmdata
from conftest import DATA

FUSION = DATA / "oracle/fusion"
CASES = {"mlp_dp2": (0, 1), "mlp_dp4": (0, 1, 2, 3), "mlp_dp2mp2": (0, 1, 2, 3),
         "llama_dp2": (0, 1), "llama_dp4": (0, 1, 2, 3), "llama_dp2mp2": (0, 1, 2, 3)}
# variant -> distc shard options (the strategy.sharding settings gen_fusion.py gave Paddle)
VARIANTS = {"fuse": [], "overlap": ["--overlap"], "buf0": ["--comm-buffer-size", "0"],
            "release": ["--release-gradients"], "ovrel": ["--overlap", "--release-gradients"]}
PASS_OPTS = {"fuse": {}, "overlap": {"overlap": True}, "buf0": {"comm_buffer_mb": 0},
             "release": {"release_gradients": True}, "ovrel": {"overlap": True, "release_gradients": True}}


@functools.lru_cache(maxsize=2)
def archive(case: str) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress((FUSION / f"{case}.tar.xz").read_bytes()))) as tar:
        return {m.name: tar.extractfile(m).read().decode("utf-8") for m in tar.getmembers()}  # type: ignore[union-attr]


def text(case: str, variant: str, rank: int, snap: str) -> str:
    """A Paddle program; the LLaMA's stage-0 inputs come from llm/."""
    if case.startswith("llama") and variant == "s0":
        return llmdata.get("clip", case, "s0", rank, snap)
    return archive(case)[f"{case}.{variant}.r{rank}.{snap}.ir"]


def canon(t: str) -> str:
    """Ring ids renamed in order of appearance (Paddle's are a process-wide counter)."""
    import re

    m: dict[str, int] = {}
    return re.sub(r"ring_id:(\d+)", lambda g: "ring_id:R%d" % m.setdefault(g.group(1), len(m)), t)


def first_difference(a: str, b: str) -> str | None:
    """None when ``a`` and ``b`` are the same program up to ring ids, else the first line that
    differs (for the assertion message)."""
    a, b = canon(a), canon(b)
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {i + 1}:\n- {x[:300]}\n+ {y[:300]}"
    return f"{len(a.splitlines())} vs {len(b.splitlines())} lines"


def check(case: str, variant: str, rank: int) -> dict[str, str | None]:
    """distc's programs against Paddle's for one rank: ``before`` (the fused program before
    partition, ``annotate_only``), ``main`` (after reshard), ``startup`` (startup_final), ``dense``."""
    from distc.pipeline import ShardOptions, ShardPipeline
    from distc.syntax.parser import parse_program

    src = parse_program(text(case, "s0", rank, "before_partition"))
    sprog = parse_program(text(case, "s0", rank, "startup_after_remove"))
    opts = dict(PASS_OPTS[variant], tensor_fusion=True)
    out: dict[str, str | None] = {}
    res = ShardPipeline(src.clone(), ShardOptions(annotate_only=True, **opts)).lower(rank, copy=False)
    out["before"] = first_difference(text(case, variant, rank, "before_partition"), res.text)
    res = ShardPipeline(src.clone(), ShardOptions(**opts), startup=sprog).lower(rank, copy=False)
    out["main"] = first_difference(text(case, variant, rank, "after_reshard"), res.text)
    out["startup"] = first_difference(text(case, variant, rank, "startup_final"), res.startup_text)
    res = ShardPipeline(src, ShardOptions(dense=True, **opts)).lower(rank, copy=False)
    out["dense"] = first_difference(text(case, variant, rank, "dense"), res.text)
    return out


# ------------------------------------------------------------------ pipeline stages (pp2 x dp2, pp2 x dp2 x mp2)
# gen_fusion.py PP_CASES: gen_pp.py's LLaMA with enable_tensor_fusion, every rank; case -> variant ->
# (schedule, accumulate steps) (None: no schedule, gen_pp.py's JOBS model); distc's inputs are
# gen_pp.py's stage-0 programs (pp/ store; sched/ archive for the schedule model)
PP = "llama_pp2dp2"
PP_CASES = {"llama_pp2dp2": {"fuse": None, "FThenB.a2.fuse": ("FThenB", 2), "1F1B.a2.fuse": ("1F1B", 2),
                             "GM.a2.fuse": ("GM", 2), "VPP.a4.fuse": ("VPP", 4)},
            "llama_pp2dp2mp2": {"fuse": None, "1F1B.a4.fuse": ("1F1B", 4)}}
PP_VARIANTS = PP_CASES[PP]
PP_REFUSED = ["Eager1F1B.a4.fuse", "ZBH1.a4.fuse"]  # Paddle: 'pipeline scheduler only support FThenB, 1F1B and VPP'


def pp_refusal(variant: str, rank: int, case: str = PP) -> str | None:
    return archive(case).get(f"{case}.{variant}.r{rank}.error.txt")
PP_RANKS = {"llama_pp2dp2": [0, 1, 2, 3], "llama_pp2dp2mp2": list(range(8))}
PP_DIMS = {"llama_pp2dp2": ("dp",), "llama_pp2dp2mp2": ("dp", "mp")}


def pp_text(variant: str, rank: int, snap: str, case: str = PP) -> str:
    return archive(case)[f"{case}.{variant}.r{rank}.{snap}"]


def _pp_input(case: str, rank: int, snap: str) -> str:
    """gen_pp.py's stage-0 program of the rank (pp/ stores pp2 x dp2 x mp2's ranks 0, 3, 4, 7: the
    programs are the same within a pipeline stage)."""
    stored = [r for r in PP_RANKS[case] if llmdata.has("clip", case, "s0", r, snap, root=llmdata.PP)]
    r = rank if rank in stored else max(s for s in stored if s <= rank)
    return llmdata.get("clip", case, "s0", r, snap, root=llmdata.PP)


def pp_check(rank: int, case: str = PP) -> dict[str, str | None]:
    """:func:`check` for a pp program without a schedule (each stage's buffers on its mesh, the
    clip's norms resharded to the first stage and back)."""
    from distc.pipeline import ShardOptions, ShardPipeline
    from distc.syntax.parser import parse_program

    src = parse_program(_pp_input(case, rank, "before_partition"))
    sprog = parse_program(_pp_input(case, rank, "startup_after_remove"))
    want = lambda snap: pp_text("fuse", rank, snap + ".ir", case)  # noqa: E731
    o = dict(tensor_fusion=True, mesh_dims=PP_DIMS[case])
    out: dict[str, str | None] = {}
    res = ShardPipeline(src.clone(), ShardOptions(annotate_only=True, **o)).lower(rank, copy=False)
    out["before"] = first_difference(want("before_partition"), res.text)
    res = ShardPipeline(src.clone(), ShardOptions(**o), startup=sprog).lower(rank, copy=False)
    out["main"] = first_difference(want("after_reshard"), res.text)
    out["startup"] = first_difference(want("startup_final"), res.startup_text)
    res = ShardPipeline(src, ShardOptions(dense=True, **o)).lower(rank, copy=False)
    out["dense"] = first_difference(want("dense"), res.text)
    return out


def pp_sched_build(variant: str, ranks: list[int], case: str = PP):
    """distc's results for a schedule variant (``distc shard --tensor-fusion --pp-schedule MODE
    --acc-steps K --paddle`` from the stage-0 program of gen_pp.py's schedule model): (options,
    rank -> RankResult)."""
    import scheddata
    from distc.pipeline import ShardOptions, shard_ranks

    mode, acc = PP_CASES[case][variant] if variant in PP_CASES[case] else \
        (variant.split(".")[0], int(variant.split(".")[1][1:]))
    src, _ = scheddata.main_input(case, mode, acc, "s0")
    first = src[len(case) + 1:].split(".")[0]  # the mode whose stage-0 programs are stored
    startups = {r: scheddata.parsed(scheddata.base(case, first, acc, "s0", r) + "startup_after_remove.ir")
                for r in ranks}
    opts = ShardOptions(stage=1, mesh_dims=PP_DIMS[case], pp_schedule=None if mode == "GM" else mode, acc_steps=acc,
                        paddle_merge=True, tensor_fusion=True)
    return opts, shard_ranks(scheddata.parsed(src), ranks, startup=startups, options=opts)


def pp_sched_mismatches(variant: str, ranks: list[int], case: str = PP) -> list[str]:
    """``rR SNAPSHOT`` of every file of a schedule variant where distc is not Paddle (ring ids
    renamed): dist_final, dense, the job list, each job program, startup_final; and the job types
    where the two plans differ."""
    _, res = pp_sched_build(variant, ranks, case)
    bad = []
    for r, x in res.items():
        b = f"{case}.{variant}.r{r}."
        got = {"dist_final.ir": x.text, "dense.ir": str(x.dense), "jobs.txt": x.plan.job_list_text(),
               "startup_final.ir": x.startup_text}
        got.update({f"job.{t}.ir": str(p) for t, p in x.plan.programs.items()})
        want = sorted(n[len(b):] for n in archive(case) if n.startswith(b + "job."))
        if sorted(k for k in got if k.startswith("job.")) != want:
            bad.append(f"r{r} job types {sorted(k for k in got if k.startswith('job.'))} != {want}")
        bad += [f"r{r} {snap}" for snap, t in got.items() if first_difference(archive(case)[b + snap], t) is not None]
    return bad
