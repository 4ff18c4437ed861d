"""Passes over PIR programs, one a file.  A pass is a class you import
(``from distc.passes.reshard_pass import ReshardPass``); ``@register`` where it is defined also
gives it its name for pipeline strings (``distc opt -p 'reshard{rank=1}'``): :func:`load_passes`
imports every module of this package (no list to keep), so every pass is there to be named."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path


def pass_modules() -> list[str]:
    """The modules of this package (not its subpackages), by name."""
    return sorted(i.name for i in pkgutil.iter_modules([str(Path(__file__).parent)]) if not i.ispkg)


def load_passes() -> None:
    """Import every pass module, so that each pass has registered its name.  Safe from several
    threads: an import another thread has begun is waited for, never seen half done."""
    for m in pass_modules():
        importlib.import_module(f"{__name__}.{m}")
