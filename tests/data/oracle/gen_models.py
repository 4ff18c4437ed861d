#!/usr/bin/env python3
"""Generate training programs of models written here from scratch with real PaddlePaddle 3.3.1 (CPU).

A table of model builders (MODELS: name -> builder) and a table of cases (CASES: model, mesh,
optimizer, stages, ranks).  A builder takes (mesh, dims, place) in a process that has imported
paddle and returns (model, dataset, loss): ``place(shard_dim)`` gives the placements of a weight
sharded over `mp` on tensor axis ``shard_dim`` (replicated where the mesh has no `mp`, or for
``None``).  Add a model by writing its builder and adding rows to CASES.

Models (tiny sizes, random weights):
  gpt2  token + learned position embedding (`arange` ids), 2 pre-LN blocks (LayerNorm, causal
        attention with fused qkv, GELU MLP, dropout 0.1 on attention probabilities and residuals),
        final LayerNorm, lm head tied to the token embedding (matmul with transpose_y); qkv and fc1
        column-parallel (weights Shard(1), biases Shard(0) over mp), proj and fc2 row-parallel.
  vit   conv2d patch embedding (3x8x8 images, 4x4 patches), flatten + transpose, a cls token
        (parameter expanded to the batch and concatenated), learned position embedding, 2 pre-LN
        blocks as gpt2 (no mask, no dropout), LayerNorm, the cls token's head over 10 classes.
  mlp   gen_stage1.py's MLP (16-32-16, relu), here for the optimizers (Momentum, Lamb, ...).
  llama a LLaMA decoder written from scratch: rotary position embedding computed in the program
        (arange, outer, cos/sin, rotate-half by slicing and concat), RMSNorm (mean of squares, rsqrt),
        SwiGLU MLP, causal mask (triu of -inf); q/k/v/gate/up column-, o/down row-parallel over mp.
  resnet a ResNet basic block: conv2d stem, batch_norm, relu, max pool, conv-bn-relu-conv-bn plus the
        identity, adaptive average pool, flatten, linear head (data parallel).

Optimizers (OPTIMIZERS): adamw (and the others) with lr 0.01; `wrap` False means the optimizer is
not given to dist.shard_optimizer (Paddle 3.3.1 accepts only AdamW and SGD there): plain data
parallel, stage 0 only, and Paddle prints `<#AttrNull>` for results without a dist attr.

Stored as models/MODEL.tar.xz (the files of one model in one xz stream: the programs of the ranks
and stages of a model differ little, so this is ~10x smaller than gzip per file); tests/modelsdata.py
reads them.

Names as gen_llm.py: MODEL/CASE.sN.rR.SNAPSHOT.ir (SNAPSHOT in before_partition, after_reshard,
dense, startup_after_remove, startup_final) or MODEL/CASE.sN.rR.error.txt; CASE is
MODEL_MESH_OPT (e.g. gpt2/gpt2_dp2mp2_adamw.s3.r1.dense.ir).

Usage (/tmp/paddle/bin/python, paddlepaddle==3.3.1 and numpy<2.3):
  python gen_models.py --out DIR [-j N] [FILTER...]   # FILTER: MODEL/CASE.sN[.rR] prefixes
  python gen_models.py --pack DIR DEST [MODEL...]     # DIR/MODEL/* -> DEST/MODEL.tar.xz
  python gen_models.py --unpack DEST OUT              # DEST/*.tar.xz -> OUT/MODEL/*
  python gen_models.py --list                         # the case table (markdown)

Each (case, stage, rank) runs in a fresh Python process with PYTHONHASHSEED=0,
PADDLE_TRAINER_ID=rank and PADDLE_TRAINERS_NUM=8 set before `import paddle`.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_llm import SNAPSHOTS  # noqa: E402
from oracle_capture import command_line, last_line as _last_line, run_engine, run_jobs, sample, write_snapshot  # noqa: E402  (distc/capture/hooks.py)

MESHES = {
    "dp2": ([0, 1], ["dp"]),
    "dp4": ([0, 1, 2, 3], ["dp"]),
    "dp2mp2": ([[0, 1], [2, 3]], ["dp", "mp"]),
}
STAGES = ["s0", "s1", "s2", "s3"]
HIDDEN, HEADS, FFN, LAYERS, BATCH = 32, 4, 64, 2, 4


# ----------------------------------------------------------------------------- model builders

def _blocks():
    """The transformer block shared by gpt2 and vit: pre-LN, fused qkv, GELU MLP."""
    import math

    import paddle
    import paddle.distributed as dist
    import paddle.nn.functional as F

    def linear(mesh, place, i, o, shard_dim):
        """Column-parallel (shard_dim 1: bias Shard(0)) or row-parallel (0: bias replicated)."""
        lin = paddle.nn.Linear(i, o)
        lin.weight = dist.shard_tensor(lin.weight, mesh, place(shard_dim))
        lin.bias = dist.shard_tensor(lin.bias, mesh, place(0 if shard_dim == 1 else None))
        return lin

    def layernorm(mesh, place):
        ln = paddle.nn.LayerNorm(HIDDEN)
        ln.weight = dist.shard_tensor(ln.weight, mesh, place())
        ln.bias = dist.shard_tensor(ln.bias, mesh, place())
        return ln

    class Block(paddle.nn.Layer):
        def __init__(self, mesh, place, seq, causal, dropout):
            super().__init__()
            self.seq, self.causal, self.p = seq, causal, dropout
            self.ln1 = layernorm(mesh, place)
            self.qkv = linear(mesh, place, HIDDEN, 3 * HIDDEN, 1)
            self.proj = linear(mesh, place, HIDDEN, HIDDEN, 0)
            self.ln2 = layernorm(mesh, place)
            self.fc1 = linear(mesh, place, HIDDEN, FFN, 1)
            self.fc2 = linear(mesh, place, FFN, HIDDEN, 0)

        def forward(self, h):
            hd = HIDDEN // HEADS
            qkv = paddle.reshape(self.qkv(self.ln1(h)), [0, 0, 3 * HEADS, hd])
            qkv = paddle.transpose(qkv, [0, 2, 1, 3])
            q, k, v = paddle.split(qkv, 3, axis=1)
            s = paddle.matmul(q, k, transpose_y=True) * (1.0 / math.sqrt(hd))
            if self.causal:
                s = s + paddle.triu(paddle.full([self.seq, self.seq], -10000.0, dtype="float32"), 1)
            p = F.softmax(s, axis=-1)
            if self.p:
                p = F.dropout(p, self.p)
            a = paddle.reshape(paddle.transpose(paddle.matmul(p, v), [0, 2, 1, 3]), [0, 0, HIDDEN])
            a = self.proj(a)
            h = h + (F.dropout(a, self.p) if self.p else a)
            m = self.fc2(F.gelu(self.fc1(self.ln2(h))))
            return h + (F.dropout(m, self.p) if self.p else m)

    return Block, layernorm, linear


def _token_task(vocab, seq):
    """The language-model dataset and loss of gpt2, llama and the PaddleFormers models (random ids,
    cross entropy): samples/llama_model.py's."""
    L = sample("llama_model")
    assert seq == L.SEQ
    return L.TokenData(4 * BATCH, vocab), L.Loss()


