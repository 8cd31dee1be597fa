"""The tensor hash is defined over dtype, shape and little-endian C-order bytes."""

from __future__ import annotations

import hashlib

import numpy as np

from tensorcode.weights import tensor_sha256


def test_hash_matches_its_written_definition():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = hashlib.sha256(b"tensorcode.tensor.v1\nfloat32\n2,3\n"
                              + array.astype("<f4").tobytes(order="C")).hexdigest()
    assert tensor_sha256(array) == expected
    scalar = np.array(1.5)
    assert tensor_sha256(scalar) == hashlib.sha256(
        b"tensorcode.tensor.v1\nfloat64\n\n" + np.float64(1.5).tobytes()).hexdigest()


def test_hash_ignores_layout_and_byte_order_but_not_values_dtype_or_shape():
    array = np.arange(12, dtype=np.float64).reshape(3, 4)
    fortran = np.asfortranarray(array)
    big_endian = array.astype(">f8")
    strided = np.arange(24, dtype=np.float64).reshape(3, 8)[:, ::2]
    assert not strided.flags.c_contiguous
    assert tensor_sha256(array) == tensor_sha256(fortran) == tensor_sha256(big_endian)
    assert tensor_sha256(strided) == tensor_sha256(np.ascontiguousarray(strided))
    assert tensor_sha256(array) != tensor_sha256(array.reshape(4, 3))
    assert tensor_sha256(array) != tensor_sha256(array.astype(np.float32))
    assert tensor_sha256(np.array([0.0])) != tensor_sha256(np.array([-0.0]))
    same_bytes = np.zeros(2, dtype=np.float32)
    assert tensor_sha256(same_bytes) != tensor_sha256(same_bytes.view(np.int32))


def test_hash_definition_holds_for_every_kind_of_array():
    arrays = [np.array(True), np.zeros((0, 3), dtype=np.float32), np.arange(6).reshape(2, 3).T,
              np.array([1, 2], dtype=">i8"), np.array([0.5], dtype=np.float16)]
    for array in arrays:
        little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        header = (f"tensorcode.tensor.v1\n{array.dtype.name}\n"
                  f"{','.join(str(n) for n in array.shape)}\n").encode()
        assert tensor_sha256(array) == hashlib.sha256(header + little.tobytes()).hexdigest()
