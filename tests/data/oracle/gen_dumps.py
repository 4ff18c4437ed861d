#!/usr/bin/env python3
"""Real PIR dumps of forms neither the corpus nor ``syntax/`` holds (paddlepaddle 3.3.1, CPU):
nested control flow, pylayers with several outputs, every dtype, hostile strings, long names,
empty programs, 0-d and dynamic shapes, vector results, ops without results, to_static programs
with parameters, 3-D meshes, Partial(MAX/AVG), several meshes, ``print(program)`` output and logs
mixing programs with other lines.

Every file in ``dumps/`` is text Paddle printed: ``str(program)``, or what ``print`` / the pass
manager's IR printing / an Executor with ``FLAGS_print_ir`` wrote to stdout (captured from fd 1).

    PYTHONHASHSEED=0 /work/paddle/bin/python tests/data/oracle/gen_dumps.py [--case NAME]

Each case runs in a fresh process (``PADDLE_TRAINER_ID=0``, ``PADDLE_TRAINERS_NUM=8``), so ids and
ring ids are reproducible.  Files over 16 KB are stored gzipped.
"""

import gzip
import hashlib
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
OUT = os.path.join(HERE, "dumps")
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _write(name, text):
    data = text.encode("utf-8") if isinstance(text, str) else text
    path = os.path.join(OUT, name)
    if len(data) > 16_000:
        with open(path + ".gz", "wb") as f:
            f.write(gzip.compress(data, mtime=0))
    else:
        with open(path, "wb") as f:
            f.write(data)


def _progs():
    import paddle

    paddle.enable_static()
    return paddle.static.Program(), paddle.static.Program()


