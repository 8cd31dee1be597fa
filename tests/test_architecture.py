"""The layering holds: products -> runtime -> compiler -> ir/primitives, nothing upward.

These read the source (every import, including the ones inside functions) rather than
trusting a convention, so a new upward import fails here with the module that made it.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "tensorcode"

#: each top-level part of the package and its layer; a module may import its own layer
#: and the layers below it, never one above
LAYERS: dict[str, int] = {
    "errors": 0, "extras": 0, "files": 0, "grammars": 0,
    "compiler": 1,
    "runtime": 2, "nn": 2, "text": 2,
    # the public addresses of runtime and nn modules (``import tensorcode.optim``)
    "optim": 2, "checkpoint": 2, "random": 2, "init": 2, "functional": 2,
    "operations": 3, "ops": 3, "algorithm": 3, "distill": 3, "weights": 3, "training": 3,
    "integrations": 3, "interop": 3,
    "plot": 3, "guide": 3, "tools": 3, "models": 3, "serve": 3, "distributed": 3,
    "commands": 4, "cli": 4,
}


def _part(module: str) -> str | None:
    """The top-level part of ``tensorcode.X...`` (None for the package itself)."""
    names = module.split(".")
    return names[1] if len(names) > 1 and names[0] == "tensorcode" else None


def _module_name(path: pathlib.Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    names = list(relative.parts)
    if names[-1] == "__init__":
        names.pop()
    return ".".join(names)


def _imports(path: pathlib.Path) -> list[tuple[int, str, list[str]]]:
    """``(line, absolute module, imported names)`` for every import in ``path``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target, [alias.name for alias in node.names]))
    return found


def _sources() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_part_of_the_package_has_a_layer():
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if not p.name.startswith("__") and (p.is_dir() or p.suffix == ".py")}
    assert parts <= set(LAYERS), f"give these a layer in LAYERS: {sorted(parts - set(LAYERS))}"


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for path in _sources():
        own = _part(_module_name(path))
        if own is None:
            continue  # tensorcode/__init__.py: the public surface, loaded lazily upward
        for line, target, _ in _imports(path):
            other = _part(target)
            if other is not None and LAYERS[other] > LAYERS[own]:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not upward, "\n".join(upward)


def test_no_module_imports_another_modules_private_name():
    private = []
    for path in _sources():
        for line, target, names in _imports(path):
            for name in names:
                sibling = PACKAGE.parent.joinpath(*target.split("."), f"{name}.py")
                if sibling.is_file() and _module_name(path).startswith(target + "."):
                    continue  # a package's own private module, checked below
                if name.startswith("_") and not name.startswith("__"):
                    private.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports "
                                   f"{name} from {target}")
            # a private module is its package's own: siblings may import it, others not
            names_ = target.split(".")
            for k, part in enumerate(names_):
                if part.startswith("_") and not part.startswith("__") and \
                        not _module_name(path).startswith(".".join(names_[:k]) + "."):
                    private.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports the "
                                   f"private module {target}")
    assert not private, "\n".join(private)


