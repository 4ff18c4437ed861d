"""Paddle's engine hooks: the one place that takes programs out of Paddle's auto-parallel engine.

This file runs inside a Paddle process, never in distc's own: it imports only the standard library
at module level and Paddle inside its functions, and no other part of distc (the process may be a
virtualenv holding Paddle but not distc's dependencies).  It is used three ways:

* ``distc capture -- python train.py ARGS`` runs it *as a script* in the command's interpreter, once
  per rank (``python hooks.py --out DIR [--stage0] -- train.py ARGS``): it installs the hooks, runs
  the user's script unmodified (``runpy``) and stops it once the engine has prepared the program
  (``DistModel.train()`` or the first training step), before any device work; then it writes every
  snapshot as ``DIR/NAME.ir`` and ``DIR/result.json`` (status, Paddle's version, stage, strategy,
  Paddle's error if it failed).
* The oracle generators (``tests/data/oracle/gen_*.py``) load it by path (:func:`load_by_path` in
  their ``oracle_capture`` helper) and call :func:`run_engine` on a model they build themselves.
* ``python -m distc.capture`` is the same driver as ``distc capture``.

Snapshots (``snapshot_cb(name, program)``, first occurrence of a name is what a caller keeps):
``startup.before`` (the startup program after ``Engine._build``), ``before_partition`` (the main
program given to ``apply_partition_pass``: distc's MAIN), ``after_reshard``,
``startup_after_reshard``, ``startup_before_remove``, ``after_remove``, ``startup_after_remove``
(distc's ``--startup``), ``dense`` (the rank's dense program), ``dist_final`` (the dist program at
the end of ``_parallel_pir``: after gradient merge, where set) and ``startup_final`` (the startup
program the executor would run).  Where a pipeline schedule or gradient merge is set, the job plan
is given to ``job_cb(types_to_programs, jobs)`` as well.
"""

import json
import os
import sys
import time
import traceback

SUPPORTED_PADDLE = ("3.3.1",)  # the versions whose engine these hooks were written against (and tested)
SNAPSHOTS = ("startup.before", "before_partition", "after_reshard", "startup_after_reshard",
             "startup_before_remove", "after_remove", "startup_after_remove", "dense", "dist_final",
             "startup_final")
RESULT = "result.json"


class CaptureDone(BaseException):
    """Raised into the user's script once the engine has prepared the program (not an Exception, so
    that a script's own ``except Exception`` does not swallow it)."""


def paddle_version():
    """Paddle's version in this interpreter; ImportError if Paddle is not installed."""
    import paddle

    return paddle.__version__


def check_version(version):
    """None if ``version`` is supported, else the message naming what is expected."""
    if version in SUPPORTED_PADDLE:
        return None
    return ("PaddlePaddle %s is not supported by distc capture: it hooks Paddle's auto-parallel engine "
            "and is tested with paddlepaddle==%s (pip install paddlepaddle==%s)"
            % (version, " or ".join(SUPPORTED_PADDLE), SUPPORTED_PADDLE[-1]))


