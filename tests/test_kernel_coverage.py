"""Every op name of every stored Paddle training program has a simulator kernel (issue 17): a file
under tests/data (plain, gzipped, xz, or a member of a .tar.xz/.tar.gz archive: the model, fusion
and schedule sets; logs of several programs included) holding a gradient op is a training program,
and each op name in it must be in the kernel table.  Found by a scan of the op
names (``"name" (`` is how every print era writes an op), so the whole store is checked in
seconds."""

from __future__ import annotations

import gzip
import lzma
import re
import tarfile
from pathlib import Path

from distc.analysis.simulate import lookup

DATA = Path(__file__).resolve().parent / "data"
OP = re.compile(r'= "([A-Za-z_][\w]*\.[\w]+)" \(')


def stored_texts():
    for p in sorted(DATA.rglob("*")):
        if not p.is_file():
            continue
        if p.name.endswith((".tar.xz", ".tar.gz")):
            with tarfile.open(p) as tar:
                for m in tar.getmembers():
                    if m.isfile():
                        yield p / m.name, tar.extractfile(m).read().decode("utf-8", errors="replace")  # type: ignore[union-attr]
        elif p.name.endswith(".ir"):
            yield p, p.read_text(encoding="utf-8", errors="replace")
        elif p.name.endswith(".gz"):
            yield p, gzip.decompress(p.read_bytes()).decode("utf-8", errors="replace")
        elif p.name.endswith(".xz"):
            yield p, lzma.decompress(p.read_bytes()).decode("utf-8", errors="replace")


def test_every_op_of_a_stored_training_program_has_a_kernel():
    missing: dict[str, str] = {}
    training = 0
    for path, text in stored_texts():
        names = set(OP.findall(text))
        if not any(n.endswith(("_grad", "_grad_")) for n in names):
            continue
        training += 1
        for n in names:
            if lookup(n) is None:
                missing.setdefault(n, str(path.relative_to(DATA)))
    assert training > 1500, training  # the LLaMA, MLP, pipeline, dump sets; model, fusion, schedule archives
    assert not missing, "no kernel for: " + ", ".join(f"{n} ({f})" for n, f in sorted(missing.items()))


def test_the_scan_sees_every_print_era():
    """The op-name pattern matches the quoted names of 2023, 2024 and current prints."""
    lines = ['    (%0) = "pd_op.matmul" (%1, %2) {transpose_x:false} : (tensor<2x2xf32>) -> tensor<2x2xf32>',
             '    (%3) = "pd_op.matmul_grad" (%1, %2, %0) {transpose_x:(Bool)false} : (builtin.tensor<2xf32>) -> ',
             '    (%4, %5) = "cf.tuple_pop" (%outlet_2) {stop_gradient:[true,false]} : (cf.outlet) -> tensor<1xf32>']
    assert [OP.findall(ln) for ln in lines] == [["pd_op.matmul"], ["pd_op.matmul_grad"], ["cf.tuple_pop"]]
