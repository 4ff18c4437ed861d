"""``distc shard --all-ranks / --ranks LIST / -j N``: every rank's program from one run.

The rank-independent passes (parse, shard-optimizer, partition) run once; then each rank's part
(reshard, the dense passes, printing, the startup program: :meth:`distc.pipeline.ShardPipeline.lower`)
runs in a worker process forked from that state (:func:`distc.workers.fork_each`), so each output
equals what ``--rank R`` alone prints.  Where the passes end with reshard, the first rank's worker
also derives the other ranks' texts from its own (:mod:`distc.pipeline.derive`), byte for byte
what a whole lowering prints; the ranks it cannot derive get workers of their own.
Outputs go to temporary files (:mod:`distc.outputs`) and are renamed into place only when every
rank succeeded: a failing rank is named and nothing is written.
"""

from __future__ import annotations

import os

from .. import cmdline
from ..driver import WorkerFailed
from ..ir.records import field, record
from ..outputs import Target
from ..pipeline import RankResult, ShardPipeline, ShardResult
from ..pipeline.inputs import format_ranks
from ..syntax.diagnostics import DiagnosticError


def parse_ranks(text: str) -> list[range]:
    """``0-3,6`` -> [range(0, 4), range(6, 7)] (ranges, not lists: ``0-99999999999`` costs nothing)."""
    out: list[range] = []
    for part in text.split(","):
        p = part.strip()
        try:
            if not p.replace("-", "").isdigit():  # digits only: no signs, spaces, 0x, 1.0
                raise ValueError
            a, _, b = p.partition("-")
            lo, hi = int(a), int(b or a)
            if not b and "-" in p or lo > hi:
                raise ValueError
            out.append(range(lo, hi + 1))
        except ValueError:
            raise cmdline.BadParameter(f"{text!r}: expected ranks like 0-3,6", param_hint="--ranks") from None
    return out


def check_many(rank: int | None, all_ranks: bool, rank_list: str | None, output: str | None,
               startup_out: str | None) -> None:
    if rank is not None:
        raise cmdline.UsageError("--rank is one rank; --all-ranks/--ranks are several: give one of them")
    if all_ranks and rank_list is not None:
        raise cmdline.UsageError("--all-ranks and --ranks exclude each other")
    for opt, path in (("-o", output), ("--startup-out", startup_out)):
        if opt == "--startup-out" and path is None:
            continue
        if path in (None, "-") or "{rank}" not in path:
            raise cmdline.UsageError(f"several ranks write one file each: give {opt} a pattern with {{rank}}, "
                                     f"e.g. {opt} 'out/{'startup' if opt != '-o' else 'main'}.r{{rank}}.ir'")
    if output == startup_out:
        raise cmdline.UsageError("-o and --startup-out name the same files")


def select_ranks(known: list[int], wanted: list[range] | None, filename: str | None) -> list[int]:
    if not known:
        raise DiagnosticError("the program has no process mesh: there are no ranks to lower for (use --rank)",
                              filename=filename)
    if wanted is None:
        return known
    bad: list[range] = []  # the wanted ranks outside ``known``, as ranges
    for rg in wanted:
        lo = rg.start
        for k in [k for k in known if k in rg] + [rg.stop]:
            if k > lo:
                bad.append(range(lo, k))
            lo = k + 1
    if bad:
        # (range sizes by subtraction: len() of 0-99999999999999999999 overflows)
        many = len(bad) > 1 or bad[0].stop - bad[0].start > 1
        names = ", ".join(", ".join(map(str, b)) if b.stop - b.start <= 2 else f"{b.start}-{b.stop - 1}"
                          for b in bad[:20])
        raise DiagnosticError(f"rank{'s' * many} {names}{', ...' if len(bad) > 20 else ''} "
                              f"{'are' if many else 'is'} in none of the program's meshes (ranks "
                              f"{', '.join(map(str, known)) if len(known) <= 16 else format_ranks(known)})",
                              filename=filename)
    return [k for k in known if any(k in rg for rg in wanted)]


WORKER_BYTES_PER_INPUT_BYTE = 9  # a worker's own memory (copied pages, its rank's program): 131 MB on mlp680's 15 MB
WORKER_BASE = 32 << 20


