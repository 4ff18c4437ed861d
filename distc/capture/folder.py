"""The capture folder: every rank's files under one naming scheme, ``manifest.json``, written whole.

Names (``S`` the ZeRO stage of the run, ``R`` the rank, as in the test data's ``CASE.sS.rR.*``):

* ``s0.rR.before_partition.ir``, ``s0.rR.startup_after_remove.ir`` — distc's inputs (``distc shard
  MAIN --startup``): Paddle's programs of the script's stage-0 form (its ``dist.shard_optimizer``
  without a shard function);
* ``sS.rR.{before_partition,after_reshard,dense,startup_after_remove,startup_final}.ir`` — Paddle's
  own programs for the script as written (golden files; ``before_partition`` at stage 1-3 is what
  ``distc shard --annotate-only`` gives);
* ``sS.rR.jobs.json`` and ``sS.rR.job.TYPE.ir`` — the job list (type, micro batch) and each job
  type's program, where a pipeline schedule or gradient merge is set;
* ``sS.rR.error.txt`` — Paddle's refusal (``Type: last line of its message``) where Paddle failed
  after distc's inputs were taken.

The folder is built beside its target under a temporary name and renamed into place only when
every rank is done: a failing rank leaves nothing, and an earlier capture is replaced whole.  A
folder that is not a capture (no ``manifest.json``) is never replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile

from ..syntax.diagnostics import DiagnosticError

MANIFEST = "manifest.json"
FORMAT = "distc-capture/1"
INPUTS = ("before_partition", "startup_after_remove")
RESULTS = ("before_partition", "after_reshard", "dense", "startup_after_remove", "startup_final")
INPUT_KEYS = ("main", "startup")  # the manifest's "inputs"


def name(stage: int, rank: int, what: str, ext: str = "ir") -> str:
    return f"s{stage}.r{rank}.{what}.{ext}"


class Folder:
    """The output folder, staged: :meth:`add` files, then :meth:`commit` or :meth:`discard`."""

    def __init__(self, target: str):
        self.target = os.path.abspath(target)
        if os.path.lexists(self.target):
            if not os.path.isdir(self.target) or os.path.islink(self.target):
                raise DiagnosticError("exists and is not a folder: the capture writes a folder", filename=target)
            if os.listdir(self.target) and not os.path.isfile(os.path.join(self.target, MANIFEST)):
                raise DiagnosticError("exists and is not a distc capture folder (no manifest.json): "
                                      "not replaced; give another -o or empty it", filename=target)
        parent = os.path.dirname(self.target)
        if not os.path.isdir(parent):
            raise DiagnosticError("the folder to hold it does not exist (distc creates no parent "
                                  "folders)", filename=target)
        self.tmp = tempfile.mkdtemp(prefix=".distc-capture-", dir=parent)
        self.work = os.path.join(self.tmp, ".runs")  # the child processes' own folders
        os.mkdir(self.work)
        self.files: dict[str, dict] = {}

    def add(self, src: str, dest: str, **meta) -> None:
        """Copy ``src`` into the folder as ``dest``; ``meta`` (rank, stage, role ...) goes to the manifest."""
        out = os.path.join(self.tmp, dest)
        shutil.copyfile(src, out)
        with open(out, "rb") as f:
            meta["sha256"] = hashlib.sha256(f.read()).hexdigest()
        self.files[dest] = meta

    def add_text(self, dest: str, text: str, **meta) -> None:
        data = text.encode("utf-8")
        with open(os.path.join(self.tmp, dest), "wb") as f:
            f.write(data)
        meta["sha256"] = hashlib.sha256(data).hexdigest()
        self.files[dest] = meta

    def commit(self, manifest: dict) -> None:
        shutil.rmtree(self.work)
        manifest["files"] = dict(sorted(self.files.items()))
        with open(os.path.join(self.tmp, MANIFEST), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
        os.chmod(self.tmp, 0o777 & ~_umask())
        old = None
        if os.path.lexists(self.target):
            old = tempfile.mkdtemp(prefix=".distc-capture-old-", dir=os.path.dirname(self.target))
            os.rename(self.target, os.path.join(old, "x"))
        os.rename(self.tmp, self.target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def discard(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def read_manifest(folder: str) -> dict:
    """A capture folder's manifest (a located error if the folder holds none)."""
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise DiagnosticError("is not a distc capture folder (no manifest.json)", filename=folder) from None
    except json.JSONDecodeError as e:  # located, with the line and a caret
        raise DiagnosticError(f"unreadable manifest: {e.msg}", e.lineno, e.colno, filename=path,
                              source=e.doc) from None
    except (OSError, ValueError) as e:
        raise DiagnosticError(f"unreadable manifest: {e}", filename=path) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise DiagnosticError(f"not a {FORMAT} manifest (format {got!r})", filename=path)
    why = _malformed(doc)
    if why:
        raise DiagnosticError(f"a damaged {FORMAT} manifest: {why} (capture the script again)", filename=path)
    return doc