def _capture(fn):
    """What ``fn()`` writes to fd 1 (C++ prints and Python prints alike)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            fn()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        return tmp.read()


# ------------------------------------------------------------------------------ control flow
@case
def cond_nested():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [3], "float32")
        s = paddle.sum(x)

        def outer_true():
            return paddle.static.nn.cond(s > 10.0, lambda: x * 3.0, lambda: x * 2.0)

        y = paddle.static.nn.cond(s > 0.0, outer_true, lambda: -x)
        paddle.static.nn.cond(s < 1.0, lambda: None, lambda: None)  # regions without results
        paddle.mean(y)
    _write("cond_nested.ir", str(main))


@case
def while_nested():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [2, 2], "float32")
        i = paddle.full([1], 0, "int32")
        n = paddle.full([1], 3, "int32")

        def body(i, h):
            j = paddle.full([1], 0, "int32")
            _, h2 = paddle.static.nn.while_loop(lambda j, g: j < i, lambda j, g: [j + 1, g * 0.5], [j, h])
            h3 = paddle.static.nn.cond(paddle.mean(h2) > 1.0, lambda: h2 - 1.0, lambda: h2 + 1.0)
            return [i + 1, h3]

        paddle.static.nn.while_loop(lambda i, h: i < n, body, [i, x])
    _write("while_nested.ir", str(main))


@case
def while_grad_nested():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [3], "float32")
        x.stop_gradient = False
        i = paddle.full([1], 0, "int64")
        n = paddle.full([1], 2, "int64")

        def body(i, h):
            h = paddle.static.nn.cond(paddle.sum(h) > 0, lambda: paddle.sin(h), lambda: paddle.cos(h))
            return [i + 1, h * x]

        _, h = paddle.static.nn.while_loop(lambda i, h: i < n, body, [i, x])
        paddle.static.append_backward(paddle.sum(h))
    _write("while_grad_nested.ir", str(main))


@case
def pylayer_multi():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        a = paddle.static.data("a", [2, 3], "float32")
        b = paddle.static.data("b", [3], "float32")
        a.stop_gradient = False
        b.stop_gradient = False
        u, v = paddle.static.nn.static_pylayer(
            lambda p, q: (p * q, paddle.exp(q)), [a, b], backward_fn=lambda du, dv: (du * 2.0, dv + 1.0))
        paddle.static.append_backward(paddle.sum(u) + paddle.sum(v))
    _write("pylayer_multi.ir", str(main))


@case
def pylayer_no_backward():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        a = paddle.static.data("a", [4], "float32")
        paddle.static.nn.static_pylayer(lambda p: paddle.nn.functional.relu(p), [a])
    _write("pylayer_no_backward.ir", str(main))


# ------------------------------------------------------------------------------ dtypes, shapes
@case
def dtypes():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [2, 3], "float32")
        for dt in ("float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool", "float64"):
            paddle.cast(x, dt)
        c = paddle.complex(x, x)
        paddle.abs(c)
        paddle.cast(c, "complex128")
        paddle.static.data("h", [4], "float16")
        paddle.static.data("bf", [4], "bfloat16")
        paddle.static.data("flag", [], "bool")
        paddle.full([2], 7, "int8")
        paddle.full([2], True, "bool")
        paddle.full([2], 0.1, "float16")
        paddle.full([2], 1.5, "bfloat16")
        paddle.full([2], 3, "uint8")
        paddle.to_tensor([1 + 2j, 3 - 4j], "complex64")
    _write("dtypes.ir", str(main))


@case
def shapes_0d_dynamic():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [None, -1, 4], "float32")
        s = paddle.sum(x)                 # 0-d
        paddle.static.data("scalar", [], "float32")
        paddle.reshape(x, [-1, 4])
        paddle.shape(x)
        paddle.unsqueeze(s, 0)
        paddle.full([], 3.0)
        paddle.zeros([0, 3])
        paddle.arange(0, 5)
        paddle.nonzero(x > 0)
        paddle.static.data("big", [1 << 40, 2], "float32")
    _write("shapes_0d_dynamic.ir", str(main))


@case
def vector_results():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [4, 6], "float32")
        paddle.unbind(x, axis=0)
        paddle.split(x, [1, 2, 3], axis=1)
        paddle.meshgrid(paddle.arange(3), paddle.arange(2))
        paddle.concat([x, x, x])
        paddle.stack([x, x])
        paddle.broadcast_tensors([x, paddle.static.data("y", [1, 6], "float32")])
        paddle.add_n([x, x])
    _write("vector_results.ir", str(main))


@case
def no_result_ops():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [3], "float32")
        paddle.static.Print(x, message="value of x")
        paddle.static.nn.cond(paddle.sum(x) > 0, lambda: [paddle.static.Print(x)] and None, lambda: None)
        paddle.assign(x, paddle.zeros([3]))
    _write("no_result_ops.ir", str(main))


# ------------------------------------------------------------------------------ strings, names
@case
def strings_hostile():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        names = [
            "ünïcödé_张量_🙂",
            'q", b:"x',                 # looks like the end of a string and another attribute
            'q"} : () -> tensor<2xf32>',  # looks like the end of the op
            "back\\\\slash\\",
            "brace{}[]()<>",
            "line1\nline2\n",
            "tab\there",
            'end"',
            '"',
            "\\",
            "",
            " lead and trail ",
            "a,b:c=d%e",
        ]
        vs = [paddle.static.data(n if n else "empty_name_x", [2], "float32") for n in names]
        paddle.static.data("", [1], "float32") if False else None
        paddle.static.Print(vs[0], message='msg with "quotes", \\back\\ and\nnewline')
        paddle.einsum("ij,ij->i", paddle.reshape(vs[1], [1, 2]), paddle.reshape(vs[2], [1, 2]))
        paddle.add_n(vs)
    _write("strings_hostile.ir", str(main))


@case
def long_names():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        a = paddle.static.data("n" * 3000, [2], "float32")
        b = paddle.static.data("m" * 40 + "." * 10 + "_w_0@GRAD@RENAME@block0@0", [2], "float32")
        paddle.static.Print(a, message="x" * 5000)
        a + b
    _write("long_names.ir", str(main))


# ------------------------------------------------------------------------------ degenerate programs
@case
def empty_program():
    main, _ = _progs()
    _write("empty_program.ir", str(main))


@case
def args_no_ops():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [2], "float32")
    blk = main.global_block()
    blk.add_kwarg("kw_only", x.type())
    blk.add_arg(x.type())
    x.get_defining_op().erase()
    _write("args_no_ops.ir", str(main))


@case
def startup_program():
    import paddle

    main, startup = _progs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4, 3], "float32")
        y = paddle.nn.Linear(3, 2)(paddle.nn.LayerNorm(3)(x))
        paddle.optimizer.Adam(0.01).minimize(paddle.mean(y))
    _write("startup_program.ir", str(startup))
    _write("adam_main.ir", str(main))


# ------------------------------------------------------------------------------ to_static, inference
@case
def to_static_params():
    import paddle

    paddle.disable_static()
    paddle.seed(0)

    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.conv = paddle.nn.Conv2D(2, 3, 3)
            self.bn = paddle.nn.BatchNorm2D(3)
            self.fc = paddle.nn.Linear(3, 2)

        def forward(self, x):
            h = self.bn(self.conv(x)).mean(axis=[2, 3])
            if paddle.sum(h) > 0:
                h = h * 2
            return self.fc(h)

    net = paddle.jit.to_static(Net(), input_spec=[paddle.static.InputSpec([None, 2, 5, 5], "float32", "img")],
                               full_graph=True)
    prog = net.forward.concrete_program
    _write("to_static_params.ir", str(prog.main_program))
    net.train()
    fwd = net.forward.get_concrete_program(paddle.static.InputSpec([None, 2, 5, 5], "float32", "img"))[1]
    _write("to_static_train_forward.ir", str(fwd.train_program.forward_program))
    _write("to_static_train_backward.ir", str(fwd.train_program.backward_program))


@case
def inference_model():
    import numpy as np
    import paddle

    main, startup = _progs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 4], "float32")
        y = paddle.nn.functional.softmax(paddle.nn.Linear(4, 3)(x))
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    d = tempfile.mkdtemp()
    paddle.static.save_inference_model(os.path.join(d, "m"), [x], [y], exe, program=main)
    prog, feeds, fetches = paddle.static.load_inference_model(os.path.join(d, "m"), exe)
    _write("inference_model.ir", str(prog))
    exe.run(prog, feed={feeds[0]: np.ones([2, 4], "float32")}, fetch_list=fetches)


@case
def selected_rows():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        ids = paddle.static.data("ids", [4], "int64")
        emb = paddle.nn.Embedding(10, 3, sparse=True)
        paddle.optimizer.SGD(0.1).minimize(paddle.mean(emb(ids)))
    _write("selected_rows.ir", str(main))


# ------------------------------------------------------------------------------ printed other ways
@case
def print_program():
    """``print(program)``: str(program) and print's own newline."""
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [2, 3], "float32")
        paddle.nn.functional.gelu(x)

    _write("print_program.log", _capture(lambda: print(main)))


