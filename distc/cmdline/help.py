"""Help pages and usage lines of :mod:`distc.cmdline`'s commands, laid out as click 8
lays them out (imported only when one is shown).

The width is the terminal's (``COLUMNS``, else 80 off a terminal) up to the context's
``max_content_width``, less 2, and at least 50.  Paragraphs are rewrapped; one whose first line is
``\\b`` is kept as it is written (the exit-status tables of the epilogs)."""

from __future__ import annotations

import textwrap
from contextlib import contextmanager

from .params import UNSET, Argument, Option, _Range, _split_opt


def cleandoc(text: str) -> str:
    """A docstring without its indentation and its blank first and last lines."""
    lines = text.expandtabs().split("\n")
    indents = [len(x) - len(x.lstrip()) for x in lines[1:] if x.lstrip()]
    margin = min(indents) if indents else 0
    lines = [lines[0].lstrip(), *(x[margin:] for x in lines[1:])]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


class _Wrapper(textwrap.TextWrapper):
    """A word longer than the line is cut where the line ends, at least one character a line
    (not at a hyphen inside it)."""

    def _handle_long_word(self, reversed_chunks, cur_line, cur_len, width) -> None:
        space_left = max(width - cur_len, 1)
        if self.break_long_words:
            last = reversed_chunks[-1]
            cur_line.append(last[:space_left])
            reversed_chunks[-1] = last[space_left:]
        elif not cur_line:
            cur_line.append(reversed_chunks.pop())


def wrap_text(text: str, width: int = 78, initial_indent: str = "", subsequent_indent: str = "",
              preserve_paragraphs: bool = False) -> str:
    text = text.expandtabs()
    wrapper = _Wrapper(width, initial_indent=initial_indent, subsequent_indent=subsequent_indent,
                       replace_whitespace=False)
    if not preserve_paragraphs:
        return wrapper.fill(text)
    paragraphs: list[tuple[int, bool, str]] = []
    buf: list[str] = []
    indent = None

    def flush() -> None:
        if buf:
            raw = buf[0].strip() == "\b"
            paragraphs.append((indent or 0, raw, "\n".join(buf[1:]) if raw else " ".join(buf)))
            buf.clear()

    for line in text.splitlines():
        if not line:
            flush()
            indent = None
        else:
            if indent is None:
                stripped = line.lstrip()
                indent, line = len(line) - len(stripped), stripped
            buf.append(line)
    flush()
    out = []
    first, rest = wrapper.initial_indent, wrapper.subsequent_indent
    for indent, raw, par in paragraphs:
        wrapper.initial_indent, wrapper.subsequent_indent = first + " " * indent, rest + " " * indent
        if raw:
            out.append("\n".join((wrapper.subsequent_indent if i else wrapper.initial_indent) + x
                                 for i, x in enumerate(par.splitlines())))
        else:
            out.append(wrapper.fill(par))
    return "\n\n".join(out)


