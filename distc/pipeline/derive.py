"""Rank programs derived from one rank's text (``distc shard --all-ranks``).

After the shared passes, the ranks' programs differ only in what the reshard pass inserts: a
training program lowers a few distinct reshards (by :class:`~distc.passes.reshard.replay.Replayer`
key: layouts, types, attributes the lowering reads) hundreds of times each, and for two ranks the
inserted ops of one key have the same names, wiring and results -- only their attributes and
types differ (the group's process ids, the offsets of a slice, ring ids).  So:

* the **base** rank (the first) is lowered whole, verified and printed, its replayer logging
  which ops each reshard inserted; :func:`sketch_of` keeps where those ops' lines are in its text;
* every **other** rank is only *sketched*: the first reshard of each key lowered (ring ids handed
  out in the same order as a whole lowering does), the others left as they are, their keys logged;
  each key's inserted ops printed alone and verified (:func:`~distc.passes.reshard.replay.template_text`);
* :func:`derive` gives the other rank's text: the base text, with the attributes-and-types part of
  each inserted op's line replaced by the other rank's where the two differ, and its collective
  records (the template's, at each reshard's line).

A rank is derived only if every check holds, else it is lowered whole as before: both ranks'
reshards have the same keys in the same order, every key has a template (no reshard lowered one
by one: one that reaches outside its own ops, leaves notes or has no key), the templates have the
same shape (op names, operand wiring, result counts) and the value replacing the reshard's result
prints the same type (so the other ops' lines are the same text), the base program has no
regions, and each replaced line ends with the base template's text.
``tests/test_derive_ranks.py`` holds derived texts to whole lowerings byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Program
from ..passes.reshard.replay import Replayer, template_text, with_value


@dataclass
class Sketch:
    """What deriving needs of one rank's lowering (plain data: it crosses from a worker process).
    ``keys``: per reshard in lowering order, the hash of its replay key (same in every process
    forked from one parent); ``lines``: each reshard's line; ``templates``: key hash -> the
    template as text (:func:`~distc.passes.reshard.replay.template_text`); ``where`` (the base
    only): (key hash, op of the template) -> the lines of the base text holding that op's copies."""

    keys: list
    lines: list
    templates: dict
    complete: bool
    where: dict | None = None


def sketch_of(replayer: Replayer, style, base: Program | None = None) -> Sketch:
    """The sketch of a lowering done by ``replayer`` (a logging one; ``base``: the whole program
    it lowered, printed as its text, for :attr:`Sketch.where`)."""
    log = replayer.log or []
    keys = [None if k is None else hash(k) for k, _, _ in log]
    templates = {}
    for k, t in replayer.templates.items():
        if k is not None:
            tt = template_text(t, k[1], style)  # (records without their layouts: plain data)
            templates[hash(k)] = tt and (*tt[:3], [with_value(c, "layouts", None) for c in tt[3]])
    complete = (not replayer.incomplete and None not in keys
                and all(templates.get(k) is not None for k in set(keys)))
    sk = Sketch(keys, [line for _, _, line in log], templates, complete)
    if base is not None and complete:
        sk.where = _where(base, log, keys)
    return sk


def _where(prog: Program, log: list, keys: list) -> dict | None:
    """(key hash, op index) -> the text lines of the inserted ops (as the printer lays them out:
    the head's lines, then per op its comment lines and its line); None with regions."""
    made = {}
    for fp, (_, ops, _) in zip(keys, log):
        for j, op in enumerate(ops or ()):
            made[id(op)] = (fp, j)
    out: dict = {}
    n = prog.head.count("\n")
    for op in prog.block.ops:
        if op.regions:
            return None
        n += len(op.pre)
        w = made.get(id(op))
        if w is not None:
            out.setdefault(w, []).append(n)
        n += 1
    return out


def derive(base: Sketch, text: str, other: Sketch) -> tuple[str, list] | None:
    """The other rank's text and collective records, from the base rank's ``text`` (None: not
    derivable, lower it whole)."""
    if not (base.complete and other.complete) or base.where is None or base.keys != other.keys:
        return None
    lines = None
    for fp, bt in base.templates.items():
        ot = other.templates.get(fp)
        if bt is None or ot is None or bt[0] != ot[0] or bt[2] != ot[2]:
            return None
        for j, (ta, tb) in enumerate(zip(bt[1], ot[1])):
            if ta == tb:
                continue
            if lines is None:
                lines = text.split("\n")
            cut = len(ta)
            for i in base.where.get((fp, j), ()):
                ln = lines[i]
                if not ln.endswith(ta):
                    return None
                lines[i] = ln[:len(ln) - cut] + tb
    records = [with_value(r, "line", line) for fp, line in zip(base.keys, base.lines)
               for r in other.templates[fp][3]]
    return (text if lines is None else "\n".join(lines)), records


def lower_base(pipe, rank: int):
    """The base rank, lowered whole in place, printed, with its sketch (``res.sketch``)."""
    from ..passes.reshard.lower import lower_reshard

    rp = Replayer(lower_reshard, log=[])
    res = pipe.lower(rank, copy=False, replayer=rp)
    prog = res.program
    res.text  # noqa: B018  (printed here: the lines of the inserted ops are counted in this text)
    res.sketch = sketch_of(rp, prog.style, prog)
    return res


def lower_sketch(pipe, rank: int):
    """A rank only sketched (``res.sketch``; its program dropped: it is not the rank's), its
    startup program lowered whole and printed."""
    from ..passes.reshard.lower import lower_reshard

    rp = Replayer(lower_reshard, sketch=True)
    res = pipe.lower(rank, copy=False, replayer=rp)
    res.sketch = sketch_of(rp, pipe.program.style)
    res.program = None
    res.startup_text  # noqa: B018  (printed in the worker)
    return res


def run_derived(pipe, ranks: list[int], each) -> dict:
    """``ShardPipeline.run`` with ``each`` (forked workers): the first rank whole, the others
    sketched and derived from it (their ``derived_from`` set, their texts made here: the caller
    writes them); a rank that cannot be derived is lowered whole in a second round of workers."""
    base = ranks[0]
    _warm(pipe.prepare().program)
    got = dict(each(ranks, lambda r: lower_base(pipe, r) if r == base else lower_sketch(pipe, r)))
    b = got[base]
    redo = []
    for r in ranks[1:]:
        res = got[r]
        d = derive(b.sketch, b.text, res.sketch) if b.sketch is not None and res.sketch is not None else None
        res.sketch = None
        if d is None:
            redo.append(r)
            continue
        res._text = d[0]
        res.collectives = [c for c in d[1] if c.runs]
        res.derived_from = base
    b.sketch = None
    if redo:
        got.update(each(redo, lambda r: pipe.lower(r, copy=False)))
    return got


def _warm(prog: Program) -> None:
    """Hash what the reshards' replay keys hold (dist attrs and types keep their hashes): once
    here, not in every worker (each would compute them for its own copy of the pages)."""
    from ..dialects.ops import RESHARD

    for op in prog.walk():
        if op.name == RESHARD:
            x = op.operand(0)
            try:
                hash((op.dist_attr, None if x is None else x.type, *(r.type for r in op.results)))
            except TypeError:
                pass
