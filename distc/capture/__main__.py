"""``python -m distc.capture [OPTIONS] -- python train.py ARGS``: the same as ``distc capture``."""

from .command import main

main()