@case
def log_mixed():
    """A training script's stdout: log lines, ``print(program)`` twice, a dist program, more logs."""
    import paddle
    import paddle.distributed as dist

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [2, 3], "float32")
        y = paddle.tanh(x)
    other, _ = _progs()
    mesh = dist.ProcessMesh([0, 1], dim_names=["dp"])
    with paddle.static.program_guard(other):
        z = dist.shard_tensor(paddle.static.data("z", [4], "float32"), mesh, [dist.Shard(0)])
        dist.reshard(z, mesh, [dist.Replicate()])

    def run():
        print("I1201 06:00:00.000000 12345 program.cc:42] building programs")
        print("main program:")
        print(main)
        print("W1201 06:00:01.000000 12345 pass.cc:7] {not a program}")
        print(f"step 0 loss {{'loss': [1.0, 2.0]}}")
        print(other)
        print("done }")

    _write("log_mixed.log", _capture(run))


@case
def ir_printing_passes():
    """The pass manager's IR printing (``enable_ir_printing``) around two passes."""
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [2, 3], "float32")
        y = paddle.matmul(x, paddle.ones([3, 3])) + paddle.zeros([3])
        paddle.nn.functional.relu(y)
        paddle.full([1], 0.0) * 1.0  # dead code
    pm = paddle.base.libpaddle.pir.PassManager()
    pm.add_pass("dead_code_elimination_pass", {})
    pm.add_pass("common_subexpression_elimination_pass", {})
    pm.enable_ir_printing()
    text = _capture(lambda: pm.run(main)) + _capture(lambda: None)
    _write("ir_printing_passes.log", text)


