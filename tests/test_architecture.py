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
    "errors": 0, "files": 0, "grammars": 0,
    "compiler": 1,
    "runtime": 2, "nn": 2, "interop": 2, "text": 2,
    # the public addresses of runtime and nn modules (``import tensorcode.optim``)
    "optim": 2, "checkpoint": 2, "random": 2, "init": 2, "functional": 2,
    "ops": 3, "algorithm": 3, "distill": 3, "weights": 3, "training": 3, "integrations": 3,
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
            "'tensorcode.algorithm', 'tensorcode.ops', 'tensorcode.nn', 'tensorcode.commands'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip() == "[]"


def test_ir_and_the_registry_do_not_import_each_other_in_a_circle():
    ir_imports = {target for _, target, names in _imports(PACKAGE / "compiler" / "core" / "ir.py")
                  for target in [target] + [f"{target}.{n}" for n in names]}
    assert "tensorcode.compiler.core.registry" not in ir_imports
