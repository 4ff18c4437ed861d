"""The scheduler: runs every rank's :class:`.runner.RankRunner` in lockstep.  A collective blocks
until every rank of its group reaches it (groups are the sorted ids of the op mesh -- the sub-mesh of ``nranks`` ranks through the rank
when that mesh is larger --, else from
``rings``, else the ranks using the same ``ring_id``); ``send_v2`` is buffered and ``recv_v2``
blocks until a matching send exists (pairs by ``peer``, mesh position, ring id).  When nothing
can move, the ranks deadlock and the report says where each one waits."""

from __future__ import annotations

import zlib
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from .layout import distribute, reduce_arrays
from ...ir.dist import REDUCE_TYPES
from .requests import Coll, Recv, Send
from .runner import RankRunner
from .groups import assumed_notes, candidates, infer_group
from .values import RankValues, SimulationError, Undecidable
from ...ir.attrs import attr_value
from ...ir.core import Operation, Program
from ...ir.dist import TensorDistAttr
from ...dialects import collectives as C


class Simulator:
    def __init__(self, programs: Mapping[int, Program], inputs: Mapping[str, Any], seed: int,
                 rings: Mapping[int, Iterable[int]] | None, check_types: bool, strict_rings: bool,
                 serial: bool = False, progress: Callable[[int], None] | None = None,
                 shapes_from_types: bool = False, layouts: Mapping[str, TensorDistAttr] | None = None,
                 tags: Mapping[str, tuple] | None = None, slice_index: Callable | None = None,
                 rank_rings: Mapping[int, Mapping[int, Iterable[int]]] | None = None) -> None:
        self.programs = dict(programs)
        self.tags = tags  # a startup proof: constants kept under these names are told apart (kernels.init)
        self.slice_index = slice_index  # (rank, name, shape) -> the global indices of its slice@ piece
        self.layouts = dict(layouts or {})  # name -> layout, for dense-typed startup values
        self.shapes_from_types = shapes_from_types
        self.serial = serial
        self.progress = progress
        self.inputs = dict(inputs)
        self.seed = seed
        self.rings = {int(k): tuple(sorted(v)) for k, v in (rings or {}).items()}
        self.check_types = check_types
        self.strict_rings = strict_rings
        self._shards: dict[tuple, dict[int, np.ndarray]] = {}
        self._ring_users: dict[int, set[int]] | None = None
        # rank -> ring id -> group: what 1-D op meshes name, else the builder's ring table (given)
        self._given_rings = {r: {int(k): tuple(sorted(g)) for k, g in t.items()} for r, t in (rank_rings or {}).items()}
        self._rank_rings: dict[int, dict[int, tuple[int, ...]]] = {}
        self.ring_groups: dict[int, dict[int, tuple[int, ...]]] = {}
        self.ring_notes: list[tuple[list[int], str]] = []
        self.assumed: dict[tuple, dict[int, tuple[int, ...]]] = {}  # groups no file names, inferred (.groups)

    # -- groups ----------------------------------------------------------------------------
    def shard(self, k: int, x, dist: TensorDistAttr) -> dict[int, np.ndarray]:
        key = (k, dist.mesh, dist.dims_mapping, dist.partial)
        if key not in self._shards:
            rng = np.random.default_rng([self.seed, k, 7])
            self._shards[key] = distribute(np.asarray(x), dist, rng)
        return self._shards[key]

    def input_pieces(self, key: str, x, dist: TensorDistAttr) -> dict[int, np.ndarray]:
        """Every rank's piece of a partial input (random, reproducible from ``seed`` and the name)."""
        k = ("input", key, dist.mesh, dist.dims_mapping, dist.partial)
        if k not in self._shards:
            rng = np.random.default_rng([self.seed, zlib.crc32(key.encode()), 11])
            self._shards[k] = distribute(np.asarray(x), dist, rng)
        return self._shards[k]

    def ring_users(self, ring: int) -> tuple[int, ...]:
        if self._ring_users is None:
            self._ring_users = {}
            for r, p in self.programs.items():
                for op in p.walk():
                    a = op.attrs.get("ring_id")
                    if a is not None:
                        self._ring_users.setdefault(int(attr_value(a)), set()).add(r)
        return tuple(sorted(self._ring_users.get(ring, ())))

    def rank_ring_group(self, rank: int, ring) -> tuple[int, ...] | None:
        """The group a collective of ``rank``'s program on ``ring`` names by a 1-D op mesh (a
        ring is one group on a rank), if one does."""
        if ring is None:
            return None
        memo = self._rank_rings.get(rank)
        if memo is None:
            memo = self._rank_rings[rank] = {}
            for o in self.programs[rank].walk():
                a, d = o.attrs.get("ring_id"), o.dist_attr
                if a is None or d is None or d.mesh.ndim != 1 or rank not in d.mesh:
                    continue
                n = o.attrs.get("nranks")
                if n is None or int(attr_value(n)) == d.mesh.size:
                    memo.setdefault(int(attr_value(a)), tuple(sorted(d.mesh.process_ids)))
            for ring_id, group in self._given_rings.get(rank, {}).items():  # (what the text does not name)
                memo.setdefault(ring_id, group)
        return memo.get(int(ring))

    def sub_group(self, op: Operation, rank: int, ring, nranks: int | None) -> tuple[int, ...] | None:
        """The group of a collective on a 2-D (or larger) op mesh that is a 1-D sub-mesh of it
        (Paddle's fused ZeRO buffers and its sharded clip carry the whole mesh): the group the
        same ring names by a 1-D mesh elsewhere in the rank's program (or the builder's ring
        table), else the one sub-mesh through ``rank`` of ``nranks`` ranks, else what all the
        ranks' programs tell (:func:`.groups.infer_group`: noted in :attr:`RankValues.assumed`,
        or :class:`Undecidable`); None when the collective spans the whole mesh."""
        mesh = op.dist_attr.mesh
        known = self.rank_ring_group(rank, ring)
        if known is not None and set(known) < set(mesh.process_ids) and nranks in (None, len(known)):
            return known
        if nranks is None or nranks == mesh.size:
            return None
        cands = set(candidates(mesh, rank, nranks).values())
        if len(cands) == 1:
            return next(iter(cands))
        if ring is None:
            raise Undecidable(f"nranks {nranks} on mesh {list(mesh.shape)} without a ring_id: cannot tell which "
                              "sub-mesh is the group", rank, op)
        group, d, why = infer_group(self.programs[rank], op, rank, int(ring), nranks, self.ring_users)
        self._rank_rings[rank][int(ring)] = group  # (a ring is one group on a rank)
        self.assumed.setdefault((int(ring), mesh, d, why), {})[rank] = group
        return group

    def group_of(self, op: Operation, rank: int, ring) -> tuple[int, ...]:
        d = op.dist_attr
        if d is not None and d.mesh.ndim > 1 and rank in d.mesh:
            n = op.attrs.get("nranks")
            g = self.sub_group(op, rank, ring, None if n is None else int(attr_value(n)))
            if g is not None:
                return g
        if d is not None and rank in d.mesh.process_ids:
            g = tuple(sorted(d.mesh.process_ids))
            if ring is not None and int(ring) in self.rings and self.rings[int(ring)] != g:
                raise SimulationError(f"ring_id {ring} is group {list(self.rings[int(ring)])} but the op mesh "
                                      f"says {list(g)}", rank, op)
            return g
        if ring is not None and int(ring) in self.rings:
            return self.rings[int(ring)]
        if ring is not None:
            return self.ring_users(int(ring))
        raise SimulationError("cannot tell the group of this collective (no op mesh, no ring_id)", rank, op)

    def p2p_partner(self, ring, peer: int, rank: int) -> int | None:
        if ring is not None and int(ring) in self.rings:
            g = self.rings[int(ring)]
            if peer >= len(g):
                raise SimulationError(f"peer {peer} is outside ring {ring} = {list(g)}", rank)
            return g[peer]
        return None

    # -- main loop -------------------------------------------------------------------------
    def make_runner(self, rank: int, prog: Program) -> RankRunner:
        return RankRunner(self, rank, prog)

    def run(self) -> dict[int, RankValues]:
        runners = {r: self.make_runner(r, p) for r, p in sorted(self.programs.items())}
        self.runners = runners
        try:
            return self._run(runners)
        except SimulationError as e:
            # what every rank computed before the failure: a proof can look for the op that first
            # went wrong (a collective that fails may only be where a wrong value surfaces)
            e.partial = {r: rr.env for r, rr in runners.items()}
            raise

    def _run(self, runners: dict[int, RankRunner]) -> dict[int, RankValues]:
        gens = {r: rr.run() for r, rr in runners.items()}
        waiting: dict[int, Any] = {}
        done: set[int] = set()
        sends: list[Send] = []

        def step(r: int, reply=None) -> None:
            try:
                req = gens[r].send(reply) if r in waiting or reply is not None else next(gens[r])
            except StopIteration:
                waiting.pop(r, None)
                done.add(r)
                return
            waiting[r] = req

        for r in runners:
            step(r)

        def receives(stuck: bool) -> bool:
            moved = False
            for r in sorted(waiting):
                req = waiting.get(r)
                if isinstance(req, Recv):
                    s = self._match(req, sends, stuck)
                    if s is not None:
                        sends.remove(s)
                        moved = True
                        step(r, (s.data.copy(), s.rank))
                        if stuck:
                            return True
            return moved

        while len(done) < len(runners):
            progressed = False
            # buffered sends
            for r in sorted(waiting):
                req = waiting.get(r)
                if isinstance(req, Send):
                    sends.append(req)
                    progressed = True
                    step(r, [])
            progressed |= receives(False)
            # collectives
            colls = {r: q for r, q in waiting.items() if isinstance(q, Coll)}
            seen_groups = set()
            for r, q in sorted(colls.items()):
                if q.group in seen_groups:
                    continue
                seen_groups.add(q.group)
                members = [colls.get(m) for m in q.group]
                if any(m is None or m.group != q.group for m in members):
                    missing = [m for m in q.group if m not in self.programs]
                    if missing:
                        raise SimulationError(f"collective over group {list(q.group)}, but no program was "
                                              f"given for ranks {missing}", r, q.op)
                    continue
                replies = self._collective(members)  # type: ignore[arg-type]
                progressed = True
                for m, rep in zip(q.group, replies):
                    step(m, rep)
            if not progressed and not receives(True):
                lines = []
                for r in sorted(waiting):
                    q = waiting[r]
                    what = type(q).__name__.strip("_").lower()
                    loc = f" line {q.op.loc[0]}" if q.op.loc else ""
                    extra = f" group {list(q.group)}" if isinstance(q, Coll) else f" ring {q.ring} peer {q.peer}"
                    lines.append(f"rank {r} waits in {q.op.name}{loc} ({what}{extra})")
                for r in sorted(done):
                    lines.append(f"rank {r} has finished its program")
                r0 = self._stuck_rank(waiting, done)
                raise SimulationError("deadlock: " + "; ".join(lines), r0, waiting[r0].op)
        out = {r: rr.env for r, rr in runners.items()}
        for ranks, msg in self.ring_notes:
            for r in ranks:
                out[r].notes.append(msg)
        for r, notes in assumed_notes(self.assumed).items():
            out[r].assumed.extend(notes)
        for s in sends:
            out[s.rank].notes.append(f"send_v2 (ring {s.ring}, peer {s.peer}) was never received")
        return out

    @staticmethod
    def _stuck_rank(waiting: Mapping[int, Any], done: set[int]) -> int:
        """The rank to blame for a deadlock: one waiting in a collective that a member of its
        group will never join (finished, or waiting in another group), else the first waiting."""
        for r in sorted(waiting):
            q = waiting[r]
            if isinstance(q, Coll):
                for m in q.group:
                    other = waiting.get(m)
                    if m in done or (other is not None and (not isinstance(other, Coll) or other.group != q.group)):
                        return r
        return min(waiting)

    def ring_group(self, rank: int, ring) -> tuple[int, ...] | None:
        """The ranks of ``ring`` as ``rank`` numbers its rings, in their order (None: not known)."""
        return self.rings.get(int(ring)) if ring is not None else None

    def _one_channel(self, s: Send, rq: Recv) -> bool:
        """A send and a receive resolved through rings meet on one communicator: the same ring id,
        or (each rank numbering its rings in its own order of creation) the same ordered group."""
        if s.ring == rq.ring:
            return True
        g = self.ring_group(s.rank, s.ring)
        return g is not None and g == self.ring_group(rq.rank, rq.ring)

    def _match(self, rq: Recv, sends: list[Send], stuck: bool) -> Send | None:
        """The send a receive gets.  Ring ids are process-local handles (Paddle numbers groups in
        creation order, which differs between ranks), so without ``rings`` a send from s matches
        a receive on d when their ``peer`` indices agree with the sorted pair (s, d), preferring
        pairs at the same position of their op meshes (Paddle's cross-mesh copies pair
        ``zip(src_mesh.process_ids, dst_mesh.process_ids)``), then pairs with equal ring ids.
        A ring-id-only match is taken only when nothing else can progress."""
        tiers: dict[int, list[Send]] = {}
        for s in sends:
            if rq.src is not None or s.to is not None:  # resolved through rings=
                if (rq.src is None or s.rank == rq.src) and (s.to is None or s.to == rq.rank) and \
                        (rq.src is None or s.to is None or self._one_channel(s, rq)):
                    tiers.setdefault(0, []).append(s)
                continue
            # the 2-rank group is [src, dst] in Paddle (unsorted): each side's ``peer`` is the
            # other's index in it, so the two indices differ
            if s.rank == rq.rank or s.peer not in (0, 1) or rq.peer not in (0, 1) or s.peer == rq.peer:
                continue
            same_pos = s.pos is not None and s.pos == rq.pos
            same_ring = s.ring == rq.ring
            if same_pos and same_ring:
                tiers.setdefault(0, []).append(s)
            elif same_pos:
                tiers.setdefault(1, []).append(s)
            elif same_ring:
                tiers.setdefault(2, []).append(s)
        for t in sorted(tiers):
            if t == 2 and not stuck:
                return None
            cands = tiers[t]
            if len({c.rank for c in cands}) > 1:
                raise SimulationError(f"recv_v2 (ring {rq.ring}, peer {rq.peer}) could match sends of ranks "
                                      f"{sorted({c.rank for c in cands})}; pass rings= to disambiguate",
                                      rq.rank, rq.op)
            return cands[0]
        return None

    def _collective(self, members: list[Coll]) -> list:
        q0 = members[0]
        kinds = {m.kind for m in members}
        if len(kinds) > 1:
            desc = ", ".join(f"rank {m.rank}: {m.op.name}" for m in members)
            odd = _odd_one(members, lambda m: m.kind)
            raise SimulationError(f"mismatched collectives on group {list(q0.group)}: {desc}", odd.rank, odd.op)
        for m in members:  # within one rank, a ring id is one communicator
            seen = self.ring_groups.setdefault(m.rank, {})
            if m.ring is not None and seen.setdefault(m.ring, m.group) != m.group:
                raise SimulationError(f"ring_id {m.ring} is used for group {list(seen[m.ring])} and for "
                                      f"group {list(m.group)}", m.rank, m.op)
        rings = {m.ring for m in members}
        if len(rings) > 1:
            desc = ", ".join(f"rank {m.rank}: ring_id {m.ring}" for m in members)
            msg = f"{q0.op.name} on group {list(q0.group)} uses different ring ids ({desc})"
            if self.strict_rings:
                raise SimulationError(msg)
            self.ring_notes.append(([m.rank for m in members], msg))
        shapes = {m.data.shape for m in members}
        if len(shapes) > 1:
            desc = ", ".join(f"rank {m.rank}: {list(m.data.shape)}" for m in members)
            odd = _odd_one(members, lambda m: m.data.shape)
            raise SimulationError(f"{q0.op.name} on group {list(q0.group)} with different local shapes ({desc})",
                                  odd.rank, odd.op)
        n = len(members)
        xs = [m.data for m in members]
        kind = q0.kind
        if kind == C.ALL_REDUCE:
            rts = {int(m.attrs["reduce_type"]) for m in members}
            if len(rts) > 1:
                odd = _odd_one(members, lambda m: int(m.attrs["reduce_type"]), _undeclared_reduce)
                desc = ", ".join(f"rank {m.rank}: {REDUCE_TYPES[int(m.attrs['reduce_type'])]}" for m in members)
                raise SimulationError(f"all_reduce on group {list(q0.group)} with different reduce types ({desc})",
                                      odd.rank, odd.op)
            y = reduce_arrays(xs, int(rts.pop())).astype(xs[0].dtype)
            return [y.copy() for _ in members]
        if kind == C.ALL_GATHER:
            y = np.concatenate(xs, axis=0) if xs[0].ndim else np.stack(xs)
            return [y.copy() for _ in members]
        if kind == C.REDUCE_SCATTER:
            y = reduce_arrays(xs, 0)
            if y.ndim == 0 or y.shape[0] % n:
                raise SimulationError(f"{q0.op.name}: extent {y.shape[0] if y.ndim else 0} of axis 0 is not "
                                      f"divisible by the {n} ranks of group {list(q0.group)}")
            return list(np.split(y, n, axis=0))
        if kind == C.ALL_TO_ALL:
            if xs[0].ndim == 0 or xs[0].shape[0] % n:
                raise SimulationError(f"{q0.op.name}: extent {xs[0].shape[0] if xs[0].ndim else 0} of axis 0 "
                                      f"is not divisible by the {n} ranks of group {list(q0.group)}")
            parts = [np.split(x, n, axis=0) for x in xs]
            return [np.concatenate([parts[i][j] for i in range(n)], axis=0) for j in range(n)]
        if kind == C.BROADCAST:
            roots = {m.attrs["root"] for m in members}
            if len(roots) > 1:
                odd = _odd_one(members, lambda m: m.attrs["root"])
                raise SimulationError(f"broadcast on group {list(q0.group)} with different roots {sorted(roots)}",
                                      odd.rank, odd.op)
            root = roots.pop()
            idx = root if root < n else list(q0.group).index(root)
            return [xs[idx].copy() for _ in members]
        raise SimulationError(f"unknown collective {kind}")


