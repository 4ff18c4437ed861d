"""The SPMD rules of the compute ops a forward-backward program is built from, as Paddle 3.3.1
infers them (``paddle/phi/infermeta/spmd_rules``), on dims mappings.

Paddle runs an op's rule when it builds the op: the op's ``op_dist_attr`` (what each operand must
be, what each result is) follows from the types of its operands.  distc re-runs these rules where a
pass changes the type of a value ops already read -- ZeRO stage 3 shards the parameters over dp
*before* Paddle builds the forward program, so every op downstream of a parameter sees the sharded
type (``distc.passes.zero3_complete``).

A rule takes shapes and dims mappings (one mesh dim or -1 per tensor axis) and returns
``(operand mappings, result mappings, result partial mesh dims)``, or ``None`` where Paddle's rule
raises (``Tensor Axis[..] is Sharded by two different mesh dimension``) or the case is not one
modelled here: the caller then keeps the op as it is.  Checked against Paddle's own rules
(``core.get_phi_spmd_rule``) on random layouts: ``tests/test_spmd_compute.py``.
"""

from __future__ import annotations

Dm = tuple[int, ...]


class Conflict(Exception):
    """Paddle's rule raises for these layouts (``Tensor Axis[..] is Sharded by two different mesh
    dimension``): Paddle fails to build the program."""
Rule = tuple[list[Dm], list[Dm], list[tuple[int, ...]]]


def _dup_free(dm) -> bool:
    used = [m for m in dm if m != -1]
    return len(used) == len(set(used))


def _shards(dims, mesh_shape) -> int:
    n = 1
    for d in dims:
        n *= mesh_shape[d]
    return n


def _merge_axis(suggestions, size: int, mesh_shape) -> list[int]:
    """One tensor axis: the mesh dims the inputs shard it by (the larger mesh dim first, else in
    input order), then the last ones dropped until the axis size divides by the number of pieces."""
    dims: list[int] = []
    for m in sorted(suggestions, key=lambda m: -mesh_shape[m] if m != -1 else 0):  # stable
        if m != -1 and m not in dims:
            dims.append(m)
    while dims and size % _shards(dims, mesh_shape):
        dims.pop()
    return dims


def _single(dims: list[int]) -> int | None:
    """-1, the mesh dim, or None where Paddle would co-shard the axis (not modelled)."""
    return -1 if not dims else dims[0] if len(dims) == 1 else None


def matmul(xs, xd: Dm, ys, yd: Dm, trans_x: bool = False, trans_y: bool = False, mesh_shape=()) -> Rule | None:
    """``out = x @ y`` (Paddle 3.3.1's rule): batch axes merged first (broadcast), then the two free
    axes m (x) and n (y) -- a mesh dim sharding both stays on the larger one (m on a tie) -- then the
    contracted axis k, on the mesh dims the others left; the result is partial over k's."""
    xs, ys, xd, yd = list(xs), list(ys), list(xd), list(yd)
    if len(xs) < 2 or len(ys) < 2 or len(xd) != len(xs) or len(yd) != len(ys):
        return None  # the vector forms are not modelled
    if trans_x:
        xs[-1], xs[-2], xd[-1], xd[-2] = xs[-2], xs[-1], xd[-2], xd[-1]
    if trans_y:
        ys[-1], ys[-2], yd[-1], yd[-2] = ys[-2], ys[-1], yd[-2], yd[-1]
    nb = max(len(xs), len(ys)) - 2
    xb, yb = nb - (len(xs) - 2), nb - (len(ys) - 2)  # leading batch axes each one lacks
    used: set[int] = set()
    batch = []
    for i in range(nb):
        sugg, size = [], 1
        for s, d, off in ((xs, xd, xb), (ys, yd, yb)):
            j = i - off
            if j >= 0:
                size = max(size, s[j])
                sugg.append(d[j] if s[j] != 1 else -1)
        b = _single(_merge_axis(sugg, size, mesh_shape))
        if b is None or b in used:
            return None
        if b != -1:
            used.add(b)
        batch.append(b)
    m_ax = xd[-2] if xs[-2] != 1 else -1  # (no divisibility check on m and n)
    n_ax = yd[-1] if ys[-1] != 1 else -1
    if (m_ax != -1 and m_ax in used) or (n_ax != -1 and n_ax in used):
        return None
    if m_ax != -1 and m_ax == n_ax:
        if ys[-1] > xs[-2]:
            m_ax = -1
        else:
            n_ax = -1
    used |= {a for a in (m_ax, n_ax) if a != -1}
    kd = _merge_axis([m for m in (xd[-1], yd[-2]) if m not in used], xs[-1], mesh_shape)
    k_ax = _single(kd)
    if k_ax is None:
        return None
    out = tuple(batch) + (m_ax, n_ax)
    xr = [(-1 if xs[j] == 1 else batch[j + xb]) for j in range(len(xs) - 2)] + [m_ax, k_ax]
    yr = [(-1 if ys[j] == 1 else batch[j + yb]) for j in range(len(ys) - 2)] + [k_ax, n_ax]
    if trans_x:
        xr[-1], xr[-2] = xr[-2], xr[-1]
    if trans_y:
        yr[-1], yr[-2] = yr[-2], yr[-1]
    partial = (k_ax,) if k_ax != -1 else ()
    return [tuple(xr), tuple(yr)], [out], [partial]


