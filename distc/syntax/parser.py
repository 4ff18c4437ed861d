"""Parsing PIR text into a :class:`~distc.ir.Program`.

Two paths build the same IR through one :class:`Builder`:

* the **fast path** reads ordinary op lines with one regular expression and parses the type lists
  and attribute dictionaries through caches (a real dump repeats a few dozen type spellings and
  dist attributes thousands of times); anything it has not seen before is parsed by the grammar's
  ``type_list``/``attr`` rules;
* the **full path** parses the whole text with the Lark grammar.  It runs whenever the fast path
  meets a line it does not know, and it produces every error message, so diagnostics always
  come from the grammar, with exact lines and columns.

``tests/test_parser_paths.py`` checks that both paths give identical IR.
"""

from __future__ import annotations

import re
from typing import Callable

from ..ir import attrs as A
from ..ir.core import Block, BlockArgument, Operation, Program, Region, Value
from ..ir.dist import TensorDistAttr
from ..ir.types import NULL_TYPE, DenseTensorType, DistTensorType
from .diagnostics import DiagnosticError
from .style import Style

_number = A.number_attr


def lark_parser():
    """The grammar's parser, loaded on first use (ordinary dumps may never need it)."""
    from .grammar import lark_parser as lp

    return lp()


class _Fallback(Exception):
    """The fast path cannot read this text; use the grammar."""


