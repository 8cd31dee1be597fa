"""``tensorcode.ops``, the former name of ``tensorcode.operations``, still imports with a
``DeprecationWarning`` and gives the new package's objects under the old names."""

from __future__ import annotations

import subprocess
import sys

import tensorcode.operations as operations


def test_importing_the_old_name_warns_and_resolves_to_the_new_objects():
    code = ("import warnings\n"
            "warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n"
            "    import tensorcode.ops\n"
            "except DeprecationWarning as warning:\n"
            "    print('warned:', warning)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "warned: tensorcode.ops is deprecated (removed in 0.2.0): import " \
        "tensorcode.operations" in out


def test_old_names_are_the_new_classes():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import tensorcode.ops as ops
        from tensorcode.ops.vec import Space, latent_codecs

    assert ops.Linear is operations.LinearOperation
    assert ops.Mlp is operations.MlpOperation
    assert ops.Embedding is operations.EmbeddingOperation
    for name in operations.__all__:
        assert getattr(ops, name) is getattr(operations, name)
    assert Space is operations.vec.Space and latent_codecs is operations.vec.latent_codecs


def test_stored_identifiers_are_unchanged():
    """Fingerprints in experience and tool files name the operation's stable identifier,
    kept across the rename so files written before still load."""
    assert operations.LinearOperation.qualified_name == "tensorcode.ops.Linear"
    assert operations.MlpOperation.qualified_name == "tensorcode.ops.Mlp"
    assert operations.EmbeddingOperation.qualified_name == "tensorcode.ops.Embedding"
    assert operations.Operation.qualified_name == "tensorcode.ops.Operation"