class Hooks:
    """Wraps the engine's passes to take snapshots, stubs the executor and the communicator set-up.

    ``mode``: the engine mode whose programs are captured; ``stop``: raise :class:`CaptureDone` when
    the engine has prepared that mode (the user-script path)."""

    def __init__(self, snapshot_cb, job_cb=None, timings=None, mode="train", stop=False):
        self.snapshot_cb = snapshot_cb
        self.job_cb = job_cb
        self.timings = timings
        self.mode = mode
        self.stop = stop
        self.main = None
        self.engine = None  # the engine that prepared self.mode
        self._active = True  # snapshots are taken while no other mode is being prepared

    def _snap(self, name, program):
        if self._active:
            self.snapshot_cb(name, program)

    def _time(self, key, t0, c0=None):
        if self.timings is not None and self._active:
            self.timings.setdefault(key, time.perf_counter() - t0)
            if c0 is not None:  # the CPU time of this thread (what other jobs on the machine do not add to)
                self.timings.setdefault(key + "_cpu", time.thread_time() - c0)

    def install(self):
        import paddle
        from paddle.distributed.auto_parallel.static import engine as engine_mod
        from paddle.distributed.auto_parallel.static import helper as helper_mod
        from paddle.distributed.auto_parallel.static import pir_pass

        hooks = self
        orig = getattr(engine_mod, "_distc_capture_originals", None)
        if orig is None:  # Paddle's own functions, kept so that a second install wraps them, not ours
            orig = engine_mod._distc_capture_originals = dict(
                partition=engine_mod.apply_partition_pass, reshard=pir_pass.ReshardPasses.apply_reshard_pass,
                remove=pir_pass.RemovePasses.apply_all, build=engine_mod.Engine._build,
                parallel=engine_mod.Engine._parallel_pir, prepare=engine_mod.Engine._prepare_program)
        orig_partition, orig_reshard, orig_remove = orig["partition"], orig["reshard"], orig["remove"]
        orig_build, orig_parallel, orig_prepare = orig["build"], orig["parallel"], orig["prepare"]
        Engine = engine_mod.Engine

        def partition(program, *a, **k):
            hooks.main = program
            hooks._snap("before_partition", program)
            t0, c0 = time.perf_counter(), time.thread_time()
            r = orig_partition(program, *a, **k)
            hooks._time("partition", t0, c0)
            return r

        def reshard(program, *a, **k):
            t0, c0 = time.perf_counter(), time.thread_time()
            r = orig_reshard(program, *a, **k)
            if program is hooks.main:
                hooks._time("reshard", t0, c0)
                hooks._snap("after_reshard", program)
            else:
                hooks._snap("startup_after_reshard", program)
            return r

        def remove(program, startup, *a, **k):
            hooks._snap("startup_before_remove", startup)
            r = orig_remove(program, startup, *a, **k)
            hooks._snap("after_remove", program)
            hooks._snap("startup_after_remove", startup)
            return r

        def build(self, mode, *a, **k):
            hooks._active = mode == hooks.mode
            r = orig_build(self, mode, *a, **k)
            hooks._snap("startup.before", self._startup_progs[mode])
            return r

        def parallel_pir(self, mode, *a, **k):
            hooks._active = mode == hooks.mode
            r = orig_parallel(self, mode, *a, **k)
            hooks._snap("dense", self._pir_dense_main_progs[mode])
            hooks._snap("dist_final", self._pir_dist_main_progs[mode])
            if self._job_plan is not None and hooks._active and hooks.job_cb is not None:
                plan = self._job_plan
                hooks.job_cb({t: plan.ir_program(t) for t in plan.job_types()},
                             [(j.type(), j.micro_batch_id()) for j in plan.job_list()])
            return r

        def prepare_program(self, mode, *a, **k):
            r = orig_prepare(self, mode, *a, **k)
            if mode == hooks.mode:
                hooks.engine = self
                if hooks.stop:
                    raise CaptureDone()
            return r

        class FakeExecutor:
            """Records the startup program instead of running it."""

            def __init__(self, *a, **k):
                pass

            def run(self, program, *a, **k):
                hooks._snap("startup_final", program)

            def _set_plan(self, *a, **k):
                pass

        engine_mod.apply_partition_pass = partition
        pir_pass.ReshardPasses.apply_reshard_pass = staticmethod(reshard)
        pir_pass.RemovePasses.apply_all = staticmethod(remove)
        Engine._build, Engine._parallel_pir, Engine._prepare_program = build, parallel_pir, prepare_program
        paddle.static.Executor = FakeExecutor
        Engine._init_comm = lambda self: None
        helper_mod.ProgramHelper.init_pir = lambda self, *a, **k: None
        return self


def run_engine(model, dloader, loss, opt, snapshot_cb, timings=None, strategy=None, job_cb=None):
    """The generators' path: ``dist.to_static`` and the engine's build, parallelization and
    initialization driven step by step, every snapshot given to ``snapshot_cb`` (and the job plan to
    ``job_cb`` where one is set).  Returns the engine."""
    import paddle.distributed as dist

    Hooks(snapshot_cb, job_cb=job_cb, timings=timings).install()
    dm = dist.to_static(model, dloader, loss, opt, strategy=strategy)
    eng = dm._engine
    eng._build("train")
    eng._parallel_pir("train")
    eng._initialize("train")
    return eng