def test_the_compiler_loads_without_the_runtime_or_any_product():
    code = ("import sys, pkgutil, importlib, tensorcode.compiler as c; "
            "[importlib.import_module(m.name) for m in pkgutil.walk_packages("
            "c.__path__, 'tensorcode.compiler.')]; "
            "print(sorted(m for m in sys.modules if m.startswith(('tensorcode.runtime', "
            "'tensorcode.distill', 'tensorcode.training', 'tensorcode.weights', "
            "'tensorcode.algorithm', 'tensorcode.operations', 'tensorcode.nn', "
            "'tensorcode.commands'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip() == "[]"


def test_ir_and_the_registry_do_not_import_each_other_in_a_circle():
    ir_imports = {target for _, target, names in _imports(PACKAGE / "compiler" / "core" / "ir.py")
                  for target in [target] + [f"{target}.{n}" for n in names]}
    assert "tensorcode.compiler.core.registry" not in ir_imports


def _import_edges() -> dict[str, set[str]]:
    """Module -> the package modules it imports, counting every import (in functions and
    under ``TYPE_CHECKING`` too); ``from pkg import sub`` imports the submodule."""
    modules = {_module_name(path): path for path in _sources()}
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for _, target, names in _imports(path):
            for name in names or [None]:
                sub = f"{target}.{name}" if name else target
                targets.add(sub if sub in modules else target)
        edges[module] = {t for t in targets if t in modules and t != module}
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_outside_the_compiler():
    """No cycle made by the imports of modules outside ``tensorcode/compiler`` (the
    package facade included); the compiler's own imports answer to its layer rules."""
    edges = {module: targets for module, targets in _import_edges().items()
             if not module.startswith("tensorcode.compiler")}
    assert _cycles(edges) == []


#: function-level and ``TYPE_CHECKING`` imports outside the compiler need one of these
#: reasons; anything else belongs at the top of its module
DEFERRED_IMPORTS = {
    ("tensorcode/training/calibration.py", "scipy.optimize"):
        "a heavy import (seconds) used by one method, TemperatureCalibration.fit",
    ("tensorcode/runtime/progress.py", "tqdm"):
        "loaded only when a progress bar is shown (on a terminal)",
    ("tensorcode/runtime/optim.py", "tensorcode.runtime.optim_kernels"):
        "a named backend: the Numba update loops, loaded on the first fused update",
}


def _deferred_imports(path: pathlib.Path) -> list[tuple[int, str, bool]]:
    """``(line, module, under TYPE_CHECKING)`` of the imports inside functions or under
    ``TYPE_CHECKING`` in ``path``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []

    def walk(node: ast.AST, deferred: bool, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            in_function = deferred or isinstance(child, (ast.FunctionDef,
                                                         ast.AsyncFunctionDef))
            checking = type_checking or (isinstance(child, ast.If)
                                         and "TYPE_CHECKING" in ast.unparse(child.test))
            if isinstance(child, (ast.Import, ast.ImportFrom)) and (deferred or type_checking):
                if isinstance(child, ast.Import):
                    targets = [alias.name for alias in child.names]
                else:
                    base = child.module or ""
                    if child.level:
                        parts = package.split(".")
                        parts = parts[:len(parts) - (child.level - 1)]
                        base = ".".join(parts + ([child.module] if child.module else []))
                    targets = [f"{base}.{alias.name}" if PACKAGE.parent.joinpath(
                        *base.split("."), f"{alias.name}.py").is_file() else base
                        for alias in child.names]
                found.extend((child.lineno, target, type_checking) for target in targets)
            walk(child, in_function, checking)

    walk(ast.parse(path.read_text(encoding="utf-8")), False, False)
    return found


def test_function_level_imports_outside_the_compiler_have_a_named_reason():
    """Outside the compiler an import is deferred (into a function, or under
    ``TYPE_CHECKING``) only for: command start-up (``tensorcode/commands``: ``tensorcode
    --help`` loads no product), a lazy facade (a package ``__init__`` that loads its names
    on first use), an optional extra (checked first by ``tensorcode.extras.require``), or
    a reason named in ``DEFERRED_IMPORTS``."""
    from tensorcode.extras import extra_of

    def optional(module: str) -> bool:
        try:
            extra_of(module)
        except KeyError:
            return False
        return True

    unexplained = []
    for path in _sources():
        relative = path.relative_to(PACKAGE.parent).as_posix()
        if relative.startswith(("tensorcode/compiler/", "tensorcode/commands/")):
            continue
        for line, module, type_checking in _deferred_imports(path):
            if (type_checking and path.name == "__init__.py") or optional(module) or \
                    (relative, module) in DEFERRED_IMPORTS:
                continue
            unexplained.append(f"{relative}:{line} defers importing {module}")
    assert not unexplained, "\n".join(unexplained)