def elementwise(shapes, dms, mesh_shape=()) -> Rule | None:
    """Elementwise ops, broadcast from the right.  Unary: an axis stays sharded where its size
    divides by the pieces.  Binary (Paddle 3.3.1's older merge): an axis takes the mesh dim either
    input shards it by (two different ones: Paddle raises, :class:`Conflict`), no divisibility check; a mesh dim two
    axes claim stays on the first of them (x's axes, then y's); a size-1 axis is not sharded."""
    n = max(len(s) for s in shapes)
    if any(len(s) != len(d) for s, d in zip(shapes, dms)):
        return None
    if len(shapes) == 1:
        axis = []
        for size, m in zip(shapes[0], dms[0]):
            a = _single(_merge_axis([m], size, mesh_shape))
            if a is None:
                return None
            axis.append(a)
        return [tuple(axis)], [tuple(axis)], [()]
    axis = [-1] * n
    order: list[int] = []  # the axes in the order the merge meets them sharded
    for s, d in zip(shapes, dms):
        off = n - len(s)
        for j, m in enumerate(d):
            if m == -1:
                continue
            a = axis[j + off]
            if a != -1 and a != m:
                raise Conflict(f"Tensor Axis[{j + off}] is Sharded by two different mesh dimension [{m}] and [{a}]")
            axis[j + off] = m
            if j + off not in order:
                order.append(j + off)
    seen: set[int] = set()
    for a in order:
        if axis[a] in seen:
            axis[a] = -1
        else:
            seen.add(axis[a])
    ins = []
    for s in shapes:
        off = n - len(s)
        ins.append(tuple(-1 if s[j] == 1 else axis[j + off] for j in range(len(s))))
    return ins, [tuple(axis)], [()]


def reduction(shape, dm: Dm, axes, keepdim: bool) -> Rule | None:
    """sum / mean / max over ``axes`` (empty: all): the input as it is, the reduced axes gone (or
    kept as -1), the result partial over the mesh dims they were sharded by."""
    n = len(shape)
    red = sorted({a % n for a in axes}) if axes and n else list(range(n))
    out = tuple(-1 if i in red else m for i, m in enumerate(dm)) if keepdim else \
        tuple(m for i, m in enumerate(dm) if i not in red)
    partial = tuple(sorted(dm[i] for i in red if dm[i] != -1))
    return [tuple(dm)], [out], [partial]


def elementwise_grad(x_shape, y_shape, g_shape, g_dm: Dm) -> Rule:
    """``add_grad`` / ``subtract_grad`` / ... (x, y, out_grad): every operand and gradient follows
    out_grad; a gradient whose input was broadcast is partial over the mesh dims of the axes it
    lacks or had of size 1."""
    ins, outs, parts = [], [], []
    for s in (x_shape, y_shape):
        diff = len(g_shape) - len(s)
        dm = list(g_dm[diff:])
        partial = [g_dm[i] for i in range(diff) if g_dm[i] != -1]
        for j, size in enumerate(s):
            if size == 1 and dm[j] != -1:
                partial.append(dm[j])
                dm[j] = -1
        ins.append(tuple(dm))
        outs.append(tuple(dm))
        parts.append(tuple(sorted(partial)))
    return [ins[0], ins[1], tuple(g_dm)], outs, parts