def last_line(e):
    """The last non-empty line of an exception's message (Paddle's messages end with the hint)."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def refusal(e):
    """``Type: last line`` of an exception (the form of the ``error.txt`` files)."""
    msg = last_line(e)
    return msg if msg.startswith(type(e).__name__ + ":") else "%s: %s" % (type(e).__name__, msg)


# ------------------------------------------------------------------------------------ the script

def _shard_optimizer_hook(info, stage0):
    """Record which ZeRO stage the script asks ``dist.shard_optimizer`` for; with ``stage0``, drop the
    shard function (the script's stage-0 program: distc's input)."""
    import paddle.distributed as dist
    from paddle.distributed.auto_parallel import api

    orig = api.shard_optimizer

    def shard_optimizer(optimizer, shard_fn=None, *a, **k):
        if shard_fn is not None:
            name = type(shard_fn).__name__
            info["shard_fn"] = name
            info["stage"] = {"ShardingStage1": 1, "ShardingStage2": 2, "ShardingStage3": 3}.get(name)
            dim = getattr(shard_fn, "_sharding_mesh_dim", None)
            info["sharding_mesh_dim"] = dim if isinstance(dim, (int, str)) else None
            mesh = getattr(shard_fn, "_mesh", None)
            info["mesh_dim_names"] = list(mesh.dim_names) if mesh is not None else None
        else:
            info.setdefault("stage", 0)
        info["optimizer"] = type(optimizer).__name__
        names = []  # the dim names of the parameters' meshes (a pipeline stage's mesh has no "pp")
        for p in getattr(optimizer, "_parameter_list", None) or ():
            mesh = getattr(p, "process_mesh", None) if getattr(p, "is_dist", lambda: False)() else None
            if mesh is not None and list(mesh.dim_names) not in names:
                names.append(list(mesh.dim_names))
        info["param_mesh_dims"] = names
        return orig(optimizer, None if stage0 else shard_fn, *a, **k)

    api.shard_optimizer = dist.shard_optimizer = shard_optimizer


def _strategy_doc(engine):
    """The parts of the engine's strategy that change the programs, as JSON values."""
    out = {}
    st = getattr(engine, "_strategy", None)
    for key in ("amp", "sharding", "pipeline", "gradient_merge", "recompute", "fused_passes"):
        cfg = getattr(st, key, None)
        try:
            doc = cfg.to_dict() if cfg is not None else None
            out[key] = json.loads(json.dumps(doc, default=str))
        except Exception:  # a section this Paddle does not have, or cannot print
            out[key] = None
    return out


def _user_frame(tb, script):
    """``file:line:col`` of the deepest frame of the traceback in the user's script, or None."""
    where = None
    for fr in traceback.extract_tb(tb):
        if os.path.abspath(fr.filename) == script:
            where = "%s:%d:%d" % (fr.filename, fr.lineno, (getattr(fr, "colno", None) or 0) + 1)
    return where


def _traceback(e, script):
    """The traceback from the script's first frame on (not the hooks' and runpy's frames)."""
    frames = traceback.extract_tb(e.__traceback__)
    first = next((i for i, fr in enumerate(frames) if os.path.abspath(fr.filename) == script), 0)
    lines = ["Traceback (most recent call last):\n"] + traceback.format_list(frames[first:])
    return "".join(lines + traceback.format_exception_only(type(e), e))


