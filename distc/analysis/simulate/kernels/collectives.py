"""Communication kernels: the collectives of both print eras (``all_reduce`` with a
``reduce_type``, ``c_allreduce_sum``...), ``send_v2``/``recv_v2`` (``p_send``/``p_recv``).
Each yields its request to the scheduler (:mod:`..scheduler`) and returns what it replies."""

from __future__ import annotations

import numpy as np

from ....dialects.collectives import ALL_REDUCE, BROADCAST, C_ALLREDUCE_REDUCE, KIND_BY_BASE, RECV, SEND
from ..registry import kernel
from ..requests import Coll, Recv, Send
from ..values import attr, np_dtype

# op base name -> (collective kind, fixed reduce type or None); the table is distc.dialects.collectives
COLLECTIVES: dict[str, tuple[str, int | None]] = {
    base: (kind, C_ALLREDUCE_REDUCE.get(base)) for base, kind in KIND_BY_BASE.items() if kind not in (SEND, RECV)
}


def _base(op) -> str:
    return op.name.split(".", 1)[-1].rstrip("_")


@kernel(*(f"pd_op.{n}" for n in COLLECTIVES))
def collective(rt, op, vals):
    kind, fixed = COLLECTIVES[_base(op)]
    ring = attr(op, "ring_id")
    group = rt.sim.group_of(op, rt.rank, ring)
    nranks = attr(op, "nranks")
    if nranks is not None and int(nranks) != len(group):
        raise rt.err(op, f"nranks {nranks} but the group {list(group)} has {len(group)} ranks")
    attrs = {}
    if kind == ALL_REDUCE:
        attrs["reduce_type"] = fixed if fixed is not None else attr(op, "reduce_type", 0)
    if kind == BROADCAST:
        attrs["root"] = int(attr(op, "root", 0))
    data = yield Coll(kind, op, rt.rank, group, ring, np.asarray(vals[0]), attrs)
    return [data] + [None] * (op.num_results - 1)


@kernel("pd_op.send_v2", "pd_op.p_send")
def send(rt, op, vals):
    ring = attr(op, "ring_id")
    x = np.asarray(vals[0])
    peer = int(attr(op, "peer", 0))
    to = rt.sim.p2p_partner(ring, peer, rt.rank)
    yield Send(op, rt.rank, ring, peer, x.copy(), to)
    return []


@kernel("pd_op.recv_v2", "pd_op.p_recv")
def recv(rt, op, vals):
    ring = attr(op, "ring_id")
    peer = int(attr(op, "peer", 0))
    src = rt.sim.p2p_partner(ring, peer, rt.rank)
    data, sender = yield Recv(op, rt.rank, ring, peer, src)
    out_shape = attr(op, "out_shape")
    if out_shape is not None and all(int(d) >= 0 for d in out_shape) and \
            list(data.shape) != [int(d) for d in out_shape]:
        raise rt.err(op, f"received {list(data.shape)} from rank {sender}, but out_shape is {list(out_shape)}")
    dt = attr(op, "dtype")
    if dt is not None:
        data = data.astype(np_dtype(str(dt)))
    return [data]