class HelpFormatter:
    """Text laid out ``width`` columns wide: usage line, headings, paragraphs, two-column lists."""

    def __init__(self, width: int | None = None, max_width: int | None = None, indent_increment: int = 2) -> None:
        if width is None:
            import shutil

            width = max(min(shutil.get_terminal_size().columns, max_width or 80) - 2, 50)
        self.width, self.indent_increment, self.current_indent = width, indent_increment, 0
        self.buffer: list[str] = []

    def write(self, text: str) -> None:
        self.buffer.append(text)

    def getvalue(self) -> str:
        return "".join(self.buffer)

    @contextmanager
    def indentation(self):
        self.current_indent += self.indent_increment
        try:
            yield
        finally:
            self.current_indent -= self.indent_increment

    @contextmanager
    def section(self, name: str):
        self.write_paragraph()
        self.write(f"{'':>{self.current_indent}}{name}:\n")
        with self.indentation():
            yield

    def write_paragraph(self) -> None:
        if self.buffer:
            self.write("\n")

    def write_usage(self, prog: str, args: str = "", prefix: str = "Usage: ") -> None:
        usage_prefix = f"{prefix:>{self.current_indent}}{prog} "
        text_width = self.width - self.current_indent
        if not args:
            self.write(usage_prefix.rstrip(" ") + "\n")
            return
        if text_width >= len(usage_prefix) + 20:  # the arguments fit to the right of the prefix
            self.write(wrap_text(args, text_width, initial_indent=usage_prefix,
                                 subsequent_indent=" " * len(usage_prefix)))
        else:
            indent = " " * (max(self.current_indent, len(prefix)) + 4)
            self.write(usage_prefix + "\n" + wrap_text(args, text_width, initial_indent=indent,
                                                       subsequent_indent=indent))
        self.write("\n")

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write(wrap_text(text, self.width, initial_indent=indent, subsequent_indent=indent,
                             preserve_paragraphs=True) + "\n")

    def write_dl(self, rows: list[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        first_col = min(max(len(a) for a, _ in rows), col_max) + col_spacing
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + " " * (first_col + self.current_indent))
            lines = wrap_text(second, max(self.width - first_col - 2, 10), preserve_paragraphs=True).splitlines()
            if lines:
                self.write(lines[0] + "\n")
                for line in lines[1:]:
                    self.write(f"{'':>{first_col + self.current_indent}}{line}\n")
            else:
                self.write("\n")


def _formatter(ctx: Context) -> HelpFormatter:
    return HelpFormatter(max_width=ctx.max_content_width)


def _write_usage(ctx: Context, f: HelpFormatter) -> None:
    f.write_usage(ctx.command_path, " ".join(ctx.command.collect_usage_pieces(ctx)))


def usage(ctx: Context) -> str:
    f = _formatter(ctx)
    _write_usage(ctx, f)
    return f.getvalue().rstrip("\n")


def help_page(ctx: Context) -> str:
    """``--help``: usage, the command's text, its options, (a group's commands), its epilog."""
    cmd, f = ctx.command, _formatter(ctx)
    _write_usage(ctx, f)
    text = cleandoc(cmd.help).partition("\f")[0] if cmd.help is not None else ""
    if text:
        f.write_paragraph()
        with f.indentation():
            f.write_text(text)
    args = [p for p in cmd.get_params(ctx) if isinstance(p, Argument)]
    if any(p.help is not None for p in args):
        with f.section("Positional arguments"):
            f.write_dl([(p.make_metavar(), p.help or "") for p in args])
    opts = [r for p in cmd.get_params(ctx) if isinstance(p, Option) for r in [option_record(p, ctx)] if r]
    if opts:
        with f.section("Options"):
            f.write_dl(opts)
    if hasattr(cmd, "format_commands"):
        cmd.format_commands(ctx, f)
    if cmd.epilog:
        f.write_paragraph()
        with f.indentation():
            f.write_text(cleandoc(cmd.epilog))
    return f.getvalue().rstrip("\n")


def option_record(p: Option, ctx: Context) -> tuple[str, str] | None:
    """``("-o, --output TEXT", "help  [default: x; 0<=x<=3; required]")``."""
    if p.hidden:
        return None

    def spell(opts: list[str]) -> str:
        rv = ", ".join(sorted(opts, key=lambda o: len(_split_opt(o)[0])))
        return rv if p.is_flag else f"{rv} {p.make_metavar()}"

    spec = " / ".join([spell(p.opts), *([spell(p.secondary_opts)] if p.secondary_opts else [])])
    extra = []
    default = p.get_default(ctx)
    if isinstance(p.show_default, str) or (p.show_default and default not in (None, UNSET)):
        if isinstance(p.show_default, str):
            shown = f"({p.show_default})"
        elif isinstance(default, (list, tuple)):
            shown = ", ".join(str(d) for d in default)
        elif p.is_flag and p.secondary_opts:
            shown = _split_opt((p.opts if default else p.secondary_opts)[0])[1]
        elif p.is_flag and not default:
            shown = ""
        elif default == "":
            shown = '""'
        else:
            shown = str(default)
        if shown:
            extra.append(f"default: {shown}")
    if isinstance(p.type, _Range):
        extra.append(p.type.describe())
    if p.required:
        extra.append("required")
    text = p.help or ""
    if extra:
        text = f"{text}  [{'; '.join(extra)}]" if text else f"[{'; '.join(extra)}]"
    return spec, text


def short_help(text: str, limit: int, given: bool = False) -> str:
    """A command's line in its group's list: its first sentence, shortened to ``limit``."""
    if given:
        return cleandoc(text).strip()
    words = text.partition("\n\n")[0].split()
    if words and words[0] == "\b":
        words = words[1:]
    for i, w in enumerate(words):  # a period ends the sentence unless a lowercase word follows
        if w.endswith(".") and (i == len(words) - 1 or not words[i + 1][0].islower()):
            words = words[:i + 1]
            break
    text = " ".join(words)
    if len(text) <= limit:
        return text.strip()
    if limit < 3:
        return "..."
    return textwrap.shorten(text, limit, placeholder="...", break_on_hyphens=False).strip()

