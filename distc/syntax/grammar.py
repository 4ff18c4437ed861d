"""Loading the Lark grammar (``grammar/pir.lark``) and turning its leaves into IR values.

The grammar file lives in the project's top-level ``grammar/`` folder.  A built wheel carries a
copy inside the package (``distc/_grammar/pir.lark``); an editable install reads the source file.
"""

from __future__ import annotations

import functools
from pathlib import Path

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..ir import attrs as A
from ..ir.dist import (
    EMPTY_MESH, REDUCE_TYPES, OperationDistAttr, Placement, ProcessMesh, TensorDistAttr, VecDistAttr, null_dist_attr,
)
from ..ir.types import NULL_TYPE, DenseTensorType, DistTensorType, OpaqueType, VectorType
from .diagnostics import DiagnosticError


def grammar_path() -> Path:
    pkg = Path(__file__).resolve().parent.parent
    for cand in (pkg / "_grammar" / "pir.lark", pkg.parent / "grammar" / "pir.lark"):
        if cand.is_file():
            return cand
    raise FileNotFoundError("distc: cannot find the PIR grammar (grammar/pir.lark)")


def _err(msg: str, tok: Token | None) -> DiagnosticError:
    if tok is not None and getattr(tok, "line", None) is not None:
        return DiagnosticError(msg, tok.line, tok.column)
    return DiagnosticError(msg)


def _ints(tokens) -> tuple[int, ...]:
    return tuple(int(t) for t in tokens if t is not None)


_number = A.number_attr


def group_dist_fields(fields: list, op_mesh: ProcessMesh | None = None) -> list[TensorDistAttr]:
    """Group a flat run of dist fields into tensor dist attrs; a group starts at each mesh_shape
    (or dims_maping, the F1 op_dist_attr form)."""
    groups: list[list] = []
    for f in fields:
        # a group starts at mesh_shape/dims_maping; '<#AttrNull>' is a group of its own
        if f[0] in ("mesh_shape", "dims_maping", "null") or not groups or groups[-1][0][0] == "null":
            groups.append([])
        groups[-1].append(f)
    return [null_dist_attr() if g[0][0] == "null" else _make_tensor_dist(g, op_mesh) for g in groups]


def _make_tensor_dist(fields: list, op_mesh: ProcessMesh | None) -> TensorDistAttr:
    d: dict = {}
    partial = []
    first_tok = fields[0][2] if fields else None
    for name, value, tok in fields:
        if name == "partial":
            partial.append(value)
            continue
        if name in d:
            raise _err(f"'{name}' given twice in a dist attribute", tok)
        d[name] = (value, tok)
    if "dims_maping" in d:
        mesh = op_mesh or EMPTY_MESH
        dm = d["dims_maping"][0]
        form = "maping"
    else:
        if "dims_mappings" not in d:
            raise _err("dist attribute has no dims_mappings", first_tok)
        shape = d.get("mesh_shape", ((), None))[0]
        if "process_ids" in d:
            pids, ptok = d["process_ids"]
            form = "full"
        else:
            pids, ptok = tuple(range(_prod(shape))) if shape else (), first_tok
            form = "nopids"
        try:
            mesh = ProcessMesh(shape, pids)
        except ValueError as e:
            raise _err(str(e), ptok) from None
        dm = d["dims_mappings"][0]
    for m in dm:
        if m < -1 or (m >= mesh.ndim and mesh.shape):
            tok = d.get("dims_mappings", d.get("dims_maping"))[1]
            raise _err(f"dims_mapping {list(dm)} names mesh dim {m}, but the mesh has {mesh.ndim} dims", tok)
    for md, red in partial:
        if md >= mesh.ndim:
            raise _err(f"partial on mesh dim {md}, but the mesh has {mesh.ndim} dims", first_tok)
    shown = "placements" in d
    attr = TensorDistAttr(mesh, tuple(dm), tuple(partial), form=form, placements_shown=shown)
    if shown:
        given, tok = d["placements"]
        if tuple(given) != attr.placements and attr.consistent(tuple(given)):
            attr = TensorDistAttr(mesh, tuple(dm), tuple(partial), form=form, placements_shown=shown,
                                  given=tuple(given))
        elif tuple(given) != attr.placements:
            raise _err(
                "placements [" + ", ".join(map(str, given)) + "] disagree with dims_mappings "
                f"{list(dm)} and partial status", tok)
    return attr


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