# ------------------------------------------------------------------------------------- builder
class Builder:
    """Creates operations from parsed pieces, resolving value names in nested scopes."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Value]] = [{}]
        self.top: Block | None = None

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def lookup(self, name: str) -> Value | None:
        for s in reversed(self.scopes):
            v = s.get(name)
            if v is not None:
                return v
        return None

    def define(self, name: str, value: Value, line=None, col=None) -> None:
        if self.lookup(name) is not None:
            raise DiagnosticError(f"value %{name} is defined twice", line, col)
        self.scopes[-1][name] = value
        value.name = name

    def build(self, results, name, op_id, operands, attrs, in_types, out_types, sig, regions, line, col,
              inline_args=None) -> Operation:
        """``results``: [(name, line, col)]; ``operands``: [(name|None, keyword|None, line, col)]."""
        if sig == "none":  # pd_op.while prints no types: its results carry the loop values' types
            out_types = None
        elif len(out_types) != len(results):
            raise DiagnosticError(
                f"'{name}' has {len(results)} result(s) but {len(out_types)} result type(s)", line, col)
        if in_types is not None and len(in_types) != len(operands):
            raise DiagnosticError(
                f"'{name}' has {len(operands)} operand(s) but {len(in_types)} operand type(s)", line, col)
        values: list[Value | None] = []
        kws = []
        for i, (vname, kw, vl, vc) in enumerate(operands):
            if kw is not None:
                kws.append((i, kw))
            if vname is None:
                if in_types is not None and in_types[i] is not NULL_TYPE:
                    raise DiagnosticError(f"<<NULL VALUE>> operand {i} of '{name}' has a non-null type", vl, vc)
                values.append(None)
                continue
            v = self.lookup(vname)
            if v is None and inline_args and i in inline_args:
                if in_types is None:
                    raise DiagnosticError(f"block argument %{vname} needs a type", vl, vc)
                v = self.top.add_argument(in_types[i], vname, attrs=inline_args[i])
                self.scopes[0][vname] = v
            elif v is None:
                raise DiagnosticError(f"use of undefined value %{vname}", vl, vc)
            elif v._type is NULL_TYPE and isinstance(v, BlockArgument) and in_types is not None:
                v._type = in_types[i]  # block arguments print no type: learn it from the first use
            if in_types is not None and in_types[i] != v.type:
                raise DiagnosticError(
                    f"operand {i} of '{name}' is declared as {in_types[i]} but %{vname} has type {v.type}", vl, vc)
            values.append(v)
        if out_types is None:
            carried = values[len(values) - len(results):] if len(results) <= len(values) else []
            out_types = [v.type if v is not None else NULL_TYPE for v in carried]
            if len(out_types) != len(results):
                raise DiagnosticError(f"'{name}' has {len(results)} result(s) but {len(values)} operand(s)", line, col)
        od = attrs.get("op_dist_attr")
        if od is not None and not isinstance(od, A.IdentAttr):
            _check_op_dist(name, od, values, out_types, line, col)
        op = Operation(name, values, out_types, attrs, regions, op_id=op_id,
                       operand_keywords=tuple(kws), sig=sig)
        op.loc = (line, col)
        for r, (rname, rl, rc) in zip(op.results, results):
            self.define(rname, r, rl, rc)
        return op


def _check_op_dist(name, od, values, out_types, line, col) -> None:
    """Each op_dist_attr entry must fit the rank of its value (the entry counts may differ:
    Paddle's own dumps leave some entries out)."""
    for kind, entries, types in (("operand", od.operands, [v.type if v is not None else None for v in values]),
                                 ("result", od.results, out_types)):
        for i, (e, t) in enumerate(zip(entries, types)):
            if isinstance(e, TensorDistAttr) and not e.is_empty and e.form != "maping" \
                    and isinstance(t, DistTensorType) and len(e.dims_mapping) != t.rank:
                raise DiagnosticError(
                    f"'{name}': op_dist_attr {kind}({i}) has dims_mapping {list(e.dims_mapping)} for a "
                    f"tensor of rank {t.rank}", line, col)


# ------------------------------------------------------------------------------------- fast path
_OP = re.compile(
    r'([ \t]*)\(([^()]*)\) = "([^"]+)"(?: \[id:(\d+)\])? \(([^()=]*)\) \{(.*)\} : \((.*)\) -> (.*?)[ \t]*'
)
_REGION_OP = re.compile(
    r'([ \t]*)\(([^()]*)\) = "([^"]+)"(?: \[id:(\d+)\])? \(([^()=]*)\) \{(.*)\} -> (.*?) \{[ \t]*'
)
_CLOSE = re.compile(r"[ \t]*\}[ \t]*")
_ELSE = re.compile(r"[ \t]*\} else \{[ \t]*")
_TRIVIA = re.compile(r"[ \t]*(//.*)?")
_SIMPLE_ITEM = re.compile(
    r'([A-Za-z_]\w*):(?:"((?:[^"\\]|\\.)*)"|(-?\d+)|(true|false)|\[((?:true|false)(?:,(?:true|false))*)\]'
    r'|\[(-?\d+(?:,-?\d+)*)?\]|(Place\([^()\s]*\))|([A-Za-z_][\w.]*)'
    r'|([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+](?:inf|nan)))',
    re.S,
)


def _simple_item(item: str):
    """The common attribute forms, read without the grammar (same values as the grammar gives)."""
    m = _SIMPLE_ITEM.fullmatch(item)
    if m is None:
        return None
    key = m.group(1)
    if key == "op_dist_attr":
        return None
    s, i, b, bl, il, pl, name, num = m.group(2, 3, 4, 5, 6, 7, 8, 9)
    if s is not None:
        return key, A.StrAttr(s)
    if i is not None:
        return key, _number(i)
    if b is not None:
        return key, A.BoolAttr(b == "true")
    if bl is not None:
        return key, A.ArrayAttr(tuple(A.BoolAttr(x == "true") for x in bl.split(",")))
    if pl is not None:
        return key, A.PlaceAttr(pl, tagged=False)
    if name is not None:
        return key, A.IdentAttr(name)
    if num is not None:
        return key, _number(num)
    if il is not None:
        return key, A.ArrayAttr(tuple(A.IntAttr(int(x)) for x in il.split(",")))
    return key, A.ArrayAttr(())


class FastParser:
    """Line-at-a-time parser for ordinary dumps, with caches shared across calls."""

    def __init__(self) -> None:
        self.types: dict[str, list] = {}
        self.attr_dicts: dict[str, dict] = {}
        self.items: dict[str, tuple] = {}
        self.dist: dict[str, object] = {}
        self._lark_inst = None

    @property
    def _lark(self):
        if self._lark_inst is None:
            self._lark_inst = lark_parser()
        return self._lark_inst

    def type_list(self, text: str) -> list:
        t = self.types.get(text)
        if t is None:
            if not text:
                t = []
            else:
                t = _fast_type_list(text)
                if t is None:
                    t = self._lark.parse(text, start="type_list")
            self.types[text] = t
        return t

    def attr_dict(self, text: str) -> dict:
        d = self.attr_dicts.get(text)
        if d is not None:
            return d
        d = {}
        for item in self._split_items(text):
            kv = self.items.get(item)
            if kv is None:
                kv = self._item(item)
            k, v = kv
            if k in d:
                raise _Fallback
            d[k] = v
        if len(self.attr_dicts) < 200_000:
            self.attr_dicts[text] = d
        return d

    def _item(self, item: str) -> tuple:
        kv = _simple_item(item)
        if kv is None and item.startswith("op_dist_attr:{"):
            od = _fast_op_dist(item[13:])
            if od is not None:
                kv = "op_dist_attr", od
        if kv is None:
            k, v, _tok = self._lark.parse(item, start="attr")
            kv = k, v
        if len(self.items) < 100_000:
            self.items[item] = kv
        return kv

    @staticmethod
    def _split_items(text: str) -> list[str]:
        """Split an attribute dict body at its top-level commas."""
        if not text:
            return []
        i = text.find("op_dist_attr:{")
        if i < 0 or (i > 0 and text[i - 1] != ","):
            return _split_general(text)
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
        out = _split_general(text[: i - 1]) if i > 0 else []
        out.append(text[i:j])
        if j < len(text):
            out.extend(_split_general(text[j + 1:]))
        return out

    def parse(self, text: str, filename: str | None, progress=None) -> Program:
        lines = text.split("\n")
        b = Builder()
        prog = Program(filename=filename)
        b.top = prog.block
        # head: everything up to the line that opens the program
        i = 0
        pre: list[str] = []
        while i < len(lines) and _TRIVIA.fullmatch(lines[i]):
            i += 1
        if i >= len(lines):
            raise _Fallback
        first = lines[i]
        stripped = first.rstrip(" \t")
        if not stripped.endswith("{") or "{" in stripped[:-1] or "(" in stripped[:-1]:
            raise _Fallback
        prog.head = "\n".join(lines[: i + 1]) + "\n"
        i += 1
        stack: list[tuple] = []  # (header fields, regions, current block) for open region ops
        block = prog.block
        OP = _OP.fullmatch
        REG = _REGION_OP.fullmatch
        types = self.type_list
        attr_dict = self.attr_dict
        nlines = len(lines)
        step = max(1000, nlines // 100)
        next_report = step
        offset_per_line = len(text) / max(nlines, 1)
        while i < nlines:
            if progress is not None and i >= next_report:
                progress(int(i * offset_per_line))
                next_report += step
            line = lines[i]
            m = OP(line)
            if m is not None:
                ind, res, name, oid, opnds, attrs, tin, tout = m.groups()
                op = b.build(
                    [(r[1:], i + 1, 0) for r in res.split(", ")] if res else [],
                    name, int(oid) if oid else None,
                    [(None if o == "<<NULL VALUE>>" else _vname(o), None, i + 1, 0) for o in opnds.split(", ")] if opnds else [],
                    attr_dict(attrs), types(tin), types(tout), "full", (), i + 1, len(ind) + 1,
                )
                op.src = line
                op.indent = ind
                op.dirty = False
                if pre:
                    op.pre = pre
                    pre = []
                block.append(op)
                i += 1
                continue
            if _TRIVIA.fullmatch(line):
                pre.append(line)
                i += 1
                continue
            m = REG(line)
            if m is not None:
                stack.append((m.groups(), [], block, line, pre, i + 1))
                pre = []
                region = Region()
                block = region.add_block(Block())
                stack[-1][1].append(region)
                region.open_src = line
                b.push()
                i += 1
                continue
            if _ELSE.fullmatch(line) and stack:
                regions = stack[-1][1]
                block.post = pre
                pre = []
                regions[-1].close_src = line
                b.pop()
                region = Region()
                block = region.add_block(Block())
                regions.append(region)
                b.push()
                i += 1
                continue
            if _CLOSE.fullmatch(line):
                block.post = pre
                pre = []
                if not stack:
                    prog.tail = "\n".join(lines[i:])
                    if any(not _TRIVIA.fullmatch(x) for x in lines[i + 1:]):
                        raise _Fallback
                    break
                b.pop()
                (ind, res, name, oid, opnds, attrs, tout), regions, parent, hline, hpre, hline_no = stack.pop()
                regions[-1].close_src = line
                op = b.build(
                    [(r[1:], hline_no, 0) for r in res.split(", ")] if res else [],
                    name, int(oid) if oid else None,
                    [(None if o == "<<NULL VALUE>>" else _vname(o), None, hline_no, 0) for o in opnds.split(", ")] if opnds else [],
                    attr_dict(attrs), None, types(tout), "results", regions, hline_no, len(ind) + 1,
                )
                op.src = hline
                op.indent = ind
                op.dirty = False
                op.pre = hpre
                block = parent
                block.append(op)
                i += 1
                continue
            raise _Fallback
        else:
            raise _Fallback  # no closing line
        if stack:
            raise _Fallback
        return prog


_TYPE = re.compile(
    r"(?:pd_dist\.tensor<((?:-?\d+x)*)([a-z][a-z0-9_]*), mesh_shape:\[([\d,]*)\],process_ids:\[([\d,]*)\],"
    r"dims_mappings:\[([-\d,]*)\]((?:, partial\(\d+,[A-Z]+\)(?:,partial\(\d+,[A-Z]+\))*)?)"
    r"(, placements:\[[^\]]*\])?>"
    r"|([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)<((?:-?\d+x)*)([a-z][a-z0-9_]*)>|(<<NULL TYPE>>))(, |$)"
)
_PARTIAL = re.compile(r"partial\((\d+),([A-Z]+)\)")
_PLACEMENT = re.compile(r"Shard\(dim=(\d+)\)|Replicate\(\)|Partial\(reduce_type=([A-Z]+)\)")


def _ints_of(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",")) if text else ()


_TDIST = re.compile(
    r"mesh_shape:\[([\d,]*)\],process_ids:\[([\d,]*)\],dims_mappings:\[([-\d,]*)\]"
    r"((?:, partial\(\d+,[A-Z]+\)(?:,partial\(\d+,[A-Z]+\))*)?)(, placements:\[[^\]]*\])?"
)


def _fast_tdist(m) -> "TensorDistAttr | None":
    """A tensor dist attr from a ``_TDIST`` match (``None``: let the grammar decide)."""
    from ..ir.dist import REDUCE_TYPES, Placement, ProcessMesh, TensorDistAttr

    mshape, pids, dm, partial, pl = m.groups()
    try:
        mesh = ProcessMesh(_ints_of(mshape), _ints_of(pids))
    except ValueError:
        return None
    dmap = _ints_of(dm)
    parts = tuple((int(a), b) for a, b in _PARTIAL.findall(partial)) if partial else ()
    if any(m_ < -1 or (m_ >= mesh.ndim and mesh.shape) for m_ in dmap) \
            or any(d >= mesh.ndim or r not in REDUCE_TYPES for d, r in parts):
        return None
    attr = TensorDistAttr(mesh, dmap, parts, form="full", placements_shown=pl is not None)
    if pl is not None:
        given = []
        body = pl[len(", placements:["):-1]
        for pm in _PLACEMENT.finditer(body):
            if pm.group(1) is not None:
                given.append(Placement("S", int(pm.group(1))))
            elif pm.group(2) is not None:
                given.append(Placement("P", -1, pm.group(2)))
            else:
                given.append(Placement("R"))
        given_t = tuple(given)
        if ", ".join(map(str, given_t)) != body:
            return None
        if given_t != attr.placements:
            if not attr.consistent(given_t):
                return None
            attr = TensorDistAttr(mesh, dmap, parts, form="full", placements_shown=True, given=given_t)
    return attr


def _fast_type_list(text: str):
    """The common type spellings without the grammar (``None``: let the grammar read it).  Gives
    the same objects as the grammar's ``type`` rules; the differential tests hold it to that."""
    from ..ir.types import DenseTensorType, DistTensorType

    out = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _TYPE.match(text, pos)
        if m is None:
            return None
        dshape, ddtype, prefix, shape, dtype, null, sep = m.group(1, 2, 8, 9, 10, 11, 12)
        if null:
            out.append(NULL_TYPE)
        elif prefix is not None:
            if prefix in ("vec", "pd_dist.tensor"):
                return None
            out.append(DenseTensorType(tuple(int(x) for x in shape[:-1].split("x")) if shape else (), dtype, prefix))
        else:
            dims = tuple(int(x) for x in dshape[:-1].split("x")) if dshape else ()
            tm = _TDIST.fullmatch(text, m.start(3) - len("mesh_shape:["), m.end(7) if m.group(7) else m.end(6))
            attr = _fast_tdist(tm) if tm is not None else None
            if attr is None or len(attr.dims_mapping) != len(dims) or not attr.mesh.shape:
                return None
            out.append(DistTensorType(dims, ddtype, attr))
        pos = m.end()
        if not sep and pos < n:
            return None
    return out


_OD = re.compile(r"\{mesh:\{shape:\[([\d,]*)\],process_ids:\[([\d,]*)\]\}((?:,(?:operand|result)\(\d+\):\{[^{}]*\})*)"
                 r"(?:,chunk_id:(-?\d+))?\}")
_OD_ENTRY = re.compile(r",(operand|result)\((\d+)\):\{([^{}]*)\}")


def _fast_op_dist(text: str):
    """``op_dist_attr`` values in the F2-F4 formats without the grammar (``None``: use it)."""
    from ..ir.dist import EMPTY_MESH, OperationDistAttr, ProcessMesh, TensorDistAttr, VecDistAttr

    m = _OD.fullmatch(text)
    if m is None:
        return None
    try:
        mesh = ProcessMesh(_ints_of(m.group(1)), _ints_of(m.group(2)))
    except ValueError:
        return None
    lists: dict[str, list] = {"operand": [], "result": []}
    for e in _OD_ENTRY.finditer(m.group(3)):
        kind, idx, body = e.groups()
        lst = lists[kind]
        if int(idx) != len(lst):
            return None
        if not body:
            lst.append(TensorDistAttr(EMPTY_MESH, (), form="blank"))
            continue
        vec = body[0] == "["
        if vec:
            if body[-1] != "]":
                return None
            body = body[1:-1]
        items = []
        pos = 0
        while pos < len(body):
            tm = _TDIST.match(body, pos)
            if tm is None:
                return None
            a = _fast_tdist(tm)
            if a is None:
                return None
            items.append(a)
            pos = tm.end()
            if pos < len(body):
                if body[pos] != "," or not vec:
                    return None
                pos += 1
        if vec:
            lst.append(VecDistAttr(tuple(items)))
        elif len(items) == 1:
            lst.append(items[0])
        else:
            return None
    chunk = int(m.group(4)) if m.group(4) is not None else None
    return OperationDistAttr(mesh, tuple(lists["operand"]), tuple(lists["result"]), chunk)


_SCAN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]()<>,]')
_BRACES = re.compile(r"[{}]")


