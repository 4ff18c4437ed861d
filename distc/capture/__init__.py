"""``distc capture``: a user's own Paddle training script -> distc's inputs and Paddle's golden files.

The only part of distc that has to do with Paddle, and it never imports Paddle itself:
:mod:`.hooks` runs inside the Paddle process (the command's own interpreter, or an oracle
generator) and takes the programs out of Paddle's auto-parallel engine; :mod:`.run` starts one such
process per rank; :mod:`.session` checks what they left and :mod:`.folder` writes the capture
folder whole (``manifest.json`` + every rank's files); :mod:`.command` is the CLI
(``distc capture`` and ``python -m distc.capture``).
"""
