"""The oracle generators' way into distc's capture machinery: ``distc/capture/hooks.py``, the one
copy of Paddle's engine hooks (snapshots of every program Paddle's auto-parallel engine passes
through, the executor and communicator set-up stubbed), which ``distc capture`` runs in a user's
training script too — so what users capture is what made the test data.

hooks.py imports only the standard library (and Paddle, inside its functions), never distc: it is
loaded here by its path, in the Paddle virtualenv, which does not have distc's dependencies.

    from oracle_capture import run_engine, Hooks, last_line, refusal, SNAPSHOTS
    from oracle_capture import command_line, run_jobs, sample

``run_engine(model, loader, loss, opt, snapshot_cb, timings=None, strategy=None, job_cb=None)``:
``dist.to_static``, then the engine's ``_build``, ``_parallel_pir`` and ``_initialize`` for "train";
``snapshot_cb(name, program)`` at every snapshot (keep the first of a name), ``job_cb(programs,
jobs)`` with the job plan where a pipeline schedule or gradient merge is set.  ``Hooks(cb, ...)
.install()`` for generators that drive the engine themselves.  ``command_line`` and ``run_jobs``:
the generators' shared ``main`` (``-j N``, the command table, filters); ``sample(NAME)``: a model
of ``samples/``.  See tests/data/oracle/README.md.
"""

import importlib.util
import os
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
HOOKS_PATH = os.path.join(ROOT, "distc", "capture", "hooks.py")


def _load(name, path):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def sample(name):
    """``samples/NAME.py``, the shipped model code (``llama_model``: the LLaMA of train_llama.py;
    ``train_mlp``: its MLP and RandomData), imported in a Paddle process: the generators build
    the models users run, from the one copy."""
    return _load(name, os.path.join(ROOT, "samples", f"{name}.py"))


def command_line(argv, doc, commands, j=2):
    """A generator's ``main(argv)``: ``-j N`` (Paddle processes at a time, default ``j``) taken
    out wherever it stands, then ``commands[argv[0]](rest, j)`` (its exit status; None is 0); no
    or an unknown command: the usage ``doc``, exit 2."""
    if "-j" in argv:
        i = argv.index("-j")
        j = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    run = commands.get(argv[0]) if argv else None
    if run is None:
        print(doc)
        return 2
    return run(argv[1:], j) or 0


def run_jobs(run_worker, jobs, j, filters=(), tag=None):
    """``run_worker(job)`` for each job (each starts its own Paddle process), ``j`` at a time; with
    ``filters``, only the jobs whose ``tag(job)`` starts with one of them."""
    if filters:
        jobs = [jb for jb in jobs if any(tag(jb).startswith(a) for a in filters)]
    with ThreadPoolExecutor(max_workers=j) as ex:
        list(ex.map(run_worker, jobs))


def write_snapshot(path, text):
    """A program (or the job list) as Paddle printed it, ending in one newline."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def write_crash(path, output):
    """The error file of a Paddle process that crashed: ``CRASH:`` and its last ``FatalError:``
    line, else the last line of its ``output``."""
    lines = output.strip().splitlines() or ["?"]
    fatal = [ln.strip() for ln in lines if ln.strip().startswith("FatalError:")]
    with open(path, "w", encoding="utf-8") as f:
        f.write("CRASH: " + (fatal or lines)[-1] + "\n")


hooks = _load("distc_capture_hooks", HOOKS_PATH)
Hooks = hooks.Hooks
run_engine = hooks.run_engine
last_line = hooks.last_line
refusal = hooks.refusal
SNAPSHOTS = hooks.SNAPSHOTS
