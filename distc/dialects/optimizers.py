"""Paddle's optimizer ops: the operand roles of each signature and the in-place map.

For each optimizer op (and each operand count it has had), the role of every operand and which
operand each result updates in place.  Paddle accepts only AdamW and SGD in ``shard_optimizer``;
distc shards the other stateful optimizers the same way.  ``analysis.memory`` sizes states by
these roles, ``passes.shard_optimizer`` shards them, ``passes.partition`` follows in-place results.
"""

from __future__ import annotations

import functools
from collections import namedtuple

from ..ir.core import Operation, Value
from . import ops

# operand roles
PARAM, GRAD, LR, STATE, BETA_POW, MASTER, SKIP, SCALAR = (
    "param", "grad", "lr", "state", "beta_pow", "master", "skip_update", "scalar")


# One signature of an optimizer op: operand roles (with names) and result -> operand.
#   operands: tuple[tuple[str, str], ...]  (role, name)
#   inplace: tuple[int, ...]  result i updates operand inplace[i]
#   spmd: str  "adam": merge param/grad/states/master; "sgd": param/grad elementwise only;
#   "replicate": every operand whole (Paddle has no rule: its default one; lamb_'s trust ratio
#   takes norms of the whole parameter and update, so ZeRO states are gathered for the update)
OptSig = namedtuple("OptSig", ["operands", "inplace", "spmd"])
OptSig.__doc__ = "One signature of an optimizer op: operand roles (with names) and result -> operand."


def _sig(operands: str, inplace: tuple[int, ...], spmd: str = "adam") -> OptSig:
    out = []
    for item in operands.split():
        name, role = item.split(":")
        out.append((role, name))
    return OptSig(tuple(out), inplace, spmd)


_ADAM13 = _sig("param:param grad:grad learning_rate:lr moment1:state moment2:state moment2_max:state "
               "beta1_pow:beta_pow beta2_pow:beta_pow master_param:master skip_update:skip_update "
               "beta1:scalar beta2:scalar epsilon:scalar", (0, 3, 4, 5, 6, 7, 8))
_ADAM12 = _sig("param:param grad:grad learning_rate:lr moment1:state moment2:state "
               "beta1_pow:beta_pow beta2_pow:beta_pow master_param:master skip_update:skip_update "
               "beta1:scalar beta2:scalar epsilon:scalar", (0, 3, 4, 5, 6, 7))

# (op name, operand count) -> signature.  12-operand adam(w)_ is the 2024 one (no moment2_max).
OPTIMIZERS: dict[tuple[str, int], OptSig] = {
    ("pd_op.adamw_", 13): _ADAM13,
    ("pd_op.adamw_", 12): _ADAM12,
    ("pd_op.adam_", 13): _ADAM13,
    ("pd_op.adam_", 12): _ADAM12,
    ("pd_op.sgd_", 4): _sig("param:param learning_rate:lr grad:grad master_param:master", (0, 3), "sgd"),
    ("pd_op.momentum_", 5): _sig("param:param grad:grad velocity:state learning_rate:lr "
                                 "master_param:master", (0, 2, 4)),
    ("pd_op.lamb_", 9): _sig("param:param grad:grad learning_rate:lr moment1:state moment2:state "
                             "beta1_pow:beta_pow beta2_pow:beta_pow master_param:master "
                             "skip_update:skip_update", (0, 3, 4, 5, 6, 7), "replicate"),
    ("pd_op.adagrad_", 5): _sig("param:param grad:grad moment:state learning_rate:lr master_param:master",
                                (0, 2, 4)),
    ("pd_op.rmsprop_", 7): _sig("param:param mean_square:state grad:grad moment:state learning_rate:lr "
                                "mean_grad:state master_param:master", (0, 3, 1, 5, 6)),
    ("pd_op.adamax_", 7): _sig("param:param grad:grad learning_rate:lr moment:state inf_norm:state "
                               "beta1_pow:beta_pow master_param:master", (0, 3, 4, 6)),
    ("pd_op.adadelta_", 6): _sig("param:param grad:grad avg_squared_grad:state avg_squared_update:state "
                                 "learning_rate:lr master_param:master", (0, 2, 3, 5)),
}


def optimizer_sig(op: Operation) -> OptSig | None:
    return OPTIMIZERS.get((op.name, op.num_operands))


def inplace_map(op: Operation) -> dict[int, int]:
    """result index -> operand index for ops that update operands in place (Paddle's
    ``get_op_inplace_info``): the optimizer table, ``assign_out_``, and ``x_`` ops on operand 0.
    The answer depends on the op's name and counts alone: one shared dict per such key (read only)."""
    return _inplace_map(op.name, len(op._operands), len(op.results))


@functools.lru_cache(maxsize=4096)
def _inplace_map(name: str, num_operands: int, num_results: int) -> dict[int, int]:
    sig = OPTIMIZERS.get((name, num_operands))
    if sig is not None:
        return {r: o for r, o in enumerate(sig.inplace) if r < num_results}
    if name == ops.ASSIGN_OUT_:
        return {0: 1}
    dialect, _, base = name.partition(".") if "." in name else ("", "", name)
    if (dialect == "pd_op" and base.endswith("_") and not base.endswith("__")
            and num_operands and num_results and name not in NOT_INPLACE):
        return {0: 0}
    return {}


# collectives and other "_" ops whose result does not alias operand 0 in the partition sense
NOT_INPLACE = {ops.SHARE_DATA_, ops.COALESCE_TENSOR_}


# op base names (no dialect, no trailing "_") that are optimizer updates, in the table or not
OPTIMIZER_BASES = frozenset({
    "adamw", "adam", "sgd", "momentum", "lamb", "adagrad", "rmsprop", "adamax", "adadelta",
    "merged_adam", "merged_momentum", "lars_momentum", "nadam", "radam", "asgd"})


def looks_like_optimizer(op: Operation) -> bool:
    """Whether the op is an optimizer update by its name (to warn about ones the table lacks)."""
    return op.name.split(".")[-1].rstrip("_") in OPTIMIZER_BASES


def param_name(v: Value) -> str:
    """A parameter's name: its defining op's ``parameter_name`` or ``name``, else ``%N``."""
    op = v.owner
    if op is not None:
        for key in ("parameter_name", "name"):
            a = op.attr(key)
            if a is not None and hasattr(a, "value"):
                return str(a.value)
    return f"%{v.name}"