def matmul_grad(xs, xd: Dm, ys, yd: Dm, trans_x: bool = False, trans_y: bool = False,
                mesh_shape=()) -> Rule | None:
    """``matmul_grad`` (x, y, out_grad): x and y as the forward rule wants them (for the same
    operand types), out_grad as the forward result; x's gradient partial over n's mesh dim, y's over
    m's (and over the batch mesh dims y was broadcast along)."""
    f = matmul(xs, xd, ys, yd, trans_x, trans_y, mesh_shape)
    if f is None:
        return None
    (xr, yr), (out,), _ = f
    m_ax, n_ax = out[-2], out[-1]
    nb = len(out) - 2
    xb, yb = nb - (len(xs) - 2), nb - (len(ys) - 2)
    px = tuple(sorted({n_ax} - {-1} | {out[i] for i in range(xb) if out[i] != -1}
                      | {out[i + xb] for i in range(len(xs) - 2) if xs[i] == 1 and out[i + xb] != -1}))
    py = tuple(sorted({m_ax} - {-1} | {out[i] for i in range(yb) if out[i] != -1}
                      | {out[i + yb] for i in range(len(ys) - 2) if ys[i] == 1 and out[i + yb] != -1}))
    return [xr, yr, out], [xr, yr], [px, py]


def unary_grad(dm: Dm, ngrads: int = 1) -> Rule:
    """``relu_grad`` / ``square_grad`` / ... (x or out, out_grad): everything follows the forward
    value (operand 0), as Paddle 3.3.1's programs show."""
    return [tuple(dm), tuple(dm)], [tuple(dm)] * ngrads, [()] * ngrads


def reduction_grad(x_shape, g_dm: Dm, axes, keepdim: bool) -> Rule:
    """``mean_grad`` / ``sum_grad`` (x, out_grad, axis): the gradient follows out_grad, the reduced
    axes replicated; x as its gradient."""
    n = len(x_shape)
    red = sorted({a % n for a in axes}) if axes and n else list(range(n))
    if keepdim:
        dm = tuple(-1 if i in red else g_dm[i] for i in range(n))
    else:
        it = iter(g_dm)
        dm = tuple(-1 if i in red else next(it, -1) for i in range(n))
    return [dm, tuple(g_dm)], [dm], [()]


def embedding_conflict(x_dm: Dm, w_dm: Dm) -> None:
    """Where Paddle 3.3.1's ``embedding`` rule raises (:class:`Conflict`), as its dist build runs it:
    the table's row axis (the vocabulary, ``j``) taken as replicated (a vocab-parallel table's
    operand is ``[-1, ...]`` in its stage-0 programs), its column axis ``k`` goes to the result
    beside x's axes, so a mesh dim that shards both x and the table's columns (a ZeRO-3 shard of a
    vocab-parallel table, ``[S1, S0]`` under a batch split over dp) is claimed twice.  Checked
    against ``core.get_phi_spmd_rule("embedding")`` on every layout of 1- to 3-D ids and a 2-D
    table over 2x2, 2x4 and 2x2x2 meshes whose row axis is replicated (342 cases, tests/test_spmd_compute.py;
    the error's axes and mesh dim as Paddle names them)."""
    if len(w_dm) != 2 or w_dm[1] == -1 or w_dm[1] not in x_dm:
        return
    axis = "abcdefghilmnopqrstuvwxyz"[list(x_dm).index(w_dm[1])]
    raise Conflict(f"Multiple Tensor Axes [{axis},k] is sharded by same mesh dimension [{w_dm[1]}]")


def valid(rule: Rule | None) -> bool:
    return rule is not None and all(_dup_free(d) for d in rule[0] + rule[1])