def run_script(out, argv, stage0=False, mode="train"):
    """Run the user's script ``argv`` (``[script, args...]`` or ``["-m", module, args...]``) with the
    hooks installed; write the snapshots and ``result.json`` into ``out``.  Returns the exit status
    (0: written, whatever Paddle did)."""
    import runpy

    res = {"status": None, "rank": int(os.environ.get("PADDLE_TRAINER_ID", "0")), "mode": mode,
           "stage0_run": stage0, "python": sys.version.split()[0]}
    got, jobs = {}, {}

    def write():
        os.makedirs(out, exist_ok=True)
        for name, text in got.items():
            with open(os.path.join(out, name + ".ir"), "w", encoding="utf-8") as f:
                f.write(text if text.endswith("\n") else text + "\n")
        for t, text in jobs.get("programs", {}).items():
            with open(os.path.join(out, "job.%s.ir" % t), "w", encoding="utf-8") as f:
                f.write(text if text.endswith("\n") else text + "\n")
        res["snapshots"] = [s for s in SNAPSHOTS if s in got]
        with open(os.path.join(out, RESULT), "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1, sort_keys=True)
        return 0

    try:
        res["paddle"] = paddle_version()
    except ImportError as e:
        res.update(status="no-paddle", message="%s: %s" % (type(e).__name__, e))
        return write()
    bad = check_version(res["paddle"])
    if bad:
        res.update(status="version", message=bad)
        return write()

    def snap(name, program):
        if name not in got:  # the first occurrence is the one kept
            got[name] = str(program)

    def job(programs, job_list):
        if "programs" not in jobs:
            jobs["programs"] = {t: str(p) for t, p in programs.items()}
            res["jobs"] = [{"type": t, "micro_batch_id": m} for t, m in job_list]

    info = {}
    hooks = Hooks(snap, job_cb=job, timings={}, mode=mode, stop=True).install()
    _shard_optimizer_hook(info, stage0)
    import paddle.distributed as dist
    dist.init_parallel_env = lambda *a, **k: None  # one process per rank, no communication

    if argv[0] == "-m":
        script, run = argv[1], lambda: runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        sys.argv = [argv[1]] + list(argv[2:])
        sys.path[0] = os.getcwd()
    else:
        script = os.path.abspath(argv[0])
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(script)
        run = lambda: runpy.run_path(script, run_name="__main__")  # noqa: E731
    t0 = time.perf_counter()
    try:
        run()
    except CaptureDone:
        res["status"] = "ok"
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) or e.code is None else 1
        res.update(status="no-engine", exit=code,
                   message="the script exited (status %s) before Paddle's engine prepared its %s program"
                   % (code, mode))
    except BaseException as e:  # Paddle's refusal, a crash of the script, or Ctrl-C
        res.update(status="error", message=refusal(e), where=_user_frame(e.__traceback__, script),
                   traceback=_traceback(e, script))
        if isinstance(e, KeyboardInterrupt):
            res["status"] = "interrupted"
    else:
        res.update(status="no-engine",
                   message="the script ended without preparing a %s program: it must call "
                   "dist.to_static(...) and then .%s() on the result (or run a step)" % (mode, mode))
    res["seconds"] = round(time.perf_counter() - t0, 3)
    res["timings"] = {k: round(v, 4) for k, v in (hooks.timings or {}).items()}
    res.update({k: info.get(k) for k in ("stage", "shard_fn", "sharding_mesh_dim", "mesh_dim_names", "param_mesh_dims",
                                         "optimizer")})
    if res["stage"] is None and res["status"] == "ok":
        res["stage"] = 0
    if hooks.engine is not None:
        res["strategy"] = _strategy_doc(hooks.engine)
    return write()


def main(argv=None):
    """``python hooks.py --out DIR [--stage0] [--mode train] -- SCRIPT ARGS...`` (one rank)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        sys.stderr.write(main.__doc__ + "\n")
        return 2
    i = argv.index("--")
    opts, cmd = argv[:i], argv[i + 1:]
    out, stage0, mode = None, False, "train"
    while opts:
        o = opts.pop(0)
        if o == "--out":
            out = opts.pop(0)
        elif o == "--stage0":
            stage0 = True
        elif o == "--mode":
            mode = opts.pop(0)
        else:
            sys.stderr.write("unknown option %s\n" % o)
            return 2
    if out is None or not cmd:
        sys.stderr.write(main.__doc__ + "\n")
        return 2
    return run_script(out, cmd, stage0=stage0, mode=mode)


if __name__ == "__main__":
    sys.exit(main())
