"""Synthetic pipeline schedules for the report's timeline chart (until distc models real ones):
FThenB and 1F1B over ``stages`` ranks and ``micro`` micro-batches, forward 1 unit, backward 2,
each job starting when its rank is free and its input has arrived (no communication time)."""

from __future__ import annotations


def schedule(kind: str, stages: int = 4, micro: int = 4, f: float = 1.0, b: float = 2.0) -> dict[int, list]:
    """{rank: [[job, micro_batch, start, end], ...]} (the ``--schedule`` JSON form)."""
    order: dict[int, list[tuple[str, int]]] = {}
    for s in range(stages):
        if kind == "FThenB":
            order[s] = [("forward", m) for m in range(micro)] + [("backward", m) for m in range(micro)]
        elif kind == "1F1B":
            warm = min(stages - s - 1, micro)
            seq = [("forward", m) for m in range(warm)]
            fwd, bwd = warm, 0
            while bwd < micro:
                if fwd < micro:
                    seq.append(("forward", fwd))
                    fwd += 1
                seq.append(("backward", bwd))
                bwd += 1
            order[s] = seq
        else:
            raise ValueError(kind)
    done: dict[tuple[str, int, int], float] = {}
    free = {s: 0.0 for s in range(stages)}
    out: dict[int, list] = {s: [] for s in range(stages)}
    pos = {s: 0 for s in range(stages)}
    while any(pos[s] < len(order[s]) for s in range(stages)):
        progressed = False
        for s in range(stages):
            if pos[s] >= len(order[s]):
                continue
            job, m = order[s][pos[s]]
            dep = ("forward", m, s - 1) if job == "forward" and s > 0 else \
                ("backward", m, s + 1) if job == "backward" and s < stages - 1 else \
                ("forward", m, s) if job == "backward" else None
            if dep is not None and dep not in done:
                continue
            start = max(free[s], done.get(dep, 0.0) if dep else 0.0)
            end = start + (f if job == "forward" else b)
            done[(job, m, s)] = end
            free[s] = end
            out[s].append([job, m, start, end])
            pos[s] += 1
            progressed = True
        assert progressed, "the synthetic schedule deadlocked"
    return out