class LeafTransformer(Transformer):
    """Builds types, attributes and dist attributes while Lark reduces (no parse tree for them)."""

    # -- types --
    def type_list(self, items):
        return list(items)

    def dense_type(self, items):
        open_tok, shape = items
        dims, dtype = _split_shape(shape)
        return DenseTensorType(dims, dtype, str(open_tok)[:-1])

    def dist_type(self, items):
        _open, shape, fields = items
        dims, dtype = _split_shape(shape)
        (dist,) = group_dist_fields(fields) if fields else [None]
        if dist.form == "maping":
            raise _err("a dist tensor type needs mesh_shape and dims_mappings", shape)
        if len(dist.dims_mapping) != len(dims):
            tok = next((f[2] for f in fields if f[0] == "dims_mappings"), shape)
            raise _err(
                f"dims_mapping {list(dist.dims_mapping)} has {len(dist.dims_mapping)} entries but the "
                f"tensor has rank {len(dims)}", tok)
        return DistTensorType(dims, dtype, dist)

    def vec_type(self, items):
        (lst,) = items
        return VectorType(tuple(lst or ()))

    def null_type(self, _items):
        return NULL_TYPE

    def opaque_type(self, items):
        return OpaqueType(str(items[0]))

    # -- dist fields --
    def dist_fields(self, items):
        return list(items)

    def int_list(self, items):
        return _ints(items)

    def f_mesh_shape(self, items):
        return ("mesh_shape", items[1], items[0])

    def f_process_ids(self, items):
        return ("process_ids", items[1], items[0])

    def f_dims_mappings(self, items):
        return ("dims_mappings", items[1], items[0])

    def f_dims_maping(self, items):
        return ("dims_maping", items[1], items[0])

    def f_partial(self, items):
        dim, red = items
        if str(red) not in REDUCE_TYPES:
            raise _err(f"unknown reduce type '{red}' (expected one of {', '.join(REDUCE_TYPES)})", red)
        return ("partial", (int(dim), str(red)), dim)

    def f_placements(self, items):
        return ("placements", tuple(i for i in items[1:] if i is not None), items[0])

    def placement(self, items):
        name, key, val = (list(items) + [None, None])[:3]
        n = str(name)
        if n == "Shard" and key is not None:
            return Placement("S", int(val))
        if n == "Replicate":
            return Placement("R")
        if n == "Partial":
            return Placement("P", -1, str(val) if val is not None else "SUM")
        raise _err(f"unknown placement '{n}'", name)

    # -- op_dist_attr --
    def od_mesh(self, items):
        shape, _ptok, pids = items
        try:
            return ("mesh", ProcessMesh(shape, pids), _ptok)
        except ValueError as e:
            raise _err(str(e), _ptok) from None

    def od_entry_item(self, items):
        key, entry = items
        kind, idx = str(key).rstrip(")").split("(")
        return (kind, int(idx), entry, key)

    def od_single(self, items):
        return ("single", items[0])

    def od_fields(self, items):
        return list(items)

    def f_null(self, items):
        return ("null", None, items[0])

    def od_null(self, items):
        return ("null", None)

    def od_vector(self, items):
        return ("vec", items[0] or [])

    def od_chunk(self, items):
        return ("chunk", int(items[0]), items[0])

    def op_dist_attr(self, items):
        mesh = None
        operands: list = []
        results: list = []
        chunk = None
        for it in items:
            if it[0] == "mesh":
                mesh = it[1]
            elif it[0] == "chunk":
                chunk = it[1]
            else:
                kind, idx, entry, key = it
                lst = operands if kind == "operand" else results
                if idx != len(lst):
                    raise _err(f"{kind}({idx}) out of order in op_dist_attr (expected {kind}({len(lst)}))", key)
                lst.append(self._entry(entry, mesh))
        if mesh is None:
            raise DiagnosticError("op_dist_attr has no mesh")
        return OperationDistAttr(mesh, tuple(operands), tuple(results), chunk)

    @staticmethod
    def _entry(entry, mesh):
        if entry is None:
            return TensorDistAttr(EMPTY_MESH, (), form="blank")  # '{}'
        kind, fields = entry
        if kind == "null":
            return null_dist_attr()
        if kind == "vec":
            return VecDistAttr(tuple(group_dist_fields(fields, mesh)) if fields else ())
        (attr,) = group_dist_fields(fields, mesh)
        return attr

    def op_dist_attr_word(self, items):
        return A.IdentAttr(str(items[0]))

    # -- attributes --
    def attr_dict(self, items):
        d = {}
        for it in items:
            if it is None:
                continue
            k, v, tok = it
            if k in d:
                raise _err(f"attribute '{k}' given twice", tok)
            d[k] = v
        return d

    def dist_attr_item(self, items):
        return ("op_dist_attr", items[0], None)

    def attr_item(self, items):
        key, value = items
        return (str(key), value, key)

    def true(self, _):
        return A.BoolAttr(True)

    def false(self, _):
        return A.BoolAttr(False)

    def number(self, items):
        return _number(str(items[0]))

    def string(self, items):
        return A.StrAttr(str(items[0])[1:-1])

    def place(self, items):
        return A.PlaceAttr(str(items[0]), tagged=False)

    def ident(self, items):
        return A.IdentAttr(str(items[0]))

    def raw(self, items):
        return A.RawAttr(str(items[0]))

    def complex(self, items):
        re_, im = items
        return A.RawAttr(f"real:{re_} imag:{im}")

    def array(self, items):
        return A.ArrayAttr(tuple(i for i in items if i is not None))

    def dict(self, items):
        return A.DictAttr(tuple((k, v) for k, v, _ in (i for i in items if i is not None)))

    def tagged(self, items):
        tag_tok, body = items
        tag = str(tag_tok)
        if tag == "pd_op.DataType":
            return A.DataTypeAttr(str(body), tagged=True)
        if tag == "pd_op.Place":
            return A.PlaceAttr(str(body), tagged=True)
        if tag == "pd_op.IntArray":
            if isinstance(body, A.ArrayAttr) and all(isinstance(e, A.IntAttr) and e.tag is None for e in body.elements):
                return A.IntArrayAttr(tuple(e.value for e in body.elements), tagged=True)
        if isinstance(body, (A.IntAttr, A.FloatAttr)):
            return _number(str(body), tag)
        if tag in ("Float", "Double") and isinstance(body, A.IdentAttr):
            return A.FloatAttr(body.name, tag)
        return A.TypedAttr(tag, str(body))


