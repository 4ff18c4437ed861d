"""``verify``: check use-def chains, dominance and dist attributes (see distc.analysis.verify)."""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.verify import verify
from .base import ModulePass, PassContext, register


@register
@dataclass
class VerifyPass(ModulePass):
    name = "verify"
    description = "check use-def chains, dominance and dist-attribute consistency"

    def apply(self, prog, ctx: PassContext) -> None:
        verify(prog)