@case
def print_ir_executor():
    """An Executor run with FLAGS_print_ir of a program with control flow and a parameter."""
    import numpy as np
    import paddle

    main, startup = _progs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [2, 3], "float32")
        h = paddle.nn.Linear(3, 3)(x)
        y = paddle.static.nn.cond(paddle.sum(h) > 0, lambda: h * 2.0, lambda: h)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    paddle.set_flags({"FLAGS_print_ir": True})
    text = _capture(lambda: exe.run(main, feed={"x": np.ones([2, 3], "float32")}, fetch_list=[y]))
    paddle.set_flags({"FLAGS_print_ir": False})
    _write("print_ir_executor.log", text)


# ------------------------------------------------------------------------------ distributed
def _dist():
    import paddle.distributed as dist

    return dist


@case
def dist_mesh3d():
    import paddle

    dist = _dist()
    from paddle.distributed.auto_parallel.static.pir_pass import ReshardPasses

    mesh = dist.ProcessMesh([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], dim_names=["pp", "dp", "mp"])
    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [8, 12, 4], "float32")
        a = dist.shard_tensor(x, mesh, [dist.Replicate(), dist.Shard(0), dist.Shard(1)])
        b = dist.reshard(a, mesh, [dist.Shard(2), dist.Replicate(), dist.Partial(dist.ReduceType.kRedMax)])
        c = dist.reshard(a, mesh, [dist.Partial(dist.ReduceType.kRedAvg), dist.Shard(1), dist.Replicate()])
        dist.reshard(b, mesh, [dist.Replicate(), dist.Replicate(), dist.Replicate()])
        dist.reshard(c, mesh, [dist.Replicate(), dist.Shard(1), dist.Shard(0)])
    _write("dist_mesh3d.ir", str(main))
    after = main.clone()
    try:
        ReshardPasses.apply_reshard_pass(after)
        _write("dist_mesh3d.r0.after_reshard.ir", str(after))
    except Exception as e:  # noqa: BLE001
        print("reshard refused:", str(e).strip().splitlines()[-1][:300], file=sys.stderr)


@case
def dist_partial_kinds():
    import paddle

    dist = _dist()
    from paddle.distributed.auto_parallel.static.pir_pass import ReshardPasses

    mesh = dist.ProcessMesh([[0, 1], [2, 3]], dim_names=["x", "y"])
    main, _ = _progs()
    with paddle.static.program_guard(main):
        outs = []
        for k, red in enumerate((dist.ReduceType.kRedMax, dist.ReduceType.kRedAvg, dist.ReduceType.kRedMin,
                                 dist.ReduceType.kRedProd, dist.ReduceType.kRedSum)):
            x = paddle.static.data(f"x{k}", [4, 4], "float32")
            a = dist.shard_tensor(x, mesh, [dist.Partial(red), dist.Shard(1)])
            outs.append(dist.reshard(a, mesh, [dist.Replicate(), dist.Shard(1)]))
        b = dist.shard_tensor(paddle.static.data("both", [4, 4], "float32"), mesh,
                              [dist.Partial(dist.ReduceType.kRedMax), dist.Partial(dist.ReduceType.kRedAvg)])
        dist.reshard(b, mesh, [dist.Replicate(), dist.Replicate()])
    _write("dist_partial_kinds.ir", str(main))
    after = main.clone()
    try:
        ReshardPasses.apply_reshard_pass(after)
        _write("dist_partial_kinds.r0.after_reshard.ir", str(after))
    except Exception as e:  # noqa: BLE001
        print("reshard refused:", str(e).strip().splitlines()[-1][:300], file=sys.stderr)