def _split_general(text: str) -> list[str]:
    if "," not in text:
        return [text] if text else []
    out = []
    start = 0
    depth = 0
    for m in _SCAN.finditer(text):
        c = m.group()
        if c[0] == '"':
            continue
        if c in "{[(<":
            depth += 1
        elif c in "}])>":
            depth -= 1
        elif depth == 0:
            out.append(text[start:m.start()])
            start = m.end()
    out.append(text[start:])
    return out


def _vname(tok: str) -> str:
    if not tok.startswith("%") or " " in tok:
        raise _Fallback
    return tok[1:]


# ------------------------------------------------------------------------------------- full path
class FullParser:
    """Parses with the Lark grammar and walks the op trees in order."""

    def parse(self, text: str, filename: str | None) -> Program:
        from lark import Token, Tree

        from .grammar import lark_errors

        try:
            tree = lark_parser().parse(text, start="start")
        except Exception as e:  # noqa: BLE001 - every Lark error becomes a located diagnostic
            raise lark_errors(e) from None
        b = Builder()
        prog = Program(filename=filename)
        b.top = prog.block
        lines = text.split("\n")
        children = list(tree.children)
        banner = None
        if children and isinstance(children[0], Token) and children[0].type == "BANNER":
            banner = children.pop(0)
        ops = [c for c in children if isinstance(c, Tree) and c.data in ("op", "op_bare")]
        headers = [c for c in children if isinstance(c, Tree) and c.data in ("block_args", "block_kwargs")]
        for h in headers:
            self._block_header(b, prog.block, h)
        first_line = self._open_line(text, banner)
        prog.head = "\n".join(lines[:first_line]) + "\n"
        for t in ops:
            prog.block.append(self._op(b, t, lines))
        close_line = self._close_line(lines)
        prog.tail = "\n".join(lines[close_line - 1:])
        _attach_trivia(prog, lines, first_line, close_line)
        return prog

    @staticmethod
    def _open_line(text: str, banner) -> int:
        start = banner.end_pos if banner is not None else 0
        brace = text.index("{", start)
        return text.count("\n", 0, brace) + 1

    @staticmethod
    def _close_line(lines: list[str]) -> int:
        for k in range(len(lines) - 1, -1, -1):
            if lines[k].strip().startswith("}"):
                return k + 1
        return len(lines)

    def _block_header(self, b: Builder, block: Block, h: Tree) -> None:
        kw = h.data == "block_kwargs"
        for arg in h.children:
            if arg is None:
                continue
            tok, attrs = arg.children
            name = str(tok)[1:]
            keyword = name[len("kwarg_"):] if kw and name.startswith("kwarg_") else (name if kw else None)
            v = block.add_argument(NULL_TYPE, name, keyword=keyword, attrs=attrs or {})
            v.attrs_shown = attrs is not None  # type: ignore[attr-defined]
            b.define(name, v, tok.line, tok.column)
        block.dirty = False

    def _op(self, b: Builder, t: Tree, lines: list[str]) -> Operation:
        from lark import Token
        ch = t.children
        results_t, name_tok, op_id_t, operands_t = ch[0], ch[1], ch[2], ch[3]
        if t.data == "op":
            attrs, sig_t, regions_t = ch[4], ch[5], ch[6]
        else:
            attrs, sig_t, regions_t = {}, None, ch[4]
        results = [(str(v)[1:], v.line, v.column) for v in results_t.children if v is not None]
        operands = []
        inline_args = {}
        for k, o in enumerate(operands_t.children if operands_t is not None else []):
            if o.data == "operand_null":
                tok = o.children[0]
                operands.append((None, None, tok.line, tok.column))
            elif o.data == "operand_keyword":
                kw, tok = o.children
                operands.append((str(tok)[1:], str(kw), tok.line, tok.column))
            else:
                tok = o.children[0]
                operands.append((str(tok)[1:], None, tok.line, tok.column))
                if o.data == "operand_arg":
                    inline_args[k] = o.children[1]
        if sig_t is None:
            in_types, out_types, sig = None, None, "none"
        elif sig_t.data == "sig_full":
            in_types, out_types, sig = sig_t.children[0] or [], sig_t.children[1] or [], "full"
        else:
            in_types, out_types, sig = None, sig_t.children[0] or [], "results"
        if in_types is None and t.data == "op_bare":
            pass
        regions = []
        if regions_t is not None:
            for r in regions_t.children:
                if isinstance(r, Token):
                    continue
                regions.append(self._region(b, r, lines))
        line, col = name_tok.line, name_tok.column
        # the op starts at its result list: report positions from the line's first token
        text = lines[line - 1]
        ind = text[: len(text) - len(text.lstrip(" \t"))]
        op = b.build(results, str(name_tok)[1:-1], int(op_id_t.children[0]) if op_id_t is not None else None,
                     operands, attrs or {}, in_types, out_types, sig, regions, line, len(ind) + 1,
                     inline_args=inline_args)
        op.indent = ind
        if t.data == "op_bare":
            op.sig = "none"
        return op

    def _region(self, b: Builder, r: Tree, lines) -> Region:
        from lark import Tree
        region = Region()
        block = region.add_block(Block())
        b.push()
        for c in r.children:
            if isinstance(c, Tree) and c.data in ("block_args", "block_kwargs"):
                self._block_header(b, block, c)
            elif isinstance(c, Tree):
                block.append(self._op(b, c, lines))
        b.pop()
        return region


