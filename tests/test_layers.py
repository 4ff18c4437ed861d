"""The package's layers: every import in distc/ goes down (or sideways), never up; no module is big.

Bottom-up: ``ir`` -> ``syntax`` -> ``dialects`` -> ``analysis`` -> ``passes`` -> ``pipeline`` ->
``commands`` (with ``cli``, ``driver``, ``testing`` and ``__main__``).  ``distc/__init__.py`` is the
library facade (``distc.parse``, ``distc.print_program``, ``distc.shard``) and sits with ``pipeline``.  Imports inside
functions count too: every ``import``/``from ... import`` in a module's AST is checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "distc"
LAYERS = ["ir", "syntax", "dialects", "analysis", "passes", "pipeline", "commands"]
# ``capture`` (``distc capture``) is a command: the one package with anything to do with Paddle, which
# it never imports itself (its ``hooks.py`` runs inside the Paddle process; see test_only_capture_knows_paddle)
TOP_LEVEL = {"__init__": "pipeline", "cli": "commands", "driver": "commands", "testing": "commands",
             "__main__": "commands", "outputs": "commands", "capture": "commands"}
MAX_LINES = 500

# (importing module, imported module) pairs still going upward, each with its owner: must end empty
ALLOWED_UPWARD: set[tuple[str, str]] = set()
# modules still over MAX_LINES, each with its owner: must end empty
ALLOWED_LONG: set[str] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def layer_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:  # distc itself
        return LAYERS.index(TOP_LEVEL["__init__"])
    head = parts[1]
    if head in LAYERS:
        return LAYERS.index(head)
    if head in TOP_LEVEL:
        return LAYERS.index(TOP_LEVEL[head])
    raise AssertionError(f"module {module} is in no layer: add it to LAYERS or TOP_LEVEL in {__file__}")


def imports_of(module: str, path: Path) -> list[tuple[str, int]]:
    """Every distc module ``module`` imports (absolute names), with the line, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "distc"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[:-(node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "distc":
                continue
            for a in node.names:  # `from . import x` may name a submodule
                sub = f"{target}.{a.name}"
                out.append((sub if sub in MODULES else target, node.lineno))
    return out


def upward_imports() -> list[str]:
    bad = []
    for mod, path in MODULES.items():
        mine = layer_of(mod)
        for target, line in imports_of(mod, path):
            if target == "distc" and mod.split(".")[1:2] and mod.split(".")[1] in TOP_LEVEL:
                continue  # cli's `from . import __version__`
            if layer_of(target) > mine and (mod, target) not in ALLOWED_UPWARD:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {mod} ({LAYERS[mine]}) imports "
                           f"{target} ({LAYERS[layer_of(target)]})")
    return bad


def test_every_module_has_a_layer():
    for mod in MODULES:
        layer_of(mod)


def test_imports_go_down_the_layers():
    bad = upward_imports()
    assert not bad, "upward imports (layers bottom-up: " + " -> ".join(LAYERS) + "):\n" + "\n".join(bad)


def test_no_module_over_500_lines():
    long = {}
    for mod, path in MODULES.items():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES and mod not in ALLOWED_LONG:
            long[mod] = n
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_allow_lists_hold_only_live_exceptions():
    """An entry that no longer excuses anything must go (the lists only shrink)."""
    for mod in ALLOWED_LONG:
        assert mod in MODULES and len(MODULES[mod].read_text().splitlines()) > MAX_LINES, mod
    for mod, target in ALLOWED_UPWARD:
        assert any(t == target for t, _ in imports_of(mod, MODULES[mod])), (mod, target)


@pytest.mark.parametrize("src,dst,ok", [
    ("distc.passes.partition", "distc.dialects.ops", True),
    ("distc.analysis.memory", "distc.passes.shard_optimizer", False),
    ("distc.ir.core", "distc.syntax.printer", False),
    ("distc.driver", "distc.passes.base", True),
    ("distc.dialects.collectives", "distc.ir.dist", True),
])
def test_layer_order(src, dst, ok):
    assert (layer_of(dst) <= layer_of(src)) == ok


def test_relative_imports_resolve(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("from ...ir import dist\nfrom .util import a\ndef f():\n    from ...syntax.parser import parse\n")
    got = {t for t, _ in imports_of("distc.passes.reshard.x", f)}
    assert got == {"distc.ir.dist", "distc.passes.reshard.util", "distc.syntax.parser"}


def _imported_roots(tree: ast.AST, top_level_only: bool = False) -> set[str]:
    nodes = tree.body if top_level_only else ast.walk(tree)  # type: ignore[attr-defined]
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            out.add("distc")  # a relative import
    return out


def test_only_capture_knows_paddle():
    """distc never imports Paddle: only ``distc/capture/hooks.py`` does, inside its functions, and it
    runs in the Paddle process (the user's interpreter, an oracle generator), never in distc's.
    hooks.py imports nothing of distc's and only the standard library at module level, so an
    interpreter holding Paddle but none of distc's dependencies can run it by its path."""
    import sys

    hooks = ROOT / "capture" / "hooks.py"
    for mod, path in MODULES.items():
        roots = _imported_roots(ast.parse(path.read_text(encoding="utf-8")))
        if path == hooks:
            assert "distc" not in roots, "hooks.py must not import distc (it runs without distc's dependencies)"
            top = _imported_roots(ast.parse(path.read_text(encoding="utf-8")), top_level_only=True)
            assert top <= set(sys.stdlib_module_names), top - set(sys.stdlib_module_names)
            assert "paddle" in roots
        else:
            assert "paddle" not in roots, f"{mod} imports paddle: only distc/capture/hooks.py may (lazily)"