@case
def dist_pipeline_meshes():
    import paddle

    dist = _dist()
    from paddle.distributed.auto_parallel.static.pir_pass import ReshardPasses

    m0 = dist.ProcessMesh([0, 1], dim_names=["dp"])
    m1 = dist.ProcessMesh([2, 3], dim_names=["dp"])
    m2 = dist.ProcessMesh([[4, 5], [6, 7]], dim_names=["dp", "mp"])
    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = dist.shard_tensor(paddle.static.data("x", [4, 8], "float32"), m0, [dist.Shard(0)])
        w0 = dist.shard_tensor(paddle.static.data("w0", [8, 8], "float32"), m0, [dist.Replicate()])
        h = paddle.matmul(x, w0)
        h1 = dist.reshard(h, m1, [dist.Shard(0)])
        w1 = dist.shard_tensor(paddle.static.data("w1", [8, 8], "float32"), m1, [dist.Replicate()])
        g = paddle.nn.functional.relu(paddle.matmul(h1, w1))
        g2 = dist.reshard(g, m2, [dist.Shard(0), dist.Replicate()])
        w2 = dist.shard_tensor(paddle.static.data("w2", [8, 4], "float32"), m2, [dist.Replicate(), dist.Shard(1)])
        paddle.mean(paddle.matmul(g2, w2))
    _write("dist_pipeline_meshes.ir", str(main))
    for rank in (0, 2):
        os.environ["PADDLE_TRAINER_ID"] = str(rank)
        after = main.clone()
        try:
            ReshardPasses.apply_reshard_pass(after)
            _write(f"dist_pipeline_meshes.r{rank}.after_reshard.ir", str(after))
        except Exception as e:  # noqa: BLE001
            print("reshard refused:", str(e).strip().splitlines()[-1][:300], file=sys.stderr)


@case
def dist_cond_while():
    import paddle

    dist = _dist()
    mesh = dist.ProcessMesh([[0, 1, 2], [3, 4, 5]], dim_names=["a", "b"])
    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = dist.shard_tensor(paddle.static.data("x", [6, 6], "float16"), mesh, [dist.Shard(0), dist.Shard(1)])
        i = paddle.full([1], 0, "int64")
        n = paddle.full([1], 2, "int64")
        _, h = paddle.static.nn.while_loop(lambda i, h: i < n, lambda i, h: [i + 1, h * 2.0], [i, x])
        paddle.static.nn.cond(paddle.mean(paddle.cast(h, "float32")) > 0, lambda: paddle.exp(h), lambda: h)
    _write("dist_cond_while.ir", str(main))