def _attach_trivia(prog: Program, lines: list[str], first: int, close: int) -> None:
    """Give ops the comment and blank lines that stand before them (full path)."""
    trivia = {k for k in range(first + 1, close) if _TRIVIA.fullmatch(lines[k - 1])}
    if not trivia:
        return
    ops = [op for op in prog.walk() if op.loc]
    ops.sort(key=lambda o: o.loc[0])
    prev = first
    for op in ops:
        op.pre = [lines[k - 1] for k in range(prev + 1, op.loc[0]) if k in trivia]
        prev = op.loc[0]
    prog.block.post = [lines[k - 1] for k in range(prev + 1, close) if k in trivia]


# ------------------------------------------------------------------------------------- entry
_FAST: FastParser | None = None


def parse(text: str, filename: str | None = None, *, fast: bool = True, progress=None) -> Program:
    """Parse PIR text.  Errors raise :class:`DiagnosticError` located in ``filename``.

    ``progress``, if given, is called now and then with the number of characters read."""
    global _FAST
    prog = None
    if fast:
        if _FAST is None:
            _FAST = FastParser()
        try:
            prog = _FAST.parse(text, filename, progress)
        except (_Fallback, DiagnosticError, Exception):  # noqa: BLE001 - the grammar decides
            prog = None
    if prog is None:
        try:
            prog = FullParser().parse(text, filename)
        except DiagnosticError as e:
            raise e.located(filename, text) from None
    prog.style = detect_style(text, prog)
    return prog


