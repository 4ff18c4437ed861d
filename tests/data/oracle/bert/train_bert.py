"""Pre-train a small BERT-style encoder with Paddle's auto-parallel API, written the way a user
writes it: word / position / token-type embeddings, LayerNorm, ``paddle.nn.TransformerEncoder``
(GELU, dropout, post-LN or ``--prenorm``), a masked-LM head tied to the word embedding and a
tanh pooler with a classifier on the first token; the layers are placed with ``dist.shard_layer``
(vocab-parallel word embedding, column/row-parallel attention and FFN over ``mp``), AdamW with
weight decay except on biases and norms, a global-norm clip and a warm-up learning rate, wrapped by
``dist.shard_optimizer`` (ZeRO stage ``--stage`` over dp), ``dist.to_static`` and a training loop.

On a machine with the GPUs:   python -m paddle.distributed.launch --devices 0,1,2,3 train_bert.py
Its programs, on a laptop:    distc capture -o cap -- python train_bert.py --mesh dp2mp2 --stage 1
"""

import argparse

import numpy as np
import paddle
import paddle.distributed as dist
import paddle.nn.functional as F
from paddle import nn

VOCAB, TYPES, MAX_POS, HIDDEN, HEADS, FFN, LAYERS, BATCH, SEQ = 64, 2, 16, 32, 4, 64, 2, 4, 8

MESHES = {  # name: (process ids, dim names)
    "dp2": ([0, 1], ["dp"]),
    "dp4": ([0, 1, 2, 3], ["dp"]),
    "dp2mp2": ([[0, 1], [2, 3]], ["dp", "mp"]),
}


class BertEmbeddings(nn.Layer):
    def __init__(self, dropout):
        super().__init__()
        self.word = nn.Embedding(VOCAB, HIDDEN)
        self.position = nn.Embedding(MAX_POS, HIDDEN)
        self.token_type = nn.Embedding(TYPES, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN, epsilon=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids, token_type_ids):
        pos = paddle.arange(ids.shape[1], dtype="int64").unsqueeze(0)
        h = self.word(ids) + self.position(pos) + self.token_type(token_type_ids)
        return self.dropout(self.norm(h))


class Bert(nn.Layer):
    def __init__(self, dropout, prenorm, num_labels=2):
        super().__init__()
        self.embeddings = BertEmbeddings(dropout)
        layer = nn.TransformerEncoderLayer(HIDDEN, HEADS, FFN, dropout=dropout, activation="gelu",
                                           normalize_before=prenorm)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, norm=nn.LayerNorm(HIDDEN) if prenorm else None)
        self.pooler = nn.Linear(HIDDEN, HIDDEN)
        self.classifier = nn.Linear(HIDDEN, num_labels)
        self.mlm_transform = nn.Linear(HIDDEN, HIDDEN)
        self.mlm_norm = nn.LayerNorm(HIDDEN, epsilon=1e-12)
        self.mlm_bias = self.create_parameter([VOCAB], is_bias=True)

    def forward(self, ids, token_type_ids):
        # padding mask: token id 0 is [PAD]; [B, 1, 1, S] added to the attention scores
        mask = paddle.unsqueeze((ids == 0).astype("float32") * -1e4, [1, 2])
        h = self.encoder(self.embeddings(ids, token_type_ids), src_mask=mask)
        pooled = paddle.tanh(self.pooler(h[:, 0]))
        cls_logits = self.classifier(pooled)
        t = self.mlm_norm(F.gelu(self.mlm_transform(h)))
        mlm_logits = paddle.matmul(t, self.embeddings.word.weight, transpose_y=True) + self.mlm_bias
        return mlm_logits, cls_logits


class Loss(nn.Layer):
    def forward(self, mlm_logits, cls_logits, labels):
        mlm = F.cross_entropy(mlm_logits, labels.unsqueeze(-1), ignore_index=-100).mean()
        cls = F.cross_entropy(cls_logits, (labels[:, 0] > VOCAB // 2).astype("int64").unsqueeze(-1)).mean()
        return mlm + cls


class Tokens(paddle.io.Dataset):
    """Random token ids (some padding), two segments, MLM labels (-100 where not masked)."""

    def __init__(self, n):
        self.ids = np.random.randint(1, VOCAB, (n, SEQ)).astype("int64")
        self.ids[:, -2:] = 0
        self.types = np.zeros((n, SEQ), "int64")
        self.types[:, SEQ // 2:] = 1
        self.labels = np.where(np.random.rand(n, SEQ) < 0.3, self.ids, -100).astype("int64")

    def __getitem__(self, i):
        return self.ids[i], self.types[i], self.labels[i]

    def __len__(self):
        return len(self.ids)


def shard_fn(mesh):
    """Megatron-style over ``mp``: vocab-parallel word embedding, q/k/v and the first FFN linear
    column-parallel, out_proj and the second FFN linear row-parallel; the rest replicated."""
    dims = mesh.dim_names

    def place(shard_dim=None):
        pl = [dist.Replicate() for _ in dims]
        if "mp" in dims and shard_dim is not None:
            pl[dims.index("mp")] = dist.Shard(shard_dim)
        return pl

    def fn(name, layer, process_mesh):
        leaf = name.rsplit(".", 1)[-1]
        if name == "embeddings.word":
            layer.weight = dist.shard_tensor(layer.weight, process_mesh, place(0))
            return
        col = leaf in ("q_proj", "k_proj", "v_proj", "linear1")
        row = leaf in ("out_proj", "linear2")
        for pname, p in list(layer.named_parameters(include_sublayers=False)):
            if col:
                sd = 1 if pname == "weight" else 0
            elif row:
                sd = 0 if pname == "weight" else None
            else:
                sd = None
            setattr(layer, pname, dist.shard_tensor(p, process_mesh, place(sd)))

    return fn


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh", default="dp2mp2", choices=sorted(MESHES))
    ap.add_argument("--stage", type=int, default=1, choices=[0, 1, 2, 3], help="ZeRO stage (0: none)")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--prenorm", action="store_true")
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()

    paddle.seed(2024)
    np.random.seed(2024)
    ids, dims = MESHES[args.mesh]
    mesh = dist.ProcessMesh(ids, dim_names=dims)
    model = dist.shard_layer(Bert(args.dropout, args.prenorm), mesh, shard_fn(mesh))

    decay = [p.name for n, p in model.named_parameters() if not any(k in n for k in ("bias", "norm"))]
    lr = paddle.optimizer.lr.LinearWarmup(
        paddle.optimizer.lr.PolynomialDecay(1e-3, decay_steps=100), warmup_steps=10, start_lr=0.0, end_lr=1e-3)
    opt = paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(), weight_decay=0.01,
                                 apply_decay_param_fun=lambda n: n in decay,
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
    for step, (x, tt, y) in enumerate(dist_loader()):
        loss = dist_model(x, tt, y)
        print(f"step {step}: loss {float(loss):.6f}")
        lr.step()
        if step + 1 == args.steps:
            break


if __name__ == "__main__":
    main()