def default_jobs(input_bytes: int | None = None) -> int:
    """The machine's cores, and no more workers than its free memory holds (``input_bytes``: the
    size of the program each worker lowers a copy of; see :func:`memory_jobs`)."""
    try:
        cores = len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    if input_bytes is None:
        return cores
    return min(cores, memory_jobs(input_bytes) or cores)


def memory_jobs(input_bytes: int) -> int | None:
    """How many workers of a program of ``input_bytes`` the available memory holds (at least 1;
    None: not known).  Available: the kernel's MemAvailable, or less under a cgroup limit."""
    avail = available_memory()
    if avail is None:
        return None
    return max(1, avail // (WORKER_BYTES_PER_INPUT_BYTE * input_bytes + WORKER_BASE))


def available_memory() -> int | None:
    free = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:  # a container's limit (cgroup v2)
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if limit != "max":
            left = max(0, int(limit) - used)
            free = left if free is None else min(free, left)
    except (OSError, ValueError):
        pass
    return free


@record
class RankTargets:
    """What one rank writes (each planned in the command's :class:`distc.outputs.Outputs` before
    any work): its program, its startup program, and with a schedule each job program (by job
    type) and the job list."""

    main: Target | None
    startup: Target | None = None
    jobs: dict[str, Target | None] = field(default_factory=dict)
    job_list: Target | None = None

    def write(self, out, res: RankResult) -> None:
        out.write(self.main, res.text_pieces())
        if self.startup is not None and res.startup_text is not None:
            out.write(self.startup, res.startup_text)
        if res.plan is not None:
            for job, t in self.jobs.items():
                out.write(t, str(res.plan.programs[job]))
            out.write(self.job_list, res.plan.job_list_text())


def run_ranks(pipe: ShardPipeline, ranks: list[int], jobs: int | None, out, targets: dict[int, RankTargets],
              before_commit: Callable[[dict[int, RankResult]], None] | None = None,
              records: bool = True) -> ShardResult:
    """Lower every rank (the pipeline's rank work, each in a forked worker), write all outputs or
    none (``out``: the command's :class:`distc.outputs.Outputs`, ``targets``: rank -> what it
    writes); each rank's result comes back without its programs — with their texts if
    ``before_commit`` (``shard --verify``) is to read them before the outputs are committed (it
    may exit: nothing is written then), without its collective records unless ``records`` (a
    ``-q`` run shows none of them; pickled, they were most of what a worker sends: mlp256's four
    ranks 0.9 MB, ~45 ms of CPU to pickle and unpickle)."""
    from ..workers import fork_each

    def each(rs: list[int], lower) -> dict[int, RankResult]:
        def work(r: int) -> RankResult | None:
            res = lower(r)
            if res is None:  # (nothing to do: distc.pipeline.derive)
                return None
            for x in (res, *(res.derived or {}).values()):  # (and the ranks derived from it)
                targets[x.rank].write(out, x)
            return _sent(res, records, texts=before_commit is not None)

        return fork_each(rs, work, jobs or default_jobs(_input_bytes(pipe.program)))

    try:
        result = pipe.run(ranks, each=each, records=records)
    except WorkerFailed as e:
        also = f" (and rank{'s' * (len(e.others) > 1)} {', '.join(map(str, e.others))})" if e.others else ""
        head = f"distc shard: rank {e.item} failed{also}; no output written"
        e.message = head + "\n" + e.message
        e.doc = {**e.doc, "rank": e.item, "notes": [*e.doc.get("notes", []), head]}
        raise
    if before_commit is not None:
        before_commit(result.ranks)
    out.commit()
    return result


def _sent(res: RankResult, records: bool, texts: bool) -> RankResult:
    """A worker's result as sent back (:meth:`RankResult.detached`), its (and its derived ranks')
    collective records dropped first unless ``records`` (not copied for nothing: mlp96's four
    ranks 2,112 records, ~10 ms)."""
    if not records:
        for x in (res, *(res.derived or {}).values()):
            x.collectives = None
    return res.detached(texts=texts)


def _input_bytes(prog) -> int:
    """The size of the program a worker lowers: its file's (else its ops' source lines')."""
    try:
        return os.path.getsize(prog.filename)
    except (OSError, TypeError, ValueError):
        return sum(len(op.src or "") + 1 for op in prog.walk())

