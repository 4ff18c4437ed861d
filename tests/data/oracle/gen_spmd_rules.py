"""Paddle 3.3.1's own SPMD rules (``paddle.base.core.get_phi_spmd_rule``) on random layouts: the
reference ``distc.dialects.spmd_compute`` is held to (tests/test_spmd_compute.py).

    /tmp/paddle/bin/python gen_spmd_rules.py spmd/rules.json.xz      # ~10 s, 6,000 cases
    /tmp/paddle/bin/python gen_spmd_rules.py --embedding spmd/embedding.json.xz   # 985 cases

Each case: the rule (matmul with its transpose flags, add, relu), the mesh shape, the inputs'
shapes and dims mappings, and Paddle's answer -- the inputs' required dims mappings, the results'
dims mappings and partial mesh dims -- or the first line of its error.  Meshes 2x2, 2x4 and 2x2x2;
matmul of 2-D and 3-D (broadcast batch) operands; elementwise with broadcast and size-1 axes.
"""

import json
import lzma
import random
import sys


def main(out, n=6000, seed=2024):
    from paddle.base import core
    from paddle.distributed.auto_parallel.static.dist_attribute import DistTensorSpec, TensorDistAttr
    from paddle.distributed.fleet import auto

    rnd = random.Random(seed)
    meshes = {(2, 2): auto.ProcessMesh([[0, 1], [2, 3]]), (2, 4): auto.ProcessMesh([[0, 1, 2, 3], [4, 5, 6, 7]]),
              (2, 2, 2): auto.ProcessMesh([[[0, 1], [2, 3]], [[4, 5], [6, 7]]])}

    def spec(mesh, shape, dm):
        a = TensorDistAttr()
        a.process_mesh = mesh
        a.dims_mapping = list(dm)
        return DistTensorSpec(list(shape), a)

    def rand_dm(k, nd):
        dm = [-1] * k
        for m in range(nd):
            if rnd.random() < 0.6:
                j = rnd.randrange(k)
                if dm[j] == -1:
                    dm[j] = m
        return dm

    rules = {r: core.get_phi_spmd_rule(r) for r in ("matmul", "add", "relu")}
    cases = []
    for _ in range(n):
        ms = rnd.choice(sorted(meshes))
        mesh, nd = meshes[ms], len(ms)
        kind = rnd.choice(["matmul", "matmul", "add", "add", "relu"])
        c = {"rule": kind, "mesh": list(ms)}
        if kind == "matmul":
            nx = rnd.choice([2, 2, 2, 3])
            ny = rnd.choice([2, 2, 3]) if nx == 3 else rnd.choice([2, 2, 2, 3])
            nb = max(nx, ny) - 2
            b = [rnd.choice([2, 4, 8]) for _ in range(nb)]
            M, K, N = (rnd.choice([2, 4, 6, 8, 16, 32]) for _ in range(3))
            xs, ys = b[nb - (nx - 2):] + [M, K], b[nb - (ny - 2):] + [K, N]
            tx, ty = rnd.random() < 0.2, rnd.random() < 0.2
            if tx:
                xs[-1], xs[-2] = xs[-2], xs[-1]
            if ty:
                ys[-1], ys[-2] = ys[-2], ys[-1]
            c.update(shapes=[xs, ys], dms=[rand_dm(nx, nd), rand_dm(ny, nd)], trans=[tx, ty])
            args = (spec(mesh, xs, c["dms"][0]), spec(mesh, ys, c["dms"][1]), tx, ty)
        elif kind == "add":
            k = rnd.choice([1, 2, 3])
            xs = [rnd.choice([2, 4, 8, 16]) for _ in range(k)]
            ky = rnd.randint(1, k)
            ys = [1 if rnd.random() < 0.15 else s for s in xs[k - ky:]]
            yd = [-1 if s == 1 else m for s, m in zip(ys, rand_dm(ky, nd))]
            c.update(shapes=[xs, ys], dms=[rand_dm(k, nd), yd])
            args = (spec(mesh, xs, c["dms"][0]), spec(mesh, ys, yd))
        else:
            k = rnd.choice([1, 2, 3])
            xs = [rnd.choice([2, 4, 8, 16]) for _ in range(k)]
            c.update(shapes=[xs], dms=[rand_dm(k, nd)])
            args = (spec(mesh, xs, c["dms"][0]),)
        try:
            r = rules[kind].infer_forward(*args)
            c["ins"] = [list(i.dims_mapping) for i in r[0]]
            c["outs"] = [list(o.dims_mapping) for o in r[1]]
            c["partial"] = [sorted(o._partial_dims()) for o in r[1]]
        except Exception as e:  # Paddle's rule raises: distc must not model it
            c["error"] = str(e).strip().splitlines()[0][:160]
        cases.append(c)
    with lzma.open(out, "wt", encoding="utf-8") as f:
        json.dump({"paddle": "3.3.1", "seed": seed, "cases": cases}, f, separators=(",", ":"))
    print(f"{len(cases)} cases -> {out}")


def embedding(out):
    """``embedding`` (ids, table; padding_idx -1, not sparse) on every layout of 1- to 3-D ids and a
    2-D table over the three meshes (each tensor's mesh dims distinct): 985 cases, ~1 s.

        /tmp/paddle/bin/python gen_spmd_rules.py --embedding spmd/embedding.json.xz"""
    import itertools

    from paddle.base import core
    from paddle.distributed.auto_parallel.static.dist_attribute import DistTensorSpec, TensorDistAttr
    from paddle.distributed.fleet import auto

    meshes = {(2, 2): auto.ProcessMesh([[0, 1], [2, 3]]), (2, 4): auto.ProcessMesh([[0, 1, 2, 3], [4, 5, 6, 7]]),
              (2, 2, 2): auto.ProcessMesh([[[0, 1], [2, 3]], [[4, 5], [6, 7]]])}
    rule = core.get_phi_spmd_rule("embedding")

    def spec(mesh, shape, dm):
        a = TensorDistAttr()
        a.process_mesh = mesh
        a.dims_mapping = list(dm)
        return DistTensorSpec(list(shape), a)

    def distinct(dm):
        used = [m for m in dm if m != -1]
        return len(used) == len(set(used))

    cases = []
    for ms, mesh in meshes.items():
        opts = [-1, *range(len(ms))]
        for xn in (1, 2, 3):
            for xd in filter(distinct, itertools.product(opts, repeat=xn)):
                for wd in filter(distinct, itertools.product(opts, repeat=2)):
                    c = {"mesh": list(ms), "x": list(xd), "w": list(wd)}
                    try:
                        r = rule.infer_forward(spec(mesh, [8] * xn, xd), spec(mesh, [64, 32], wd), -1, False)
                        c["ins"] = [list(i.dims_mapping) for i in r[0]]
                        c["outs"] = [list(o.dims_mapping) for o in r[1]]
                    except Exception as e:
                        c["error"] = str(e).strip().splitlines()[0][:160]
                    cases.append(c)
    with lzma.open(out, "wt", encoding="utf-8") as f:
        json.dump({"paddle": "3.3.1", "rule": "embedding", "cases": cases}, f, separators=(",", ":"))
    print(f"{len(cases)} cases -> {out}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--embedding"]:
        embedding(sys.argv[2] if len(sys.argv) > 2 else "spmd/embedding.json.xz")
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "spmd/rules.json.xz")
