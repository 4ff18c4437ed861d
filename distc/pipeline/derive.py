"""Rank programs derived from one rank's text (``distc shard --all-ranks``).

After the shared passes, the ranks' programs differ only in what the reshard pass inserts: a
training program lowers a few distinct reshards (by :class:`~distc.passes.reshard.replay.Replayer`
key: layouts, types, attributes the lowering reads) hundreds of times each, and for two ranks the
inserted ops of one key have the same names, wiring and results -- only their attributes and
types differ (the group's process ids, the offsets of a slice, ring ids).  So, in one worker:

* the **base** rank (the first) is lowered whole, verified and printed, its replayer logging
  which ops each reshard inserted and, for the first reshard of each key, what its lowering reads
  (:func:`~distc.passes.reshard.replay.alone`); :func:`sketch_of` finds those ops' lines in its text;
* for every **other** rank, each key's first reshard is lowered again alone (:func:`lower_alone`,
  in the base's order, so ring ids come out as a whole lowering hands them out), its ops printed
  alone and verified (:func:`~distc.passes.reshard.replay.template_text`);
* :func:`derive` gives that rank's text: the base text, with the attributes-and-types part of
  each inserted op's line replaced by the rank's where the two differ, and its collective records
  (the template's, at each reshard's line); its startup program is lowered whole.

A rank is derived only if every check holds, else it is lowered whole as before: every reshard
has a key and every key a template (none lowered one by one: reaching outside its own ops,
leaving notes), the rank's templates have the base's shape (op names, operand wiring, result
counts) and the value replacing each reshard's result prints the same type (so every other line
is the same text), the lowering alone sees the same key, and each replaced line ends with the
base template's text (the lines are where the printer put the inserted ops: ``^kw:`` arguments,
comment lines and regions counted as it lays them out).  ``tests/test_derive_ranks.py`` holds
derived texts to whole lowerings byte for byte.
"""

from __future__ import annotations

from itertools import accumulate

from ..ir.core import Program
from ..ir.records import record
from ..passes.reshard.replay import Replayer, template_text, with_value
from ..syntax.printer import print_lines


@record
class Sketch:
    """What deriving needs of one rank's lowering (plain data: it crosses from a worker process).
    ``keys``: per reshard in lowering order, the hash of its replay key (same in every process
    forked from one parent); ``lines``: each reshard's line; ``templates``: key hash -> the
    template as text (:func:`~distc.passes.reshard.replay.template_text`); ``where`` (the base
    only): (key hash, op of the template) -> the lines of the base text holding that op's copies
    (indices in ``text.split("\\n")``, as the printer laid them out)."""

    keys: list
    lines: list
    templates: dict
    complete: bool
    where: dict | None = None


def _plain(tt):
    """A template's text with its collective records made plain data (their layouts dropped: a
    sketch crosses from a worker process); None stays None."""
    return tt and (*tt[:3], [with_value(c, "layouts", None) for c in tt[3]])


def sketch_of(replayer: Replayer, style, base: Program | None = None) -> tuple[Sketch, str | None]:
    """The sketch of a lowering done by ``replayer`` (a logging one), and ``base``'s text: the
    whole program it lowered, printed once, which gives :attr:`Sketch.where` (the printer's own
    line layout: block arguments' ``^kw:`` lines, comment lines, regions)."""
    log = replayer.log or []
    keys = [None if k is None else hash(k) for k, _, _ in log]
    templates = {}
    for k, t in replayer.templates.items():
        if k is not None:
            templates[hash(k)] = _plain(template_text(t, k[1], style))
    complete = None not in keys and all(templates.get(k) is not None for k in set(keys))
    sk = Sketch(keys, [line for _, _, line in log], templates, complete)
    if base is None or not complete:
        return sk, None
    made = {}
    for fp, (_, ops, _) in zip(keys, log):
        for j, op in enumerate(ops or ()):
            made[id(op)] = (fp, j)
    text, lines = print_lines(base, made)
    sk.where = {}
    for i, n in lines.items():
        sk.where.setdefault(made[i], []).append(n)
    return sk, text


