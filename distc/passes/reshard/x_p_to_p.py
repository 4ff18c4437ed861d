"""Partial -> Partial of another reduce type (distc extra function).

Paddle 3.3.1 refuses it on a 1-D mesh ("There is no reshard function that matches ...": corpus
``m2_P_to_Pavg``, ``m2_Pavg_to_Pmax``, ``m2_Pmax_to_P`` ...) and its nd_mesh raises "Reshard tensor
from one partial type to another partial type is not supported yet".

distc: sum <-> avg is a local ``scale`` by p or ``divide`` by p (avg of p*x_i is the sum of x_i); any other
pair all_reduces with the source op and then makes the destination partial (the first process of
each group keeps the value; the others hold the op's identity: zeros for sum, ones for prod, the
value for avg/max/min).
"""

from __future__ import annotations

from . import x_common as X
from .registry import ReshardFunction, reshard_function


@reshard_function(priority=96, name="x_p_to_p")
class XPartialToPartial(ReshardFunction):
    def is_suitable(self, src, dst):
        return X.has_step(src, dst, lambda a, b: a.kind == "P" and b.kind == "P" and a.reduce != b.reduce)

    def reshard(self, ctx, src, dst, value, dst_type):
        X.decline_if_paddle_is_right(src, dst, value)
        return X.lower(ctx, src, dst, value, dst_type, function=self.name)
