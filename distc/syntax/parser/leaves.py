"""The fast path's leaf readers: common type spellings, attribute items and ``op_dist_attr``
values read with regular expressions.  Each returns ``None`` for anything it does not know, and the
grammar reads that instead; ``tests/test_parser_paths.py`` holds them to the grammar's results."""

from __future__ import annotations

from itertools import accumulate

from ...ir import attrs as A
from ...ir.dist import (
    ATTR_NULL, EMPTY_MESH, REDUCE_TYPES, OperationDistAttr, Placement, ProcessMesh, TensorDistAttr, VecDistAttr, null_dist_attr,
)
from ...ir.types import NULL_TYPE, DenseTensorType, DistTensorType, VectorType
from .. import regex
from ..diagnostics import DiagnosticError, line_col
from ..regex import LazyPattern

_number = A.number_attr


_SIMPLE_ITEM = regex.compile(
    r'([A-Za-z_]\w*):(?:(-?\d+)|(true|false)|\[((?:true|false)(?:,(?:true|false))*+)\]'
    r'|\[(-?\d+(?:,-?\d+)*+)?\]|(Place\([^()\s]*\))|([A-Za-z_][\w.]*)'
    r'|([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+](?:inf|nan)))',
    regex.S,
)


_STR_ITEM = regex.compile(r'([A-Za-z_]\w*):"')


MAX_NESTING = 100  # brackets inside brackets (Paddle nests a few): deeper is an error, not minutes of work


class Refused(DiagnosticError):
    """Text no program holds (brackets or regions nested over a hundred deep): an error at once,
    not the grammar's slow way to the same end.  ``where``: the piece of an op line it was found
    in (line and column are then within that piece)."""

    where: str | None = None

    def in_line(self, line: str, line_no: int) -> "Refused":
        """Itself, found in a piece of an op line, located in the file."""
        at = line.find(self.where) if self.where else -1
        self.col = at + (self.col or 1) if at >= 0 and self.line == 1 else None
        self.line = line_no + (self.line - 1 if at >= 0 and self.line else 0)
        return self


_STRING = LazyPattern(r'"(?:[^"\\]|\\.)*+"')
_DEPTH = str.maketrans({"[": "\x01", "{": "\x01", "(": "\x01", "]": "\xff", "}": "\xff", ")": "\xff"})
_NOT_BRACKET = regex.compile(r"[^\[\]{}()]+")
_BRACKET_ANY = LazyPattern(r"[\[\]{}()]")


def check_nesting(text: str, limit: int = MAX_NESTING) -> str:
    """``text``, if its brackets (strings aside) nest at most ``limit`` deep; else :class:`Refused`
    located at the bracket that goes deeper (line and column within ``text``).  Linear, in C."""
    if text.count("[") + text.count("{") + text.count("(") <= limit:
        return text
    bare = _STRING.sub(lambda m: " " * len(m.group()), text) if '"' in text else text
    steps = _NOT_BRACKET.sub("", bare).translate(_DEPTH).encode("latin-1")
    if max(accumulate(memoryview(steps).cast("b")), default=0) <= limit:
        return text
    depth = 0
    for m in _BRACKET_ANY.finditer(bare):
        depth += 1 if m.group() in "[{(" else -1
        if depth > limit:
            line, col = line_col(text, m.start())
            e = Refused(f"brackets nested more than {limit} deep (Paddle nests a few)", line, col)
            e.where = text
            raise e
    return text


def _simple_item(item: str):
    """The common attribute forms, read without the grammar (same values as the grammar gives)."""
    sm = _STR_ITEM.match(item)
    if sm is not None:  # a string: the whole rest of the item, and no unescaped quote inside
        end = string_end(item, sm.end() - 1)
        if end != len(item) or sm.group(1) == "op_dist_attr":
            return None
        return sm.group(1), A.StrAttr(item[sm.end():-1])
    m = _SIMPLE_ITEM.fullmatch(item)
    if m is None:
        return None
    key = m.group(1)
    if key == "op_dist_attr":
        return None
    i, b, bl, il, pl, name, num = m.group(2, 3, 4, 5, 6, 7, 8)
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
        if len(il) >= A.ArrayAttr.PACK:  # a long list stays its text (see ArrayAttr)
            return key, A.ArrayAttr.packed(il, "int")
        return key, A.ArrayAttr(tuple(A.IntAttr(int(x)) for x in il.split(",")))
    return key, A.ArrayAttr(())


_NUMBER = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
_NUMBER_LIST = LazyPattern(rf"([A-Za-z_]\w*):\[((?>{_NUMBER})(?:,(?>{_NUMBER}))*+)\]")


def _number_list(item: str):
    """A long list of numbers (``values:[0.5,1,2e-05,...]``, floats among them), packed: the grammar
    would make a million objects of it at a few hundred KB/s."""
    if len(item) < A.ArrayAttr.PACK:
        return None
    m = _NUMBER_LIST.fullmatch(item)
    if m is None or m.group(1) == "op_dist_attr":
        return None
    return m.group(1), A.ArrayAttr.packed(m.group(2), "number")