def _split_shape(tok) -> tuple[tuple[int, ...], str]:
    parts = str(tok).split("x")
    # a dtype may itself contain no 'x'; dims are the leading integer parts
    dims = []
    i = 0
    while i < len(parts) - 1:
        try:
            dims.append(int(parts[i]))
        except ValueError:
            break
        i += 1
    return tuple(dims), "x".join(parts[i:])


def _cache_path(text: str) -> str | bool:
    """Lark caches its LALR tables; the file name carries the grammar's and Lark's versions."""
    import hashlib
    import os

    import lark

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = os.path.join(base, "distc")
    try:
        os.makedirs(d, exist_ok=True)
    except OSError:
        return False
    if not os.access(d, os.W_OK):
        return False
    h = hashlib.sha256((text + lark.__version__).encode()).hexdigest()[:16]
    return os.path.join(d, f"pir-lark-{h}.cache")


@functools.lru_cache(maxsize=None)
def lark_parser() -> Lark:
    text = grammar_path().read_text()
    opts = dict(
        parser="lalr",
        lexer="contextual",
        start=["start", "rest", "rest_ops", "type_list", "attr", "attr_dict"],
        transformer=LeafTransformer(),
        maybe_placeholders=True,
    )
    cache = _cache_path(text)
    if cache:
        try:
            return Lark(text, cache=cache, **opts)
        except Exception:  # noqa: BLE001 - a broken cache file must never stop parsing
            pass
    return Lark(text, **opts)


