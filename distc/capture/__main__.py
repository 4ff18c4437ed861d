"""``python -m distc.capture [OPTIONS] -- python train.py ARGS``: ``distc capture`` (the same
command, exit statuses and signal handling)."""

import sys

from ..cli import run

sys.argv = ["distc", "capture", *sys.argv[1:]]
run(prog_name="distc")
