"""The fast line parser and the full Lark grammar build identical IR, and print back the input."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distc
from distc.syntax.parser import FastParser, detect_style
from distc.syntax.printer import print_program

from conftest import DATA, ir_files
from irutil import structure

FILES = ir_files("corpus", "oracle/syntax") + ir_files("oracle/stage1")[::10] + ir_files("oracle/reshard")[::25]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_fast_and_full_paths_agree(path):
    s = path.read_text()
    full = distc.parse(s, fast=False)
    # the full grammar's IR printed anew (every op, no source lines) gives the input's bytes
    assert print_program(full, canonical=True) == s
    if "pd_op.while" in s or "^kw:" in s:
        # while loops and inline block arguments are read by the grammar (program keyword
        # arguments alone: test_program_keyword_arguments_on_the_fast_path)
        assert distc.parse(s).block is not None
        return
    fast = _fast_only(s)
    assert structure(fast) == structure(full)
    assert fast.style == full.style


def test_program_keyword_arguments_on_the_fast_path():
    """A program's '^kw:' lines (tensor fusion, pipeline job programs) are read by the fast path,
    not handed to the grammar (0.3 MB/s): the same IR, printed back byte for byte."""
    head = "{\n    ^kw:\n"
    s = (head + '        %kwarg_fused@-w {place:Place(cpu),persistable:true}\n        %kwarg_b\n'
         '    (%0) = "pd_op.share_data_" (%kwarg_fused@-w) {stop_gradient:[false]} : (tensor<4xf32>) -> tensor<4xf32>\n'
         '    (%1) = "pd_op.add" (%0, %kwarg_b) {stop_gradient:[false]} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n'
         "}\n")
    fast = _fast_only(s)
    full = distc.parse(s, fast=False)
    assert structure(fast) == structure(full)
    assert [(a.name, a.keyword, a.attrs_shown) for a in fast.block.args] == [
        ("kwarg_fused@-w", "fused@-w", True), ("kwarg_b", "b", False)]
    assert print_program(fast) == s
    assert fast.block.ops[1].operands[1] is fast.block.args[1]
    # another form of the header (two on a line) still reads, through the grammar
    odd = s.replace("{place:Place(cpu),persistable:true}\n        %kwarg_b", "{place:Place(cpu),persistable:true}, %kwarg_b")
    assert print_program(distc.parse(odd)).count("%kwarg_b") == 2


def _fast_only(text):
    """The fast path alone (no silent fallback to the grammar); the numbering and key order it
    found while reading are those a walk of the program finds."""
    fp = FastParser()
    prog = fp.parse(text, None)
    prog.style = detect_style(text, prog)
    if fp.facts is not None:
        assert fp.facts == (prog.style.renumber, prog.style.sorted_attrs)
        assert detect_style(text, prog, fp.facts) == prog.style
    return prog


# ---------------------------------------------------------------------------- generated op lines
DTYPES = ["f32", "f16", "bf16", "i64", "i32", "b", "f64"]


def _rank_of(type_text):
    """The rank written in a type's text (0 for <<NULL TYPE>>)."""
    if type_text.startswith(("<<", "vec[")):
        return 0
    body = type_text[type_text.index("<") + 1:].split(",")[0].rstrip(">")
    return body.count("x")


def _tensor(shape, dtype, prefix):
    return f"{prefix}<{''.join(f'{d}x' for d in shape)}{dtype}>"


@st.composite
def dist_type(draw, shape, dtype):
    mesh = draw(st.sampled_from([(2,), (4,), (2, 2), (2, 1, 2)]))
    n = 1
    for m in mesh:
        n *= m
    ids = list(range(n))
    dm = [draw(st.integers(-1, len(mesh) - 1)) for _ in shape]
    # one tensor axis per mesh dim
    seen = set()
    for i, d in enumerate(dm):
        if d in seen:
            dm[i] = -1
        seen.add(d)
    free = [m for m in range(len(mesh)) if m not in dm]
    partial = sorted(draw(st.sets(st.sampled_from(free), max_size=len(free)))) if free else []
    red = draw(st.sampled_from(["SUM", "AVG", "MAX"]))
    text = (f"mesh_shape:[{','.join(map(str, mesh))}],process_ids:[{','.join(map(str, ids))}],"
            f"dims_mappings:[{','.join(map(str, dm))}]")
    if partial:
        text += ", " + ",".join(f"partial({p},{red})" for p in partial)
    pl = []
    for m in range(len(mesh)):
        if m in dm:
            pl.append(f"Shard(dim={dm.index(m)})")
        elif m in partial:
            pl.append(f"Partial(reduce_type={red})")
        else:
            pl.append("Replicate()")
    text += ", placements:[" + ", ".join(pl) + "]"
    return f"pd_dist.tensor<{''.join(f'{d}x' for d in shape)}{dtype}, {text}>"


STRINGS = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters='\\"\n\r'), max_size=8)

