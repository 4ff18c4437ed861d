"""Malformed input ends in `path:line:col: error:`, the line and a caret; never a traceback."""

import subprocess
import sys

import pytest

import distc

H = ('{\n    (%0) = "pd_op.data" () {dtype:float32,name:"x",place:Place(undefined:0),shape:[4,8],'
     'stop_gradient:[true]} : () -> tensor<4x8xf32>\n')


def op(text):
    return H + "    " + text + "\n}\n"


CASES = {
    # name: (text, line, col, message fragment)
    "unbalanced bracket": (op('(%1) = "pd_op.relu" (%0) {stop_gradient:[true} : (tensor<4x8xf32>) -> tensor<4x8xf32>'),
                           3, 50, "unexpected '}'; expected ',', ']'"),
    "unknown token": (op('(%1) = "pd_op.relu" (%0) {stop_gradient:[true]} : (tensor<4x8xf32>) -> tensor<4x8xf32> $'),
                      3, 92, "unexpected character '$'"),
    "undefined value": (op('(%1) = "pd_op.relu" (%7) {stop_gradient:[true]} : (tensor<4x8xf32>) -> tensor<4x8xf32>'),
                        3, 26, "use of undefined value %7"),
    "defined twice": (op('(%0) = "pd_op.relu" (%0) {stop_gradient:[true]} : (tensor<4x8xf32>) -> tensor<4x8xf32>'),
                      3, 6, "value %0 is defined twice"),
    "dims_mapping longer than rank": (
        op('(%1) = "dist_op.shard_tensor" (%0) {stop_gradient:[true]} : (tensor<4x8xf32>) -> '
           'pd_dist.tensor<4x8xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[0,-1,-1]>'),
        3, 143, "dims_mapping [0, -1, -1] has 3 entries but the tensor has rank 2"),
    "mesh ids do not fit shape": (
        op('(%1) = "dist_op.shard_tensor" (%0) {stop_gradient:[true]} : (tensor<4x8xf32>) -> '
           'pd_dist.tensor<4x8xf32, mesh_shape:[2,2],process_ids:[0,1,2],dims_mappings:[0,-1]>'),
        3, 127, "mesh of shape [2, 2] needs 4 process ids, got 3"),
    "dims_mapping names a missing mesh dim": (
        op('(%1) = "dist_op.shard_tensor" (%0) {stop_gradient:[true]} : (tensor<4x8xf32>) -> '
           'pd_dist.tensor<4x8xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[1,-1]>'),
        3, 143, "names mesh dim 1, but the mesh has 1 dims"),
    "operand type mismatch": (op('(%1) = "pd_op.relu" (%0) {stop_gradient:[true]} : (tensor<4x9xf32>) -> tensor<4x8xf32>'),
                              3, 26, "is declared as tensor<4x9xf32> but %0 has type tensor<4x8xf32>"),
    "result count mismatch": (op('(%1, %2) = "pd_op.relu" (%0) {stop_gradient:[true]} : (tensor<4x8xf32>) -> tensor<4x8xf32>'),
                              3, 5, "has 2 result(s) but 1 result type(s)"),
    "unterminated string": (op('(%1) = "pd_op.relu" (%0) {name:"abc} : (tensor<4x8xf32>) -> tensor<4x8xf32>'),
                            3, 36, "unterminated string"),
    "placements disagree": (
        op('(%1) = "dist_op.shard_tensor" (%0) {stop_gradient:[true]} : (tensor<4x8xf32>) -> '
           'pd_dist.tensor<4x8xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[0,-1], placements:[Replicate()]>'),
        3, None, "disagree with dims_mappings"),
    "missing closing brace": (H, 2, 133, "unexpected end of input"),
    "unknown reduce type": (
        op('(%1) = "dist_op.shard_tensor" (%0) {stop_gradient:[true]} : (tensor<4x8xf32>) -> '
           'pd_dist.tensor<4x8xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[-1,-1], partial(0,FOO)>'),
        3, None, "unknown reduce type 'FOO'"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_parse_error_is_located(name):
    text, line, col, msg = CASES[name]
    with pytest.raises(distc.DiagnosticError) as ei:
        distc.parse(text, "bad.ir")
    e = ei.value
    assert msg in e.message
    assert e.line == line
    if col is not None:
        assert e.col == col
    rendered = e.render().splitlines()
    assert rendered[0].startswith(f"bad.ir:{line}:{e.col}: error: ")
    caret = rendered[2]
    assert caret.strip() == "^"


def test_caret_points_at_the_column():
    text, line, col, _ = CASES["undefined value"]
    with pytest.raises(distc.DiagnosticError) as ei:
        distc.parse(text, "bad.ir")
    _, src, caret = ei.value.render().splitlines()[:3]
    assert src[caret.index("^"):].startswith("%7")


@pytest.mark.parametrize("name", ["unbalanced bracket", "undefined value", "mesh ids do not fit shape"])
def test_cli_reports_and_exits_1(tmp_path, name):
    text, line, col, msg = CASES[name]
    f = tmp_path / "bad.ir"
    f.write_text(text)
    out = tmp_path / "out.ir"
    r = subprocess.run([sys.executable, "-m", "distc", "fmt", str(f), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 1
    assert f"{f}:{line}:" in r.stderr and "error:" in r.stderr and msg in r.stderr
    assert "Traceback" not in r.stderr
    assert "^" in r.stderr
    assert not out.exists()  # nothing written


def test_missing_file_is_an_error_not_a_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "distc", "fmt", str(tmp_path / "nope.ir")], capture_output=True, text=True)
    assert r.returncode == 1
    assert "nope.ir: error: no such file" in r.stderr
    assert "Traceback" not in r.stderr


def test_internal_error_exits_70(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import distc.cli as cli

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(cli, "print_program", boom)
    monkeypatch.setattr(cli, "print_pieces", boom)  # (fmt -o / to stdout prints through this one)
    f = tmp_path / "ok.ir"
    f.write_text(H + "}\n")
    r = CliRunner().invoke(cli.main, ["fmt", str(f)])
    assert r.exit_code == 70
    assert "internal error" in r.output and "kaboom" in r.output


def test_op_dist_attr_entry_longer_than_the_rank_is_read_and_verify_locates_it():
    """Paddle prints such entries (gradient merge's add_ carries matmul_grad's op_dist_attr): the
    reader reads and prints them as they are; the verifier (``opt -p verify``, every pass
    pipeline) reports them, located."""
    from distc.analysis.verify import verify

    text = op('(%1) = "dist_op.shard_tensor" (%0) {op_dist_attr:{mesh:{shape:[2],process_ids:[0,1]},result(0):'
              '{mesh_shape:[2],process_ids:[0,1],dims_mappings:[0,-1,-1]},chunk_id:-1}} : (tensor<4x8xf32>) -> '
              'pd_dist.tensor<4x8xf32, mesh_shape:[2],process_ids:[0,1],dims_mappings:[0,-1]>')
    prog = distc.parse(text, "bad.ir")
    assert str(prog) == text
    with pytest.raises(distc.DiagnosticError) as ei:
        verify(prog)
    assert "result(0) dims_mapping [0, -1, -1] does not fit rank 2" in ei.value.message
    assert (ei.value.line, ei.value.col) == (3, 5)
