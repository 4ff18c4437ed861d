"""Programs of models written from scratch (GPT-2, ViT, the optimizers' MLP) and from PaddleFormers
(LLaMA, Qwen2), printed by Paddle 3.3.1: tests/data/oracle/models/MODEL.tar.xz, made by
tests/data/oracle/gen_models.py.  Names ``MODEL/CASE.sN.rR.SNAPSHOT.ir`` (or ``.error.txt``), CASE
``MODEL_MESH_OPT`` (``gpt2_dp2mp2_adamw``).  Each archive is read once per test process."""

from __future__ import annotations

import functools
import re
import tarfile

from conftest import DATA

MODELS = DATA / "oracle/models"
_NAME = re.compile(r"(\w+)/(\w+)\.(s\d)\.r(\d+)\.(\w+)\.(ir|txt)$")
MESH_DIMS = {"dp2": ("dp",), "dp4": ("dp",), "dp2mp2": ("dp", "mp")}


def path(model: str):
    """models/MODEL.tar.xz, or a model captured by a user's own script with ``distc capture``
    (tests/data/oracle/MODEL/MODEL.tar.xz, ``make test-oracle`` only: not in :func:`models`)."""
    p = MODELS / f"{model}.tar.xz"
    return p if p.exists() else DATA / "oracle" / model / f"{model}.tar.xz"


@functools.lru_cache(maxsize=None)
def archive(model: str) -> dict[str, bytes]:
    with tarfile.open(path(model), "r:xz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def models() -> list[str]:
    return sorted(p.name[:-len(".tar.xz")] for p in MODELS.glob("*.tar.xz"))


def names(model: str) -> list[str]:
    return sorted(archive(model))


def name(model: str, case: str, stage: str, rank: int, snap: str) -> str:
    return f"{model}/{case}.{stage}.r{rank}.{snap}.ir"


def has(model: str, case: str, stage: str, rank: int, snap: str) -> bool:
    return name(model, case, stage, rank, snap) in archive(model)


def get(model: str, case: str, stage: str, rank: int, snap: str) -> str:
    return archive(model)[name(model, case, stage, rank, snap)].decode("utf-8")


def error(model: str, case: str, stage: str, rank: int) -> str | None:
    b = archive(model).get(f"{model}/{case}.{stage}.r{rank}.error.txt")
    return None if b is None else b.decode("utf-8")


def write(tmp_path, model: str, case: str, stage: str, rank: int, snap: str):
    """The file as a path (the CLI reads files)."""
    p = tmp_path / f"{case}.{stage}.r{rank}.{snap}.ir"
    if not p.exists():
        p.write_text(get(model, case, stage, rank, snap))
    return p


def mesh_dims(case: str) -> tuple[str, ...]:
    return MESH_DIMS[case.split("_")[1]]


def cases(model: str | None = None) -> list[tuple[str, str, int]]:
    """(model, case, rank) of every stage-0 program (not the gradient-merge ones, ``*_gm``: their
    dense and startup programs are after Paddle's gradient-merge pass)."""
    out = []
    for m in ([model] if model else models()):
        for n in archive(m):
            g = _NAME.match(n)
            if g and g.group(3) == "s0" and g.group(5) == "before_partition" and not g.group(2).endswith("_gm"):
                out.append((g.group(1), g.group(2), int(g.group(4))))
    return sorted(out)


def stages(model: str, case: str, rank: int) -> list[str]:
    return [s for s in ("s0", "s1", "s2", "s3") if has(model, case, s, rank, "after_reshard")]
