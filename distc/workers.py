"""Forked worker processes (``distc shard --all-ranks``, ``distc report``): :func:`fork_each` maps a
function over items, each call in a child forked from this process's state."""

from __future__ import annotations

import _signal as signal  # signal's C module (ints for signals): `signal` makes 3 enums, ~1 ms of start-up
import os
import sys

from .driver import WorkerFailed, diagnostic_doc, error_doc
from .outputs import SIGNALS, default_signals
from .syntax.diagnostics import DiagnosticError


def fork_each(items: list, work, jobs: int) -> dict:
    """``{item: work(item)}``, each call in its own forked child process, at most ``jobs`` at once.

    A child starts from the parent's state at the fork (copy on write: what the parent computed
    once is shared, and a child's changes stay its own), sends back its result pickled, and exits
    without teardown.  The first failure stops new starts; the running ones are waited for and
    :class:`WorkerFailed` names the first failing item (in the order of ``items``).  Without ``os.fork`` the calls run one by one
    in this process, which only works for one item (``work`` may change the shared state)."""
    import gc
    import pickle
    import selectors

    if len(items) <= 1 or not hasattr(os, "fork"):
        if len(items) > 1:
            raise DiagnosticError("several workers need os.fork, which this platform lacks: one at a time")
        out = {}
        for it in items:
            try:
                out[it] = work(it)
            except DiagnosticError as e:
                raise WorkerFailed(it, e.render(), 1, diagnostic_doc(e)) from None
        return out
    sys.stdout.flush()
    sys.stderr.flush()
    if gc.isenabled():  # (a disabled collector has nothing to touch in the children)
        gc.collect()
    gc.freeze()  # the collector must not touch (and so copy) the shared objects in the children
    sel = selectors.DefaultSelector()
    todo = list(items)
    running: dict[int, tuple[object, int, bytearray]] = {}  # fd -> (item, pid, data)
    results: dict = {}
    failures: list[WorkerFailed] = []
    try:
        while todo or running:
            while todo and not failures and len(running) < max(1, jobs):
                it = todo.pop(0)
                r, w = os.pipe()
                # signals held back across the fork: a child must not take one in the parent's code
                mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
                pid = os.fork()
                if pid == 0:  # the child
                    _child(it, work, r, w)
                os.close(w)
                running[r] = (it, pid, bytearray())  # known before a held-back signal is taken: it kills this child too
                sel.register(r, selectors.EVENT_READ)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            if failures:
                todo.clear()
            if not running:
                break
            for key, _ in sel.select():
                fd = key.fd
                chunk = os.read(fd, 1 << 20)
                if chunk:
                    running[fd][2].extend(chunk)
                    continue
                sel.unregister(fd)
                os.close(fd)
                it, pid, data = running.pop(fd)
                _, status = os.waitpid(pid, 0)
                try:
                    kind, payload, code = pickle.loads(bytes(data))
                except Exception:  # noqa: BLE001 - the child died before it could answer
                    kind, code, payload = "error", 70, (
                        f"worker process exited with status {os.waitstatus_to_exitcode(status)}")
                    if os.WIFSIGNALED(status):  # killed from outside (the OOM killer: SIGKILL)
                        sig = os.WTERMSIG(status)
                        code = 128 + sig
                        from signal import Signals  # (its enums: imported when a signal is named)

                        msg = f"worker process killed by {Signals(sig).name}" + (
                            " (out of memory? fewer workers: -j)" if sig == signal.SIGKILL else "")
                        payload = (msg, error_doc("killed", code, msg))
                if kind == "ok":
                    results[it] = payload
                else:
                    text, doc = payload if isinstance(payload, tuple) else (payload, None)
                    failures.append(WorkerFailed(it, text, code, doc))
    except BaseException:
        # every running child stopped and reaped before the caller removes what they write
        # (their pids are ours until reaped); no second signal cuts this short
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            for _, pid, _ in running.values():
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise
    finally:
        sel.close()
        gc.unfreeze()
    if failures:  # the first in the order of ``items``, naming the others
        order = {it: i for i, it in enumerate(items)}
        failures.sort(key=lambda f: order[f.item])
        failures[0].others = [f.item for f in failures[1:]]
        raise failures[0]
    return results


def _child(item, work, r: int, w: int) -> None:
    """A forked worker: ``work(item)``, its result or error down the pipe, then ``os._exit`` —
    whatever happens, it never returns into the parent's code (its clean-up, its other children).
    Signals kill it outright (the parent, signalled too, removes what its workers wrote)."""
    import pickle

    try:
        os.close(r)
        default_signals()
        # (the cyclic collector stays on: the shared objects are frozen, and without it the
        # garbage of the rank's own work piles up and costs more than collecting it)
        try:
            out = ("ok", work(item), 0)
        except DiagnosticError as e:
            out = ("error", (e.render(), diagnostic_doc(e)), 1)
        except MemoryError:
            out = ("error", "error: out of memory", 1)
        except OSError as e:
            name = getattr(e, "filename", None)
            msg = f"{name + ': ' if name else ''}error: {e.strerror or e}"
            out = ("error", (msg, error_doc("output", 1, str(e.strerror or e), name, text=msg)), 1)
        except BaseException as e:  # noqa: BLE001 - reported by the parent, never a bare traceback
            msg = f"internal error: {type(e).__name__}: {e}"
            if os.environ.get("DISTC_DEBUG"):
                import traceback

                msg += "\n" + traceback.format_exc()
            out = ("error", msg, 70)
        try:
            data = pickle.dumps(out)
        except Exception as e:  # noqa: BLE001
            data = pickle.dumps(("error", f"internal error: result not picklable: {e}", 70))
        view = memoryview(data)
        while view:  # (the parent gone: EPIPE, and the worker just ends)
            view = view[os.write(w, view):]
    finally:
        os._exit(0)