def detect_style(text: str, prog: Program) -> Style:
    s = Style()
    head = text[:200_000]
    s.typed_attrs = any(t in head for t in ("(Int32)", "(Int64)", "(pd_op.", "(Float)", "(Double)", "(Bool)"))
    if "builtin.tensor<" in head:
        s.tensor_prefix = "builtin.tensor"
    elif "pd_op.tensor<" in head:
        s.tensor_prefix = "pd_op.tensor"
    has_dist = "pd_dist.tensor<" in head
    s.placements = ("placements:[" in head) if has_dist else not s.typed_attrs
    s.chunk_id = (",chunk_id:" in head) if "op_dist_attr:{" in head else not s.typed_attrs
    if has_dist and "process_ids:" not in head.split("pd_dist.tensor<", 1)[1][:300]:
        s.dist_form = "nopids"
    s.double_fill = "(Float)" not in head or "(Double)" in head
    sorted_ok = True
    canonical = True
    n = 0
    for op in prog.walk():
        keys = list(op.attrs)
        if sorted_ok and keys != sorted(keys):
            sorted_ok = False
        for r in op.results:
            if r.name is not None and r.name.isdigit():
                if r.name != str(n):
                    canonical = False
                n += 1
            elif r.name is not None and not _NAMED.fullmatch(r.name):
                canonical = False
    s.sorted_attrs = sorted_ok
    s.renumber = canonical
    for op in prog.block.ops:
        if op.indent is not None:
            s.indent = op.indent or "    "
            break
    return s


_NAMED = re.compile(r"[A-Za-z_][\w.@]*")
