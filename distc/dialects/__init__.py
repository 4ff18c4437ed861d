"""Paddle's op knowledge, one place for it: the layer between ``syntax`` and ``analysis``.

* :mod:`.ops` -- op-name constants (``RESHARD = "dist_op.reshard"`` ...), so no pass or analysis
  spells an op name itself;
* :mod:`.collectives` -- the collective ops of both print eras (2024's ``c_allreduce_sum_``,
  ``c_allgather``, ``c_reducescatter`` and today's ``all_reduce``, ``all_gather`` ...), their
  kinds, and the one :class:`~.collectives.Collective` record with its byte model;
* :mod:`.optimizers` -- the optimizer signature table (operand roles per op and arity) and the
  in-place map (which result updates which operand);
* :mod:`.spmd` -- the SPMD rules of the plain ops Paddle's API builds (transpose, reshape, split,
  concat): the dist attrs Paddle infers for them;
* :mod:`.partial_order` -- the order Paddle prints the partial dims of an attr it builds;
* :mod:`.known_ops` -- every op name Paddle 3.3.1 has (``paddle_ops.txt``) and the earlier
  eras' names: which ops of a program Paddle does not know (and the located warnings saying so);
* :mod:`.rings` -- communication groups and their ring ids, numbered as Paddle's ``new_group`` does.

It imports only ``distc.ir`` and ``distc.syntax`` (diagnostics); ``analysis`` and ``passes`` import it.
"""
