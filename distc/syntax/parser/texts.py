"""Attribute dict texts read in bulk: a body of plain items split with one regular expression,
and the dicts of texts that differ only in their strings built from one read (skeletons)."""

from __future__ import annotations

import re

from ...ir.attrs import StrAttr


# one attribute item of the plain forms: a string without quotes or backslashes inside, or a run
# of flat lists, flat parenthesised groups and tokens without separators (no op_dist_attr: it holds
# braces).  Where every item of a dict body is one of these, splitting at the commas between them
# gives what _split_general gives (its depth counting and string ends agree on such items).
_PLAIN_ITEM = re.compile(r'[A-Za-z_]\w*:(?:"[^"\\]*+"(?=,|\Z)'
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


_SIMPLE_STRING = re.compile(r'"[^"\\\n]*+"')
_STRING_ITEM = re.compile(r'(?:(?<=,)|^)([A-Za-z_]\w*):("[^"\\\n]*+")(?=,|$)')


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
    base, keys = tpl
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
    skeletons.keep(_SIMPLE_STRING.sub('""', text), (d, keys))


_KWARG_LINE = re.compile(r"([ \t]+)%([^\s,()\[\]{}<>=:]+)(?: \{(.*)\})?[ \t]*")


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
