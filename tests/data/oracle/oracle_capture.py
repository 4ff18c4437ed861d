"""The oracle generators' way into distc's capture machinery: ``distc/capture/hooks.py``, the one
copy of Paddle's engine hooks (snapshots of every program Paddle's auto-parallel engine passes
through, the executor and communicator set-up stubbed), which ``distc capture`` runs in a user's
training script too — so what users capture is what made the test data.

hooks.py imports only the standard library (and Paddle, inside its functions), never distc: it is
loaded here by its path, in the Paddle virtualenv, which does not have distc's dependencies.

    from oracle_capture import run_engine, Hooks, last_line, refusal, SNAPSHOTS

``run_engine(model, loader, loss, opt, snapshot_cb, timings=None, strategy=None, job_cb=None)``:
``dist.to_static``, then the engine's ``_build``, ``_parallel_pir`` and ``_initialize`` for "train";
``snapshot_cb(name, program)`` at every snapshot (keep the first of a name), ``job_cb(programs,
jobs)`` with the job plan where a pipeline schedule or gradient merge is set.  ``Hooks(cb, ...)
.install()`` for generators that drive the engine themselves.  See tests/data/oracle/README.md.
"""

import importlib.util
import os
import sys

HOOKS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "distc", "capture", "hooks.py")


def _load():
    name = "distc_capture_hooks"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.normpath(HOOKS_PATH))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


hooks = _load()
Hooks = hooks.Hooks
run_engine = hooks.run_engine
last_line = hooks.last_line
refusal = hooks.refusal
SNAPSHOTS = hooks.SNAPSHOTS
