"""The grammar is found from an editable install and from a built wheel."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from distc.syntax.grammar import grammar_path

ROOT = Path(__file__).resolve().parents[1]


def test_editable_install_reads_the_source_grammar():
    assert grammar_path() == ROOT / "grammar" / "pir.lark"


def test_wheel_carries_the_grammar_and_parses_with_it(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True)
    if r.returncode != 0 and "hatchling" in r.stderr:
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                            str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (whl,) = (tmp_path / "dist").glob("distc-*.whl")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        assert "distc/_grammar/pir.lark" in names
        assert "distc/dialects/paddle_ops.txt" in names  # Paddle 3.3.1's op names (known_ops)
        assert "distc/commands/report/templates/report.html.j2" in names  # distc report's page
        z.extractall(tmp_path / "site")
    # run from the unpacked wheel only: no source tree on the path
    code = ("import distc, distc.syntax.grammar as g; "
            "p = g.grammar_path(); assert '_grammar' in str(p), p; "
            "prog = distc.parse('{\\n    (%0) = \"pd_op.full\" () {value:1} : () -> tensor<1xf32>\\n}\\n', fast=False); "
            "from distc.dialects.known_ops import is_known; assert not is_known('pd_op.matmull'); "
            "assert is_known('pd_op.matmul'); print(len(prog.ops))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"
