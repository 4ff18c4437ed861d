"""The package's layers: every import in distc/ goes down (or sideways), never up; no import
circle; no module is big; no process-global mutable state.

Bottom-up: ``ir`` -> ``syntax`` -> ``dialects`` -> ``analysis`` -> ``passes`` -> ``pipeline`` ->
``driver`` (with ``outputs``) -> ``commands`` (with ``cli``, ``testing`` and ``__main__``).  ``distc/__init__.py`` is the
library facade (``distc.parse``, ``distc.print_program``, ``distc.shard``) and sits with ``pipeline``.
Every import counts: at module level, inside functions, under ``TYPE_CHECKING``, and the modules
``importlib.import_module(...)`` / ``__import__(...)`` name (a constant, or ``f"{__name__}..."``:
this package's own).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "distc"
LAYERS = ["ir", "syntax", "dialects", "analysis", "passes", "pipeline", "driver", "commands"]
# ``capture`` (``distc capture``) is a command: the one package with anything to do with Paddle, which
# it never imports itself (its ``hooks.py`` runs inside the Paddle process; see test_only_capture_knows_paddle)
TOP_LEVEL = {"__init__": "pipeline", "driver": "driver", "outputs": "driver", "console": "driver", "cmdline": "driver",
             "compressed": "driver", "workers": "driver",
             "cli": "commands", "testing": "commands", "__main__": "commands", "capture": "commands"}
MAX_LINES = 500

# (importing module, imported module) pairs still going upward, each with its owner: must end empty
ALLOWED_UPWARD: set[tuple[str, str]] = set()
# modules still over MAX_LINES, each with its owner: must end empty
ALLOWED_LONG: set[str] = set()
# module-level state a function changes: registries filled while their modules are imported (by a
# decorator where each entry is defined, under the import lock; read-only once imported), and the
# printer hook ``ir`` cannot import (``syntax.printer`` installs it once, at its import)
ALLOWED_STATE: dict[tuple[str, str], str] = {
    ("distc.passes.base", "REGISTRY"): "@register: pass names, filled as pass modules are imported",
    ("distc.passes.reshard.registry", "_ENTRIES"): "@reshard_function, filled as the package is imported "
                                                   "(unregister: a test's own function)",
    ("distc.analysis.simulate.registry", "KERNELS"): "@kernel, filled as the kernels package is imported",
    ("distc.ir.program", "_PRINTER"): "set once by distc.syntax.printer at its import",
}
MUTATORS = frozenset({"append", "extend", "insert", "remove", "pop", "popitem", "clear", "update",
                      "setdefault", "add", "discard", "sort", "reverse"})


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root.parent).with_suffix("")
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


def _dynamic_target(node: ast.Call, module: str) -> str | None:
    """The module ``importlib.import_module(X)`` / ``__import__(X)`` names, if it can be told:
    a constant (``None`` for ``f"{__name__}.{...}"``: a module of this package)."""
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in ("import_module", "__import__") or not node.args:
        return None
    a = node.args[0]
    if isinstance(a, ast.Constant) and isinstance(a.value, str):
        return a.value
    if isinstance(a, ast.JoinedStr) and a.values and isinstance(a.values[0], ast.FormattedValue) \
            and isinstance(a.values[0].value, ast.Name) and a.values[0].value.id == "__name__":
        return None  # a module of this package (sideways)
    return "<dynamic>"


def imports_of(module: str, path: Path, modules: dict[str, Path] | None = None) -> list[tuple[str, int]]:
    """Every distc module ``module`` imports (absolute names), with the line, at any depth."""
    modules = MODULES if modules is None else modules
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
                out.append((sub if sub in modules else target, node.lineno))
        elif isinstance(node, ast.Call):
            target = _dynamic_target(node, module)
            if target == "<dynamic>":
                out.append((target, node.lineno))
            elif target is not None and target.split(".")[0] == "distc":
                out.append((target, node.lineno))
    return out


def upward_imports(modules: dict[str, Path] | None = None) -> list[str]:
    modules = MODULES if modules is None else modules
    bad = []
    for mod, path in modules.items():
        mine = layer_of(mod)
        for target, line in imports_of(mod, path, modules):
            where = f"{path.relative_to(path.parents[len(mod.split('.')) - (path.name != '__init__.py')])}:{line}"
            if target == "<dynamic>":
                bad.append(f"{where}: {mod} imports a module named at run time (name it, or f\"{{__name__}}...\")")
                continue
            if target == "distc" and mod.split(".")[1:2] and mod.split(".")[1] in TOP_LEVEL:
                continue  # cli's `from . import __version__`
            if layer_of(target) > mine and (mod, target) not in ALLOWED_UPWARD:
                bad.append(f"{where}: {mod} ({LAYERS[mine]}) imports {target} ({LAYERS[layer_of(target)]})")
    return bad


def import_cycles(modules: dict[str, Path] | None = None) -> list[list[str]]:
    """The import circles (strongly connected components of more than one module, or a module
    importing itself by name), every import counted."""
    modules = MODULES if modules is None else modules
    graph = {m: sorted({t for t, _ in imports_of(m, p, modules) if t in modules}) for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan, iteratively (no recursion limit)
        work = [(v, iter(graph[v]))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1 or node in graph[node]:
                        out.append(sorted(comp))

    for m in graph:
        if m not in index:
            visit(m)
    return out


def module_state(modules: dict[str, Path] | None = None) -> list[str]:
    """Functions that change module-level state: a ``global`` statement, or a module-level name
    changed in place (``NAME[k] = v``, ``NAME.append(...)``, ``del NAME[k]`` ...)."""
    modules = MODULES if modules is None else modules
    bad = []
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        top = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            local = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
            local |= {t.id for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.For, ast.With))
                      for t in ast.walk(n) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
            for n in ast.walk(fn):
                names: list[str] = []
                if isinstance(n, ast.Global):
                    names = list(n.names)
                elif isinstance(n, (ast.Assign, ast.AugAssign, ast.Delete)):
                    targets = n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]
                    names = [t.value.id for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)]
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MUTATORS \
                        and isinstance(n.func.value, ast.Name):
                    names = [n.func.value.id]
                for name in names:
                    if name in top and (isinstance(n, ast.Global) or name not in local) \
                            and (mod, name) not in ALLOWED_STATE:
                        bad.append(f"{path.name}:{n.lineno}: {mod}.{fn.name} changes module-level '{name}'")
    return bad


def test_every_module_has_a_layer():
    for mod in MODULES:
        layer_of(mod)


def test_imports_go_down_the_layers():
    bad = upward_imports()
    assert not bad, "upward imports (layers bottom-up: " + " -> ".join(LAYERS) + "):\n" + "\n".join(bad)


def test_no_dynamic_import_of_a_named_module():
    """A module named by a constant is imported by an import statement, where it is used if that
    is to be late (``outputs.py`` imported ``distc.pipeline.results`` and ``distc.compressed``
    with ``__import__("...")``: a dependency that reads as none); the dynamic forms left are the
    lazy facades' ``import_module(f"{__name__}.{...}")``, and those listed (still to go)."""
    allowed = {("distc.commands", "distc.capture.command"),  # the capture command, loaded by name
               ("distc.commands.reshard", "distc.analysis.simulate")}  # reshard --verify's simulator
    bad = []
    for mod, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call):
                target = _dynamic_target(node, mod)
                if target is not None and target != "<dynamic>" and (mod, target) not in allowed:
                    bad.append(f"{mod}:{node.lineno}: imports {target!r} dynamically")
    assert not bad, "\n".join(bad)