def _odd_one(members: list[Coll], key: Callable, suspect: Callable[[Coll], bool] = lambda m: False) -> Coll:
    """The member whose ``key`` differs from the most common one; on a tie (two ranks), the one
    ``suspect`` points at (e.g. a reduce type its operand's partial layout does not declare)."""
    counts: dict = {}
    for m in members:
        counts[key(m)] = counts.get(key(m), 0) + 1
    best = max(counts.values())
    commons = [k for k, c in counts.items() if c == best]
    if len(commons) > 1:
        return next((m for m in members if suspect(m)), members[-1])
    return next(m for m in members if key(m) != commons[0])


def _undeclared_reduce(m: Coll) -> bool:
    """An all_reduce whose reduce type is not the partial reduce type its operand declares."""
    v = m.op.operand(0)
    d = v.dist_attr if v is not None else None
    return d is not None and bool(d.partial) and \
        REDUCE_TYPES[int(m.attrs["reduce_type"])] not in {rt for _, rt in d.partial}


def simulate_ranks(programs: Mapping[int, Program], inputs: Mapping[str, Any], *, seed: int = 0,
                   rings: Mapping[int, Iterable[int]] | None = None, check_types: bool = True,
                   strict_rings: bool = False, progress: Callable[[int], None] | None = None,
                   shapes_from_types: bool = False, layouts: Mapping[str, TensorDistAttr] | None = None,
                   tags: Mapping[str, tuple] | None = None, slice_index: Callable | None = None,
                   rank_rings: Mapping[int, Mapping[int, Iterable[int]]] | None = None) -> dict[int, RankValues]:
    """Run ``programs[rank]`` on every rank in lockstep.

    ``inputs`` maps ``pd_op.data`` names and ``builtin.parameter`` names to global numpy arrays
    (or to ``{rank: local array}`` mappings).  ``dist_op.shard_tensor``
    turns them into each rank's local piece (partial values: random pieces that reduce to the
    global value, the same on every rank for a given ``seed``).  ``rings`` optionally maps
    ring ids to their ranks (needed only for collectives without an op mesh or ambiguous p2p);
    ``rank_rings`` each rank's own (rank -> ring id -> ranks, as the program's builder numbered
    them), for a collective on a 2-D op mesh whose 1-D group no op of the rank's program names (as
    Paddle prints fused ZeRO buffers' collectives); what the program names comes first.

    Returns, for every rank, a :class:`RankValues` (``Value``/``"%N"`` -> ndarray; vectors are
    lists; values that do not exist on the rank are missing).  Raises :class:`SimulationError`
    when a rank cannot run its program or the ranks deadlock.
    """
    return Simulator(programs, inputs, seed, rings, check_types, strict_rings, progress=progress,
                     shapes_from_types=shapes_from_types, layouts=layouts, tags=tags, slice_index=slice_index,
                     rank_rings=rank_rings).run()


def simulate_serial(program: Program, inputs: Mapping[str, Any], *, check_types: bool = True,
                    progress: Callable[[int], None] | None = None, shapes_from_types: bool = False,
                    seed: int = 0, tags: Mapping[str, tuple] | None = None) -> RankValues:
    """Run a global-view program once, on global values: every op runs whatever its mesh,
    ``shard_tensor``/``reshard`` pass values through, a partial type is only a layout (the value
    is the reduced one).  A program with communication is not a global view."""
    return Simulator({0: program}, inputs, seed, None, check_types, False, serial=True, progress=progress,
                     shapes_from_types=shapes_from_types, tags=tags).run()[0]

