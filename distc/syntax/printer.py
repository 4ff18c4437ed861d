"""Printing a Program as PIR text, in the program's own style.

Paddle's printer rules: one op a line, four spaces a nesting level, ``%N`` assigned in print order
(named values such as ``%stack_0`` keep their names and take no number), attribute keys sorted,
``, `` between values and types, no blanks inside attribute dicts.  An op that has not changed since
it was parsed prints as its source line, byte for byte.

Printing changes nothing: the names values get (``%N`` in print order) live in the printer
(:func:`number_values` gives them), so a program can be printed from several threads at once.
"""

from __future__ import annotations

from operator import attrgetter

from ..ir.attrs import format_attr_dict
from ..ir.core import _ABSENT, Block, BlockArgument, Operation, Program, Value, set_printer
from . import parser as _parser  # noqa: F401  (the package first: see distc/syntax/__init__.py)
from .diagnostics import unnamed_operand
from .parser.fast import FastParser
from .parser.lines import attr_source
from .parser.texts import item_span

_TYPE = attrgetter("_type")
_NAME = attrgetter("name")


def _spans(src: str, name: str) -> tuple[int, int, int]:
    """Where a parsed op line's ``) = "`` (after its results), ``" (`` (before its operands) and
    the ``)`` after its operands are (r < 0: not of this form)."""
    p = src.find(') = "')
    q = src.find('" (', p + 5 + len(name)) if p >= 0 else -1
    return p, q, (src.find(")", q + 3) if q >= 0 else -1)


