"""``verify``: check use-def chains, dominance and dist attributes (see distc.analysis.verify)."""

from __future__ import annotations


from ..analysis.verify import verify
from ..ir.records import record
from .base import ModulePass, PassContext, register


@register
@record
class VerifyPass(ModulePass):
    name = "verify"
    description = "check use-def chains, dominance and dist-attribute consistency"

    def apply(self, prog, ctx: PassContext) -> None:
        verify(prog)
