"""Passes over PIR programs, one a file.  A pass is a class you import
(``from distc.passes.reshard_pass import ReshardPass``); ``@register`` where it is defined also
gives it its name for pipeline strings (``distc opt -p 'reshard{rank=1}'``): :func:`load_passes`
imports every module of this package (no list to keep), so every pass is there to be named."""

from __future__ import annotations

import importlib


def pass_modules() -> list[str]:
    """The modules of this package (not its subpackages), by name."""
    import os  # (not pkgutil/pathlib: they cost a plain run's start-up ~10 ms)

    here = os.path.dirname(__file__)
    return sorted(f[:-3] for f in os.listdir(here) if f.endswith(".py") and f != "__init__.py")


def load_passes() -> None:
    """Import every pass module, so that each pass has registered its name.  Safe from several
    threads: an import another thread has begun is waited for, never seen half done."""
    for m in pass_modules():
        importlib.import_module(f"{__name__}.{m}")
