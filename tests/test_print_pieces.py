"""A rank's program written from the printer's pieces (no string of the whole text): the same
bytes as its text, in a file, a compressed file or on a stream, and its text asked later only
joins the pieces kept."""

import gzip
import os
from pathlib import Path

import distc
import distc.outputs
from distc.outputs import Outputs
from distc.syntax.printer import print_pieces, print_program

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "mlp_dp2mp2_adamw.ir"


def _lowered(text: str):
    return distc.shard(distc.parse(text, str(SAMPLE)), rank=1)


def test_pieces_join_to_the_text_in_every_newline_style():
    text = SAMPLE.read_text()
    for src in (text, text.replace("\n", "\r\n")):
        prog = _lowered(src).program
        pieces = print_pieces(prog)
        assert isinstance(pieces, list) and len(pieces) > 100
        assert "".join(pieces) == print_program(prog) == str(prog)
        assert ("\r\n" in "".join(pieces)) == ("\r\n" in src)


def test_a_result_written_from_its_pieces_keeps_them_for_its_text():
    res = _lowered(SAMPLE.read_text())
    want = print_program(res.program)
    pieces = res.text_pieces()
    assert isinstance(pieces, list) and res.text_pieces() is pieces  # (printed once)
    assert res.text == want and res._pieces is None  # joined, not printed again
    assert res.text_pieces() == want
    sent = _lowered(SAMPLE.read_text())
    sent.text_pieces()
    assert sent.detached(texts=True).text == want  # a worker's result sent with its text


def test_pieces_are_written_as_the_text_to_a_file_a_compressed_file_and_a_stream(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(distc.outputs, "PIECES", 7)  # (many chunks, one cut inside a line)
    res = _lowered(SAMPLE.read_text())
    want = print_program(res.program)
    plain, packed = tmp_path / "r1.ir", tmp_path / "r1.ir.gz"
    with Outputs() as out:
        targets = [out.add("-o", str(plain)), out.add("-o", str(packed)), out.add("-o", "-")]
        for t in targets:
            out.write(t, print_pieces(res.program))
        out.commit()
    assert plain.read_text() == want
    assert gzip.decompress(packed.read_bytes()).decode() == want
    assert capfd.readouterr().out == want


def test_a_fault_half_way_through_the_pieces_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(distc.outputs, "PIECES", 7)
    res = _lowered(SAMPLE.read_text())
    target = tmp_path / "r1.ir"
    monkeypatch.setenv("DISTC_FAULT_INJECT", "write=EIO")
    try:
        with Outputs() as out:
            out.write(out.add("-o", str(target)), res.text_pieces())
            out.commit()
    except OSError as e:
        assert "r1.ir" in str(e)
    else:
        raise AssertionError("the injected fault did not fire")
    assert not target.exists() and not [p for p in os.listdir(tmp_path)]


def test_fmt_writes_a_file_of_several_programs_from_their_pieces(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from distc.cli import main
    from distc.syntax.parser import parse_programs

    monkeypatch.setattr(distc.outputs, "PIECES", 5)
    dumps = Path(__file__).resolve().parent / "data" / "oracle" / "dumps"
    for name in ("log_mixed.log", "ir_printing_passes.log"):
        text = (dumps / name).read_bytes()
        assert len(parse_programs(text.decode())) > 1
        for extra in ([], ["--canonical"]):
            out = tmp_path / f"{name}{len(extra)}.ir"
            r = CliRunner().invoke(main, ["fmt", str(dumps / name), "-o", str(out), *extra])
            assert r.exit_code == 0, r.output
            assert out.read_bytes() == text


# ----------------------------------------------------------------- an operand without a name
def _relu_and_add(tmp_name: str = "x.ir"):
    """The sample parsed as ``tmp_name``, its first ``pd_op.relu`` (line 27) and ``pd_op.add`` (line 26)."""
    prog = distc.parse(SAMPLE.read_text(), tmp_name)
    relu = next(o for o in prog.ops if o.name == "pd_op.relu")
    add = next(o for o in prog.ops if o.name == "pd_op.add")
    assert relu.loc == (27, 5) and add.loc == (26, 5)
    return prog, relu, add


def test_an_operand_without_a_name_is_an_error_where_its_op_is_printed():
    """An op reading a value no op of the program defines (a pass's bug: a new value used, its op
    never inserted or removed again) was a None piece: the error came where the pieces were joined
    or written ("sequence item 56: expected str instance, NoneType found"), far from its cause.
    Now the printer names the op, its line and the operand, for one operand and for several."""
    import pytest

    from distc.ir.core import Operation
    from distc.ir.values import Value
    from distc.syntax.diagnostics import UnnamedOperand

    prog, relu, add = _relu_and_add()
    relu.set_operand(0, Value(relu.operands[0].type))
    for fn in (print_pieces, print_program):
        with pytest.raises(UnnamedOperand) as ei:
            fn(prog)
        assert str(ei.value) == "x.ir:27:5: 'pd_op.relu': operand 0 has no name: no op defines its value"
    prog, relu, add = _relu_and_add()
    new = Operation("pd_op.scale", [add.operands[1]], [add.operands[1].type])  # never inserted
    add.set_operand(1, new.results[0])
    with pytest.raises(UnnamedOperand) as ei:
        print_pieces(prog)
    assert str(ei.value) == ("x.ir:26:5: 'pd_op.add': operand 1 has no name: its value is result 0 of 'pd_op.scale', "
                             "which is not in the program")


def test_cli_names_the_op_of_an_operand_without_a_name(tmp_path, monkeypatch):
    """Through the command line (a pass's bug stood in for by the program the parser gives): exit
    70, an internal error that says which op and operand, where; no traceback, nothing written."""
    from click.testing import CliRunner

    import distc.cli as cli
    from distc.ir.values import Value

    real = cli.parse_programs

    def broken(text, name):
        progs = real(text, name)
        relu = next(o for o in progs[0].ops if o.name == "pd_op.relu")
        relu.set_operand(0, Value(relu.operands[0].type))
        return progs

    monkeypatch.setattr(cli, "parse_programs", broken)
    src = tmp_path / "x.ir"
    src.write_text(SAMPLE.read_text())
    for args in (["-o", str(tmp_path / "out.ir")], []):
        r = CliRunner().invoke(cli.main, ["fmt", str(src), *args])
        assert r.exit_code == 70, r.output
        assert f"internal error: UnnamedOperand: {src}:27:5: 'pd_op.relu': operand 0 has no name" in r.output
        assert "Traceback" not in r.output and "NoneType" not in r.output
    assert not (tmp_path / "out.ir").exists()