def line_ends(text: str) -> list[int]:
    """Where each line of ``text`` ends (the offset of its newline, or the end), by line index."""
    return [n + i for i, n in enumerate(accumulate(map(len, text.split("\n"))))]


def derive(base: Sketch, text: str, other: Sketch, ends: list[int] | None = None,
           records: bool = True, data: memoryview | None = None) -> tuple[str | list, list | None] | None:
    """The other rank's text and collective records (None unless ``records``), from the base
    rank's ``text`` (None: not derivable, lower it whole; ``ends``: :func:`line_ends` of
    ``text``, made once for every rank): the base text with the replaced parts of its lines cut
    out and the rank's put in, joined once -- or, given ``data`` (``text`` encoded, for an ASCII
    text: its character offsets are its byte offsets), not joined: the pieces of UTF-8 a file is
    written from (views of ``data`` between the replaced line ends, each rank's line end encoded
    once), without a copy of the text (:meth:`~distc.pipeline.results.RankResult.text_pieces`)."""
    if not (base.complete and other.complete) or base.where is None or base.keys != other.keys:
        return None
    reps = []  # (start, end, new text) of each replaced line end
    for fp, bt in base.templates.items():
        ot = other.templates.get(fp)
        if bt is None or ot is None or bt[0] != ot[0] or bt[2] != ot[2]:
            return None
        for j, (ta, tb) in enumerate(zip(bt[1], ot[1])):
            if ta == tb:
                continue
            if ends is None:
                ends = line_ends(text)
            cut = len(ta)
            if data is not None:
                tb = tb.encode()
            for i in base.where.get((fp, j), ()):
                e = ends[i]
                if e < cut or not text.startswith(ta, e - cut, e):  # (the line ends with ta: no newline in ta)
                    return None
                reps.append((e - cut, e, tb))
    recs = [with_value(r, "line", line) for fp, line in zip(base.keys, base.lines)
            for r in other.templates[fp][3]] if records else None
    if not reps:
        return text, recs
    reps.sort()
    out, pos = [], 0
    if data is not None:
        for a, e, tb in reps:
            out += (data[pos:a], tb)
            pos = e
        out.append(data[pos:])
        return out, recs
    for a, e, tb in reps:
        out += (text[pos:a], tb)
        pos = e
    out.append(text[pos:])
    return "".join(out), recs


def lower_alone(recipe: tuple, key: tuple, rank: int, rings, style):
    """The template of a reshard lowered again, alone, for ``rank`` (``recipe``: what its lowering
    reads, :func:`~distc.passes.reshard.replay.alone`): in a program of its input's producer, the
    reshard and, if the input has other users, one more; None if that program's key differs from
    ``key`` or the lowering is not recorded (it reaches outside its ops)."""
    from ..ir.core import Block, Operation
    from ..passes.reshard.lower import Lowering, lower_reshard

    name, attrs, types, loc, sig, oname, oattrs, otypes, osig, index, uses = recipe
    block = Block()
    x = block.append(Operation(oname, (), otypes, dict(oattrs), sig=osig)).results[index]
    op = block.append(Operation(name, (x,), types, dict(attrs), sig=sig))
    op.loc = loc
    if uses > 1:
        block.append(Operation("builtin.use", (x,), ()))
    paddle_only, enable, disable = key[8:11]
    if Replayer.key(op, x, paddle_only, enable, disable) != key:
        return None
    rp = Replayer(lower_reshard)
    rp(Program(block, style=style), op, rank, rings=rings, result=Lowering(rank, rings), paddle_only=paddle_only,
       enable=enable, disable=disable)
    return rp.templates.get(key)


