"""Tagged JSON codecs for the values an experience file holds.

Every value is written as a small object with a type tag (``{"t": "array", ...}``), so
a reader never guesses what a JSON value meant. Built-in tags cover primitives, bytes,
lists, tuples, dicts with string keys, finite dense arrays and NumPy scalars (``scalar``:
the value and its dtype, read back as that NumPy type). Anything else is a
*record*: a class with ``record_fields``, ``to_record()`` and a ``from_record(fields)``
class method, written only when the caller allowlists it by name (``codecs={"name":
Class}``) and read back only through the same allowlist. Validation walks the whole
value before anything is constructed, so a bad file builds nothing.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Protocol, cast

import numpy as np

from ..errors import ArtifactError, TensorCodeError
from ..files.strict_json import read_safe_int, safe_int
from ..files.tensorfile import shape_problem

#: dtypes a dense array may carry in an experience file
ARRAY_DTYPES = ("float32", "float64", "int32", "int64", "bool")
MAX_DEPTH = 64
#: hex digits an int value may carry (the strict reader bounds JSON integers alike)
_MAX_INT_HEX_DIGITS = 1024

TAGS = ("none", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict", "array",
        "record", "scalar")


class Record(Protocol):
    """What an allowlisted record class provides (checked by ``check_codecs``)."""

    record_fields: ClassVar[Iterable[str]]

    def to_record(self) -> Any: ...

    @classmethod
    def from_record(cls, fields: dict[str, Any]) -> Any: ...


def check_codecs(codecs: Mapping[str, Any] | None) -> dict[str, type[Record]]:
    """Validate a ``{name: record class}`` allowlist."""
    checked: dict[str, type[Record]] = {}
    for name, cls in (codecs or {}).items():
        if not isinstance(name, str) or not name:
            raise TensorCodeError(f"codec names must be nonempty strings, got {name!r}")
        fields = getattr(cls, "record_fields", None)
        if not isinstance(cls, type) or fields is None or not callable(
                getattr(cls, "from_record", None)) or not callable(getattr(cls, "to_record", None)):
            raise TensorCodeError(f"codec {name!r}: {cls!r} is not a record class (it needs "
                                  "record_fields, a from_record class method and to_record())")
        if not all(isinstance(f, str) for f in fields) or len(set(fields)) != len(tuple(fields)):
            raise TensorCodeError(f"codec {name!r}: record_fields must be distinct strings")
        # the checks above are the structural ones the Record protocol states
        checked[name] = cast(type[Record], cls)
    return checked


# -- encoding -----------------------------------------------------------------------------

def encode(value: Any, codecs: Mapping[str, type[Record]], depth: int = 0) -> dict:
    """``value`` as tagged JSON data (``TensorCodeError`` for what no codec covers)."""
    if depth > MAX_DEPTH:
        raise TensorCodeError(f"value nests deeper than {MAX_DEPTH} levels")
    if value is None:
        return {"t": "none"}
    if isinstance(value, np.generic):  # before float: np.float64 subclasses float
        encoded = _encode_array(np.asarray(value))
        return {"t": "scalar", "dtype": encoded["dtype"], "v": encoded["v"][0]}
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    if isinstance(value, int):  # beyond 2**53 as a hex string: exact in every reader
        return {"t": "int", "v": safe_int(value)}
    if isinstance(value, float):
        return {"t": "float", "v": value if math.isfinite(value) else repr(value)}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if isinstance(value, (bytes, bytearray)):
        return {"t": "bytes", "v": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (np.ndarray, np.generic)):
        return _encode_array(np.asarray(value))
    if isinstance(value, list):
        return {"t": "list", "v": [encode(v, codecs, depth + 1) for v in value]}
    if isinstance(value, tuple):
        return {"t": "tuple", "v": [encode(v, codecs, depth + 1) for v in value]}
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TensorCodeError(f"dict keys must be strings to be saved, got {key!r}")
        return {"t": "dict", "v": {k: encode(v, codecs, depth + 1) for k, v in value.items()}}
    for name, cls in codecs.items():
        if type(value) is cls:
            fields = value.to_record()
            if not isinstance(fields, dict) or set(fields) != set(cls.record_fields):
                raise TensorCodeError(f"record {name!r}: to_record() must return exactly the "
                                      f"fields {list(cls.record_fields)}")
            return {"t": "record", "name": name,
                    "v": {f: encode(fields[f], codecs, depth + 1) for f in cls.record_fields}}
    raise TensorCodeError(f"no codec for a {type(value).__name__} value; pass it as an array, "
                          "a primitive or a container of them, or allowlist its record class "
                          f"with codecs={{'name': {type(value).__name__}}}")


def _encode_array(array: np.ndarray) -> dict:
    dtype = array.dtype.name
    if dtype not in ARRAY_DTYPES:
        raise TensorCodeError(f"arrays of {dtype} cannot be saved; use one of "
                              f"{list(ARRAY_DTYPES)}")
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise TensorCodeError("an array holding NaN or infinity cannot be saved; experience "
                              "files hold finite dense arrays only")
    values = array.reshape(-1).tolist()
    if dtype == "int64":  # beyond 2**53 as hex strings, exact in every JSON reader
        values = [safe_int(x) for x in values]
    return {"t": "array", "dtype": dtype, "shape": list(array.shape), "v": values}


# -- validation (constructs nothing) ------------------------------------------------------

def validate(node: Any, codecs: Mapping[str, type[Record]], path: Any, field: str,
             depth: int = 0) -> None:
    """Raise ``ArtifactError`` naming ``field`` unless ``node`` is well-formed tagged data."""
    def fail(message: str) -> None:
        raise ArtifactError(message, path=path, field=field)

    if depth > MAX_DEPTH:
        fail(f"value nests deeper than {MAX_DEPTH} levels")
    if not isinstance(node, dict) or not isinstance(node.get("t"), str):
        fail("expected a tagged value {\"t\": ...}")
    tag = node["t"]
    if tag not in TAGS:
        fail(f"unknown codec tag {tag!r}; known tags are {list(TAGS)}")
    expected = {"none": {"t"}, "array": {"t", "dtype", "shape", "v"},
                "scalar": {"t", "dtype", "v"},
                "record": {"t", "name", "v"}}.get(tag, {"t", "v"})
    if set(node) != expected:
        fail(f"a {tag!r} value has keys {sorted(node)}, expected {sorted(expected)}")
    value = node.get("v")
    if tag == "bool" and not isinstance(value, bool):
        fail("a bool value must be true or false")
    elif tag == "int" and read_safe_int(value, _MAX_INT_HEX_DIGITS) is None:
        fail("an int value must be a JSON integer or a \"0x...\" hex string")
    elif tag == "float":
        if isinstance(value, str):
            if value not in ("nan", "inf", "-inf"):
                fail(f"a float value {value!r} is neither a number nor nan/inf/-inf")
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            fail("a float value must be a JSON number")
    elif tag == "str" and not isinstance(value, str):
        fail("a str value must be a JSON string")
    elif tag == "bytes":
        if not isinstance(value, str):
            fail("a bytes value must be base64 text")
        try:
            base64.b64decode(value.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            fail("a bytes value is not valid base64")
    elif tag in ("list", "tuple"):
        if not isinstance(value, list):
            fail(f"a {tag} value must be a JSON array")
        for k, item in enumerate(value):
            validate(item, codecs, path, f"{field}[{k}]", depth + 1)
    elif tag == "dict":
        if not isinstance(value, dict):
            fail("a dict value must be a JSON object")
        for k, item in value.items():
            validate(item, codecs, path, f"{field}.{k}", depth + 1)
    elif tag == "array":
        _validate_array(node, fail)
    elif tag == "scalar":  # a NumPy scalar: a 0-d array's one value, its type kept
        _validate_array({"dtype": node["dtype"], "shape": [], "v": [value]}, fail)
    elif tag == "record":
        name = node["name"]
        if not isinstance(name, str) or name not in codecs:
            fail(f"record {name!r} is not allowlisted; pass codecs={{{name!r}: TheClass}} "
                 "to load it (known: " + repr(sorted(codecs)) + ")")
        if not isinstance(value, dict) or set(value) != set(codecs[name].record_fields):
            fail(f"record {name!r} must have exactly the fields "
                 f"{list(codecs[name].record_fields)}")
        for k, item in value.items():
            validate(item, codecs, path, f"{field}.{k}", depth + 1)


def _validate_array(node: dict, fail: Any) -> None:
    dtype, shape, data = node["dtype"], node["shape"], node["v"]
    if dtype not in ARRAY_DTYPES:
        fail(f"array dtype {dtype!r} is not one of {list(ARRAY_DTYPES)}")
    problem = shape_problem(shape)
    if problem is not None:
        fail(f"array {problem}")
    size = math.prod(shape)  # Python ints: a huge shape cannot wrap around
    if not isinstance(data, list) or len(data) != size:
        fail(f"array data must be a flat list of {size} numbers")
    if dtype == "bool":
        ok = all(isinstance(x, bool) for x in data)
    elif dtype.startswith("int"):
        info = np.iinfo(dtype)
        numbers = [read_safe_int(x, 16) for x in data]
        ok = all(x is not None and info.min <= x <= info.max for x in numbers)
    else:
        limit = float(np.finfo(dtype).max)  # finite here and after the cast to dtype
        ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                 and abs(x) <= limit for x in data)
    if not ok:
        fail(f"array data must be finite {dtype} values")


# -- decoding (after validation) ----------------------------------------------------------

def decode(node: dict, codecs: Mapping[str, type[Record]], path: Any = None,
           field: str = "") -> Any:
    """The value of validated tagged data; arrays come back read-only."""
    tag = node["t"]
    if tag == "none":
        return None
    if tag in ("bool", "str"):
        return node["v"]
    if tag == "int":
        return read_safe_int(node["v"], _MAX_INT_HEX_DIGITS)
    if tag == "float":
        return float(node["v"])
    if tag == "bytes":
        return base64.b64decode(node["v"].encode("ascii"))
    if tag == "list":
        return [decode(v, codecs, path, field) for v in node["v"]]
    if tag == "tuple":
        return tuple(decode(v, codecs, path, field) for v in node["v"])
    if tag == "dict":
        return {k: decode(v, codecs, path, field) for k, v in node["v"].items()}
    if tag == "scalar":
        value = node["v"]
        return np.dtype(node["dtype"]).type(read_safe_int(value) if isinstance(value, str)
                                            else value)
    if tag == "array":
        values = node["v"]
        if node["dtype"] == "int64":
            values = [read_safe_int(x, 16) for x in values]
        array = np.array(values, dtype=node["dtype"]).reshape(node["shape"])
        array.flags.writeable = False
        return array
    cls = codecs[node["name"]]
    fields = {k: decode(v, codecs, path, field) for k, v in node["v"].items()}
    try:
        return cls.from_record(fields)
    except Exception as error:  # the allowlisted class rejected its own fields
        raise ArtifactError(f"record {node['name']!r} rejected its fields: {error}",
                            path=path, field=field) from error


__all__ = ["encode", "validate", "decode", "check_codecs", "ARRAY_DTYPES", "TAGS"]
