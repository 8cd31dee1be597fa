"""The layering holds: products -> runtime -> compiler -> ir/primitives, nothing upward.

These read the source (every import, including the ones inside functions) rather than
trusting a convention, so a new upward import fails here with the module that made it.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "tensorcode"

#: each top-level part of the package and its layer; a module may import its own layer
#: and the layers below it, never one above
LAYERS: dict[str, int] = {
    "errors": 0, "extras": 0, "files": 0, "grammars": 0, "version": 0,
    "compiler": 1,
    # beside the compiler: ``Plan.export`` writes through it; it imports only the
    # compiler's backend interface, files and errors, and its loader none of the compiler
    "aot": 1,
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


@functools.cache
def _tree(path: pathlib.Path) -> ast.Module:
    """``path`` parsed once per test process (every test below reads the same files)."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _imports(path: pathlib.Path) -> list[tuple[int, str, list[str]]]:
    """``(line, absolute module, imported names)`` for every import in ``path``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(_tree(path)):
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


# ---------------------------------------------------------------------------------------
# the whole package's import graph, and the compiler's layers
#
# Every import counts: top-level, inside functions, under TYPE_CHECKING, and imports of
# the package facade. ``from pkg import name`` is an edge to ``pkg.name`` when that is a
# module, else to ``pkg`` (whose ``__init__`` it runs).

_MODULES = {_module_name(path): path for path in _sources()}


@functools.cache
def _edges(path: pathlib.Path) -> list[tuple[int, str, bool]]:
    """``(line, imported module, inside a function)`` for every import in ``path``."""
    tree = _tree(path)
    inner = {id(node) for function in ast.walk(tree)
             if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
             for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))}
    lines = {(node.lineno): id(node) in inner for node in ast.walk(tree)
             if isinstance(node, (ast.Import, ast.ImportFrom))}
    found = []
    for line, target, names in _imports(path):
        modules = [f"{target}.{n}" if f"{target}.{n}" in _MODULES else target for n in names]
        for module in modules or [target]:
            found.append((line, module, lines.get(line, False)))
    return found


#: the one import edge allowed to close a cycle, made inside a function: ``Entry.lower``
#: (``plans/network.py``) is a thin call into ``plans.lower`` (``plans/lowering.py``), and
#: a network sits below the plans lowered from it (``Plan.load`` rebuilds one). Every
#: other edge, function-level ones included, counts.
ENTRY_LOWER = ("tensorcode.compiler.plans.network", "tensorcode.compiler.plans.lowering")


def _graph() -> dict[str, set[str]]:
    return {module: {t for _, t, inner in _edges(path) if t in _MODULES and t != module
                     and not (inner and (module, t) == ENTRY_LOWER)}
            for module, path in _MODULES.items()}


def test_the_entry_lower_edge_is_a_function_level_import():
    """``ENTRY_LOWER`` is excused only as an import inside ``Entry.lower``: at the top of
    ``network.py`` it would be a cycle, which the graph above does count."""
    module, target = ENTRY_LOWER
    edges = [(line, inner) for line, t, inner in _edges(_MODULES[module]) if t == target]
    assert edges and all(inner for _, inner in edges), edges


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected sets of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    """No module reaches itself through imports (counting function-level and
    ``TYPE_CHECKING`` imports and the package facade): a new cycle fails with its
    modules."""
    found = _cycles(_graph())
    assert not found, f"import cycles: {[sorted(c) for c in found]}"


#: the modules of ``compiler/plans``, bottom first: each imports only those before it. A
#: network lowers to plans and ``Plan.load`` rebuilds a network; the one link against this
#: order is ``ENTRY_LOWER``, ``Entry.lower``'s thin call into ``plans.lower``
PLANS_ORDER = ("tables", "document", "network", "tape", "saved", "plan", "step", "lowering")


def test_the_plans_modules_import_one_way():
    prefix = "tensorcode.compiler.plans."
    modules = {m.removeprefix(prefix) for m in _MODULES if m.startswith(prefix)}
    assert modules == set(PLANS_ORDER), \
        f"place these in PLANS_ORDER: {sorted(modules ^ set(PLANS_ORDER))}"
    against = [f"{prefix}{module}:{line} imports {target}"
               for k, module in enumerate(PLANS_ORDER)
               for line, target, _ in _edges(_MODULES[prefix + module])
               if target.startswith(prefix) and (prefix + module, target) != ENTRY_LOWER
               and PLANS_ORDER.index(target.removeprefix(prefix)) >= k]
    assert not against, "\n".join(against)


#: the compiler's layers, in import order: a module imports its own layer and lower ones
COMPILER_LAYERS = {"core": 0, "trace": 1, "lower": 2, "backends": 3, "plans": 4, "subset": 5}
#: import paths documented before the layers, kept (with a DeprecationWarning) as
#: re-exports of their new homes until release 0.2.0; nothing in the package imports them
COMPILER_SHIMS = {"tensorcode.compiler.plan", "tensorcode.compiler.primitives",
                  "tensorcode.compiler.verify", "tensorcode.compiler.autodiff",
                  "tensorcode.compiler.backends.numba_cache"}


def _compiler_layer(module: str) -> str | None:
    names = module.split(".")
    if names[:2] != ["tensorcode", "compiler"] or len(names) < 3 or module in COMPILER_SHIMS:
        return None
    return names[2]


def test_every_compiler_module_belongs_to_a_layer():
    loose = [m for m in _MODULES if m.startswith("tensorcode.compiler.")
             and m not in COMPILER_SHIMS and _compiler_layer(m) not in COMPILER_LAYERS]
    assert not loose, f"give these a layer in COMPILER_LAYERS: {loose}"


def test_compiler_layers_import_downward_only():
    upward = []
    for module, path in _MODULES.items():
        own = _compiler_layer(module)
        for line, target, _ in _edges(path):
            if target in COMPILER_SHIMS and module not in COMPILER_SHIMS:
                upward.append(f"{module}:{line} imports the re-export {target}")
            other = _compiler_layer(target)
            if own in COMPILER_LAYERS and other in COMPILER_LAYERS and \
                    COMPILER_LAYERS[other] > COMPILER_LAYERS[own]:
                upward.append(f"{module}:{line} imports {target}")
    assert not upward, "\n".join(upward)


def test_concrete_backends_are_reached_only_through_get():
    """Outside ``compiler/backends`` a backend is ``backends.get(name)``: only the
    package itself (names, the protocol, ``get``) and its shared ``counters``,
    ``secret`` and ``threads`` (the thread knob) modules are imported."""
    shared = {"tensorcode.compiler.backends", "tensorcode.compiler.backends.counters",
              "tensorcode.compiler.backends.secret", "tensorcode.compiler.backends.threads"}
    direct = [f"{module}:{line} imports {target}" for module, path in _MODULES.items()
              if not module.startswith("tensorcode.compiler.backends")
              for line, target, _ in _edges(path)
              if target.startswith("tensorcode.compiler.backends.") and target not in shared]
    assert not direct, "\n".join(direct)


def test_no_backend_imports_another():
    """A concrete backend (``backends/llvm``, ``backends/numba``, ``backends/reference``)
    imports its own modules and what every backend shares, never another backend: what
    two backends compute alike lives below them (the loop program, the approximations,
    the registry)."""
    concrete = ("llvm", "numba", "reference")
    crossing = []
    for module, path in _MODULES.items():
        parts = module.split(".")
        if parts[:3] != ["tensorcode", "compiler", "backends"] or len(parts) < 4 or \
                parts[3] not in concrete:
            continue
        for line, target, _ in _edges(path):
            other = target.split(".")
            if other[:3] == ["tensorcode", "compiler", "backends"] and len(other) > 3 and \
                    other[3] in concrete and other[3] != parts[3]:
                crossing.append(f"{module}:{line} imports {target}")
    assert not crossing, "\n".join(crossing)


def test_code_generators_read_the_program_not_the_schedule():
    """The contract between lowering and code generation is one record, ``Program``: no
    backend module imports the schedule, and the record does not carry it."""
    import dataclasses

    from tensorcode.compiler.lower.program import Program

    readers = [f"{module}:{line}" for module, path in _MODULES.items()
               if module.startswith("tensorcode.compiler.backends")
               for line, target, names in _imports(path)
               if target == "tensorcode.compiler.lower.schedule"
               or (target == "tensorcode.compiler.lower" and "schedule" in names)]
    assert not readers, "backend modules importing the schedule: " + ", ".join(readers)
    fields = {f.name for f in dataclasses.fields(Program)}
    assert "schedule" not in fields and "kernels" in fields and "graph" in fields


#: modules outside ``compiler/backends`` that still import numba or llvmlite (shrinks)
NUMBA_ELSEWHERE: set[str] = set()


def test_only_compiler_backends_import_numba_or_llvmlite():
    found = {module for module, path in _MODULES.items()
             if not module.startswith("tensorcode.compiler.backends")
             for _, target, _ in _edges(path) if target.split(".")[0] in ("numba", "llvmlite")}
    assert found <= NUMBA_ELSEWHERE, \
        f"only compiler/backends imports numba: {found - NUMBA_ELSEWHERE}"
    assert not NUMBA_ELSEWHERE - found, \
        f"take these off NUMBA_ELSEWHERE: {NUMBA_ELSEWHERE - found}"


#: function-level imports of the package's own modules in the compiler that need a reason
#: of their own (each breaks a knot or keeps a heavy module out of a path); the list only
#: shrinks. Allowed without listing: imports of anything outside the package (the standard
#: library, optional extras) and a backend's own lazy loading (modules under
#: ``compiler/backends``, so Numba and llvmlite stay out of a warm start). Outside the
#: compiler ``DEFERRED_IMPORTS`` below holds the reasons.
LAZY_IMPORTS = {tuple(f"tensorcode.{m}" for m in pair) for pair in (
    ("compiler.lower.update", "compiler.core.ir"),
    ("compiler.plans.network", "compiler.plans.lowering"),  # ENTRY_LOWER, above
    # the exporter and its toolchain (subprocess) stay out of every process that never
    # exports: about 5 ms of a warm start
    ("compiler.plans.plan", "aot.export"),
)}


def test_function_level_imports_come_from_the_named_list():
    found = {(module, target) for module, path in _MODULES.items()
             if module.startswith("tensorcode.compiler.")
             and not module.startswith("tensorcode.compiler.backends")
             for _, target, inner in _edges(path)
             if inner and target.split(".")[0] == "tensorcode"}
    new = sorted(found - LAZY_IMPORTS)
    gone = sorted(LAZY_IMPORTS - found)
    assert not new, "import these at the top of the module (or name why in LAZY_IMPORTS): " \
        f"{new}"
    assert not gone, f"take these off LAZY_IMPORTS: {gone}"


# ---------------------------------------------------------------------------------------
# one home per fact, searched in the tree


def _constants(path: pathlib.Path) -> list[ast.AST]:
    return list(ast.walk(_tree(path)))


def test_backend_names_have_one_home():
    """``compiler/backends/__init__.py`` writes the backend names (``NUMBA``, ``LLVM``,
    ``REFERENCE``); other code uses those constants, ``BACKENDS`` or ``DEFAULT_BACKEND``."""
    from tensorcode.compiler.backends import BACKENDS

    found = {module for module, path in _MODULES.items()
             if not module.startswith("tensorcode.compiler.backends")
             for node in _constants(path)
             if isinstance(node, ast.Constant) and node.value in BACKENDS}
    assert not found, f"use the compiler.backends constants in: {sorted(found)}"


#: compiler modules holding a table keyed by every dtype besides ``core/dtypes.py``
#: (each a backend's own lowering of the dtypes)
DTYPE_TABLES_ELSEWHERE = {"tensorcode.compiler.backends.llvm.types"}


def test_the_compiler_has_one_dtype_table():
    from tensorcode.compiler.core.dtypes import DTYPES

    found = {module for module, path in _MODULES.items()
             if module.startswith("tensorcode.compiler")
             and module != "tensorcode.compiler.core.dtypes"
             for node in _constants(path)
             if isinstance(node, ast.Dict) and set(DTYPES) <= {
                 k.value for k in node.keys if isinstance(k, ast.Constant)}}
    assert found <= DTYPE_TABLES_ELSEWHERE, f"ask core/dtypes.py instead: {found}"


def test_op_classes_have_one_home():
    """Which ops are reductions (elementwise, views, ...) is the registry's to say
    (``is_reduction``, ``is_elementwise``, ...): no compiler module lists them again."""
    from tensorcode.compiler.core import registry

    reductions = {name for name in registry.REGISTRY if registry.is_reduction(name)}
    found = [f"{module}:{node.lineno}" for module, path in _MODULES.items()
             if module.startswith("tensorcode.compiler")
             and module != "tensorcode.compiler.core.registry"
             for node in _constants(path)
             if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and reductions <= {
                 e.value for e in node.elts if isinstance(e, ast.Constant)}]
    assert not found, f"ask the registry (is_reduction) instead: {found}"


def test_the_plan_format_has_one_home():
    found = [module for module, path in _MODULES.items() for node in _constants(path)
             if isinstance(node, ast.Constant) and node.value == "tensorcode.plan/1"]
    assert found == ["tensorcode.compiler.plans.saved"], found


def _names_a_format(node: ast.AST) -> bool:
    """``FORMAT``, ``INDEX_FORMAT``, ``patch_file.FORMAT`` (a file format's name constant),
    or a document's format field read in place: ``document["format"]``,
    ``document.get("format")``."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "format"
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and bool(node.args) and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == "format")
    name = node.id if isinstance(node, ast.Name) else (
        node.attr if isinstance(node, ast.Attribute) else "")
    return name.endswith("FORMAT")


