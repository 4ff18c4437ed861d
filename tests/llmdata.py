"""The LLaMA programs printed by Paddle 3.3.1 (tests/data/oracle/llm, made by gen_llm.py): stored
gzipped and deduplicated; ``MANIFEST.tsv`` maps each file name (``clip/CASE.sN.rR.SNAPSHOT.ir``)
to its stored content and says which names are the shared corpus's own files."""

from __future__ import annotations

import functools
import gzip
import re

from conftest import DATA

LLM = DATA / "oracle/llm"
PP = DATA / "oracle/pp"  # gen_pp.py: the layers on two pipeline-stage meshes (same scheme)
FUSION = DATA / "oracle/fusion"  # gen_fusion.py: ZeRO tensor fusion (fusion/) and MoE (moe/) programs
CONFIGS = ("clip", "amp")
MESH_DIMS = {"llama_dp4": ("dp",), "llama_dp2mp2": ("dp", "mp"), "llama_dp2mp4": ("dp", "mp")}
RANKS = {"llama_dp4": range(4), "llama_dp2mp2": range(4), "llama_dp2mp4": range(8)}
# gen_llm.py --more: other meshes, optimizers, shapes (configs sgd, noclip, amsgrad, clipnorm,
# ampnorm, decay)
# and (config ``mlp``) gen_stage1.py --more: the MLP of stage1/ at stages 2 and 3, dp2, dp8
MORE_MESH_DIMS = {"llama_dp2": ("dp",), "llama_dp1mp2": ("dp", "mp"), "llama_dp4mp2": ("dp", "mp"),
                  "llama_dp2mp2p": ("dp", "mp"), "llama62_dp4": ("dp",), "llama_vp_dp2mp2": ("dp", "mp"),
                  "llama_dp2mp2x2": ("dp", "mp", "x"), "llama_dp4o": ("dp",), "llama_dp4r": ("dp",),
                  "mlp_dp2_adamw": ("dp",), "mlp_dp4_adamw": ("dp",), "mlp_dp2_sgd": ("dp",),
                  "mlp_dp2mp2_adamw": ("dp", "mp"), "mlp15_dp4_adamw": ("dp",), "mlp_dp8_adamw": ("dp",),
                  "mlpb_dp2mp2_adamw": ("dp", "mp"), "mlpb4l_dp2mp2_adamw": ("dp", "mp"),
                  "mlpb_dp4mp2_adamw": ("dp", "mp"), "mlpb_mp2dp2_adamw": ("mp", "dp"),
                  "mlpbn_dp2mp2_adamw": ("dp", "mp")}
AMP_CONFIGS = ("amp", "ampnorm", "ampo1", "ampsgd", "ampams", "ampnoclip")  # built with strategy.amp: distc shard --amp
MESH_DIMS.update(MORE_MESH_DIMS)
_NAME = re.compile(r"(\w+)/(\w+)\.(s\d)\.r(\d+)\.(\w+)\.(ir|txt)$")


@functools.lru_cache(maxsize=None)
def manifest(root=LLM) -> dict[str, tuple[str, bool]]:
    """name -> (stored file hash, is a corpus file)."""
    out = {}
    for line in (root / "MANIFEST.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, h, corpus = line.split("\t")
        out[name] = (h, corpus == "corpus")
    return out


@functools.lru_cache(maxsize=64)
def text(name: str, root=LLM) -> str:
    h, _ = manifest(root)[name]
    return gzip.decompress((root / "store" / f"{h}.gz").read_bytes()).decode("utf-8")


def has(config: str, case: str, stage: str, rank: int, snap: str, root=LLM) -> bool:
    return f"{config}/{case}.{stage}.r{rank}.{snap}.ir" in manifest(root)


def get(config: str, case: str, stage: str, rank: int, snap: str, root=LLM) -> str:
    return text(f"{config}/{case}.{stage}.r{rank}.{snap}.ir", root)


def error(config: str, case: str, stage: str, rank: int) -> str | None:
    n = f"{config}/{case}.{stage}.r{rank}.error.txt"
    return text(n) if n in manifest() else None


def write(tmp_path, config: str, case: str, stage: str, rank: int, snap: str):
    """The file as a path (the CLI reads files)."""
    p = tmp_path / f"{config}.{case}.{stage}.r{rank}.{snap}.ir"
    if not p.exists():
        p.write_text(get(config, case, stage, rank, snap))
    return p


def cases(more: bool = False):
    """(config, case, rank) of every generated program: the clip/amp programs of the three
    meshes, or (``more``) those of ``gen_llm.py --more``."""
    seen = []
    for name in manifest():
        m = _NAME.match(name)
        if m and m.group(3) == "s0" and m.group(5) == "before_partition":
            base = m.group(1) in CONFIGS and m.group(2) in RANKS
            if base != more:
                seen.append((m.group(1), m.group(2), int(m.group(4))))
    return sorted(seen)