class _Printer:
    def __init__(self, prog: Program, canonical: bool = False, marks: dict | None = None) -> None:
        self.prog = prog
        # id(op) -> its line's index in ``out`` (filled for the ops whose ids it holds: print_lines)
        self.marks = marks
        self.style = prog.style
        self.canonical = canonical
        # the text in pieces, each line's followed by "\n" (joined once: no string a line); lines so far
        self.out: list[str] = []
        self.nl = 0
        # value -> its printed name (without %) where that is not its own ``name``: a program
        # printed as parsed keeps its names, and this stays small
        self.names: dict[Value, str] = {}
        self.counter = 0
        self.type_text: dict = {}
        self.type_ids: dict[int, str] = {}  # id(type) -> text (types outlive the printing)
        self.attr_ids: dict[int, str] = {}  # id(attribute) -> text
        self.bodies: dict = {}  # attribute texts, see _tail_text
        self.type_lists: dict[tuple, str] = {}  # see _types
        self.inline_pending: set[int] = set()
        self.fresh = 0
        if not self.style.renumber:
            hi = -1
            for v in prog.values():
                if v.name is not None and v.name.isdigit():
                    hi = max(hi, int(v.name))
            self.fresh = hi + 1
        self.arg_count = 0
        # id(attribute dict) of a new op -> ([name, op_id, its operands' and results' types], its
        # line's head and tail): ops replayed from one template share their dict (see ops)
        self.news: dict[int, tuple] = {}

    # -- names -------------------------------------------------------------------------------
    def _name_result(self, v: Value) -> str:
        n = v.name
        if n is not None and not n.isdigit():
            pn = n
        elif self.style.renumber:
            pn = str(self.counter)
            self.counter += 1
            if pn == n:
                pn = n  # the name it has: one string, not two (a million values, a million strings)
        elif n is not None:
            pn = n
        else:
            pn = str(self.fresh)
            self.fresh += 1
        if pn != n:
            self.names[v] = pn
        return pn

    def _name_arg(self, a: BlockArgument) -> str:
        if a.name is not None:
            pn = a.name
        elif a.keyword is not None:
            pn = "kwarg_" + a.keyword
        else:
            pn = f"arg_{self.arg_count}"
        self.arg_count += 1
        if pn != a.name:
            self.names[a] = pn
        return pn

    def _t(self, t) -> str:
        s = self.type_text.get(t)
        if s is None:
            s = str(t)
            self.type_text[t] = s
        return s

    def _t_id(self, t) -> str:
        """A type's text, by identity (no hash of the type's value), then by value."""
        s = self.type_ids.get(id(t))
        if s is None:
            s = self._t(t)
            self.type_ids[id(t)] = s
        return s

    def _attr_id(self, v) -> str:
        s = self.attr_ids.get(id(v))
        if s is None:
            s = str(v)
            self.attr_ids[id(v)] = s
        return s

    def _spliced(self, atext: str, edits: dict, was=None) -> str:
        """An attribute text with the items of ``edits`` set (or deleted), in the printer's order
        (``was``: the op_dist_attr the text holds, if known: its end is found by its text)."""
        text = atext
        if "\\" not in atext:  # each item found on its own (most edits replace one)
            for k, v in edits.items():
                i, j = item_span(text, k, self._attr_id(was) if was and k == "op_dist_attr" else None)
                if i < 0:
                    if v is _ABSENT:
                        continue
                    if self.style.sorted_attrs and text:
                        break  # (a new key among sorted ones: below)
                    text = (text + "," if text else "") + k + ":" + self._attr_id(v)
                elif j < 0:
                    break
                elif v is not _ABSENT:
                    text = "".join((text[:i], k, ":", self._attr_id(v), text[j:]))
                else:
                    text = text[:i - 1] + text[j:] if i else text[j + 1:]
            else:
                return text
        items = {}
        for it in FastParser._split_items(atext):
            items[it[:it.index(":")]] = it
        for k, v in edits.items():
            if v is _ABSENT:
                items.pop(k, None)
            else:
                items[k] = k + ":" + self._attr_id(v)
        return ",".join([items[k] for k in (sorted(items) if self.style.sorted_attrs else items)])

    # -- blocks and ops ----------------------------------------------------------------------
    def line(self, text: str) -> None:
        self.out += (text, "\n")
        self.nl += 1

    def lines(self, texts) -> None:
        for t in texts:
            self.out += (t, "\n")
        self.nl += len(texts)

    def block(self, block: Block, indent: str, header_indent: str, top: bool = False) -> None:
        if block.args:
            kwargs = [a for a in block.args if a.keyword is not None]
            plain = [a for a in block.args if a.keyword is None]
            for a in block.args:
                self._name_arg(a)
            if top:
                for a in plain:
                    self.inline_pending.add(id(a))
            elif plain:
                self.line(header_indent + "^" + ", ".join(self._arg_text(a) for a in plain))
            if kwargs:
                self.line(header_indent + "^kw:")
                for a in kwargs:
                    self.line(header_indent + self.style.indent + self._arg_text(a))
        self.ops(block.ops, indent)
        self.lines(block.post)

    def ops(self, ops, indent: str) -> None:
        """:meth:`op` for each op; in a renumbered program the common ops are printed right here.
        An unchanged op (most of a parsed program) whose results take the numbers they have and
        whose operands kept their names is its source line (while no value has been renamed, no
        operand can have been: they are not looked at); one with values renamed is its source
        line with the new names.  A new or changed op is its results and operands around a head
        (``) = "name" (``) and a tail (attributes and types): a new op's head and tail are
        printed once for each attribute dict (replayed ops share their template's) and types."""
        out = self.out
        marks = self.marks
        if not self.style.renumber or self.canonical:
            for op in ops:
                if marks is not None and id(op) in marks:
                    marks[id(op)] = self.nl + len(op.pre)
                self.op(op, indent)
            return
        nl = self.nl  # (lines: a local while printed here)
        names = self.names
        pending = self.inline_pending
        counter = self.counter
        news = self.news
        for op in ops:
            if marks is not None and id(op) in marks:
                marks[id(op)] = nl + len(op.pre)
            if op.pre or op.regions or pending or op.operand_keywords or op.sig != "full":
                self.counter, self.nl = counter, nl
                self.op(op, indent)
                counter, nl = self.counter, self.nl
                continue
            nl += 1
            renamed = False
            res = op.results
            if len(res) == 1:  # (the common case: its printed name kept at hand)
                r = res[0]
                rt = r.name
                if rt is None or rt.isdigit():
                    pn = str(counter)
                    counter += 1
                    if pn != rt:
                        names[r] = rt = pn
                        renamed = True
            else:
                rt = None
                for r in res:  # (_name_result, inline)
                    n = r.name
                    if n is None or n.isdigit():
                        pn = str(counter)
                        counter += 1
                        if pn != n:
                            names[r] = pn
                            renamed = True
            opnds = op._operands
            src = op.src
            if src is not None and not op.dirty and not renamed and (not names or names.keys().isdisjoint(opnds)):
                out += (src, "\n")
                continue
            # the results as printed: rp + rt, the operands vp + vs (names.get(v, v.name) of each, in C)
            if rt is not None:
                rp = "(%"
            else:
                rp, rt = ("(%", ", %".join(map(names.get, res, map(_NAME, res)))) if res else ("(", "")
            if not opnds:
                vp = vs = ""
            elif len(opnds) == 1 and opnds[0] is not None:
                v = opnds[0]
                vp, vs = "%", names.get(v, v.name)
                if vs is None:  # (not left as a None piece that fails where the text is joined or written)
                    raise unnamed_operand(self.prog, op, names)
            else:
                try:
                    if None not in opnds:
                        vp, vs = "%", ", %".join(map(names.get, opnds, map(_NAME, opnds)))
                    else:
                        vp, vs = "", ", ".join(["<<NULL VALUE>>" if v is None else "%" + names.get(v, v.name)
                                                for v in opnds])
                except TypeError:  # (a None name)
                    raise unnamed_operand(self.prog, op, names) from None
            ind = op.indent
            if ind is None:
                ind = indent
            if src is None:  # a new op
                attrs = op._attrs
                if attrs is not None and None not in opnds:
                    ts = [op.name, op.op_id, *map(_TYPE, opnds), *map(_TYPE, res)]
                    t = news.get(id(attrs))
                    if t is None or t[0] != ts:
                        t = news[id(attrs)] = (ts, self._head(op), ")" + self._tail_text(op) + "\n")
                    out += (ind, rp, rt, t[1], vp, vs, t[2])
                else:
                    out += (ind, rp, rt, self._head(op), vp, vs, ")", self._tail_text(op), "\n")
            elif op.dirty:
                out += (ind, rp, rt, self._head(op), vp, vs, ") {", self._attr_text(op), "} : (",
                        self._types(opnds), ") -> ", self._types(res), "\n")
            else:
                p = src.find(') = "')
                q = src.find('" (', p + 5 + len(op.name)) if p >= 0 else -1
                r = src.find(")", q + 3) if q >= 0 else -1
                if r >= 0:
                    out += (ind, rp, rt, src[p:q + 3], vp, vs, src[r:], "\n")
                else:
                    out += (ind, rp, rt, self._head(op), vp, vs, ")", self._tail_text(op), "\n")
        self.counter, self.nl = counter, nl

    @staticmethod
    def _head(op: Operation) -> str:
        """``) = "name" [id:N] (``: an op line from its results to its operands."""
        return ') = "' + op.name + ('"' if op.op_id is None else f'" [id:{op.op_id}]') + " ("

    def _arg_text(self, a: BlockArgument) -> str:
        pn = self.names.get(a, a.name)
        if not a.attrs_shown:
            return "%" + pn
        return "%" + pn + " " + format_attr_dict(a.attrs, False)  # Paddle keeps their order

    def op(self, op: Operation, indent: str) -> None:
        if op.pre:
            self.lines(op.pre)
        clean = op.src is not None and not op.dirty and not self.canonical
        for r in op.results:
            if self._name_result(r) != r.name:
                clean = False
        if clean:
            names = self.names
            for v in op._operands:
                if v is not None and (v in names or id(v) in self.inline_pending):
                    clean = False
                    break
        ind = op.indent if op.indent is not None else indent
        if clean:
            self.line(op.src)  # type: ignore[arg-type]
        elif op.src is not None and not op.dirty and not self.canonical:
            self.line(self.renamed_line(op, ind))
        else:
            self.line(self.op_line(op, ind))
        if op.regions:
            inner = ind + self.style.indent
            last = len(op.regions) - 1
            for k, region in enumerate(op.regions):
                for blk in region.blocks:
                    self.block(blk, inner, ind)
                if region.close_src is not None and not self.canonical:
                    self.line(region.close_src)
                else:
                    self.line(ind + ("} else {" if k < last else "}"))

    def renamed_line(self, op: Operation, indent: str) -> str:
        """An unchanged op whose values are numbered anew: its source line with the new names
        (attributes and types are copied as they are; anything unusual: printed anew)."""
        src = op.src
        assert src is not None
        p, q, r = _spans(src, op.name)
        if r < 0 or op.operand_keywords or op.sig != "full" or op.regions:
            return self.op_line(op, indent)
        pn = self.names
        names = []
        for v in op._operands:
            if v is None:
                names.append("<<NULL VALUE>>")
            elif id(v) in self.inline_pending:
                return self.op_line(op, indent)
            else:
                names.append("%" + pn.get(v, v.name))
        return "".join((indent, "(", ", ".join(["%" + pn.get(r_, r_.name) for r_ in op.results]),
                        src[p:q + 3], ", ".join(names), src[r:]))

    def op_line(self, op: Operation, indent: str) -> str:
        pn = self.names
        parts = [indent, "(", ", ".join(["%" + pn.get(r, r.name) for r in op.results]), ') = "', op.name, '"']
        if op.op_id is not None:
            parts.append(f" [id:{op.op_id}]")
        if not op.operand_keywords and not self.inline_pending:  # the common case, in one join
            parts.append(" (" + ", ".join(["<<NULL VALUE>>" if v is None else "%" + pn.get(v, v.name)
                                           for v in op._operands]) + ")")
            return self._tail(op, parts)
        kws = dict(op.operand_keywords)
        ops = []
        for i, v in enumerate(op._operands):
            pre = kws[i] + "=" if i in kws else ""
            if v is None:
                ops.append(pre + "<<NULL VALUE>>")
            elif id(v) in self.inline_pending:
                self.inline_pending.discard(id(v))
                ops.append(pre + self._arg_text(v))  # type: ignore[arg-type]
            else:
                ops.append(pre + "%" + pn.get(v, v.name))
        parts.append(" (" + ", ".join(ops) + ")")
        return self._tail(op, parts)

    def _tail(self, op: Operation, parts: list[str]) -> str:
        if op.sig == "none":
            parts.append(" { ")
        else:
            parts.append(self._tail_text(op))
            if op.regions:
                parts.append(" {")
        return "".join(parts)

    def _tail_text(self, op: Operation) -> str:
        """The attributes and types of an op line (its sig "full" or "results")."""
        atext = self._attr_text(op)
        if op.sig == "full":
            return "".join((" {", atext, "} : (", self._types(op._operands), ") -> ", self._types(op.results)))
        return "".join((" {", atext, "} -> ", self._types(op.results)))

    def _attr_text(self, op: Operation) -> str:
        """The attributes of an op line, inside its braces."""
        if (op._as_read or (op._edits is not None and op._attrs is None)) and not self.canonical:
            atext = attr_source(op.src)  # type: ignore[arg-type]
            # a parsed op whose attributes are as read (its operands or types changed: partition
            # retypes and renames most ops): its attribute text as it was; with items set or
            # deleted since and the rest unread (partition's op_dist_attr): those replaced
            if op._edits is not None:
                atext = self._spliced(atext, op._edits, op._dist)  # (read from this text, if read)
        else:
            # the attributes are often the same objects as an op printed before (a replayed
            # reshard, a layer like the last one): keyed by identity, valid while printing; first
            # by the dict itself (ops replayed from one template share theirs: dicts are never
            # changed in place), then by its keys and values
            attrs = op._attrs if op._attrs is not None else op.attrs
            bodies = self.bodies
            atext = bodies.get(id(attrs))
            if atext is None:
                key = (tuple(attrs), tuple(map(id, attrs.values())))
                atext = bodies.get(key)
                if atext is None:
                    # each attribute is printed once (by identity: they live as long as the program)
                    a = self._attr_id
                    keys = sorted(attrs) if self.style.sorted_attrs else attrs
                    atext = ",".join([k + ":" + a(attrs[k]) for k in keys])
                    bodies[key] = atext
                bodies[id(attrs)] = atext
        return atext

    def _types(self, values) -> str:
        """The printed types of a list of values (by the identity of each type: equal lists of the
        retyped values of partition, of each reshard, cost a lookup)."""
        if len(values) == 1 and values[0] is not None:  # (one value: its type's text, by identity)
            s = self.type_ids.get(id(values[0]._type))
            if s is not None:
                return s
        elif not values:
            return ""
        if len(values) > 64:  # (a long list is not kept: no key as long as it)
            t = self._t_id
            return ", ".join(["<<NULL TYPE>>" if v is None else t(v._type) for v in values])
        key = tuple(map(id, map(_TYPE, values))) if None not in values else \
            tuple([id(v._type) if v is not None else 0 for v in values])
        s = self.type_lists.get(key)
        if s is None:
            t = self._t_id
            s = ", ".join(["<<NULL TYPE>>" if v is None else t(v._type) for v in values])
            self.type_lists[key] = s
        return s