def test_file_headers_are_checked_in_one_place():
    """Every loader checks a file's ``format`` and ``version`` with
    ``files.check_header`` (one message for every file); no module compares a format
    constant or field itself."""
    found = [f"{module}:{node.lineno}" for module, path in _MODULES.items()
             if module != "tensorcode.files.header"
             for node in _constants(path)
             if isinstance(node, ast.Compare)
             and any(_names_a_format(side) for side in (node.left, *node.comparators))]
    assert not found, f"check the header with tensorcode.files.check_header: {found}"


# ---------------------------------------------------------------------------------------
# a line budget per compiler layer: growth past it is a decision, made here

#: lines per layer (the compiler's top-level re-exports count as "shims"; 75 for the
#: deprecation warning each gives until release 0.2.0)
#: (plans: 2425 for the lean feed path of plans called from threads and the bound step
#: call that keeps its fixed buffers' pointers, then the saved graph's size bound,
#: Plan.export and the declared backend contract; core: 1550 for the bit operations of
#: the approximations and the transcendental flag; lower: 4250 since the kernels and the
#: float32 approximations are lowered once there, to the loop program the renderers
#: read, with the rewrite rules' pattern engine, the parallel partitions' cost model
#: (matrix products in row blocks and batched products' loops included: 4300),
#: the kernels found by pattern (``row_kernels.py``) and each kernel's cost
#: (``cost.py``), then 5000 for the random draws' Philox stream written once there as
#: statements (``random_fills.py``) in place of one copy per renderer, the invariant
#: loads hoisted out of inner loops (``hoist.py``: a row's maximum or scale read once, so
#: the row's loop vectorizes) and the products with a vector side (``MatVec``: its
#: statement and order, and its split into blocks of rows); backends: 6300 for the
#: renderers of that program, the native worker pool and thread knob, the checked Numba
#: cache, the contract's plain calls and the per-kernel profiles, ``profiling.py`` and
#: ``llvm/profile.py``, then 6150 once the renderers' Philox copies were deleted and
#: ``MatVec``'s renderings added, ``llvm/matvec.py`` and the Numba intrinsics); lower
#: 5250 for the epilogues moved into a split product's blocks (``epilogue.py``), then
#: 5350 for products split along their shared dimension (``depth.py``); backends 6200
#: for the pool's segments (each thread runs its own contiguous chunks first); lower 5400
#: and backends 6500 for our register-tiled products (``Gemm`` of method ``"tiles"``:
#: the shape rule, ``backends/tiles.py``, the Numba intrinsic emitting it, and the Numba
#: cache keyed by the source of what its intrinsics emit)
LINE_BUDGET = {"core": 1550, "trace": 1250, "lower": 5400, "backends": 6500, "plans": 2425,
               "subset": 1750, "shims": 75}