ATTR_VALUES = st.one_of(
    st.booleans().map(lambda b: "true" if b else "false"),
    st.integers(-(2**40), 2**40).map(str),
    st.sampled_from(["1e-08", "0.999", "-2.25e-07", "3e+10", "nan", "-inf", "0.5"]),
    STRINGS.map(lambda s: f'"{s}"'),
    st.lists(st.booleans(), max_size=3).map(lambda xs: "[" + ",".join("true" if x else "false" for x in xs) + "]"),
    st.lists(st.integers(-5, 5), max_size=4).map(lambda xs: "[" + ",".join(map(str, xs)) + "]"),
    st.sampled_from(["float32", "Place(cpu)", "Place(gpu:0)", "(Int32)36", "(Int64)-1", "(Double)0.9",
                     "(pd_op.DataType)float32", "(pd_op.IntArray)[2,4]", "(pd_op.Place)Place(undefined:0)",
                     "<backend:CPU|layout:NCHW|dtype:float32>", '"we\\"ird"']),
)


@st.composite
def op_dist_attr(draw, operand_ranks, result_ranks):
    """op_dist_attr values: a mesh, operand/result entries (single, vector, empty; each fitting
    the rank of its value), chunk_id or not."""
    def entry(rank):
        kind = draw(st.sampled_from(["single", "vec", "empty"]))
        if kind == "empty":
            return draw(st.sampled_from(["", "mesh_shape:[],process_ids:[],dims_mappings:[]"]))

        def one():
            t = draw(dist_type([draw(st.integers(1, 9)) for _ in range(rank)], "f32"))
            body = t[t.index(", ") + 2:-1]
            if draw(st.booleans()):
                body = body[:body.index(", placements")] if ", placements" in body else body
            return body
        if kind == "vec":
            return "[" + ",".join(one() for _ in range(draw(st.integers(0, 3)))) + "]"
        return one()
    parts = [f"mesh:{{shape:[{draw(st.sampled_from(['2', '2,2', '4']))}],process_ids:[0,1,2,3]}}"]
    parts[0] = parts[0].replace("process_ids:[0,1,2,3]", "process_ids:[0,1]") if "shape:[2]" in parts[0] else parts[0]
    for kind, ranks in (("operand", operand_ranks), ("result", result_ranks)):
        for i in range(draw(st.integers(0, len(ranks)))):
            parts.append(f"{kind}({i}):{{{entry(ranks[i])}}}")
    if draw(st.booleans()):
        parts.append("chunk_id:" + str(draw(st.integers(-1, 3))))
    return "{" + ",".join(parts) + "}"





@st.composite
def program(draw):
    prefix = draw(st.sampled_from(["tensor", "builtin.tensor"]))
    lines = ["{"]
    values = []  # (name, type text)
    for i in range(draw(st.integers(1, 6))):
        nres = draw(st.integers(0, 2))
        ops = draw(st.lists(st.sampled_from(values), max_size=3)) if values else []
        has_null = draw(st.booleans())
        operand_txt = [f"%{n}" for n, _ in ops] + (["<<NULL VALUE>>"] if has_null else [])
        in_types = [t for _, t in ops] + (["<<NULL TYPE>>"] if has_null else [])
        keys = sorted(draw(st.sets(st.sampled_from(["a", "b_c", "dtype", "name", "op_dist_attr", "ring_id", "shape",
                                                      "value"]), max_size=4)))
        out_types, out_ranks = [], []
        for _ in range(nres):
            shape = draw(st.lists(st.integers(1, 9), max_size=3))
            dtype = draw(st.sampled_from(DTYPES))
            out_types.append(draw(dist_type(shape, dtype)) if draw(st.booleans()) else _tensor(shape, dtype, prefix))
            out_ranks.append(len(shape))
            if draw(st.integers(0, 3)) == 0:  # a vector (builtin.combine): of 0 to 3 of such types
                elements = [draw(dist_type(shape, dtype)) if draw(st.booleans()) else _tensor(shape, dtype, prefix)
                            for _ in range(draw(st.integers(0, 3)))]
                out_types[-1] = "vec[" + ",".join(elements) + "]"
        if any(t.startswith("vec[") for t in in_types + out_types):
            keys = [k for k in keys if k != "op_dist_attr"]  # (the generated entries fit tensors)
        in_ranks = [_rank_of(t) for t in in_types]
        attrs = ",".join(f"{k}:{draw(op_dist_attr(in_ranks, out_ranks)) if k == 'op_dist_attr' else draw(ATTR_VALUES)}"
                         for k in keys)
        names = [str(len(values) + k) for k in range(nres)]
        name = draw(st.sampled_from(["pd_op.relu", "dist_op.reshard", "add(phi_kernel)", "pd_op.adamw_"]))
        oid = f" [id:{draw(st.integers(0, 999))}]" if draw(st.booleans()) else ""
        lines.append(f'    ({", ".join("%" + n for n in names)}) = "{name}"{oid} ({", ".join(operand_txt)}) '
                     f'{{{attrs}}} : ({", ".join(in_types)}) -> {", ".join(out_types)}')
        values.extend(zip(names, out_types))
    lines.append("}")
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program())
def test_generated_programs_roundtrip_and_paths_agree(text):
    fast = _fast_only(text)
    full = distc.parse(text, fast=False)
    assert structure(fast) == structure(full)
    assert str(fast) == text
    assert print_program(full, canonical=True) == text