def _engine_program(meshes, placements_fn, rank):
    """A tiny dist.to_static training program for ``rank``: {snapshot: text} before partition,
    after reshard and dense (as in gen_stage1.py, without devices)."""
    import numpy as np
    import paddle

    dist = _dist()
    from oracle_capture import Hooks  # distc/capture/hooks.py, the one copy of the engine hooks

    os.environ["PADDLE_TRAINER_ID"] = str(rank)
    paddle.disable_static()
    paddle.seed(1)
    snaps = {}

    def keep(name, program):
        if name in ("before_partition", "after_reshard", "dense"):
            snaps.setdefault(name, str(program))

    Hooks(keep).install()
    m0, m1 = meshes

    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.l1 = paddle.nn.Linear(8, 8)
            self.l2 = paddle.nn.Linear(8, 4)
            self.l1.weight = dist.shard_tensor(self.l1.weight, m0, placements_fn(0))
            self.l1.bias = dist.shard_tensor(self.l1.bias, m0, [dist.Replicate()] * len(m0.shape))
            self.l2.weight = dist.shard_tensor(self.l2.weight, m1, placements_fn(1))
            self.l2.bias = dist.shard_tensor(self.l2.bias, m1, [dist.Replicate()] * len(m1.shape))

        def forward(self, x):
            h = paddle.nn.functional.relu(self.l1(x))
            if m1 is not m0:
                h = dist.reshard(h, m1, [dist.Replicate()] * len(m1.shape))
            return self.l2(h)

    class DS(paddle.io.Dataset):
        def __getitem__(self, i):
            return np.ones([8], "float32"), np.ones([4], "float32")

        def __len__(self):
            return 8

    net = Net()
    opt = paddle.optimizer.AdamW(0.01, parameters=net.parameters())
    loader = dist.shard_dataloader(paddle.io.DataLoader(DS(), batch_size=4), meshes=[m0, m1] if m1 is not m0 else [m0])
    model = dist.to_static(net, loader, paddle.nn.MSELoss(), opt)
    eng = model._engine
    eng._build("train")
    eng._parallel_pir("train")
    return snaps


@case
def engine_mesh3d():
    dist = _dist()
    mesh = dist.ProcessMesh([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], dim_names=["x", "y", "z"])
    snaps = _engine_program((mesh, mesh), lambda k: [dist.Replicate(), dist.Shard(0), dist.Replicate()] if k == 0
                           else [dist.Replicate(), dist.Replicate(), dist.Shard(1)], 5)
    for k, v in snaps.items():
        _write(f"engine_mesh3d.r5.{k}.ir", v)


@case
def engine_two_meshes():
    dist = _dist()
    m0 = dist.ProcessMesh([0, 1], dim_names=["dp"])
    m1 = dist.ProcessMesh([2, 3], dim_names=["dp"])
    for rank in (0, 3):
        snaps = _engine_program((m0, m1), lambda k: [dist.Replicate()], rank)
        for k, v in snaps.items():
            _write(f"engine_two_meshes.r{rank}.{k}.ir", v)


# ------------------------------------------------------------------------------ round 2
@case
def switch_case_assert():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = paddle.static.data("x", [3], "float32")
        idx = paddle.static.data("idx", [1], "int32")
        paddle.static.nn.switch_case(idx, {0: lambda: x * 1.0, 1: lambda: x * 2.0, 5: lambda: x * 5.0},
                                     default=lambda: -x)
        paddle.static.nn.case([(paddle.sum(x) > 1.0, lambda: x + 1.0), (paddle.sum(x) > 0.0, lambda: x + 2.0)],
                              default=lambda: x)
        paddle.static.nn.control_flow.Assert(paddle.all(x > -100.0), [x], summarize=3)
        arr = paddle.tensor.create_array("float32")
        i = paddle.zeros([1], "int64")
        n = paddle.full([1], 3, "int64")

        def body(i, arr):
            arr = paddle.tensor.array_write(x * paddle.cast(i, "float32"), i, array=arr)
            return [i + 1, arr]

        _, arr = paddle.static.nn.while_loop(lambda i, arr: i < n, body, [i, arr])
        paddle.tensor.array_length(arr)
        paddle.tensor.array_to_tensor(arr) if hasattr(paddle.tensor, "array_to_tensor") else None
    _write("switch_case_assert.ir", str(main))


