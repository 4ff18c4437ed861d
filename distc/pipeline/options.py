"""The options of a shard run (:class:`ShardOptions`: ``distc shard``'s options, as the library takes
them), checked when made."""

from __future__ import annotations

from ..ir.records import record


@record(frozen=True)
class ShardOptions:
    """What to do (``distc shard``'s options).  ``axis``: the sharding mesh dim, by index or by
    a name of ``mesh_dims`` (names, or ``"dp,mp"`` as ``--mesh-dims`` takes them; ``None``:
    Paddle's rule); ``annotate_only`` stops after shard-optimizer; ``dense`` goes on to each
    rank's dense program; ``verify_each`` runs the verifier after every pass (else once, at the end)."""

    stage: int = 1
    axis: str | int | None = None
    mesh_dims: tuple[str, ...] = ()
    amp: bool = False
    annotate_only: bool = False
    dense: bool = False
    verify_each: bool = False
    moe_all_to_all: bool = False  # Paddle's FLAGS_enable_moe_utils lowering (reshard{moe_all_to_all})
    # strategy.pipeline / strategy.gradient_merge: a schedule (FThenB, 1F1B, VPP, Eager1F1B, ZBH1; GM or
    # None with acc_steps > 1: gradient merge alone) over acc_steps micro-batches; each rank's dense
    # program is split into job programs (RankResult.plan); the rank's program is Paddle's final dist
    # program (after gradient merge), or with dense its dense program as the scheduler leaves it.
    # paddle_merge: Paddle's averaging after a global-norm clip of the sum.
    pp_schedule: str | None = None
    acc_steps: int = 1
    vpp_degree: int = 2
    paddle_merge: bool = False
    # ZeRO-1 with tensor fusion (strategy.sharding.enable_tensor_fusion and its settings): the
    # tensor-fusion pass and partition run per rank (Paddle writes the fused program per rank)
    tensor_fusion: bool = False
    overlap: bool = False  # strategy.sharding.enable_overlap
    comm_buffer_mb: float = 256  # strategy.sharding.comm_buffer_size_MB
    release_gradients: bool = False  # strategy.sharding.release_gradients

    @property
    def scheduled(self) -> bool:
        return self.pp_schedule is not None or self.acc_steps > 1

    def __post_init__(self) -> None:
        if self.acc_steps < 1:
            raise ValueError(f"acc_steps {self.acc_steps}: at least 1 micro-batch")
        if self.scheduled:
            from ..passes.pipeline_schedule import MODES

            if self.pp_schedule is not None and self.pp_schedule not in MODES:
                raise ValueError(f"pp_schedule {self.pp_schedule!r}: one of {', '.join(MODES)}")
            if self.annotate_only:
                raise ValueError("annotate_only stops before the schedule")
        dims = self.mesh_dims  # "dp,mp" as on the command line, or a sequence of names
        object.__setattr__(self, "mesh_dims", tuple(d.strip() for d in dims.split(",") if d.strip())
                           if isinstance(dims, str) else tuple(dims))
        if self.stage not in (0, 1, 2, 3):
            raise ValueError(f"stage {self.stage}: ZeRO stages are 0 to 3")
        if self.annotate_only and self.dense:
            raise ValueError("annotate_only and dense exclude each other")
        if self.stage == 0 and self.axis not in (None, ""):
            raise ValueError("axis chooses the mesh dim ZeRO shards over; stage 0 shards nothing")
        if self.tensor_fusion and self.stage not in (1, 2, 3):
            raise ValueError(f"tensor fusion is ZeRO-1 (Paddle's ShardingStage1) or 3 (distc's), not stage {self.stage}")
        if not self.tensor_fusion and (self.overlap or self.release_gradients or self.comm_buffer_mb != 256):
            raise ValueError("overlap, release_gradients and comm_buffer_mb are settings of tensor fusion")
