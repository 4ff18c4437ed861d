"""Train the LLaMA-style decoder of ``llama_model.py`` with pipeline parallelism: its layers on the
meshes of two pipeline stages (``mesh.get_mesh_with_dim("pp", i)``), data parallel over ``dp``
(and tensor parallel over ``mp`` on ``--mesh pp2dp2mp2``), a pipeline schedule (``--schedule``,
``--micro-batches``), AdamW with a global-norm clip and a cosine learning rate, ZeRO stage
``--stage`` over dp.

On a machine with the GPUs:   python -m paddle.distributed.launch --devices 0,1,2,3 samples/train_llama_pp.py
Its programs, on a laptop:    distc capture -o cap -- python samples/train_llama_pp.py
"""

import argparse

import numpy as np
import paddle
import paddle.distributed as dist
from llama_model import LLaMA, Loss, TokenData

MESHES = {  # name: (process ids, dim names)
    "pp2dp2": ([[0, 1], [2, 3]], ["pp", "dp"]),
    "pp2dp2mp2": ([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], ["pp", "dp", "mp"]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh", default="pp2dp2", choices=sorted(MESHES))
    ap.add_argument("--stage", type=int, default=1, choices=[0, 1], help="ZeRO stage (0: none)")
    ap.add_argument("--schedule", default="1F1B", choices=["FThenB", "1F1B"])
    ap.add_argument("--micro-batches", type=int, default=4, help="accumulate steps: micro batches a step")
    ap.add_argument("--batch", type=int, default=8, help="global batch size")
    ap.add_argument("--layers", type=int, default=4, help="decoder blocks (spread over the stages)")
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()

    paddle.seed(2024)
    np.random.seed(2024)
    ids, dims = MESHES[args.mesh]
    mesh = dist.ProcessMesh(ids, dim_names=dims)
    stages = [mesh.get_mesh_with_dim("pp", i) for i in range(2)]
    model = LLaMA(stages, layers=args.layers)

    strategy = dist.Strategy()
    strategy.pipeline.enable = True
    strategy.pipeline.pp_degree = len(stages)
    strategy.pipeline.schedule_mode = args.schedule
    strategy.pipeline.accumulate_steps = args.micro_batches
    lr = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=0.01, T_max=10)
    opt = paddle.optimizer.AdamW(learning_rate=lr, parameters=model.parameters(),
                                 grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0))
    if args.stage:
        opt = dist.shard_optimizer(opt, dist.ShardingStage1("dp", mesh))
    else:
        opt = dist.shard_optimizer(opt)
    loader = paddle.io.DataLoader(TokenData(4 * args.batch), batch_size=args.batch)
    dist_loader = dist.shard_dataloader(loader, meshes=stages, shard_dims="dp")

    dist_model = dist.to_static(model, dist_loader, Loss(), opt, strategy=strategy)
    dist_model.train()
    for step, (x, y) in enumerate(dist_loader()):
        loss = dist_model(x, y)
        if loss is not None:  # the last stage holds the loss
            print(f"step {step}: loss {float(loss):.6f}")
        if step + 1 == args.steps:
            break


if __name__ == "__main__":
    main()
