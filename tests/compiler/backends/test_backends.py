"""The backend registry: one list of names, one error, one protocol; and the generated
module holds every kernel once."""

from __future__ import annotations

import pytest
from compiler_graphs import mlp_program

import tensorcode as tc
from tensorcode.compiler import backends
from tensorcode.compiler.backends.numba.module import generate
from tensorcode.compiler.lower.program import build as build_program
from tensorcode.compiler.lower.schedule import build
from tensorcode.errors import BackendError


def test_one_list_of_names_and_one_error_for_an_unknown_backend():
    assert backends.BACKENDS == ("numba", "llvm", "reference")
    assert backends.DEFAULT_BACKEND in backends.BACKENDS
    for name in backends.BACKENDS:
        assert backends.check_backend(name) == name
    with pytest.raises(BackendError, match=r"'compiled'.*\['numba', 'llvm', 'reference'\]"):
        backends.check_backend("compiled")
    assert issubclass(BackendError, ValueError) and issubclass(BackendError, tc.TensorCodeError)
    with pytest.raises(BackendError, match="backend must be one of"):
        tc.optim.Adam(backend="gpu")
    with pytest.raises(BackendError, match="executor must be one of"):
        backends.check_backend(None, "executor")


def test_every_backend_implements_the_protocol():
    for name in backends.BACKENDS:
        backend = backends.get(name)
        assert backend.name == name
        assert isinstance(backend.approximates, bool)
        assert callable(backend.prepare)
    network, loss, adjoints, _ = mlp_program([2, 3, 1], batch=4)
    program = build_program(build(*network.entry([loss]).optimized()))
    interpreted = backends.get("reference").prepare(program, False)
    assert interpreted.key == "" and not interpreted.fuses_updates


def test_the_generated_module_holds_each_kernel_once():
    network, loss, adjoints, _ = mlp_program([2, 8, 1], batch=6)
    program = build_program(build(*network.entry(adjoints.roots()).optimized()))
    source = generate(program)
    for k in range(len(program.kernels)):
        assert source.count(f"# kernel {k}:") == 1, source
    assert source.count("def body(") == 1
    # run and run_into call it once each, run_batch once per case inside its loop
    assert source.count("        body(") == 1 and source.count("    body(") == 3