@case
def attrs_varied():
    import paddle

    main, _ = _progs()
    with paddle.static.program_guard(main):
        img = paddle.static.data("img", [2, 3, 8, 8], "float32")
        F = paddle.nn.functional
        F.interpolate(img, scale_factor=[1.5, 2.25], mode="bilinear", align_corners=True)
        F.max_pool2d(img, 2, stride=2, data_format="NCHW", ceil_mode=True)
        F.avg_pool2d(img, [3, 2], padding="SAME", exclusive=False)
        paddle.clip(img, min=-0.125, max=3.5e5)
        paddle.uniform([2, 2], min=-1e-3, max=1e-3, seed=42)
        paddle.normal(0.0, 1e-8, [3])
        img[:, 1:3, ::2, -1] = 7.5
        paddle.strided_slice(img, axes=[1, 2], starts=[0, 1], ends=[3, 8], strides=[1, 3])
        paddle.linalg.norm(img, p=2.5, axis=-1)
        F.layer_norm(img, [8], epsilon=1e-12)
        paddle.einsum("bcij,bcjk->bcik", img, img)
        paddle.full([2], -0.0)
        paddle.full([1], 1e300, "float64")
        paddle.full([1], 3.4e38)
        paddle.full([1], -(2 ** 63), "int64")
        paddle.full([1], 0.1, "float16")
        paddle.full([1], 1 / 3, "float64")
        paddle.topk(img, 2)
        paddle.static.nn.fc(paddle.reshape(img, [2, -1]), 4, activation="relu")
    _write("attrs_varied.ir", str(main))


@case
def dist_misc():
    import paddle

    dist = _dist()
    from paddle.distributed.auto_parallel.static.pir_pass import ReshardPasses

    mesh = dist.ProcessMesh([[0, 1], [2, 3]], dim_names=["a", "b"])
    one = dist.ProcessMesh([0], dim_names=["one"])
    main, _ = _progs()
    with paddle.static.program_guard(main):
        x = dist.shard_tensor(paddle.static.data("x", [8, 6], "float32"), mesh, [dist.Shard(0), dist.Replicate()])
        y = dist.shard_tensor(paddle.static.data("y", [8, 6], "float32"), mesh, [dist.Replicate(), dist.Shard(1)])
        z = dist.shard_tensor(paddle.static.data("z", [], "float32"), mesh, [dist.Replicate(), dist.Partial()])
        w = dist.shard_tensor(paddle.static.data("w", [4], "float32"), one, [dist.Shard(0)])
        c = paddle.concat([x, y], axis=0)
        parts = paddle.split(c, 2, axis=1)
        paddle.add_n([parts[0], parts[1]])
        dist.reshard(z, mesh, [dist.Replicate(), dist.Replicate()])
        dist.reshard(w, one, [dist.Replicate()])
        paddle.matmul(x, y, transpose_y=True)
    _write("dist_misc.ir", str(main))
    after = main.clone()
    try:
        ReshardPasses.apply_reshard_pass(after)
        _write("dist_misc.r0.after_reshard.ir", str(after))
    except Exception as e:  # noqa: BLE001
        print("reshard refused:", str(e).strip().splitlines()[-1][:300], file=sys.stderr)


