"""The fast path: ordinary op lines read with one regular expression each, type lists and
attribute dictionaries through caches (a real dump repeats a few dozen type spellings and dist
attributes thousands of times).  Anything unusual raises ``_Fallback`` and the grammar path
reads the whole text instead."""

from __future__ import annotations

from sys import intern

from ...ir.core import Block, Program, Region
from .. import regex
from .leaves import (
    _BRACES, MAX_NESTING, Refused, _fast_op_dist, _fast_type_list, _number_list, _simple_item, _split_general,
    check_nesting,
)
from .names import (
    _FEW, _FEW_QUOTES, OPERANDS as _OPERANDS, RESULTS as _RESULTS, Builder, Named as _Named, read_run,
)
from .lines import _CLOSE, _ELSE, _NON_TRIVIA, _OP, _OP_HEAD, _REGION_OP, _TRIVIA, attr_source, op_match, op_tail  # noqa: F401 (re-exported)
from .texts import (
    CACHE_TEXT, Cache as _Cache, Unread, from_skeleton, item_span, joined_line, keep_skeleton,
    kwarg_lines as _kwarg_lines, skeleton_of, split_plain as _split_plain,
)


def lark_parser():
    """The grammar's parser, loaded on first use (ordinary dumps may never need it)."""
    from ..grammar import lark_parser as lp

    return lp()


class _Fallback(Exception):
    """The fast path cannot read this text; use the grammar."""


class _Resume(Exception):
    """The fast path read the top block up to a line it does not know (a ``pd_op.while``, a block
    header, a cut or broken line, the end of the text): the grammar reads on from there with the
    same builder, so a big dump with one odd line (or cut short) is not read twice."""

    def __init__(self, prog, builder, line: int, offset: int, pre: list[str], at_end: bool = False) -> None:
        super().__init__()
        self.prog, self.builder, self.line, self.offset, self.pre = prog, builder, line, offset, pre
        self.at_end = at_end  # no closing line: only the grammar's error is wanted


_KNOWN_TYPES = 4096  # type and mesh spellings kept across type lists
_KNOWN_TEXT = 4096  # ... from type lists spelt in fewer characters than this

_TRAILING_COMMENT = regex.compile(r"[ \t]*//[^\n]*$")