def lark_errors(e: Exception) -> DiagnosticError:
    """Turn a Lark exception into a located diagnostic with a readable message."""
    if isinstance(e, VisitError) and isinstance(e.orig_exc, DiagnosticError):
        return e.orig_exc
    if isinstance(e, DiagnosticError):
        return e
    if isinstance(e, UnexpectedCharacters):
        ch = e.char
        return DiagnosticError(f"unexpected character {ch!r}", e.line, e.column)
    if isinstance(e, UnexpectedEOF):
        exp = _expected(e.expected)
        return DiagnosticError(f"unexpected end of input{exp}", None, None)
    if isinstance(e, UnexpectedToken):
        tok = e.token
        if tok.type == "$END":
            return DiagnosticError(f"unexpected end of input{_expected(e.expected)}", e.line if e.line != -1 else None,
                                   e.column if e.column != -1 else None)
        if tok.type == "BANNER":  # text where no token fits: name its first character
            ch = str(tok)[0]
            if ch == '"':
                return DiagnosticError("unterminated string", tok.line, tok.column)
            return DiagnosticError(f"unexpected character {ch!r}{_expected(e.expected)}", tok.line, tok.column)
        return DiagnosticError(f"unexpected {_describe(tok)}{_expected(e.expected)}", tok.line, tok.column)
    if isinstance(e, UnexpectedInput):
        return DiagnosticError(str(e).split("\n")[0], getattr(e, "line", None), getattr(e, "column", None))
    raise e


_SPELL = {
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'",
    "COMMA": "','", "COLON": "':'", "EQUAL": "'='", "MORETHAN": "'>'", "LESSTHAN": "'<'",
    "VALUE": "a value (%name)", "STRING": "a string", "NUMBER": "a number", "NAME": "a name",
    "SHAPE": "a shape (like 4x8xf32)", "NULL_VALUE": "<<NULL VALUE>>", "NULL_TYPE": "<<NULL TYPE>>",
    "DENSE_OPEN": "a tensor type", "DIST_OPEN": "pd_dist.tensor<", "$END": "end of input",
    "BANNER": "a banner line", "ANGLED": "'<...>'", "PAREN_HEX": "'(0x...)'", "PLACE": "Place(...)",
    "HEX": "a hex number", "OD_KEY": "operand(i)/result(i)", "OPAQUE_TYPE": "a type", "INT": "an integer",
    "REGION_SEP": "'else'", "MESH_SHAPE": "mesh_shape", "PROCESS_IDS": "process_ids",
    "DIMS_MAPPINGS": "dims_mappings", "DIMS_MAPING": "dims_maping", "CIRCUMFLEX": "'^'",
}


def _spell(name: str) -> str:
    if name in _SPELL:
        return _SPELL[name]
    lit = _literal(name)
    if lit is not None:
        return f"'{lit}'"
    if name.startswith("__ANON") or name.isupper():
        return name.lower()
    return name


def _literal(name: str) -> str | None:
    """The text of an anonymous string terminal ('->', 'true', ...)."""
    for t in lark_parser().terminals:
        if t.name == name and t.pattern.type == "str":
            return t.pattern.value
    return None


def _expected(exp) -> str:
    if not exp:
        return ""
    names = sorted({_spell(n) for n in exp})
    if len(names) > 8:
        names = names[:8] + ["..."]
    return "; expected " + ", ".join(names)


def _describe(tok: Token) -> str:
    text = str(tok)
    if len(text) > 30:
        text = text[:27] + "..."
    return f"{text!r}"