def print_program(prog: Program, *, canonical: bool = False) -> str:
    """The program's text.  ``canonical=True`` ignores source lines and prints every op anew."""
    return "".join(_print(prog, canonical)[0])


def print_pieces(prog: Program, *, canonical: bool = False) -> list[str]:
    """The program's text in pieces (their join is :func:`print_program`'s text): a file is
    written from them a few thousand at a time, without a string of the whole text (a big
    program's text is megabytes of fresh memory: page faults)."""
    return _print(prog, canonical)[0]


def joined(pieces: list) -> str:
    """The text of a list of pieces: the printer's (str), or bytes-like UTF-8 views of a text's
    encoding (a derived rank's, :mod:`distc.pipeline.derive`)."""
    return "".join(pieces) if not pieces or isinstance(pieces[0], str) else b"".join(pieces).decode("utf-8")


def encoded(pieces: list) -> bytes:
    """The UTF-8 bytes of a list of pieces (of either kind, as :func:`joined`): a file is written
    from a few thousand of them at a time, without a string of the whole text."""
    return "".join(pieces).encode() if not pieces or isinstance(pieces[0], str) else b"".join(pieces)


def print_lines(prog: Program, ops) -> tuple[str, dict[int, int]]:
    """The program's text (as :func:`print_program`) and, for each op whose id is in ``ops``, the
    index of its line in ``text.split("\\n")`` (the printer's own layout: the head's lines, block
    arguments' lines such as ``^kw:``, comment lines, regions)."""
    marks = dict.fromkeys(ops)
    text = "".join(_print(prog, marks=marks)[0])
    at = prog.head.count("\n")
    return text, {k: at + i for k, i in marks.items() if i is not None}


def _print(prog: Program, canonical: bool = False, marks: dict | None = None) -> tuple[list[str], dict[Value, str]]:
    """The text's pieces (joined once by the caller, or written: no string a line) and the names
    values were printed with where not their own."""
    p = _Printer(prog, canonical, marks)
    p.out.append(prog.head)
    p.block(prog.block, prog.style.indent, prog.style.indent, top=True)
    out = p.out
    out.append(prog.tail)
    nl = prog.style.newline
    return (out if nl == "\n" else [t.replace("\n", nl) for t in out]), p.names


def number_values(prog: Program) -> dict[Value, str]:
    """The names values get when the program is printed now (without ``%``)."""
    renamed = _print(prog)[1]
    return {v: renamed.get(v, v.name) for v in prog.values()}  # type: ignore[misc]


set_printer(print_program, number_values)  # ``str(program)`` prints through this module (ir cannot import it)
