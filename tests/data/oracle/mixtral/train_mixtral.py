"""Train a small Mixtral-style decoder with Paddle's auto-parallel API, written the way a user
writes it: token embedding, blocks of RMSNorm + causal attention + a sparse MoE feed-forward
(a router, softmax, top-2 gating renormalised, each expert a SwiGLU MLP run on the tokens routed
to it, gathered with ``nonzero``/``gather`` and added back with ``index_add``; the router's
load-balancing loss added to the LM loss), final norm and lm head.  Tensor parallel over ``mp``
(q/k/v, each expert's gate/up and the head column-parallel, o and each expert's down
row-parallel), data parallel over ``dp``, AdamW under ``dist.shard_optimizer`` (ZeRO stage
``--stage`` over dp), ``dist.to_static`` and a training loop.

Its programs, on a laptop:    distc capture -o cap -- python train_mixtral.py --mesh dp2mp2 --stage 1
"""

import argparse
import math

import numpy as np
import paddle
import paddle.distributed as dist
import paddle.nn.functional as F
from paddle import nn

VOCAB, HIDDEN, HEADS, FFN, EXPERTS, TOPK, LAYERS, BATCH, SEQ = 64, 32, 4, 32, 4, 2, 2, 4, 8

MESHES = {  # name: (process ids, dim names)
    "dp2": ([0, 1], ["dp"]),
    "dp4": ([0, 1, 2, 3], ["dp"]),
    "dp2mp2": ([[0, 1], [2, 3]], ["dp", "mp"]),
}


def placements(mesh, shard_dim=None):
    dims = mesh.dim_names
    pl = [dist.Replicate() for _ in dims]
    if "mp" in dims and shard_dim is not None:
        pl[dims.index("mp")] = dist.Shard(shard_dim)
    return pl


def linear(mesh, d_in, d_out, shard_dim):
    lin = nn.Linear(d_in, d_out, bias_attr=False)
    lin.weight = dist.shard_tensor(lin.weight, mesh, placements(mesh, shard_dim))
    return lin


class RMSNorm(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.weight = self.create_parameter([HIDDEN], default_initializer=nn.initializer.Constant(1.0))
        self.weight = dist.shard_tensor(self.weight, mesh, placements(mesh))

    def forward(self, x):
        return x * paddle.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.weight


class Expert(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.gate = linear(mesh, HIDDEN, FFN, 1)
        self.up = linear(mesh, HIDDEN, FFN, 1)
        self.down = linear(mesh, FFN, HIDDEN, 0)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class SparseMoE(nn.Layer):
    """Mixtral's sparse MoE block: top-2 of EXPERTS, weights renormalised over the two chosen."""

    def __init__(self, mesh):
        super().__init__()
        self.router = linear(mesh, HIDDEN, EXPERTS, None)
        self.experts = nn.LayerList([Expert(mesh) for _ in range(EXPERTS)])

    def forward(self, h):
        b, s, d = h.shape
        x = h.reshape([-1, d])
        probs = F.softmax(self.router(x), axis=-1)
        weights, chosen = paddle.topk(probs, TOPK, axis=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = paddle.zeros_like(x)
        for e, expert in enumerate(self.experts):
            hit = (chosen == e)                                  # [tokens, TOPK]
            token_w = (weights * hit.astype(weights.dtype)).sum(-1)  # 0 where not routed
            idx = paddle.nonzero(hit.any(-1)).flatten()
            y = expert(paddle.gather(x, idx)) * paddle.gather(token_w, idx).unsqueeze(-1)
            out = paddle.index_add(out, idx, 0, y)
        # Switch-style load balancing: EXPERTS * sum_e(fraction routed to e * mean prob of e)
        routed = F.one_hot(chosen, EXPERTS).sum(1).mean(0)
        aux = (routed * probs.mean(0)).sum() * EXPERTS
        return out.reshape([b, s, d]), aux


class Block(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.ln1, self.ln2 = RMSNorm(mesh), RMSNorm(mesh)
        self.q, self.k, self.v = (linear(mesh, HIDDEN, HIDDEN, 1) for _ in range(3))
        self.o = linear(mesh, HIDDEN, HIDDEN, 0)
        self.moe = SparseMoE(mesh)

    def forward(self, h):
        x = self.ln1(h)
        hd = HIDDEN // HEADS

        def heads(t):
            return paddle.transpose(paddle.reshape(t, [0, 0, HEADS, hd]), [0, 2, 1, 3])

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        s = paddle.matmul(q, k, transpose_y=True) * (1.0 / math.sqrt(hd))
        mask = paddle.triu(paddle.full([SEQ, SEQ], -1e4, dtype="float32"), 1)
        a = paddle.matmul(F.softmax(s + mask, axis=-1), v)
        h = h + self.o(paddle.reshape(paddle.transpose(a, [0, 2, 1, 3]), [0, 0, HIDDEN]))
        y, aux = self.moe(self.ln2(h))
        return h + y, aux


class Mixtral(nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.embed.weight = dist.shard_tensor(self.embed.weight, mesh, placements(mesh, 1))
        self.blocks = nn.LayerList([Block(mesh) for _ in range(LAYERS)])
        self.norm = RMSNorm(mesh)
        self.head = linear(mesh, HIDDEN, VOCAB, 1)

    def forward(self, ids):
        h = self.embed(ids)
        aux = 0.0
        for b in self.blocks:
            h, a = b(h)
            aux = aux + a
        return self.head(self.norm(h)), aux


class Loss(nn.Layer):
    def forward(self, logits, aux, label):
        return F.cross_entropy(logits, label.unsqueeze(-1)).mean() + 0.01 * aux


class Tokens(paddle.io.Dataset):
    def __init__(self, n):
        self.x = np.random.randint(0, VOCAB, (n, SEQ)).astype("int64")
        self.y = np.random.randint(0, VOCAB, (n, SEQ)).astype("int64")

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh", default="dp2mp2", choices=sorted(MESHES))
    ap.add_argument("--stage", type=int, default=1, choices=[0, 1, 2, 3], help="ZeRO stage (0: none)")
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()

    paddle.seed(2024)
    np.random.seed(2024)
    ids, dims = MESHES[args.mesh]
    mesh = dist.ProcessMesh(ids, dim_names=dims)
    model = Mixtral(mesh)
    opt = paddle.optimizer.AdamW(learning_rate=1e-3, parameters=model.parameters(),
                                 grad_clip=nn.ClipGradByGlobalNorm(1.0))
    if args.stage:
        stage = {1: dist.ShardingStage1, 2: dist.ShardingStage2, 3: dist.ShardingStage3}[args.stage]
        opt = dist.shard_optimizer(opt, stage("dp", mesh))
    else:
        opt = dist.shard_optimizer(opt)
    loader = paddle.io.DataLoader(Tokens(4 * BATCH), batch_size=BATCH)
    dist_loader = dist.shard_dataloader(loader, meshes=[mesh], shard_dims="dp")
    dist_model = dist.to_static(model, dist_loader, Loss(), opt)
    dist_model.train()
    for step, (x, y) in enumerate(dist_loader()):
        loss = dist_model(x, y)
        print(f"step {step}: loss {float(loss):.6f}")
        if step + 1 == args.steps:
            break


if __name__ == "__main__":
    main()
