"""The grammar path: the whole text parsed with the Lark grammar, op trees walked in order.  It
produces every error message, with exact lines and columns."""

from __future__ import annotations

from ...ir.core import Block, Operation, Program, Region
from ...ir.types import NULL_TYPE
from .fast import _OP, _TRIVIA, lark_parser
from .names import Builder


class FullParser:
    """Parses with the Lark grammar and walks the op trees in order."""

    def parse(self, text: str, filename: str | None) -> Program:
        from lark import Token, Tree

        from ..grammar import lark_errors

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
        elif not regions and not inline_args and _OP.fullmatch(text):
            op.src = text  # one op on its line: it prints back as written (e.g. '->' with no space)
            op.dirty = False
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

