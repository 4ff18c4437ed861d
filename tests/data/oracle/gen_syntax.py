#!/usr/bin/env python3
"""Generate real PIR text samples of syntax forms missing from the corpus.

Every ``.ir`` file written to ``syntax/`` is text printed by paddlepaddle 3.3.1
(CPU) itself:

* for ordinary programs: exactly ``str(program)``;
* for ``kernel_*.ir``: the program Paddle prints after ``IR after lowering = ``
  when an Executor runs with ``FLAGS_print_ir`` (that print is Paddle's own
  printer on the kernel-dialect program produced by ``pd_op_to_kernel_pass``;
  there is no Python binding for the pass in 3.3.1).  Only the ``{ ... }`` text
  after the ``IR after lowering = `` prefix is kept.

Usage (the parent re-runs itself once per case, in a fresh process, so that op
ids / counters are reproducible and flags do not leak between cases):

    PYTHONHASHSEED=0 /tmp/paddle2/bin/python tests/data/oracle/gen_syntax.py
    PYTHONHASHSEED=0 /tmp/paddle2/bin/python tests/data/oracle/gen_syntax.py --case if_else
"""

import hashlib
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "syntax")

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _write(name, text):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _new_programs():
    import paddle

    paddle.enable_static()
    return paddle.static.Program(), paddle.static.Program()


# --------------------------------------------------------------------------
# 1. pd_op.if with two regions
@case
def if_else():
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4], "float32")
        y = paddle.static.data("y", [4], "float32")
        pred = paddle.mean(x) > paddle.mean(y)
        paddle.static.nn.cond(
            pred,
            lambda: (x + y, paddle.full([1], 1, "int32")),
            lambda: (x - y, paddle.full([1], 2, "int32")),
        )
    _write("if_else.ir", str(main))


# --------------------------------------------------------------------------
# 2. pd_op.while with block arguments
@case
def while_loop():
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4], "float32")
        i = paddle.full([1], 0, "int64")
        n = paddle.full([1], 10, "int64")
        paddle.static.nn.while_loop(
            lambda i, x: i < n, lambda i, x: [i + 1, paddle.tanh(x)], [i, x]
        )
    _write("while_loop.ir", str(main))


# --------------------------------------------------------------------------
# 3. cond inside a while body
def _build_nested(paddle):
    x = paddle.static.data("x", [2, 4], "float32")
    i = paddle.full([1], 0, "int64")
    n = paddle.full([1], 2, "int64")

    def body(i, h):
        h2 = paddle.static.nn.cond(
            paddle.mean(h) > 0.0, lambda: h * 0.5, lambda: h + 1.0
        )
        return [i + 1, h2]

    _, h = paddle.static.nn.while_loop(lambda i, h: i < n, body, [i, x])
    return x, h


@case
def nested_if_in_while():
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        _build_nested(paddle)
    _write("nested_if_in_while.ir", str(main))


# --------------------------------------------------------------------------
# 3b. backward through while and cond: cf.stack_create / tuple_push / tuple_pop
@case
def control_flow_grad():
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4], "float32")
        x.stop_gradient = False
        i = paddle.full([1], 0, "int64")
        n = paddle.full([1], 3, "int64")
        _, h = paddle.static.nn.while_loop(
            lambda i, h: i < n, lambda i, h: [i + 1, paddle.tanh(h) * x], [i, x]
        )
        c = paddle.static.nn.cond(
            paddle.mean(h) > 0, lambda: h * 2.0, lambda: paddle.exp(h)
        )
        paddle.static.append_backward(paddle.mean(c))
    _write("control_flow_grad.ir", str(main))


# --------------------------------------------------------------------------
# 4. pd_op.pylayer
@case
def pylayer():
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [2, 3], "float32")
        x.stop_gradient = False
        y = paddle.static.nn.static_pylayer(
            lambda a: paddle.tanh(a), [x], backward_fn=lambda dy: dy * 2.0
        )
        paddle.static.append_backward(paddle.mean(y))
    _write("pylayer.ir", str(main))


