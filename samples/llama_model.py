"""A small LLaMA-style decoder for Paddle's auto-parallel API (the model of ``train_llama.py`` and
``train_llama_pp.py``): token embedding, decoder blocks (RMSNorm, causal multi-head attention,
SwiGLU MLP), final norm, lm head.  q/k/v/gate/up/head are column-parallel and o/down row-parallel
over the mesh dim named ``mp`` (where the mesh has one); each layer lives on the mesh of its
pipeline stage (one mesh: no pipeline)."""

import math

import numpy as np
import paddle
import paddle.distributed as dist
import paddle.nn.functional as F

VOCAB, HIDDEN, HEADS, FFN, LAYERS, BATCH, SEQ = 64, 32, 4, 64, 2, 4, 8


def placements(mesh, shard_dim=None):
    """Replicated, but Shard(shard_dim) over ``mp``."""
    dims = mesh.dim_names
    pl = [dist.Replicate() for _ in dims]
    if "mp" in dims and shard_dim is not None:
        pl[dims.index("mp")] = dist.Shard(shard_dim)
    return pl


def linear(mesh, d_in, d_out, shard_dim):
    lin = paddle.nn.Linear(d_in, d_out, bias_attr=False)
    lin.weight = dist.shard_tensor(lin.weight, mesh, placements(mesh, shard_dim))
    return lin


class RMSNorm(paddle.nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.weight = self.create_parameter([HIDDEN], default_initializer=paddle.nn.initializer.Constant(1.0))
        self.weight = dist.shard_tensor(self.weight, mesh, placements(mesh))

    def forward(self, x):
        v = (x * x).mean(-1, keepdim=True)
        return x * paddle.rsqrt(v + 1e-6) * self.weight


class Block(paddle.nn.Layer):
    def __init__(self, mesh):
        super().__init__()
        self.ln1 = RMSNorm(mesh)
        self.ln2 = RMSNorm(mesh)
        self.q = linear(mesh, HIDDEN, HIDDEN, 1)
        self.k = linear(mesh, HIDDEN, HIDDEN, 1)
        self.v = linear(mesh, HIDDEN, HIDDEN, 1)
        self.o = linear(mesh, HIDDEN, HIDDEN, 0)
        self.gate = linear(mesh, HIDDEN, FFN, 1)
        self.up = linear(mesh, HIDDEN, FFN, 1)
        self.down = linear(mesh, FFN, HIDDEN, 0)

    def forward(self, h):
        x = self.ln1(h)
        hd = HIDDEN // HEADS

        def heads(t):
            return paddle.transpose(paddle.reshape(t, [0, 0, HEADS, hd]), [0, 2, 1, 3])

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        s = paddle.matmul(q, k, transpose_y=True) * (1.0 / math.sqrt(hd))
        mask = paddle.triu(paddle.full([SEQ, SEQ], -10000.0, dtype="float32"), 1)
        p = F.softmax(s + mask, axis=-1)
        a = paddle.reshape(paddle.transpose(paddle.matmul(p, v), [0, 2, 1, 3]), [0, 0, HIDDEN])
        h = h + self.o(a)
        x = self.ln2(h)
        return h + self.down(F.silu(self.gate(x)) * self.up(x))


class LLaMA(paddle.nn.Layer):
    """``stages``: one mesh per pipeline stage (a list of one mesh: no pipeline); ``layers`` decoder
    blocks, spread evenly over the stages.  The embedding
    and the first half of the blocks on the first stage, the rest, the norm and the head on the
    last; activations move between the stages with dist.reshard (batch over dp)."""

    def __init__(self, stages, vocab=VOCAB, layers=LAYERS):
        super().__init__()
        self.stages = stages
        self.layers = layers
        first, last = stages[0], stages[-1]
        self.embed = paddle.nn.Embedding(vocab, HIDDEN)
        self.embed.weight = dist.shard_tensor(self.embed.weight, first, placements(first, 1))
        self.blocks = paddle.nn.LayerList([Block(stages[self.stage_of(i)]) for i in range(layers)])
        self.norm = RMSNorm(last)
        self.head = linear(last, HIDDEN, vocab, 1)

    def stage_of(self, i):
        return i * len(self.stages) // self.layers

    def forward(self, ids):
        h = self.embed(ids)
        for i, b in enumerate(self.blocks):
            if i > 0 and self.stage_of(i) != self.stage_of(i - 1):
                mesh = self.stages[self.stage_of(i)]
                pl = [dist.Replicate() for _ in mesh.dim_names]
                pl[mesh.dim_names.index("dp")] = dist.Shard(0)
                h = dist.reshard(h, mesh, pl)
            h = b(h)
        return self.head(self.norm(h))


class Loss(paddle.nn.Layer):
    def forward(self, logits, label):
        return F.cross_entropy(logits, label).mean()


class TokenData(paddle.io.Dataset):
    """Random token ids and labels."""

    def __init__(self, n, vocab=VOCAB):
        self.x = np.random.randint(0, vocab, (n, SEQ)).astype("int64")
        self.y = np.random.randint(0, vocab, (n, SEQ)).astype("int64")

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.x)
