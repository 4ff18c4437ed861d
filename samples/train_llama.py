"""Train the LLaMA-style decoder of ``llama_model.py`` with Paddle's auto-parallel API: tensor
parallel over ``mp``, data parallel over ``dp``, AdamW with a global-norm clip and a cosine
learning rate (or ``--amp``: bfloat16 O2, constant rate), ZeRO stage ``--stage`` over dp.

On a machine with the GPUs:   python -m paddle.distributed.launch --devices 0,1,2,3 samples/train_llama.py
Its programs, on a laptop:    distc capture -o cap -- python samples/train_llama.py
"""

import argparse

import numpy as np
import paddle
import paddle.distributed as dist
from llama_model import BATCH, LLaMA, Loss, TokenData

MESHES = {  # name: (process ids, dim names)
    "dp2mp2": ([[0, 1], [2, 3]], ["dp", "mp"]),
    "dp4": ([0, 1, 2, 3], ["dp"]),
    "dp2mp4": ([[0, 1, 2, 3], [4, 5, 6, 7]], ["dp", "mp"]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh", default="dp2mp2", choices=sorted(MESHES))
    ap.add_argument("--stage", type=int, default=1, choices=[0, 1, 2, 3], help="ZeRO stage (0: none)")
    ap.add_argument("--amp", action="store_true", help="bfloat16 AMP at level O2")
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()

    paddle.seed(2024)
    np.random.seed(2024)
    ids, dims = MESHES[args.mesh]
    mesh = dist.ProcessMesh(ids, dim_names=dims)
    model = LLaMA([mesh])

    strategy = dist.Strategy()
    if args.amp:
        lr = 0.01
        strategy.amp.enable = True
        strategy.amp.dtype = "bfloat16"
        strategy.amp.level = "O2"
    else:
        lr = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=0.01, T_max=10)
    opt = paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(),
                                 grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0))
    if args.stage:
        stage = {1: dist.ShardingStage1, 2: dist.ShardingStage2, 3: dist.ShardingStage3}[args.stage]
        opt = dist.shard_optimizer(opt, stage("dp", mesh))
    else:
        opt = dist.shard_optimizer(opt)
    loader = paddle.io.DataLoader(TokenData(4 * BATCH), batch_size=BATCH)
    dist_loader = dist.shard_dataloader(loader, meshes=[mesh], shard_dims="dp")

    dist_model = dist.to_static(model, dist_loader, Loss(), opt, strategy=strategy)
    dist_model.train()
    for step, (x, y) in enumerate(dist_loader()):
        loss = dist_model(x, y)
        print(f"step {step}: loss {float(loss):.6f}")
        if step + 1 == args.steps:
            break


if __name__ == "__main__":
    main()