def _malformed(doc: dict) -> str | None:
    """What is wrong with the fields the commands read (None: nothing)."""
    def ints(x) -> bool:
        return isinstance(x, list) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in x)

    def names(x, keys) -> bool:  # file names in the folder itself, with {rank}
        return isinstance(x, dict) and all(isinstance(x.get(k), str) and x[k] and "/" not in x[k] and
                                           "\\" not in x[k] and not x[k].startswith(".") for k in keys)

    if not ints(doc.get("ranks")) or not doc["ranks"]:
        return "'ranks' is not a list of ranks"
    stage = doc.get("stage")
    if stage is not None and (not isinstance(stage, int) or isinstance(stage, bool) or not 0 <= stage <= 3):
        return f"'stage' is {stage!r}, not 0-3"
    if not names(doc.get("inputs"), INPUT_KEYS):
        return "'inputs' does not name the main and startup files in the folder"
    if not names(doc.get("paddle_results"), RESULTS):
        return "'paddle_results' does not name Paddle's files in the folder"
    meshes = doc.get("meshes")
    if meshes is not None and not (isinstance(meshes, list) and all(
            isinstance(m, dict) and ints(m.get("process_ids")) for m in meshes)):
        return "'meshes' is not a list of meshes with process_ids"
    for key in ("rank_results", "strategy"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            return f"'{key}' is not an object"
    if not all(isinstance(x, dict) for x in (doc.get("rank_results") or {}).values()):
        return "'rank_results' holds a rank that is not an object"
    if (doc.get("strategy") or {}).get("amp") is not None and not isinstance(doc["strategy"]["amp"], dict):
        return "'strategy.amp' is not an object"
    dims = doc.get("param_mesh_dims")
    if dims is not None and not (isinstance(dims, list) and all(isinstance(d, list) for d in dims)):
        return "'param_mesh_dims' is not a list of mesh dim name lists"
    return None


def shard_options(doc: dict) -> list[str]:
    """The ``distc shard`` options that say what the captured script asked of Paddle: ``--stage``;
    the sharding mesh dim (``--mesh-dims``/``--axis``) where every parameter's mesh has the same dim
    names (a pipeline stage's mesh has no ``pp``); ``--amp`` under ``strategy.amp``."""
    stage = doc.get("stage") or 0
    out = ["--stage", str(stage)]
    dim, dims = doc.get("sharding_mesh_dim"), doc.get("param_mesh_dims") or []
    if stage and len(dims) == 1 and dims[0]:
        if isinstance(dim, str) and dim in dims[0]:
            out += ["--mesh-dims", ",".join(dims[0]), "--axis", dim]
        elif isinstance(dim, int) and dims[0] == doc.get("mesh_dim_names"):
            out += ["--axis", str(dim)]
    if ((doc.get("strategy") or {}).get("amp") or {}).get("enable"):
        out.append("--amp")
    return out