_TYPE = regex.compile(
    r"(?:pd_dist\.tensor<((?:-?\d+x)*)([a-z][a-z0-9_]*), mesh_shape:\[([\d,]*)\],process_ids:\[([\d,]*)\],"
    r"dims_mappings:\[([-\d,]*)\]((?:, partial\(\d+,[A-Z]+\)(?:,partial\(\d+,[A-Z]+\))*)?)"
    r"(, placements:\[[^\]]*\])?>"
    r"|([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)<((?:-?\d+x)*)([a-z][a-z0-9_]*)>|(<<NULL TYPE>>))(, |$)"
)
_PARTIAL = regex.compile(r"partial\((\d+),([A-Z]+)\)")
_PLACEMENT = regex.compile(r"Shard\(dim=(\d+)\)|Replicate\(\)|Partial\(reduce_type=([A-Z]+)\)")


def _ints_of(text: str) -> tuple[int, ...]:
    return tuple(map(int, text.split(","))) if text else ()


LONG_MESH = 1 << 11  # process ids spelt in more characters than this (~400 ranks) are read once a parse


def _mesh_of(shape: str, ids: str, known: dict | None = None, meshes: dict | None = None) -> ProcessMesh:
    """The mesh of a spelling (``known``: meshes already read in this value, by spelling: an op's
    entries repeat its mesh, and a mesh of 100,000 ranks is 600 KB of text; ``meshes``: long
    spellings already read in this parse, so that every value on a huge mesh shares one mesh
    object, its ids read and its memos made once)."""
    if known is None:
        return ProcessMesh(_ints_of(shape), _ints_of(ids))
    key = (shape, ids)
    mesh = known.get(key)
    if mesh is None:
        if meshes is not None and len(ids) > LONG_MESH:
            mesh = meshes.get(key)
            if mesh is None:
                mesh = meshes[key] = ProcessMesh(_ints_of(shape), _ints_of(ids))
        else:
            mesh = ProcessMesh(_ints_of(shape), _ints_of(ids))
        known[key] = mesh
    return mesh


_TDIST = regex.compile(
    r"mesh_shape:\[([\d,]*)\],process_ids:\[([\d,]*)\],dims_mappings:\[([-\d,]*)\]"
    r"((?:, partial\(\d+,[A-Z]+\)(?:,partial\(\d+,[A-Z]+\))*)?)(, placements:\[[^\]]*\])?"
)


def _fast_tdist(m, known: dict | None = None, meshes: dict | None = None) -> "TensorDistAttr | None":
    """A tensor dist attr from a ``_TDIST`` match (``None``: let the grammar decide).  ``known``
    (see :func:`_mesh_of`) also keeps the attrs read, by spelling: a dump's op_dist_attr values and
    types repeat a few of them (mlp96: 123 read, a handful distinct)."""
    if known is not None:
        spelling = m.group()
        attr = known.get(spelling)
        if attr is not None:
            return attr
        attr = _read_tdist(m, known, meshes)
        if attr is not None:
            known[spelling] = attr
        return attr
    return _read_tdist(m, known, meshes)


def _read_tdist(m, known: dict | None, meshes: dict | None) -> "TensorDistAttr | None":
    mshape, pids, dm, partial, pl = m.groups()
    try:
        mesh = _mesh_of(mshape, pids, known, meshes)
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


_BRACKET = LazyPattern(r"[\[\]]")


def _fast_vec(text: str, pos: int, out: list, meshes, known) -> int | None:
    """``vec[T,T,...]`` at ``pos`` of a type list (``builtin.combine``, ``split_with_num``), its
    elements read as a type list of their own: its type appended to ``out``, the position after it
    and its separator returned (None: let the grammar read it)."""
    depth = 0
    end = -1
    for b in _BRACKET.finditer(text, pos + 3):
        depth += 1 if b.group() == "[" else -1
        if depth == 0:
            end = b.start()
            break
    if end < 0:
        return None
    inner = text[pos + 4:end]
    if "vec[" in inner or ">, " in inner or inner.endswith(","):
        return None  # (a vector of vectors, or not its elements' spelling: the grammar says)
    spelling = text[pos:end + 1]
    same = known.get(spelling) if known is not None else None
    if same is None:
        elements = _fast_type_list(inner.replace(">,", ">, "), meshes, known) if inner else []
        if elements is None:
            return None
        same = VectorType(tuple(elements))
        if known is not None:
            known[spelling] = same
    out.append(same)
    end += 1
    if end == len(text):
        return end
    return end + 2 if text.startswith(", ", end) else None