def test_each_compiler_layer_stays_within_its_line_budget():
    lines: dict[str, int] = dict.fromkeys(LINE_BUDGET, 0)
    for module, path in _MODULES.items():
        if module.startswith("tensorcode.compiler."):
            layer = _compiler_layer(module) or "shims"
            lines[layer] += len(path.read_text(encoding="utf-8").splitlines())
    print("compiler lines per layer:",
          ", ".join(f"{k} {lines[k]}/{LINE_BUDGET[k]}" for k in LINE_BUDGET))
    over = {k: (lines[k], LINE_BUDGET[k]) for k in LINE_BUDGET if lines[k] > LINE_BUDGET[k]}
    assert not over, f"layers over their line budget (lines, budget): {over}"


def test_no_import_cycle_outside_the_compiler():
    """No cycle made by the imports of modules outside ``tensorcode/compiler`` (the
    package facade included); the compiler's own imports answer to its layer rules."""
    outside = {module: {t for t in targets if not t.startswith("tensorcode.compiler")}
               for module, targets in _graph().items()
               if not module.startswith("tensorcode.compiler")}
    assert _cycles(outside) == set()


#: function-level and ``TYPE_CHECKING`` imports outside the compiler need one of these
#: reasons; anything else belongs at the top of its module
DEFERRED_IMPORTS = {
    ("tensorcode/training/calibration.py", "scipy.optimize"):
        "a heavy import (seconds) used by one method, TemperatureCalibration.fit",
    ("tensorcode/runtime/progress.py", "tqdm"):
        "loaded only when a progress bar is shown (on a terminal)",
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

    walk(_tree(path), False, False)
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


def test_every_named_deferred_import_still_exists():
    """An entry of ``DEFERRED_IMPORTS`` names a file of the package that still defers
    that import: the list shrinks with the code instead of excusing imports of files
    that are gone."""
    stale = []
    for relative, module in DEFERRED_IMPORTS:
        path = PACKAGE.parent / relative
        if not path.is_file():
            stale.append(f"{relative} (no such file)")
        elif module not in {target for _, target, _ in _deferred_imports(path)}:
            stale.append(f"{relative} no longer defers importing {module}")
    assert not stale, f"take these off DEFERRED_IMPORTS: {stale}"


# ---------------------------------------------------------------------------------------
# imports by name

#: the modules that import something by a name held as data (``importlib.import_module``,
#: ``__import__``, loading a file as a module), each with its reason. Reading package data
#: or metadata (``importlib.resources``, ``importlib.metadata``, ``importlib.util.find_spec``)
#: imports nothing and needs no entry. Anything else imports with an ``import`` statement,
#: which the layer rules above read.
IMPORTS_BY_NAME = {
    "tensorcode/__init__.py":
        "the public facade loads each name on first use (PEP 562), so `import tensorcode` "
        "loads no NumPy and no compiler; its TYPE_CHECKING block names every target",
    "tensorcode/serve/__init__.py":
        "a lazy facade over its own modules, which need the `serve` extra (starlette); its "
        "TYPE_CHECKING block names every target",
    "tensorcode/distributed/__init__.py":
        "a lazy facade over its own modules, which need the `distributed` extra (Ray); its "
        "TYPE_CHECKING block names every target",
    "tensorcode/extras.py":
        "require/installed import an optional extra's third-party module by name, never a "
        "module of the package",
    "tensorcode/cli.py":
        "imports only the chosen subcommand's module (tensorcode.commands.*), so one "
        "command never pays for another's dependencies",
    "tensorcode/guide/__init__.py":
        "loads an example program from the examples directory: a file, not a module of "
        "the package",
    "tensorcode/files/__init__.py":
        "a lazy facade over its own modules, so a reader of JSON manifests (the aot "
        "loader) does not load safetensors and the atomic writers; its TYPE_CHECKING "
        "block names every target",
    "tensorcode/compiler/backends/__init__.py":
        "get() loads a backend on first request from its name table; a static import "
        "would have the backends package and each backend import each other",
}

_BY_NAME = {"import_module", "__import__", "spec_from_file_location", "module_from_spec",
            "exec_module"}


def _imports_by_name(path: pathlib.Path) -> list[int]:
    """Lines of ``path`` that import by a name held as data."""
    found = []
    for node in ast.walk(_tree(path)):
        name = node.attr if isinstance(node, ast.Attribute) else (
            node.id if isinstance(node, ast.Name) else None)
        from_importlib = isinstance(node, ast.ImportFrom) and node.module and \
            node.module.split(".")[0] == "importlib" and \
            any(alias.name in _BY_NAME for alias in node.names)
        if name in _BY_NAME or from_importlib:
            found.append(node.lineno)
    return found


def test_imports_by_name_come_from_the_named_list():
    """No module of the package imports another by a string (which the import graph
    above cannot see) unless ``IMPORTS_BY_NAME`` says why; the list only shrinks."""
    found = {path.relative_to(PACKAGE.parent).as_posix(): lines for path in _sources()
             if (lines := _imports_by_name(path))}
    new = [f"{relative}:{line}" for relative, lines in sorted(found.items())
           if relative not in IMPORTS_BY_NAME for line in lines]
    gone = sorted(set(IMPORTS_BY_NAME) - set(found))
    assert not new, f"import these with an import statement (or say why in IMPORTS_BY_NAME): " \
        f"{new}"
    assert not gone, f"take these off IMPORTS_BY_NAME: {gone}"


def test_the_lazy_facades_name_their_targets_statically():
    """A lazy facade's ``_LAZY`` table names only modules its ``TYPE_CHECKING`` block
    imports too, so every target is an edge the layer and cycle checks read."""
    import importlib

    for module in ("tensorcode", "tensorcode.serve", "tensorcode.distributed"):
        path = _MODULES[module]
        static = {target for _, target, _ in _edges(path)}
        targets = set()
        for value in vars(importlib.import_module(module))["_LAZY"].values():
            name = value[0] if isinstance(value, tuple) else value
            targets.add(f"{module}{name}" if name.startswith(".") else name)
        missing = sorted(t for t in targets if t not in static)
        assert targets and not missing, f"{module}: import these under TYPE_CHECKING " \
            f"too: {missing}"
