"""Attribute dict texts read in bulk: a body of plain items split with one regular expression,
and the dicts of texts that differ only in their strings built from one read (skeletons)."""

from __future__ import annotations

from ...ir.attrs import StrAttr
from .. import regex
from ..regex import LazyPattern


# one attribute item of the plain forms: a string without quotes or backslashes inside, or a run
# of flat lists, flat parenthesised groups and tokens without separators (no op_dist_attr: it holds
# braces).  Where every item of a dict body is one of these, splitting at the commas between them
# gives what _split_general gives (its depth counting and string ends agree on such items).
_PLAIN_ITEM = regex.compile(r'[A-Za-z_]\w*:(?:"[^"\\]*+"(?=,|\Z)'
                            r'|(?:\[[^\[\]{}()<>"]*+\]|\([^()\[\]{}<>"]*+\)|[^",{}\[\]()<>]++)++)')


def split_plain(text: str) -> list[str] | None:
    """An attribute dict body split into its items when each is of the plain forms (else None)."""
    match = _PLAIN_ITEM.match
    out = []
    pos, n = 0, len(text)
    while True:
        m = match(text, pos)
        if m is None:
            return None
        pos = m.end()
        out.append(m.group())
        if pos == n:
            return out
        if text[pos] != ",":
            return None
        pos += 1


_SIMPLE_STRING = regex.compile(r'"[^"\\\n]*+"')
_STRING_ITEM = regex.compile(r'(?:(?<=,)|^)([A-Za-z_]\w*):("[^"\\\n]*+")(?=,|$)')


# A dump's ops of one kind differ in a string or two (each ``pd_op.data`` its ``name``, each
# ``builtin.parameter`` its ``parameter_name``): their attribute texts are all distinct, but equal
# once each string is emptied (the skeleton).  A skeleton whose strings are each a whole item's
# value (``key:"..."``) keeps the dict read first; another text of it is that dict with its own
# strings.  Only for texts whose strings hold no backslash and no raw newline (each string is the
# text between two neighbouring quotes).
def from_skeleton(skeletons, text: str) -> dict | None:
    """The dict of ``text`` from a kept skeleton (``skeletons``: the parser's cache), or None."""
    tpl = skeletons.get(_SIMPLE_STRING.sub('""', text))
    if tpl is None:
        return None
    skeletons.hits += 1
    base, keys = tpl[0], tpl[1]
    d = dict(base)
    for k, raw in zip(keys, _SIMPLE_STRING.findall(text)):
        d[k] = StrAttr(raw[1:-1])
    return d


def keep_skeleton(skeletons, text: str, d: dict) -> None:
    """Keep ``text``'s skeleton with ``d`` (its dict, read item by item) where every string of
    ``text`` is a whole item's value."""
    strings = _SIMPLE_STRING.findall(text)
    whole = _STRING_ITEM.findall(text)
    if len(whole) != len(strings):
        return  # a string inside a list or a group: not a whole item's value
    keys = tuple(k for k, _ in whole)
    if len(set(keys)) != len(keys):
        return  # a key twice (one inside a list): each string must be its own item's
    for k, raw in whole:
        v = d.get(k)
        if not isinstance(v, StrAttr) or v.raw != raw[1:-1]:
            return
    skeletons.keep(_SIMPLE_STRING.sub('""', text), (d, keys, _keys_found(text, d), list(d) == sorted(d)))


def _keys_found(text: str, d: dict) -> bool:
    """Every key of ``d`` is spelt ``key:`` at the start of ``text`` or right after a comma (so a
    key found in neither place is not one of the dict's: what :meth:`Operation.attr` asks an
    unread text).  The texts of a skeleton agree on it: they differ only inside strings."""
    return all(text.startswith(k + ":") or ("," + k + ":") in text for k in d)


def skeleton_of(skeletons, text: str):
    """The kept ``(dict, string keys, keys found, sorted)`` of ``text``'s skeleton, or None."""
    tpl = skeletons.get(_SIMPLE_STRING.sub('""', text))
    if tpl is not None:
        skeletons.hits += 1
    return tpl


_KWARG_LINE = LazyPattern(r"([ \t]+)%([^\s,()\[\]{}<>=:]+)(?: \{(.*)\})?[ \t]*")


def kwarg_lines(text: str, pos: int, i: int) -> list | None:
    """The lines under a top-level '^kw:' from ``pos`` (line index ``i``): one
    ``(name, attribute text or None, line, column, offset after the line)`` each, as Paddle prints
    them (one a line); ``None`` for any other form (the grammar reads it)."""
    out = []
    n = len(text)
    while pos < n:
        e = text.find("\n", pos)
        if e < 0:
            e = n
        m = _KWARG_LINE.fullmatch(text, pos, e)
        if m is None:
            break
        out.append((m[2], m[3], i + 1, len(m[1]) + 1, e + 1))
        i += 1
        pos = e + 1
    return out or None