def test_no_import_circle():
    assert import_cycles() == []


def test_no_module_level_mutable_state():
    bad = module_state()
    assert not bad, "process-global mutable state (a run's state goes in its PassContext):\n" + "\n".join(bad)


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
    for mod, name in ALLOWED_STATE:
        assert f"'{name}'" in (MODULES[mod].read_text()) or name in MODULES[mod].read_text(), (mod, name)


@pytest.mark.parametrize("src,dst,ok", [
    ("distc.passes.partition", "distc.dialects.ops", True),
    ("distc.analysis.memory", "distc.passes.shard_optimizer", False),
    ("distc.ir.core", "distc.syntax.printer", False),
    ("distc.driver", "distc.passes.base", True),
    ("distc.driver", "distc.commands.shard", False),
    ("distc.pipeline.shard", "distc.commands.shard", False),
    ("distc.pipeline.shard", "distc.driver", False),
    ("distc.commands.shard", "distc.pipeline", True),
    ("distc", "distc.pipeline.shard", True),
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


# -------------------------------------------------------------- the checks catch each kind of fault
def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    """A throwaway ``distc`` tree (module path -> source) for the checks above."""
    root = tmp_path / "distc"
    for rel, src in {"__init__.py": "", **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        for d in p.parents:
            if d == root.parent:
                break
            (d / "__init__.py").touch()
        p.write_text(textwrap.dedent(src))
    return _modules(root)


@pytest.mark.parametrize("src", [
    "import importlib\ndef f():\n    return importlib.import_module('distc.commands.shard')\n",
    "def f():\n    return __import__('distc.cli')\n",
    "def f(name):\n    import importlib\n    return importlib.import_module('distc.commands.' + name)\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..pipeline import shard\n",
    "def f():\n    from ..driver import load\n",
])
def test_upward_imports_of_every_kind_are_caught(tmp_path, src):
    mods = _package(tmp_path, {"analysis/x.py": src, "commands/shard.py": "", "cli.py": "", "pipeline/__init__.py": "",
                               "pipeline/shard.py": "", "driver.py": "def load():\n    pass\n"})
    assert len(upward_imports(mods)) == 1, upward_imports(mods)


def test_driver_importing_commands_is_caught(tmp_path):
    mods = _package(tmp_path, {"driver.py": "def f():\n    from .commands import shard\n", "commands/shard.py": ""})
    assert any("distc.driver (driver) imports distc.commands.shard (commands)" in b for b in upward_imports(mods))


def test_import_circles_are_caught(tmp_path):
    mods = _package(tmp_path, {
        "ir/core.py": "def clone(p):\n    from .clone import clone_program\n    return clone_program(p)\n",
        "ir/clone.py": "from .core import clone\n",
        "analysis/a.py": "from .b import x\n", "analysis/b.py": "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .a import y\n",
        "passes/ok.py": "from ..ir import core\n"})
    assert import_cycles(mods) == [["distc.analysis.a", "distc.analysis.b"], ["distc.ir.clone", "distc.ir.core"]] \
        or sorted(import_cycles(mods)) == [["distc.analysis.a", "distc.analysis.b"], ["distc.ir.clone", "distc.ir.core"]]


def test_module_state_is_caught(tmp_path):
    mods = _package(tmp_path, {"syntax/p.py": """
        _FAST = None
        WARNINGS = []
        CACHE = {}
        def parse():
            global _FAST
            _FAST = 1
        def warn(t):
            WARNINGS.append(t)
        def remember(k, v):
            CACHE[k] = v
        def fine(x):
            CACHE = {}
            CACHE[x] = 1
            return CACHE
        """})
    bad = module_state(mods)
    assert len(bad) == 3 and all(("'_FAST'" in b) or ("'WARNINGS'" in b) or ("'CACHE'" in b) for b in bad), bad
