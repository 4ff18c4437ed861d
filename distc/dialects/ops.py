"""Op-name constants of the dialects distc reads and writes (``pd_op``, ``dist_op``, ``builtin``, ``cf``).

Passes and analyses compare ``op.name`` with these instead of spelling names out.  Collective op
names (both eras) live in :mod:`distc.dialects.collectives`, optimizer ops in
:mod:`distc.dialects.optimizers`.
"""

from __future__ import annotations

# dist_op
RESHARD = "dist_op.reshard"
SHARD_TENSOR = "dist_op.shard_tensor"
MOE_SUB_MESH_TENSORS = "dist_op.moe_sub_mesh_tensors"  # a global value -> one value per expert sub-mesh
MOE_GLOBAL_MESH_TENSOR = "dist_op.moe_global_mesh_tensor"  # the experts' values -> one global value

# builtin
PARAMETER = "builtin.parameter"
SET_PARAMETER = "builtin.set_parameter"
SHADOW_OUTPUT = "builtin.shadow_output"
COMBINE = "builtin.combine"
BUILTIN_SPLIT = "builtin.split"
BUILTIN_SLICE = "builtin.slice"

# cf (control flow helpers)
CF_YIELD = "cf.yield"
CF_TUPLE_PUSH = "cf.tuple_push"
CF_TUPLE_POP = "cf.tuple_pop"
CF_STACK_CREATE = "cf.stack_create"
CF_HAS_ELEMENTS = "cf.has_elements"

# pd_op
DATA = "pd_op.data"
FULL = "pd_op.full"
FULL_INT_ARRAY = "pd_op.full_int_array"
ASSIGN = "pd_op.assign"
ASSIGN_OUT_ = "pd_op.assign_out_"
SHARE_DATA_ = "pd_op.share_data_"
SHARE_DATA = "pd_op.share_data"
COALESCE_TENSOR_ = "pd_op.coalesce_tensor_"
CAST = "pd_op.cast"
RESHAPE = "pd_op.reshape"
TRANSPOSE = "pd_op.transpose"
SLICE = "pd_op.slice"
SPLIT = "pd_op.split"
SPLIT_WITH_NUM = "pd_op.split_with_num"
CONCAT = "pd_op.concat"
SCALE = "pd_op.scale"
DIVIDE = "pd_op.divide"
MULTIPLY = "pd_op.multiply"
ADD_N = "pd_op.add_n"
# the global-norm gradient clip and AMP's loss scaling
SQUARED_L2_NORM = "pd_op.squared_l2_norm"
STACK = "pd_op.stack"
CHECK_FINITE_AND_UNSCALE_ = "pd_op.check_finite_and_unscale_"
UPDATE_LOSS_SCALING_ = "pd_op.update_loss_scaling_"
# per-tensor gradient clips (ClipGradByNorm, ClipGradByValue): one gradient in, one out
CLIP_BY_NORM = "pd_op.clip_by_norm"
CLIP = "pd_op.clip"
PYLAYER = "pd_op.pylayer"

# Paddle's partition_skip_op_list: ops the partition pass (and op-dist-attr completion) leave alone
PARTITION_SKIP = frozenset({
    COMBINE, BUILTIN_SPLIT, PYLAYER, CF_YIELD, CF_TUPLE_PUSH, CF_TUPLE_POP, CF_STACK_CREATE, CF_HAS_ELEMENTS,
})