_OP_START = LazyPattern(r'\n(?=[ \t]*\([^()\n]*\) = "|[ \t]*\})')


def joined_line(text: str, pos: int, e: int, OP):
    """An op whose strings hold raw newlines, read on over the following lines: (match, end offset).
    The op ends on a line holding a quote (its last string's closing one), before the next line
    that starts an op or closes a block; the last such line is tried first."""
    nxt = _OP_START.search(text, e)
    limit = nxt.start() if nxt is not None else len(text)
    q = text.rfind('"', e, limit)
    while q >= 0:
        end = text.find("\n", q, limit)
        end = limit if end < 0 else end
        m = OP(text, pos, end)
        if m is not None:
            return m, end
        q = text.rfind('"', e, text.rfind("\n", e, q) + 1)
    return None, e


CACHE_TEXT = 1 << 16  # longer texts are not kept in the caches (a 20 MB string would stay)


class Cache(dict):
    """Parsed pieces by spelling.  It starts small and doubles while its spellings come back (a
    real dump repeats most of its attribute texts); when it is full and they did not, it starts
    over: a million distinct ops keep a few thousand spellings, not a million (a copy of each
    op's attribute text)."""

    def __init__(self, size: int = 1 << 11, most: int = 1 << 16) -> None:
        super().__init__()
        self.size, self.most, self.hits = size, most, 0

    def hit(self, key):
        v = self.get(key)
        if v is not None:
            self.hits += 1
        return v

    def keep(self, key, value) -> None:
        if len(key) >= CACHE_TEXT:
            return
        if len(self) >= self.size:
            if self.hits * 16 >= len(self) and self.size < self.most:
                self.size *= 2  # they come back: keep them all
            else:
                self.clear()
            self.hits = 0
        self[key] = value


_BRACED = LazyPattern(r"\{(?:[^{}]++|\{(?:[^{}]++|\{(?:[^{}]++|\{(?:[^{}]++|\{[^{}]*+\})*+\})*+\})*+\})*+\}")  # 5 deep


_STRING = LazyPattern(r'"[^"]*+"')


def _nested(text: str, i: int) -> bool:
    """Whether ``i`` of an attribute text whose strings hold no backslash is inside a value (a
    dict, list or parentheses: ``op_dist_attr:{...,dims_mappings:[0]}`` holds a ``dims_mappings``
    that is no item of the text)."""
    head = text[:i]
    if '"' in head:
        head = _STRING.sub("", head)
    return head.count("{") != head.count("}") or head.count("[") != head.count("]") or head.count("(") != head.count(")")


def item_span(text: str, key: str, old: str | None = None) -> tuple[int, int]:
    """Where the item ``key:...`` of an attribute text (its body) whose strings hold no backslash
    is: ``(start, end)``, or (-1, -1) where it has none; ``(start, -1)`` where its end is not found
    here (not of the plain forms).  op_dist_attr holds no string: it ends at the first '}' after
    which its braces balance (or after ``old``, the text of a dict the caller knows the value
    was, where the text goes on with it)."""
    want = key + ":"
    i = 0 if text.startswith(want) else text.find("," + want) + 1
    inner = key != "op_dist_attr"  # (a key a value may hold too: op_dist_attr holds no op_dist_attr)
    while i > 0 and (text.count('"', 0, i) % 2 or inner and _nested(text, i)):  # (not a key: in a string, or a value's)
        i = text.find("," + want, i) + 1
    if i < 0 or (i == 0 and not text.startswith(want)):
        return -1, -1
    if key == "op_dist_attr":
        if old is not None and text.startswith(old, i + 13):
            return i, i + 13 + len(old)
        m = _BRACED.match(text, i + 13)
        if m is not None:
            return i, m.end()
        j = text.find("}", i)  # (nested deeper than _BRACED reads)
        while j >= 0 and text.count("{", i, j) != text.count("}", i, j + 1):
            j = text.find("}", j + 1)
        return i, (j + 1 if j >= 0 else -1)
    m = _PLAIN_ITEM.match(text, i)
    return i, (m.end() if m is not None and (m.end() == len(text) or text[m.end()] == ",") else -1)


class Unread:
    """What an op whose attribute text was left unread asks (``Operation.attrs``): one for the
    ops of one parse.  ``unsorted``: a text left unread has its keys out of order (the print
    style's ``sorted_attrs`` is false then, see :func:`distc.syntax.parser.detect_style`)."""

    __slots__ = ("parser", "unsorted")

    def __init__(self, parser) -> None:
        self.parser, self.unsorted = parser, False

    def read_attrs(self, src: str) -> dict:
        return self.parser.read_attrs(src)

    def read_item(self, src: str, key: str):
        return self.parser.read_item(src, key)