@case
def pylayer_to_static():
    import paddle

    class Tanh(paddle.autograd.PyLayer):
        @staticmethod
        def forward(ctx, x):
            y = paddle.tanh(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensor()
            return dy * (1 - paddle.square(y))

    def fn(x):
        return Tanh.apply(x) * 2.0

    spec = paddle.static.InputSpec([2, 3], "float32", "x")
    sf = paddle.jit.to_static(fn, input_spec=[spec], full_graph=True)
    cp, _ = sf.get_concrete_program(spec)
    _write("pylayer_to_static.ir", str(cp.main_program))


# --------------------------------------------------------------------------
# 5. kernel dialect (captured from the Executor's FLAGS_print_ir output)
def _run_and_capture(runs):
    """Run ``runs()`` with fd 1 redirected; return the text C++ printed."""
    import paddle

    paddle.set_flags({"FLAGS_print_ir": True})
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            runs()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode("utf-8")
    paddle.set_flags({"FLAGS_print_ir": False})
    return text


def _sections(text, header):
    """Programs printed as ``header{ ... }`` (top-level braces at column 0)."""
    out = []
    lines = text.splitlines(keepends=True)
    k = 0
    while k < len(lines):
        if lines[k].startswith(header):
            buf = [lines[k][len(header):]]
            k += 1
            while k < len(lines) and lines[k] != "}\n":
                buf.append(lines[k])
                k += 1
            buf.append("}\n")
            out.append("".join(buf))
        k += 1
    return out


def _kernel_case(fname, build, feed_fn, train=False):
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        fetch = build(paddle)
    exe = paddle.static.Executor(paddle.CPUPlace())

    def runs():
        if train:
            exe.run(startup)
        exe.run(main, feed=feed_fn(), fetch_list=[fetch])

    text = _run_and_capture(runs)
    progs = _sections(text, "IR after lowering = ")
    if not progs:
        raise RuntimeError("no 'IR after lowering' section printed")
    _write(fname, progs[-1])


@case
def kernel_dialect():
    import numpy as np

    def build(paddle):
        x = paddle.static.data("x", [2, 4], "float32")
        y = paddle.static.data("y", [2, 4], "float32")
        a, b = paddle.split(paddle.nn.functional.relu(x + y), 2, axis=1)
        return paddle.concat([b, a], axis=1)

    _kernel_case(
        "kernel_dialect.ir",
        build,
        lambda: {"x": np.ones([2, 4], "float32"), "y": np.ones([2, 4], "float32")},
    )


@case
def kernel_dialect_cf():
    import numpy as np

    def build(paddle):
        _, h = _build_nested(paddle)
        return h

    _kernel_case(
        "kernel_dialect_cf.ir", build, lambda: {"x": np.ones([2, 4], "float32")}
    )


@case
def kernel_dialect_train():
    import numpy as np

    def build(paddle):
        x = paddle.static.data("x", [4, 6], "float32")
        loss = paddle.mean(paddle.nn.Linear(6, 2)(x))
        paddle.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss

    _kernel_case(
        "kernel_dialect_train.ir",
        build,
        lambda: {"x": np.ones([4, 6], "float32")},
        train=True,
    )


# --------------------------------------------------------------------------
# 6. backward + optimizer: builtin.combine / builtin.split / vec[...] / NULL
@case
def backward_with_grads():
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4, 6], "float32")
        h = paddle.nn.Linear(6, 6)(x)
        a, b, c = paddle.split(h, 3, axis=1)
        d = paddle.concat([paddle.nn.functional.relu(a), b * c], axis=1)
        paddle.optimizer.SGD(learning_rate=0.1).minimize(paddle.mean(d))
    _write("backward_with_grads.ir", str(main))


# --------------------------------------------------------------------------
# 7. auto-parallel dist program with a cond (before / after reshard pass)
@case
def dist_with_regions():
    import paddle
    import paddle.distributed as dist
    from paddle.distributed.auto_parallel.static.pir_pass import ReshardPasses

    mesh = dist.ProcessMesh([0, 1], dim_names=["x"])
    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4, 6], "float32")
        xs = dist.shard_tensor(x, mesh, [dist.Shard(0)])
        pred = paddle.mean(xs) > 0.0
        out = paddle.static.nn.cond(
            pred,
            lambda: dist.reshard(xs * 2.0, mesh, [dist.Replicate()]),
            lambda: dist.reshard(
                paddle.nn.functional.relu(xs), mesh, [dist.Replicate()]
            ),
        )
        out + 1.0
    _write("dist_with_regions.ir", str(main))
    after = main.clone()
    ReshardPasses.apply_reshard_pass(after)
    _write("dist_with_regions.r0.after_reshard.ir", str(after))