def _fast_type_list(text: str, meshes: dict | None = None, known: dict | None = None):
    """The common type spellings without the grammar (``None``: let the grammar read it).  Gives
    the same objects as the grammar's ``type`` rules; the differential tests hold it to that.
    ``known``: meshes and types already read, by spelling (the parser's, shared by the type lists
    of a dump: an equal spelling is one object, so name resolution compares types by identity);
    ``meshes``: long mesh spellings read in this parse (see :func:`_mesh_of`)."""

    out = []
    pos = 0
    n = len(text)
    if known is None:
        known = {}  # meshes, and types by spelling (a list of 800,000 equal types is one object)
    while pos < n:
        if text.startswith("vec[", pos):
            pos = _fast_vec(text, pos, out, meshes, known)
            if pos is None:
                return None
            continue
        m = _TYPE.match(text, pos)
        if m is None:
            return None
        dshape, ddtype, prefix, shape, dtype, null, sep = m.group(1, 2, 8, 9, 10, 11, 12)
        spelling = text[pos:m.end() - len(sep)]
        same = known.get(spelling)
        if same is not None:
            out.append(same)
        elif null:
            out.append(NULL_TYPE)
        elif prefix is not None:
            if prefix in ("vec", "pd_dist.tensor"):
                return None
            out.append(DenseTensorType(tuple(int(x) for x in shape[:-1].split("x")) if shape else (), dtype, prefix))
        else:
            dims = tuple(int(x) for x in dshape[:-1].split("x")) if dshape else ()
            tm = _TDIST.fullmatch(text, m.start(3) - len("mesh_shape:["), m.end(7) if m.group(7) else m.end(6))
            attr = _fast_tdist(tm, known, meshes) if tm is not None else None
            if attr is None or len(attr.dims_mapping) != len(dims) or not attr.mesh.shape:
                return None
            out.append(DistTensorType(dims, ddtype, attr))
        if same is None:
            known[spelling] = out[-1]
        pos = m.end()
        if not sep and pos < n:
            return None
    return out


_OD = regex.compile(r"\{mesh:\{shape:\[([\d,]*)\],process_ids:\[([\d,]*)\]\}((?:,(?:operand|result)\(\d+\):\{[^{}]*\})*+)"
                    r"(?:,chunk_id:(-?\d+))?\}")
_OD_ENTRY = regex.compile(r",(operand|result)\((\d+)\):\{([^{}]*)\}")


def _fast_op_dist(text: str, meshes: dict | None = None, known: dict | None = None):
    """``op_dist_attr`` values in the F2-F4 formats without the grammar (``None``: use it).
    ``known``: meshes and tensor dist attrs already read, by spelling (the parser's, shared with
    its type lists; else this value's own)."""

    m = _OD.fullmatch(text)
    if m is None:
        return None
    if known is None:
        known = {}
    try:
        mesh = _mesh_of(m.group(1), m.group(2), known, meshes)
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
        if body == ATTR_NULL:
            lst.append(null_dist_attr())
            continue
        vec = body[0] == "["
        if not vec:
            a = known.get(body)  # (an entry read before: one tensor dist attr, spelt as the whole body)
            if a.__class__ is TensorDistAttr:
                lst.append(a)
                continue
        else:
            if body[-1] != "]":
                return None
            body = body[1:-1]
        items = []
        pos = 0
        while pos < len(body):
            tm = _TDIST.match(body, pos)
            if tm is None:
                return None
            a = _fast_tdist(tm, known, meshes)
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


_SCAN = LazyPattern(r'["{}\[\]()<>,]')
_FLAT = {"[": LazyPattern(r'[^"{}\[\]()<>]*\]'), "{": LazyPattern(r'[^"{}\[\]()<>]*\}'),
         "(": LazyPattern(r'[^"{}\[\]()<>]*\)')}
_UNESCAPED_QUOTE = regex.compile(r'(?<!\\)"')
_AFTER_STRING = ",}]"


def string_end(text: str, p: int) -> int | None:
    """The index just past the string whose opening quote is at ``p`` (``None``: unterminated).

    Paddle escapes only quotes, so the content holds no unescaped quote: the string ends at the
    first one (``q``) if a separator follows it, else at the last ``\\"`` before ``q`` that a
    separator follows (a raw backslash before the closing quote).  Linear, no regex stack."""
    m = _UNESCAPED_QUOTE.search(text, p + 1)
    q = m.start() if m is not None else len(text)
    if q < len(text) and (q + 1 == len(text) or text[q + 1] in _AFTER_STRING):
        return q + 1
    k = text.rfind('\\"', p + 1, q)
    while k >= 0:
        if k + 2 == len(text) or text[k + 2] in _AFTER_STRING:
            return k + 2
        k = text.rfind('\\"', p + 1, k)
    return None


_BRACES = regex.compile(r"[{}]")


def _split_general(text: str) -> list[str]:
    if "," not in text:
        return [text] if text else []
    out = []
    start = 0
    depth = 0
    pos = 0
    search = _SCAN.search
    while True:
        m = search(text, pos)
        if m is None:
            break
        c = m.group()
        pos = m.end()
        if c == '"':
            end = string_end(text, m.start())
            if end is None:
                break
            pos = end
            continue
        if c in "{[(<":
            flat = _FLAT.get(c)
            if flat is not None and (f := flat.match(text, pos)) is not None:
                pos = f.end()  # a bracket holding no bracket or string: skipped whole (a long list)
                continue
            depth += 1
        elif c in "}])>":
            depth -= 1
        elif depth == 0:
            out.append(text[start:m.start()])
            start = m.end()
    out.append(text[start:])
    return out