def test_op_match_reads_lines_as_the_op_regex_does():
    """The fast path's hand-written op-line reader agrees with the regex it replaces (greedy
    attributes and input types, trailing blanks, tabs, separators inside strings), and reads only
    lines whose result and operand lists are lists of values (the builder splits them unchecked)."""
    import random

    from distc.syntax.parser.fast import _OP, _OPERANDS, _RESULTS, op_match

    base = [
        '(%1) = "pd_op.add" [id:3] (%a, %b) {x:"} : (",y:1} : (f32, f32) -> f32',
        '  (%1, %2) = "pd_op.split" (%a) {k:[1,2]} : (f32) -> f32, f32  ',
        '(%1) = "pd_op.full" () {value:") -> ",z:{a:1}} : () -> f32\t',
        '(%1) = "pd_op.f" (%a) {} : (vec<f32) -> x>) -> f32 ) ->',
    ]
    pieces = ["} : (", ") ->", " ", "\t", "{", "}", "(", ")", "->", "x", '"', ",", "\n", ") -> ", "} : () -> "]
    rnd = random.Random(7)
    lines = list(base)
    for _ in range(20000):
        line = rnd.choice(base)
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randint(0, len(line))
            line = line[:i] + rnd.choice(pieces) + line[i:]
        lines.append(line)
    def want(line):  # the regex's groups where its value lists are lists of values
        m = _OP.fullmatch(line)
        if m is None or (m[2] and not _RESULTS.fullmatch(m[2])) or (m[5] and not _OPERANDS.fullmatch(m[5])):
            return None
        return m.groups()

    checked = 0
    for line in lines:
        w = want(line)
        checked += w is not None
        assert op_match(line) == w, line
        pad = "zz" + line + "\nyy"
        assert op_match(pad, 2, 2 + len(line)) == w, line
    assert checked > 5000
    assert op_match('(%1 x) = "pd_op.f" (%a) {} : (f32) -> f32') is None  # (a value list of the loose regex)
    assert op_match('(%1) = "pd_op.f" (%a,%b) {} : (f32, f32) -> f32') is None


@pytest.mark.parametrize("body", [
    '(%0) = "pd_op.full" () {b:1,a:2} : () -> tensor<f32>\n    (%1) = "pd_op.relu" (%0) {a:1} : (tensor<f32>) -> tensor<f32>',
    '(%0) = "pd_op.data" () {name:"x",a:1} : () -> tensor<f32>\n    (%1) = "pd_op.data" () {name:"y",a:1} : () -> tensor<f32>',
    '(%0) = "pd_op.full" () {a:1} : () -> tensor<f32>\n    (%2) = "pd_op.relu" (%0) {a:1} : (tensor<f32>) -> tensor<f32>',
    '(%x) = "pd_op.full" () {a:1} : () -> tensor<f32>\n    (%0, %1) = "pd_op.split" (%x) {a:1} : (tensor<f32>) -> tensor<f32>, tensor<f32>',
    '(%0) = "pd_op.full" () {a:1} : () -> tensor<f32>\n    (%1, %1x) = "pd_op.split" (%0) {a:1} : (tensor<f32>) -> tensor<f32>, tensor<f32>',
])
def test_style_found_while_reading_is_the_walks(body):
    """The numbering and key order the fast path finds while reading (unsorted keys, read or left
    unread; a number skipped; plain names; a name that is not one) are what a walk finds."""
    text = "{\n    " + body + "\n}\n"
    fast = _fast_only(text)
    assert print_program(fast) == text


@pytest.mark.parametrize("types", [
    "vec[]", "vec[tensor<2xf32>]", "vec[tensor<2xf32>,tensor<3x4xi64>], tensor<2xf32>",
    "tensor<2xf32>, vec[<<NULL TYPE>>,tensor<2xf32>]",
    "vec[pd_dist.tensor<4x2xf32, mesh_shape:[2,2],process_ids:[0,1,2,3],dims_mappings:[1,-1], "
    "placements:[Replicate(), Shard(dim=0)]>,pd_dist.tensor<4x2xf32, mesh_shape:[2,2],process_ids:[0,1,2,3],"
    "dims_mappings:[1,-1], placements:[Replicate(), Shard(dim=0)]>], pd_dist.tensor<1xi32, mesh_shape:[2,2],"
    "process_ids:[0,1,2,3],dims_mappings:[-1], placements:[Replicate(), Replicate()]>",
])
def test_vector_types_read_without_the_grammar(types):
    """``vec[...]`` types (builtin.combine, split_with_num: every reshard output has them) are read
    by the fast path, as the grammar reads them (loading the grammar is ~0.2 s of a run)."""
    from distc.syntax.parser.leaves import _fast_type_list

    fast = _fast_type_list(types)
    assert fast is not None
    assert fast == FastParser()._lark.parse(types, start="type_list")
    assert ", ".join(map(str, fast)) == types