# --------------------------------------------------------------------------
# 8. op ids: FLAGS_print_ir makes IrPrinter print " [id:N]"
@case
def ids():
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        _build_nested(paddle)
    paddle.set_flags({"FLAGS_print_ir": True})
    text = str(main)
    paddle.set_flags({"FLAGS_print_ir": False})
    _write("ids.ir", text)


# --------------------------------------------------------------------------
# 9. oddities: block kwargs (^kw:), %kwarg_*, block args in the top block,
#    tensor_array type, <<NULL VALUE>>, dynamic dims
@case
def block_kwargs():
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4], "float32")
        blk = main.global_block()
        kw = blk.add_kwarg("scale_in", x.type())
        arg = blk.add_arg(x.type())
        z = x * kw + arg
        arr = paddle.tensor.create_array("float32")
        i = paddle.zeros([1], "int64")
        arr = paddle.tensor.array_write(z, i, array=arr)
        paddle.tensor.array_read(arr, i)
    _write("block_kwargs.ir", str(main))


@case
def attrs_misc():
    import numpy as np
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data('we"ird', [-1, 3, 8, 8], "float32")
        y = paddle.nn.BatchNorm2D(4, epsilon=1e-5, momentum=0.9)(
            paddle.nn.Conv2D(3, 4, 3, padding=1)(x)
        )
        paddle.to_tensor(np.array([1.5, -2.25e-7, 3e10], "float32"))
        for dt in ("float16", "bfloat16", "int8", "uint8", "float64"):
            paddle.cast(y, dt)
        paddle.full([2], 2**40, "int64")
        paddle.complex(paddle.ones([2]), paddle.zeros([2]))
        paddle.static.data("mask", [None, 5], "bool")
        t = paddle.transpose(paddle.nn.functional.softmax(y), [0, 2, 3, 1])
        paddle.nn.functional.dropout(t, p=0.1)
        paddle.full([1], float("nan"))
        paddle.full([1], float("-inf"))
    _write("attrs_misc.ir", str(main))


# --------------------------------------------------------------------------
DIST_CASES = {"dist_with_regions"}


# --------------------------------------------------------------------------
# every dump form (issue 10): strings as Paddle prints them, several programs in one log
@case
def strings_raw():
    """Names holding a quote, backslashes (one ending the name), a newline and a tab: Paddle
    escapes only the quote, the rest is printed raw (so the op spans two lines)."""
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        a = paddle.static.data("dir\\", [2], "float32")
        b = paddle.static.data('say "hi\\"', [2], "float32")
        c = paddle.static.data("two\nlines\tand tab", [2], "float32")
        d = paddle.static.data("C:\\tmp\\n", [2], "float32")
        paddle.add(paddle.add(a, b), paddle.add(c, d))
    _write("strings_raw.ir", str(main))


@case
def glog_print_ir():
    """What a log holds when an Executor runs with FLAGS_print_ir: the program before and after
    lowering, each after a banner, the whole stdout as printed."""
    import paddle

    main, startup = _new_programs()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [2, 3], "float32")
        y = paddle.nn.functional.relu(x * 2.0)
    exe = paddle.static.Executor(paddle.CPUPlace())
    import numpy as np

    text = _run_and_capture(lambda: exe.run(main, feed={"x": np.ones([2, 3], "float32")}, fetch_list=[y]))
    _write("glog_print_ir.log", text)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        CASES[sys.argv[2]]()
        return
    os.makedirs(OUT, exist_ok=True)
    for name in CASES:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
        if name in DIST_CASES:
            env.update(PADDLE_TRAINER_ID="0", PADDLE_TRAINERS_NUM="2")
        r = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--case", name],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        status = "ok" if r.returncode == 0 else "FAILED"
        print(f"{name}: {status}")
        if r.returncode:
            print(r.stderr[-2000:])
    sums = []
    for fn in sorted(os.listdir(OUT)):
        if fn.endswith((".ir", ".log")):
            with open(os.path.join(OUT, fn), "rb") as f:
                sums.append(f"{hashlib.sha256(f.read()).hexdigest()}  {fn}\n")
    _write("SHA256SUMS", "".join(sums))


if __name__ == "__main__":
    main()