@case
def engine_pipeline():
    """dist.to_static with a pipeline strategy over two meshes (chunk ids, send/recv)."""
    import numpy as np
    import paddle

    dist = _dist()
    from oracle_capture import Hooks  # distc/capture/hooks.py, the one copy of the engine hooks

    paddle.disable_static()
    paddle.seed(1)
    snaps, plan = {}, {}
    Hooks(lambda name, program: snaps.setdefault(name, str(program)),
          job_cb=lambda programs, jobs: plan.update(programs={t: str(p) for t, p in programs.items()},
                                                    jobs=jobs)).install()
    m0 = dist.ProcessMesh([0], dim_names=["x"])
    m1 = dist.ProcessMesh([1], dim_names=["x"])

    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.l1 = paddle.nn.Linear(4, 4)
            self.l2 = paddle.nn.Linear(4, 2)
            self.l1.weight = dist.shard_tensor(self.l1.weight, m0, [dist.Replicate()])
            self.l1.bias = dist.shard_tensor(self.l1.bias, m0, [dist.Replicate()])
            self.l2.weight = dist.shard_tensor(self.l2.weight, m1, [dist.Replicate()])
            self.l2.bias = dist.shard_tensor(self.l2.bias, m1, [dist.Replicate()])

        def forward(self, x):
            h = dist.reshard(paddle.tanh(self.l1(x)), m1, [dist.Replicate()])
            return self.l2(h)

    class DS(paddle.io.Dataset):
        def __getitem__(self, i):
            return np.ones([4], "float32"), np.ones([2], "float32")

        def __len__(self):
            return 8

    net = Net()
    opt = paddle.optimizer.SGD(0.1, parameters=net.parameters())
    loader = dist.shard_dataloader(paddle.io.DataLoader(DS(), batch_size=4), meshes=[m0, m1])
    strategy = dist.Strategy()
    strategy.pipeline.enable = True
    strategy.pipeline.schedule_mode = "1F1B"
    strategy.pipeline.accumulate_steps = 2
    strategy.pipeline.micro_batch_size = 2
    model = dist.to_static(net, loader, paddle.nn.MSELoss(), opt, strategy=strategy)
    eng = model._engine
    eng._build("train")
    eng._parallel_pir("train")
    _write("engine_pipeline.r0.dense.ir", snaps["dense"])
    for k, (job_type, _) in enumerate(plan.get("jobs", [])[:3]):
        _write(f"engine_pipeline.r0.job{k}.ir", plan["programs"][job_type])


# ------------------------------------------------------------------------------ round 3
@case
def amp_o2_train():
    import paddle

    main, startup = _progs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4, 8], "float32")
        y = paddle.nn.Linear(8, 8)(paddle.nn.LayerNorm(8)(x))
        loss = paddle.mean(paddle.nn.functional.silu(y))
        opt = paddle.static.amp.decorate(paddle.optimizer.AdamW(0.01, multi_precision=True), level="O2",
                                         dtype="bfloat16", init_loss_scaling=1024.0, use_dynamic_loss_scaling=True)
        with paddle.static.amp.fp16_guard():
            pass
        opt.minimize(loss)
    _write("amp_o2_train.ir", str(main))


@case
def lstm_to_static():
    import paddle

    paddle.disable_static()
    paddle.seed(0)
    net = paddle.nn.Sequential(paddle.nn.LSTM(4, 3, num_layers=1), )

    class M(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.rnn = paddle.nn.GRU(4, 3)
            self.att = paddle.nn.MultiHeadAttention(3, 1)

        def forward(self, x):
            h, _ = self.rnn(x)
            return self.att(h, h, h)

    m = paddle.jit.to_static(M(), input_spec=[paddle.static.InputSpec([2, 5, 4], "float32", "seq")],
                             full_graph=True)
    _write("lstm_to_static.ir", str(m.forward.concrete_program.main_program))
    del net


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        CASES[sys.argv[2]]()
        return
    os.makedirs(OUT, exist_ok=True)
    names = sys.argv[1:] or list(CASES)
    failed = 0
    for name in names:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0", PADDLE_TRAINER_ID="0", PADDLE_TRAINERS_NUM="8")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", name], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
        tail = [x for x in r.stderr.splitlines() if "refused" in x]
        print(f"{name}: {'ok' if r.returncode == 0 else 'FAILED'}", *tail)
        if r.returncode:
            failed += 1
            print(r.stderr[-3000:])
    sums = []
    for fn in sorted(os.listdir(OUT)):
        if fn.endswith((".ir", ".log", ".gz")):
            with open(os.path.join(OUT, fn), "rb") as f:
                sums.append(f"{hashlib.sha256(f.read()).hexdigest()}  {fn}\n")
    with open(os.path.join(OUT, "SHA256SUMS"), "w") as f:
        f.write("".join(sums))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
