"""One way to say an optional extra is missing: ``tensorcode.extras.require`` raising
``MissingExtraError``; the tree holds no second mechanism (the last test searches it)."""

from __future__ import annotations

import ast
import pathlib

import pytest

from tensorcode import extras
from tensorcode.errors import MissingExtraError, TensorCodeError

PACKAGE = pathlib.Path(extras.__file__).resolve().parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def test_require_returns_the_module():
    import matplotlib

    assert extras.require("matplotlib", "drawing a plot") is matplotlib


def test_a_missing_module_names_its_extra_and_the_install_line(monkeypatch):
    monkeypatch.setitem(extras.EXTRAS, "tensorcode_absent_probe", "plot")
    with pytest.raises(MissingExtraError) as caught:
        extras.require("tensorcode_absent_probe.sub", "drawing a plot")
    error = caught.value
    assert isinstance(error, TensorCodeError) and isinstance(error, ImportError)
    assert error.name == "tensorcode_absent_probe.sub" and error.extra == "plot"
    message = str(error)
    assert message.startswith("drawing a plot needs tensorcode_absent_probe.sub")
    assert "pip install 'tensorcode[plot]'" in message
    assert "No module named 'tensorcode_absent_probe'" in message  # the cause is kept


def test_an_accelerator_is_the_module_or_none(monkeypatch):
    import matplotlib

    assert extras.installed("matplotlib") is matplotlib
    monkeypatch.setitem(extras.EXTRAS, "tensorcode_absent_probe", "serve")
    assert extras.installed("tensorcode_absent_probe") is None
    with pytest.raises(KeyError):
        extras.installed("numpy")  # a required dependency is never optional


def test_the_longest_prefix_names_the_extra():
    assert extras.extra_of("ray") == "distributed"
    assert extras.extra_of("ray.exceptions") == "distributed"
    assert extras.extra_of("ray.serve") == "distributed-serve"
    assert extras.extra_of("matplotlib.figure") == "plot"
    with pytest.raises(KeyError, match="EXTRAS"):
        extras.extra_of("numpy")  # a required dependency, no extra provides it


def test_every_extra_named_exists_in_pyproject():
    import tomllib

    declared = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert set(extras.EXTRAS.values()) <= set(declared)


def _is_extra(module: str) -> bool:
    try:
        extras.extra_of(module)
    except KeyError:
        return False
    return True


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = {node.id for node in ast.walk(handler.type)
             if isinstance(node, ast.Name)} if handler.type else set()
    return bool(names & {"ImportError", "ModuleNotFoundError"})


def _calls(node: ast.AST, names: set[str]) -> list[int]:
    """Lines of calls to a function named in ``names`` inside ``node``."""
    return [call.lineno for call in ast.walk(node) if isinstance(call, ast.Call) and (
        (isinstance(call.func, ast.Name) and call.func.id in names)
        or (isinstance(call.func, ast.Attribute) and call.func.attr in names))]


def test_no_second_missing_extra_mechanism():
    """Outside ``extras.py`` nothing catches ``ImportError`` (the compiler may, for
    modules no extra provides, such as the platform's ``fcntl``), nothing probes an
    extra with ``find_spec``, and an extra's module is imported with an import statement
    only under ``TYPE_CHECKING`` or after ``require`` (``require_matplotlib``) has
    checked it, in the same module or function."""
    found = []
    requires = {"require", "require_matplotlib"}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "extras.py":
            continue
        where = path.relative_to(PACKAGE.parent)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_compiler = path.is_relative_to(PACKAGE / "compiler")
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(map(_catches_import_error, node.handlers)):
                guarded = [n.module if isinstance(n, ast.ImportFrom) else n.names[0].name
                           for n in ast.walk(ast.Module(node.body, []))
                           if isinstance(n, (ast.Import, ast.ImportFrom))]
                if not in_compiler or any(_is_extra(m or "") for m in guarded):
                    found.append(f"{where}:{node.lineno} catches ImportError")
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "find_spec":
                literal = node.args[0] if node.args else None
                if isinstance(literal, ast.Constant) and _is_extra(str(literal.value)):
                    found.append(f"{where}:{node.lineno} probes {literal.value} with find_spec")
        parents = {child: parent for parent in ast.walk(tree)
                   for child in ast.iter_child_nodes(parent)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.ImportFrom):
                module = "" if node.level else (node.module or "")
            else:
                module = node.names[0].name
            if not _is_extra(module):
                continue
            scope, up = tree, parents.get(node)
            type_checking = False
            while up is not None:
                if isinstance(up, ast.If) and "TYPE_CHECKING" in ast.unparse(up.test):
                    type_checking = True
                if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope is tree:
                    scope = up
                up = parents.get(up)
            if type_checking or any(line < node.lineno for line in _calls(scope, requires)):
                continue
            found.append(f"{where}:{node.lineno} imports {module} without require()")
    assert not found, "\n".join(found)
