"""The grammar path: the whole text parsed with the Lark grammar, op trees walked in order.  It
produces every error message, with exact lines and columns."""

from __future__ import annotations

from ...ir.core import Block, Operation, Program, Region
from ..diagnostics import DiagnosticError
from .fast import _CLOSE, _ELSE, _OP, _REGION_OP, _TRIVIA, lark_parser
from .names import Builder

MAX_DEPTH = 100  # regions inside regions: deeper is an error, not a RecursionError


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
        _attach_trivia(prog.block.ops, prog, lines, first_line, close_line)
        return prog

    def resume(self, text: str, r) -> Program | None:
        """Read on where the fast path stopped (``r``: its :class:`_Resume`), with its builder and
        program; ``None`` if the grammar reads the whole text after all (it should not)."""
        from lark import Tree

        from ..grammar import lark_errors

        rest = "\n" * r.line + text[r.offset:]  # the same line numbers as the whole text
        try:
            tree = lark_parser().parse(rest, start="rest_ops" if r.prog.block.ops else "rest")
        except Exception as e:  # noqa: BLE001 - every Lark error becomes a located diagnostic
            raise lark_errors(e) from None
        if r.at_end:
            return None
        prog, b = r.prog, r.builder
        lines = rest.split("\n")
        for c in tree.children:
            if isinstance(c, Tree) and c.data in ("block_args", "block_kwargs"):
                self._block_header(b, prog.block, c)
        new = []
        for c in tree.children:
            if isinstance(c, Tree) and c.data in ("op", "op_bare"):
                new.append(prog.block.append(self._op(b, c, lines)))
        close_line = self._close_line(lines)
        prog.tail = "\n".join(lines[close_line - 1:])
        _attach_trivia(new, prog, lines, r.line, close_line, r.pre)
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
        args = [(str(arg.children[0])[1:], arg.children[1], arg.children[0].line, arg.children[0].column)
                for arg in h.children if arg is not None]
        b.define_args(block, args, h.data == "block_kwargs")

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
        elif regions and not inline_args and _REGION_OP.fullmatch(text):
            op.src = text  # a region op's header line, as the fast path keeps it
            op.dirty = False
        return op

    def _region(self, b: Builder, r: Tree, lines) -> Region:
        from lark import Tree
        region = Region()
        block = region.add_block(Block())
        b.push()
        if len(b.scopes) > MAX_DEPTH + 1:  # a program, not a stack overflow, says where
            first = next((c for c in r.children if isinstance(c, Tree) and c.data in ("op", "op_bare")), None)
            tok = first.children[1] if first is not None else None
            raise DiagnosticError(f"regions nested more than {MAX_DEPTH} deep (Paddle nests a few)",
                                  getattr(tok, "line", None), getattr(tok, "column", None))
        for c in r.children:
            if isinstance(c, Tree) and c.data in ("block_args", "block_kwargs"):
                self._block_header(b, block, c)
            elif isinstance(c, Tree):
                block.append(self._op(b, c, lines))
        b.pop()
        return region


def _attach_trivia(top_ops, prog: Program, lines: list[str], first: int, close: int, pre=()) -> None:
    """Give ops (``top_ops`` and the ops inside them) the comment and blank lines that stand before
    them (full path), after ``pre`` (trivia the fast path read before the first of them); those
    before a region's closing line are its block's ``post``, as the fast path reads them."""
    trivia = {k for k in range(first + 1, close) if _TRIVIA.fullmatch(lines[k - 1])}
    ops = [op for top in top_ops for op in top.walk() if op.loc]
    ops.sort(key=lambda o: o.loc[0])
    posts: dict[int, list] = {}  # trivia line -> the post list of the region block it closes
    for op in ops:
        start = op.loc[0]  # the line before the region's first op: the header or the last '} else {'
        for region in op.regions:
            for blk in region.blocks:
                end = max((o.loc[0] for o in blk.ops for o in o.walk() if o.loc), default=start)
                k = end + 1
                blk.post = []
                while k in trivia:
                    posts[k] = blk.post
                    k += 1
                if k <= len(lines) and (_CLOSE.fullmatch(lines[k - 1]) or _ELSE.fullmatch(lines[k - 1])):
                    region.close_src = lines[k - 1]  # its closing line as written
                start = k
    if not trivia and not pre:
        return
    prev = first
    for op in ops:
        op.pre = [*pre, *(lines[k - 1] for k in range(prev + 1, op.loc[0]) if k in trivia and k not in posts)]
        pre = ()
        prev = op.loc[0]
    for k in sorted(posts):
        posts[k].append(lines[k - 1])
    prog.block.post = [*pre, *(lines[k - 1] for k in range(prev + 1, close) if k in trivia and k not in posts)]