def sketch_alone(base: Replayer, keys: Sketch, rank: int, rings, style) -> Sketch:
    """Another rank's sketch from the base rank's logging replayer (``keys``: the base's sketch):
    each key's first reshard lowered alone for ``rank``, in the base's order (so ``rings`` hands
    out the ids a whole lowering of the rank would)."""
    templates: dict = {}
    for k, recipe in base.recipes.items():  # (in the order of their first reshards)
        templates[hash(k)] = _plain(template_text(lower_alone(recipe, k, rank, rings, style), k[1], style)
                                    if recipe else None)
    return Sketch(keys.keys, keys.lines, templates, keys.complete and all(t is not None for t in templates.values()))


def lower_deriving(pipe, rank: int, others: list[int], records: bool = True):
    """The base rank lowered whole in place, and every rank of ``others`` that can be derived from
    it (``res.derived``: rank -> its result, text and startup program made; the caller writes
    them; ``derived_from`` set; without ``records`` their ``collectives`` None)."""
    from ..dialects.rings import RingAllocator
    from ..passes.reshard.lower import lower_reshard
    from .results import rank_memory

    sh = pipe.prepare()
    # (clones: the base's startup program, maybe every rank's, is lowered in place)
    startups = {r: s.clone() for r in others if (s := pipe.startup_of(r)) is not None}
    rp = Replayer(lower_reshard, log=[])
    res, ctx, layouts = pipe.lower_main(rank, copy=False, replayer=rp)
    notes, first, reserved = list(ctx.notes), ctx.rings.first, set(ctx.rings.reserved)
    pipe.lower_startup(res, ctx, layouts)
    prog = res.program
    base, text = sketch_of(rp, prog.style, prog)
    res.derived = {}
    if text is None:
        return res
    res._text = text
    ends = line_ends(text) if others else None  # (once, for every derived rank)
    data = memoryview(text.encode()) if others and text.isascii() else None  # (ditto)
    for r in others:
        rings = RingAllocator(first, reserved=set(reserved))
        d = derive(base, text, sketch_alone(rp, base, r, rings, prog.style), ends, records, data)
        if d is None:
            continue
        got = res.derived[r] = type(res)(r, None, startups.get(r), memory_before=rank_memory(sh.before, r),
                                         memory_after=rank_memory(sh.after, r), derived_from=rank)
        if isinstance(d[0], str):
            got._text = d[0]
        else:
            got._pieces = d[0]
        got.collectives = None if d[1] is None else [c for c in d[1] if c.runs]
        got.rings = {ring: group for group, ring in rings.groups.items()}
        got.ran = [p.spec() for p in pipe.rank_passes(r)]
        rctx = sh.ctx.fork()
        rctx.rings, rctx.notes, rctx.collectives = rings, list(notes), list(d[1] or ())
        pipe.lower_startup(got, rctx, layouts)
    return res


def derivable(pipe, ranks: list[int]) -> bool:
    """Whether ranks' texts may be derived from the first's: several ranks whose passes end with
    reshard (no dense passes, schedule or tensor fusion)."""
    o = pipe.options
    return len(ranks) > 1 and not (o.annotate_only or o.dense or o.scheduled or o.tensor_fusion or o.verify_each)


def run_derived(pipe, ranks: list[int], each, records: bool = True) -> dict:
    """``ShardPipeline.run`` with ``each`` (forked workers; ``work`` may give None: nothing to do):
    the first rank lowered whole in a worker that also derives every other rank it can
    (:func:`lower_deriving`); the ranks it could not derive (or all, where :func:`derivable` says
    no) are lowered whole, a worker each."""
    if not derivable(pipe, ranks):
        return dict(each(ranks, lambda r: pipe.lower(r, copy=False)))
    base, others = ranks[0], ranks[1:]
    # (a second item, whose work is None, so that the base is lowered in a worker of its own: this
    # process keeps the shared state for the ranks the base cannot derive; `each` runs one item here)
    got = dict(each([base, others[0]], lambda r: lower_deriving(pipe, r, others, records) if r == base else None))
    del got[others[0]]
    got.update(got[base].derived or {})
    got[base].derived = None
    redo = [r for r in others if r not in got]
    if redo:
        got.update(each(redo, lambda r: pipe.lower(r, copy=False)))
    return {r: got[r] for r in ranks}
