"""Regenerate ``distc/dialects/paddle_ops.txt``: every op name real Paddle registers.

Run with the real Paddle's interpreter (distc never imports paddle)::

    /work/paddle/bin/python tests/data/oracle/paddle_op_names.py distc/dialects/paddle_ops.txt

Paddle 3.3.1 ships no op yaml files and exposes no list of its IrContext's registered ops to
Python; every PIR op class has its name as a string literal (``static const char *name() { return
"pd_op.matmul"; }``) in ``libpaddle.so``, so the names are read from there: each NUL-terminated
literal that is exactly ``<dialect>.<name>`` for a dialect Paddle registers.  A name literal that
is not an op (there are few: pass code compares op names with such literals) only makes distc
more lenient.  Output: a header line (``# ``) naming the Paddle version, then one name a line,
sorted (the same input gives the same bytes; plain text: distc reads it on every run, and
unzipping it cost more than its 42 KB).
"""

from __future__ import annotations

import re
import sys

DIALECTS = ("pd_op", "dist_op", "builtin", "cf", "pd_kernel", "onednn_op", "cinn_op", "cinn_runtime", "shape")


def names_in(binary: bytes) -> list[str]:
    # not after a name or path character (``.../dist_op.cc`` is a file); the linker merges a literal
    # into the tail of a longer one ("Handle for builtin.split"), so what precedes may be text
    pat = re.compile(rb"(?<![A-Za-z0-9_./-])((?:" + b"|".join(d.encode() for d in DIALECTS)
                     + rb")\.[A-Za-z0-9_]+)\x00")
    return sorted({m.group(1).decode() for m in pat.finditer(binary)})


def main(out: str) -> None:
    import paddle
    from paddle.base import libpaddle

    with open(libpaddle.__file__, "rb") as f:
        names = names_in(f.read())
    head = f"# Paddle {paddle.__version__} (commit {paddle.version.commit}): op names in libpaddle.so, {len(names)}\n"
    with open(out, "wb") as f:
        f.write((head + "".join(n + "\n" for n in names)).encode())
    print(head.strip(), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "distc/dialects/paddle_ops.txt")