class FastParser:
    """Line-at-a-time parser for ordinary dumps, with caches shared by its calls (one a file: see
    :mod:`distc.syntax.parser`)."""

    def __init__(self) -> None:
        self.types = _Cache()
        self.attr_dicts = _Cache()
        # the text of an op line after its head (attributes and types) -> the (attribute dict or
        # None, input types, output types, op_dist_attr of a dict left unread) read from it: a dump's
        # compute ops of one kind repeat theirs, layer after layer (it starts small: where they do
        # not repeat, as in a program of distinct constants, it keeps no copy of them)
        self.tails = _Cache(64)
        self.items = _Cache()
        self.unread_dist = None  # op_dist_attr of the last attribute text left unread (False: none)
        self.skeletons = _Cache()  # attribute texts with their strings emptied -> (dict, string keys)
        self.dist: dict[str, object] = {}
        self.meshes: dict = {}  # long mesh spellings read in the current parse (see leaves._mesh_of)
        self.known_types: dict = {}  # types, meshes and tensor dist attrs by spelling, across type lists and items
        self._lark_inst = None
        self.unread = Unread(self)  # what the ops of the current parse left unread ask
        self.unsorted: dict[int, dict] = {}  # id -> the attribute dicts read whose keys are out of order
        # (the print style's numbering and key order, found while reading a program of ordinary op
        # lines: see detect_style), or None
        self.facts: tuple[bool, bool] | None = None
        self.whole = False  # the text read: its first line opens, its last closes, no other starts with '}'

    @property
    def _lark(self):
        if self._lark_inst is None:
            self._lark_inst = lark_parser()
        return self._lark_inst

    def type_list(self, text: str) -> list:
        types = self.types
        t = types.get(text)
        if t is not None:
            types.hits += 1
        else:
            if not text:
                t = []
            else:
                t = _fast_type_list(text, self.meshes, self._known(text))
                if t is None:
                    t = self._lark.parse(check_nesting(text), start="type_list")
            self.types.keep(text, t)
        return t

    def _known(self, text: str) -> dict | None:
        """The types, meshes and tensor dist attrs read, by spelling, to read ``text`` with (None:
        a long text, whose spellings are not kept)."""
        if len(text) >= _KNOWN_TEXT:
            return None
        known = self.known_types
        if len(known) > _KNOWN_TYPES:
            known.clear()  # (distinct spellings galore: they do not come back)
        return known

    def attr_dict(self, text: str) -> dict:
        dicts = self.attr_dicts
        d = dicts.get(text)
        if d is not None:
            dicts.hits += 1
            return d
        plain = '"' in text and "\\" not in text and "\n" not in text  # strings of one piece each
        if plain:
            d = from_skeleton(self.skeletons, text)
            if d is not None:
                if list(d) != sorted(d):
                    self.unsorted[id(d)] = d
                dicts.keep(text, d)
                return d
        d = {}
        items = self.items
        for item in self._split_items(check_nesting(text)):
            kv = items.get(item)
            if kv is None:
                kv = self._item(item)
            else:
                items.hits += 1
            k, v = kv
            if k in d:
                raise _Fallback
            d[k] = v
        if list(d) != sorted(d):
            self.unsorted[id(d)] = d
        dicts.keep(text, d)
        if plain:
            keep_skeleton(self.skeletons, text, d)
        return d

    def attr_dict_or_unread(self, text: str) -> dict | None:
        """:meth:`attr_dict`, or None where the text may be left unread until its op is asked
        (``Operation.attrs``; it then calls :attr:`read_attrs`): a text of a skeleton read
        before, whose keys are spelt plainly, reads well for sure.  Most attribute texts of a
        dump differ from all others (a name, a struct name) but share a skeleton."""
        d = self.attr_dicts.get(text)
        if d is not None:
            self.attr_dicts.hits += 1
            return d
        if '"' in text and "\\" not in text and "\n" not in text:
            tpl = skeleton_of(self.skeletons, text)
            if tpl is not None and tpl[2]:
                if not tpl[3]:
                    self.unread.unsorted = True
                self.unread_dist = tpl[0].get("op_dist_attr", False)  # (it holds no strings: the kept dict's)
                return None
        return self.attr_dict(text)

    def read_attrs(self, src: str) -> dict:
        """The attribute dict of an op line whose text was left unread."""
        return self.attr_dict(attr_source(src))

    def read_item(self, src: str, key: str):
        """The value of the item ``key`` of an op line whose attribute text was left unread (None:
        it has none), without the rest of its dict (op_dist_attr: what the passes ask of every op)."""
        text = attr_source(src)
        i, j = item_span(text, key)
        if i < 0 or j < 0:  # (none, or not of the forms item_span reads)
            return None if i < 0 else self.attr_dict(text).get(key)
        item = text[i:j]
        kv = self.items.get(item)
        return (kv if kv is not None else self._item(item))[1]

    def _item(self, item: str) -> tuple:
        kv = _simple_item(item)
        if kv is None:
            kv = _number_list(item)
        if kv is None and item.startswith("op_dist_attr:{"):
            od = _fast_op_dist(item[13:], self.meshes, self._known(item))
            if od is not None:
                kv = "op_dist_attr", od
        if kv is None:
            k, v, _tok = self._lark.parse(check_nesting(item), start="attr")
            kv = k, v
        self.items.keep(item, kv)
        return kv

    @staticmethod
    def _split_items(text: str) -> list[str]:
        """Split an attribute dict body at its top-level commas."""
        if not text:
            return []
        i = text.find("op_dist_attr:{")
        if i < 0 or (i > 0 and text[i - 1] != ","):
            return _split_plain(text) or _split_general(text)
        # op_dist_attr holds no strings: its end is found by counting braces alone
        depth = 0
        j = -1
        for m in _BRACES.finditer(text, i + 13):
            if m.group() == "{":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    j = m.end()
                    break
        if j < 0 or (j < len(text) and text[j] != ","):
            return _split_general(text)
        out = (_split_plain(text[: i - 1]) or _split_general(text[: i - 1])) if i > 0 else []
        out.append(text[i:j])
        if j < len(text):
            rest = text[j + 1:]
            out.extend(_split_plain(rest) or _split_general(rest))
        return out

    def parse(self, text: str, filename: str | None, progress=None) -> Program:
        self.unread = Unread(self)
        self.facts, self.whole = None, False
        try:
            return self._parse(text, filename, progress)
        finally:
            self.meshes = {}  # (their spellings are not kept past the parse)

    def _parse(self, text: str, filename: str | None, progress=None) -> Program:
        # lines are read one at a time (offsets into ``text``, no list of every line): a string
        # holding millions of raw newlines costs no more than one without
        b = Builder()
        prog = Program(filename=filename)
        b.top = prog.block
        n = len(text)
        find = text.find
        # head: everything up to the line that opens the program
        m = _NON_TRIVIA.search(text)
        if m is None:
            raise _Fallback
        e = find("\n", m.start())
        if e < 0:
            raise _Fallback
        first = text[m.start():e]
        stripped = _TRAILING_COMMENT.sub("", first).rstrip(" \t")  # '{ // Kernel Dialect'
        if not stripped.endswith("{") or "{" in stripped[:-1] or stripped.lstrip().startswith("("):
            raise _Fallback
        prog.head = text[:e + 1]
        i = text.count("\n", 0, e) + 1  # 0-based number of the current line
        pos = e + 1
        pre: list[str] = []
        stack: list[tuple] = []  # (header fields, regions, current block) for open region ops
        block = prog.block
        OP = op_match
        HEAD = _OP_HEAD.match
        tails = self.tails
        skeletons: dict[str, tuple] = {}  # ... of tails of strings, by their skeleton (attributes unread)
        REG = _REGION_OP.fullmatch
        types = self.type_list
        attr_dict = self.attr_dict
        unread = self.attr_dict_or_unread
        reader = self.unread
        unsorted = self.unsorted
        sorted_ok = True
        regular = True  # every op read by read_run (what the facts are found for)
        step = max(1 << 16, n // 100)
        next_report = step
        last = (i, pos)  # the last top-level op line read: where the grammar resumes at the end
        ran = False  # the line at pos is where a run of ordinary top-level op lines stopped (see read_run)
        whole = True  # no line but the last starts with '}' (and no op line spans several)
        while pos < n:
            if not (stack or pre or ran) and (r := read_run(text, pos, i, next_report if progress else n, HEAD, block,
                                                            b, tails, skeletons, reader, unsorted))[2] is not None:
                pos, i, last, ran, sorted_ok = *r[:3], True, sorted_ok and not r[3]
                continue
            ran = False
            if not stack:
                here = (i, pos)
            if progress is not None and pos >= next_report:
                progress(pos)
                next_report += step
            e = find("\n", pos)
            if e < 0:
                e = n
            line = text[pos:e]
            got = tail = skeleton = None
            hm = HEAD(line)
            if hm is not None:
                if len(line) - hm.end() < CACHE_TEXT:  # (a longer one is not kept: no copy of it made)
                    tail = line[hm.end():]
                    got = tails.get(tail)
                    if got is None and '"' in tail and "\\" not in tail and tail.count('"') in _FEW_QUOTES:
                        skeleton = '""'.join(tail.split('"')[::2])  # (strings of one piece each)
                        got = skeletons.get(skeleton)
                if got is not None:
                    tails.hits += 1
                    m = (*hm.groups(), None, None, None)
                else:
                    m = op_tail(line, hm, len(line))
            else:
                m = None
            span = 1
            if m is None and '"' in line and not _TRIVIA.fullmatch(line) and not REG(line):
                m, e = joined_line(text, pos, e, OP)  # raw newlines inside a string
                whole = False
                if m is not None:
                    line = text[pos:e]
                    span = line.count("\n") + 1
            if m is not None:
                ind, res, name, oid, opnds, attrs, tin, tout = m
                m = None
                name, ind = intern(name), intern(ind)  # one string for every op of a name, an indent
                try:
                    if len(res) + len(opnds) < _FEW:  # an ordinary op: its few names read at once
                        if got is None:  # (a tail of strings is kept once its attribute text comes back: read before)
                            known = self.attr_dicts.get(attrs) if tail is not None and '"' in tail else None
                            d = unread(attrs)
                            got = d, types(tin), types(tout or ""), self.unread_dist if d is None else None
                            if span == 1 and tail is not None:
                                if skeleton is not None and d is None:
                                    if len(skeletons) < _FEW:
                                        skeletons[skeleton] = got
                                elif '"' not in tail or known is not None and d is known:
                                    tails.keep(tail, got)
                        r = read_run(text, pos, i, 0, HEAD, block, b, tails, skeletons, reader, unsorted,
                                     ((ind, res, name, oid, opnds), got, line, e))
                        if r[4] is None:
                            raise ValueError(line[:80])  # (the grammar reads it: an undefined value, ...)
                        op, sorted_ok = r[4], sorted_ok and not r[3]
                        if pre:
                            op.pre = pre
                            pre = []
                        if not stack:
                            last = here
                        i += span
                        pos = e + 1
                        continue
                    else:
                        regular = False
                        if got is not None:
                            attrs, tin, tout = op_tail(line, hm, len(line))[5:]
                        t_in, t_out = types(tin), types(tout or "")
                        tin = tout = tail = None  # (the text of a list of 800,000 types is not kept while the op is built)
                        op = b.build(
                            _Named(_RESULTS, res, i + 1) if res else [],
                            name, int(oid) if oid else None,
                            _Named(_OPERANDS, opnds, i + 1, True) if opnds else [],
                            attr_dict(attrs), t_in, t_out, "full", (), i + 1, len(ind) + 1,
                        )
                except Refused as e:
                    raise e.in_line(line, i + 1) from None
                except Exception:  # noqa: BLE001 - a line it cannot read: the grammar reads on from it
                    if stack:
                        raise
                    raise _Resume(prog, b, *here, pre) from None
                op.src = line
                op.indent = ind
                op.dirty = False
                if pre:
                    op.pre = pre
                    pre = []
                block.append(op)
                if not stack:
                    last = here
                i += span
                pos = e + 1
                continue
            i += 1
            pos = e + 1
            if _TRIVIA.fullmatch(line):
                pre.append(line)
                continue
            if not stack and not pre and not block.ops and not block.args and line.strip() == "^kw:":
                got = _kwarg_lines(text, pos, i)  # a program's keyword arguments (tensor fusion, job programs)
                if got is None:
                    raise _Resume(prog, b, *here, pre)
                b.define_args(block, [(nm, None if at is None else attr_dict(at), ln, col)
                                      for nm, at, ln, col, _end in got], True)
                i, pos = i + len(got), got[-1][4]
                continue
            m = REG(line)
            if m is not None:
                if len(stack) >= MAX_NESTING:  # at the first line inside the region that is too deep
                    e2 = find("\n", pos)
                    nxt = text[pos: e2 if e2 >= 0 else n]
                    raise Refused(f"regions nested more than {MAX_NESTING} deep (Paddle nests a few)", i + 1,
                                  len(nxt) - len(nxt.lstrip(" \t")) + 1)
                regular = False
                stack.append((m.groups(), [], block, line, pre, i))
                pre = []
                region = Region()
                block = region.add_block(Block())
                stack[-1][1].append(region)
                region.open_src = line
                b.push()
                continue
            if _ELSE.fullmatch(line) and stack:
                whole = whole and line[0] != "}"
                regions = stack[-1][1]
                block.post = pre
                pre = []
                regions[-1].close_src = line
                b.pop()
                region = Region()
                block = region.add_block(Block())
                regions.append(region)
                b.push()
                continue
            if _CLOSE.fullmatch(line):
                block.post = pre
                pre = []
                if not stack:
                    start = pos - len(line) - 1
                    prog.tail = text[start:]
                    if _NON_TRIVIA.search(text, min(pos, n)) is not None:
                        raise _Fallback
                    self.whole = whole and line[0] == "}" and pos >= n
                    break
                whole = whole and line[0] != "}"
                b.pop()
                (ind, res, name, oid, opnds, attrs, tout), regions, parent, hline, hpre, hline_no = stack.pop()
                regions[-1].close_src = line
                try:
                    op = b.build(
                        _Named(_RESULTS, res, hline_no) if res else [],
                        name, int(oid) if oid else None,
                        _Named(_OPERANDS, opnds, hline_no, True) if opnds else [],
                        attr_dict(attrs), None, types(tout), "results", regions, hline_no, len(ind) + 1,
                    )
                except Refused as e:
                    raise e.in_line(hline, hline_no) from None
                except Exception:  # noqa: BLE001 - as for an op line
                    if stack:
                        raise
                    raise _Resume(prog, b, *here, hpre) from None
                op.src = hline
                op.indent = ind
                op.dirty = False
                op.pre = hpre
                block = parent
                block.append(op)
                if not stack:
                    last = here
                continue
            if stack:
                raise _Fallback
            raise _Resume(prog, b, *here, pre)
        else:
            if stack:
                raise _Fallback  # no closing line
            # cut short after a top-level op: the grammar reads that op on again, to say where
            raise _Resume(prog, b, *last, pre, at_end=True)
        if stack:
            raise _Fallback
        if regular:
            self.facts = b.canonical, sorted_ok and not reader.unsorted
        return prog