def _image_task(image, classes):
    """The image-classification dataset and loss of vit and resnet (random 3 x image x image
    pictures, cross entropy over ``classes``)."""
    import numpy as np
    import paddle
    import paddle.nn.functional as F

    class Loss(paddle.nn.Layer):
        def forward(self, logits, label):
            return F.cross_entropy(logits, label).mean()

    class DS(paddle.io.Dataset):
        def __init__(self, n):
            self.x = np.random.rand(n, 3, image, image).astype("float32")
            self.y = np.random.randint(0, classes, (n, 1)).astype("int64")

        def __getitem__(self, i):
            return self.x[i], self.y[i]

        def __len__(self):
            return len(self.x)

    return DS(4 * BATCH), Loss()


def build_gpt2(mesh, dims, place):
    import paddle
    import paddle.distributed as dist
    import paddle.nn.functional as F

    vocab, seq = 64, 8
    Block, layernorm, _ = _blocks()

    class GPT2(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.wte = paddle.nn.Embedding(vocab, HIDDEN)
            self.wte.weight = dist.shard_tensor(self.wte.weight, mesh, place(1))
            self.wpe = paddle.nn.Embedding(seq, HIDDEN)
            self.wpe.weight = dist.shard_tensor(self.wpe.weight, mesh, place())
            self.blocks = paddle.nn.LayerList([Block(mesh, place, seq, True, 0.1) for _ in range(LAYERS)])
            self.ln_f = layernorm(mesh, place)

        def forward(self, ids):
            pos = paddle.arange(seq, dtype="int64")
            h = F.dropout(self.wte(ids) + self.wpe(pos), 0.1)
            for b in self.blocks:
                h = b(h)
            # the lm head is the token embedding (tied weights)
            return paddle.matmul(self.ln_f(h), self.wte.weight, transpose_y=True)

    ds, loss = _token_task(vocab, seq)
    return GPT2(), ds, loss


def build_vit(mesh, dims, place):
    import paddle
    import paddle.distributed as dist

    image, patch, classes = 8, 4, 10
    tokens = (image // patch) ** 2 + 1
    Block, layernorm, _ = _blocks()

    class ViT(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.patch = paddle.nn.Conv2D(3, HIDDEN, patch, stride=patch)
            self.patch.weight = dist.shard_tensor(self.patch.weight, mesh, place())
            self.patch.bias = dist.shard_tensor(self.patch.bias, mesh, place())
            self.cls = self.create_parameter([1, 1, HIDDEN], default_initializer=paddle.nn.initializer.Normal(std=0.02))
            self.cls = dist.shard_tensor(self.cls, mesh, place())
            self.pos = self.create_parameter([1, tokens, HIDDEN],
                                             default_initializer=paddle.nn.initializer.Normal(std=0.02))
            self.pos = dist.shard_tensor(self.pos, mesh, place())
            self.blocks = paddle.nn.LayerList([Block(mesh, place, tokens, False, 0.0) for _ in range(LAYERS)])
            self.ln = layernorm(mesh, place)
            self.head = paddle.nn.Linear(HIDDEN, classes)
            self.head.weight = dist.shard_tensor(self.head.weight, mesh, place())
            self.head.bias = dist.shard_tensor(self.head.bias, mesh, place())

        def forward(self, x):
            p = paddle.transpose(paddle.flatten(self.patch(x), 2), [0, 2, 1])
            cls = paddle.expand(self.cls, [p.shape[0], 1, HIDDEN])
            h = paddle.concat([cls, p], axis=1) + self.pos
            for b in self.blocks:
                h = b(h)
            return self.head(self.ln(h)[:, 0])

    ds, loss = _image_task(image, classes)
    return ViT(), ds, loss


def build_mlp(mesh, dims, place):
    import paddle
    import paddle.distributed as dist

    widths = (16, 32, 16)

    class MLP(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.layers = paddle.nn.LayerList()
            for i in range(len(widths) - 1):
                lin = paddle.nn.Linear(widths[i], widths[i + 1])
                lin.weight = dist.shard_tensor(lin.weight, mesh, place(1 if i % 2 == 0 else 0))
                self.layers.append(lin)

        def forward(self, x):
            for i, lin in enumerate(self.layers):
                x = lin(x)
                if i < len(self.layers) - 1:
                    x = paddle.nn.functional.relu(x)
            return x

    return MLP(), sample("train_mlp").RandomData(4 * BATCH, widths[0], widths[-1]), paddle.nn.MSELoss()


def build_llama_rope(mesh, dims, place):
    """A LLaMA block with rotary position embedding computed in the program (arange, outer, cos,
    sin, rotate-half by slicing and concat), RMSNorm (mean of squares, rsqrt), SwiGLU
    (silu(gate) * up) and a causal mask (triu of -inf added before softmax)."""
    import math

    import paddle
    import paddle.distributed as dist
    import paddle.nn.functional as F

    vocab, seq = 64, 8
    hd = HIDDEN // HEADS

    def linear(i, o, shard_dim):
        lin = paddle.nn.Linear(i, o, bias_attr=False)
        lin.weight = dist.shard_tensor(lin.weight, mesh, place(shard_dim))
        return lin

    class RMSNorm(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.weight = self.create_parameter([HIDDEN], default_initializer=paddle.nn.initializer.Constant(1.0))
            self.weight = dist.shard_tensor(self.weight, mesh, place())

        def forward(self, x):
            return x * paddle.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * self.weight

    def rotate(x, cos, sin):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + paddle.concat([-x2, x1], axis=-1) * sin

    class Block(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(), RMSNorm()
            self.q, self.k, self.v = linear(HIDDEN, HIDDEN, 1), linear(HIDDEN, HIDDEN, 1), linear(HIDDEN, HIDDEN, 1)
            self.o = linear(HIDDEN, HIDDEN, 0)
            self.gate, self.up, self.down = linear(HIDDEN, FFN, 1), linear(HIDDEN, FFN, 1), linear(FFN, HIDDEN, 0)

        def forward(self, h):
            x = self.n1(h)
            t = lambda z: paddle.reshape(z, [0, 0, HEADS, hd])  # noqa: E731
            q, k, v = t(self.q(x)), t(self.k(x)), t(self.v(x))
            inv = 1.0 / (10000 ** (paddle.arange(0, hd, 2, dtype="float32") / hd))
            freqs = paddle.outer(paddle.arange(seq, dtype="float32"), inv)
            emb = paddle.concat([freqs, freqs], axis=-1)
            cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            q, k, v = (paddle.transpose(z, [0, 2, 1, 3]) for z in (q, k, v))
            s = paddle.matmul(q, k, transpose_y=True) / math.sqrt(hd)
            s = s + paddle.triu(paddle.full([seq, seq], float("-inf"), dtype="float32"), 1)
            a = paddle.matmul(F.softmax(s, -1), v)
            h = h + self.o(paddle.reshape(paddle.transpose(a, [0, 2, 1, 3]), [0, 0, HIDDEN]))
            x = self.n2(h)
            return h + self.down(F.silu(self.gate(x)) * self.up(x))

    class LLaMA(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed = paddle.nn.Embedding(vocab, HIDDEN)
            self.embed.weight = dist.shard_tensor(self.embed.weight, mesh, place(1))
            self.blocks = paddle.nn.LayerList([Block() for _ in range(LAYERS)])
            self.norm = RMSNorm()
            self.head = linear(HIDDEN, vocab, 1)

        def forward(self, ids):
            h = self.embed(ids)
            for b in self.blocks:
                h = b(h)
            return self.head(self.norm(h))

    ds, loss = _token_task(vocab, seq)
    return LLaMA(), ds, loss


def build_resnet(mesh, dims, place):
    """A ResNet basic block: conv2d stem (3x3, no bias), batch_norm, relu, max pool 2x2, then
    conv-bn-relu-conv-bn plus the identity, relu, adaptive average pool to 1x1, flatten, linear
    head over 10 classes (8x8 images).  Weights replicated (data parallel)."""
    import paddle
    import paddle.distributed as dist
    import paddle.nn.functional as F

    ch, classes, image = 8, 10, 8

    def conv(i, o):
        c = paddle.nn.Conv2D(i, o, 3, padding=1, bias_attr=False)
        c.weight = dist.shard_tensor(c.weight, mesh, place())
        return c

    def bn(c):
        b = paddle.nn.BatchNorm2D(c)
        b.weight = dist.shard_tensor(b.weight, mesh, place())
        b.bias = dist.shard_tensor(b.bias, mesh, place())
        return b

    class ResNet(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.stem, self.bn0 = conv(3, ch), bn(ch)
            self.c1, self.b1, self.c2, self.b2 = conv(ch, ch), bn(ch), conv(ch, ch), bn(ch)
            self.fc = paddle.nn.Linear(ch, classes)
            self.fc.weight = dist.shard_tensor(self.fc.weight, mesh, place())
            self.fc.bias = dist.shard_tensor(self.fc.bias, mesh, place())

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn0(self.stem(x))), 2, 2)
            y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
            x = F.relu(x + y)
            return self.fc(paddle.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    ds, loss = _image_task(image, classes)
    return ResNet(), ds, loss


def _pf_model(cls_name):
    """A PaddleFormers 1.2.0 causal LM from a tiny config (random weights, no download), and the
    tensor-parallel plan of the library's ``LlamaForCausalLM.auto_dist_config()`` (its keys say
    ``llama.``, the base model's attribute is ``model``: renamed, as the trainer's config would)."""
    import sys as _sys
    import types

    import paddle

    import paddleformers
    if cls_name == "qwen2":  # its modeling imports a Megatron-style provider that needs paddlefleet
        stub = types.ModuleType("paddleformers.transformers.gpt_provider")
        stub.GPTModelProvider = type("GPTModelProvider", (), {})
        _sys.modules.setdefault("paddleformers.transformers.gpt_provider", stub)
    paddle.jit.ignore_module([paddleformers.transformers.configuration_utils])
    from paddleformers.transformers.llama.auto_dist_config import get_dist_config

    kw = dict(vocab_size=64, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
              num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=16,
              use_single_model_implementation=True, fuse_rms_norm=False)
    if cls_name == "llama":
        from paddleformers.transformers.llama.configuration import LlamaConfig
        from paddleformers.transformers.llama.modeling import LlamaForCausalLM
        model = LlamaForCausalLM(LlamaConfig(**kw))
    else:  # the library's single-model Qwen2 (qkv with bias, tied head off)
        from paddleformers.transformers.qwen2.configuration import Qwen2Config
        from paddleformers.transformers.qwen2.modeling import Qwen2ForCausalLMDeprecated
        model = Qwen2ForCausalLMDeprecated(Qwen2Config(**kw))
    plan = get_dist_config(model)["mp_config"]["parallelize_plan"]
    conf = {"mp_config": {"parallelize_plan": {k.replace("llama.", "model.", 1): v for k, v in plan.items()}}}
    return model, conf


def build_pf(cls_name):
    def build(mesh, dims, place):
        import paddle
        import paddle.nn.functional as F

        model, conf = _pf_model(cls_name)
        vocab, seq = 64, 8

        class Loss(paddle.nn.Layer):
            def forward(self, *outs):  # the model's outputs (logits first), then the label
                return F.cross_entropy(outs[0], outs[-1].unsqueeze(-1)).mean()

        ds, _ = _token_task(vocab, seq)
        model._gen_parallel_config = conf
        return model, ds, Loss()
    return build


def pf_parallelize(model, make_opt, stage, mesh):
    """As PaddleFormers' auto-parallel trainer: ``parallelize_model`` / ``parallelize_optimizer``
    with the model's plan (over `mp` where the mesh has it) and ``dp_config.sharding_level``."""
    from paddle.distributed.auto_parallel.intermediate import parallelize as par
    conf = dict(model._gen_parallel_config)
    if "mp" not in mesh.dim_names:
        conf.pop("mp_config")
    conf["dp_config"] = {"sharding_level": stage}
    model = par.parallelize_model(model, mesh, conf)
    return model, par.parallelize_optimizer(make_opt(model.parameters()), mesh, conf)


# name -> builder(mesh, dims, place) -> (model, dataset, loss).  PARALLELIZE: a model whose
# library parallelizes it itself (else dist.shard_optimizer with ShardingStage1/2/3).
MODELS = {"gpt2": build_gpt2, "vit": build_vit, "mlp": build_mlp, "llama": build_llama_rope, "resnet": build_resnet,
          "pfllama": build_pf("llama"), "pfqwen2": build_pf("qwen2")}
PARALLELIZE = {"pfllama": pf_parallelize, "pfqwen2": pf_parallelize}


def make_optimizer(name, params):
    import paddle
    o = paddle.optimizer
    lr = 0.01
    return {
        "adamw": lambda: o.AdamW(learning_rate=lr, parameters=params),
        "adamw_gm": lambda: o.AdamW(learning_rate=lr, parameters=params),
        "sgd": lambda: o.SGD(learning_rate=lr, parameters=params),
        "adam": lambda: o.Adam(learning_rate=lr, parameters=params),
        "momentum": lambda: o.Momentum(learning_rate=lr, momentum=0.9, parameters=params),
        "lamb": lambda: o.Lamb(learning_rate=lr, lamb_weight_decay=0.01, parameters=params),
        "adagrad": lambda: o.Adagrad(learning_rate=lr, parameters=params),
        "rmsprop": lambda: o.RMSProp(learning_rate=lr, parameters=params),  # Paddle 3.3.1 crashes
        "rmspropc": lambda: o.RMSProp(learning_rate=lr, centered=True, parameters=params),
        "adamax": lambda: o.Adamax(learning_rate=lr, parameters=params),
        "adadelta": lambda: o.Adadelta(learning_rate=lr, parameters=params),
    }[name]()


OPTIMIZERS = ["adamw", "sgd", "adam", "momentum", "lamb", "adagrad", "rmsprop", "rmspropc", "adamax", "adadelta"]
WRAPPED = {"adamw", "sgd", "adamw_gm"}  # what dist.shard_optimizer accepts


# ----------------------------------------------------------------------------- cases

def C(model, mesh, opt="adamw", stages=STAGES, ranks=None):
    return (model, mesh, opt, list(stages), ranks)


CASES = [C(m, mesh) for m in ("gpt2", "vit") for mesh in ("dp2", "dp4", "dp2mp2")]
# PaddleFormers' LLaMA and Qwen2 (PYTHONPATH: paddleformers 1.2.0 and what its import needs)
CASES += [C(m, "dp2mp2", "adamw", ["s0", "s1", "s3"], [0, 3]) for m in ("pfllama", "pfqwen2")]
# a LLaMA block with rotary embedding, SwiGLU, RMSNorm and a causal mask; a ResNet basic block
CASES += [C("llama", mesh) for mesh in ("dp2", "dp2mp2")] + [C("resnet", mesh) for mesh in ("dp2", "dp4")]
# gradient merge (k_steps 2): Paddle's grad_merge_add ops carry a copied op_dist_attr
CASES += [C("gpt2", "dp2mp2", "adamw_gm", ["s0"], [0])]
# every optimizer, not wrapped by shard_optimizer (stage 0: plain data parallel), on the MLP
CASES += [C("mlp", mesh, opt, ["s0"]) for opt in OPTIMIZERS if opt not in WRAPPED
          for mesh in ("dp2mp2", "dp4")]


def case_name(model, mesh, opt):
    return f"{model}_{mesh}_{opt}"


def ranks_of(mesh):
    ids = MESHES[mesh][0]
    while isinstance(ids[0], list):
        ids = [r for row in ids for r in row]
    return ids


def jobs(outdir):
    return [(model, mesh, opt, s, r, outdir) for model, mesh, opt, ss, rs in CASES for s in ss
            for r in (rs or ranks_of(mesh))]


# ----------------------------------------------------------------------------- capture

def build_and_capture(model_name, mesh_name, opt_name, stage, snapshot_cb):
    import numpy as np
    import paddle
    import paddle.distributed as dist

    paddle.seed(2024)
    np.random.seed(2024)
    ids, dims = MESHES[mesh_name]
    mesh = dist.ProcessMesh(ids, dim_names=dims)

    def place(shard_dim=None):
        pl = [dist.Replicate() for _ in dims]
        if "mp" in dims and shard_dim is not None:
            pl[dims.index("mp")] = dist.Shard(shard_dim)
        return pl

    model, ds, loss = MODELS[model_name](mesh, dims, place)
    n = int(stage[1:])
    if model_name in PARALLELIZE:
        model, opt = PARALLELIZE[model_name](model, lambda ps: make_optimizer(opt_name, ps), n, mesh)
    else:
        opt = make_optimizer(opt_name, model.parameters())
        if n:
            fn = {1: dist.ShardingStage1, 2: dist.ShardingStage2, 3: dist.ShardingStage3}[n]
            opt = dist.shard_optimizer(opt, fn("dp", mesh))
        elif opt_name in WRAPPED:
            opt = dist.shard_optimizer(opt)
    loader = paddle.io.DataLoader(ds, batch_size=BATCH)
    dloader = dist.shard_dataloader(loader, meshes=[mesh], shard_dims="dp")
    strategy = dist.Strategy()
    if opt_name.endswith("_gm"):  # gradient merge over 2 steps (snapshot dist_final: after its pass)
        strategy.gradient_merge.enable = True
        strategy.gradient_merge.k_steps = 2
    run_engine(model, dloader, loss, opt, snapshot_cb, strategy=strategy)


def worker(model, mesh, opt, stage, rank, outdir):
    assert os.environ.get("PADDLE_TRAINER_ID") == str(rank)
    base = os.path.join(outdir, model, f"{case_name(model, mesh, opt)}.{stage}.r{rank}")
    got = {}

    def cb(name, program):
        if name not in got:
            got[name] = str(program)

    try:
        build_and_capture(model, mesh, opt, stage, cb)
    except Exception as e:  # Paddle refused: only its message is kept
        msg = _last_line(e)
        if not msg.startswith(type(e).__name__ + ":"):
            msg = f"{type(e).__name__}: {msg}"
        with open(base + ".error.txt", "w", encoding="utf-8") as f:
            f.write(msg + "\n")
        return
    for s in SNAPSHOTS + (["dist_final"] if opt.endswith("_gm") else []):
        write_snapshot(f"{base}.{s}.ir", got[s])


def run_worker(job):
    model, mesh, opt, stage, rank, outdir = job
    os.makedirs(os.path.join(outdir, model), exist_ok=True)
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", PYTHONHASHSEED="0", PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM="8",
               GLOG_minloglevel="2")
    tag = f"{model}/{case_name(model, mesh, opt)}.{stage}.r{rank}"
    err = os.path.join(outdir, f"{tag}.error.txt")
    for attempt in range(3):  # dy2static's temporary module files can clash between parallel processes
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", model, mesh, opt, stage,
                            str(rank), outdir], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if attempt == 2 or not (os.path.exists(err) and "transformed from AST" in open(err, encoding="utf-8").read()):
            break
        os.remove(err)
    if p.returncode != 0:  # Paddle crashed: keep what it said (a C++ exception's what(), the signal)
        said = re.findall(r"what\(\):\s*(.*)|(FatalError: `[^`]*` is detected by the operating system\.)", p.stdout)
        msg = "; ".join(a or b for a, b in said) or (p.stdout.strip().splitlines() or ["?"])[-1]
        print(f"  CRASH {tag}: {msg}", flush=True)
        with open(err, "w", encoding="utf-8") as f:
            f.write(f"CRASH: {msg}\n")
    else:
        print("  done", tag, "(error)" if os.path.exists(err) else "", flush=True)


def pack(src, dest, models=None):
    """src/MODEL/NAME -> dest/MODEL.tar.xz, reproducibly (sorted names, no times, no owners)."""
    import io
    import lzma
    import tarfile
    os.makedirs(dest, exist_ok=True)
    for model in models or sorted(os.listdir(src)):
        names = sorted(os.listdir(os.path.join(src, model)))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for n in names:
                data = open(os.path.join(src, model, n), "rb").read()
                info = tarfile.TarInfo(f"{model}/{n}")
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        out = os.path.join(dest, f"{model}.tar.xz")
        with open(out, "wb") as f:
            f.write(lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME))
        print(f"{model}: {len(names)} files, {buf.tell()} bytes -> {os.path.getsize(out)} bytes", flush=True)


def unpack(dest, out):
    import tarfile
    for f in sorted(os.listdir(dest)):
        if f.endswith(".tar.xz"):
            with tarfile.open(os.path.join(dest, f), "r:xz") as tar:
                tar.extractall(out, filter="data")


def table():
    print("| model | case | mesh (dims) | optimizer | stages | ranks |")
    print("|---|---|---|---|---|---|")
    for model, mesh, opt, ss, rs in CASES:
        ids, dims = MESHES[mesh]
        print(f"| {model} | `{case_name(model, mesh, opt)}` | `{ids}` ({','.join(dims)}) | {opt} | "
              f"{','.join(ss)} | {','.join(map(str, rs or ranks_of(mesh)))} |")


def main(argv):
    return command_line(argv, __doc__, {
        "--worker": lambda a, j: worker(a[0], a[1], a[2], a[3], int(a[4]), a[5]),
        "--list": lambda a, j: table(),
        "--pack": lambda a, j: pack(a[0], a[1], a[2:]),
        "--unpack": lambda a, j: unpack(a[0], a[1]),
        "--out": lambda a, j: run_jobs(run_worker, jobs(a[0]), j, a[1:],  # DIR [FILTER: MODEL/CASE.sN[.rR] ...]
                                       lambda jb: f"{jb[0]}/{case_name(*jb[:3])}.{jb[3]}.r{jb[4]}"),
    })


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
