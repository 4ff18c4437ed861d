"""A small training script written the way a user writes one for Paddle's auto-parallel API: an MLP
whose weights are placed on a dp x mp mesh with ``dist.shard_tensor``, AdamW wrapped by
``dist.shard_optimizer`` (ZeRO stage ``--stage``), a data loader sharded over dp, ``dist.to_static``,
then the training loop.

On a machine with the GPUs:   python -m paddle.distributed.launch --devices 0,1,2,3 samples/train_mlp.py
Its programs, on a laptop:    distc capture -o cap -- python samples/train_mlp.py
(``samples/mlp_dp2mp2_adamw.ir`` is the stage-0 ``before_partition`` program it gives.)
"""

import argparse

import numpy as np
import paddle
import paddle.distributed as dist

MESHES = {  # name: (process ids, dim names)
    "dp2mp2": ([[0, 1], [2, 3]], ["dp", "mp"]),
    "dp4": ([0, 1, 2, 3], ["dp"]),
    "dp2": ([0, 1], ["dp"]),
}


class MLP(paddle.nn.Layer):
    """Linear -> relu -> Linear; over mp the first weight is column-parallel, the second row-parallel."""

    def __init__(self, mesh, widths=(16, 32, 16)):
        super().__init__()
        dims = mesh.dim_names
        self.layers = paddle.nn.LayerList()
        for i in range(len(widths) - 1):
            lin = paddle.nn.Linear(widths[i], widths[i + 1])
            placements = [dist.Replicate() for _ in dims]
            if "mp" in dims:
                placements[dims.index("mp")] = dist.Shard(1 if i % 2 == 0 else 0)
            lin.weight = dist.shard_tensor(lin.weight, mesh, placements)
            self.layers.append(lin)

    def forward(self, x):
        for i, lin in enumerate(self.layers):
            x = lin(x)
            if i < len(self.layers) - 1:
                x = paddle.nn.functional.relu(x)
        return x * 1.0  # an output scale (Paddle prints it as pd_op.scale)


class RandomData(paddle.io.Dataset):
    def __init__(self, n, d_in, d_out):
        self.x = np.random.rand(n, d_in).astype("float32")
        self.y = np.random.rand(n, d_out).astype("float32")

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
    model = MLP(mesh)
    opt = paddle.optimizer.AdamW(learning_rate=0.01, parameters=model.parameters())
    if args.stage:
        stage = {1: dist.ShardingStage1, 2: dist.ShardingStage2, 3: dist.ShardingStage3}[args.stage]
        opt = dist.shard_optimizer(opt, stage("dp", mesh))
    else:
        opt = dist.shard_optimizer(opt)
    loader = paddle.io.DataLoader(RandomData(16, 16, 16), batch_size=4)
    dist_loader = dist.shard_dataloader(loader, meshes=[mesh], shard_dims="dp")

    dist_model = dist.to_static(model, dist_loader, paddle.nn.MSELoss(), opt)
    dist_model.train()
    for step, (x, y) in enumerate(dist_loader()):
        loss = dist_model(x, y)
        print(f"step {step}: loss {float(loss):.6f}")
        if step + 1 == args.steps:
            break


if __name__ == "__main__":
    main()
