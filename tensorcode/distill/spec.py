"""``SUBSET_SPEC``: the one-page language reference given to program authors.

The page is generated from the compiler's own tables (``tensorcode.compiler.subset``:
functions, methods, operators, comparisons and bounds), so it cannot list a function the
compiler refuses or miss one it accepts; tests check the tables against the op registry
and the grammar, and compile the example on the page.
"""

from __future__ import annotations

from ..compiler import subset

EXAMPLE_INPUTS = {"features": (12,)}
EXAMPLE_OUTPUTS = {"route": (), "covered": ()}
EXAMPLE_PARAMETERS = {"threshold": 0.5}

#: the guide-shaped router the page shows (also the benchmark's and the tests' router)
EXAMPLE_SOURCE = """\
def route(features, threshold):
    # features: twelve 0/1 keyword indicators; threshold: a json parameter
    billing = 0.0
    for i in range(0, 4):
        billing += features.slice(i, i + 1).reshape()
    technical = features.slice(4, 8).sum()
    other = features.slice(8, 12).max()
    route = where(billing >= technical, 0.0, 1.0)
    route = where(other > maximum(billing, technical), 2.0, route)
    covered = where(features.sum() >= threshold, 1.0, 0.0)
    return {"route": route, "covered": covered}
"""

#: the example as an author's reply: the program in a fenced block, then its parameters
EXAMPLE = f"```python\n{EXAMPLE_SOURCE}```\n```json\n{{\"threshold\": 0.5}}\n```"


def _build() -> str:
    unary = ", ".join(subset.UNARY_FUNCTIONS)
    methods = ", ".join(f"x.{m}(...)" for m in subset.METHODS)
    operators = " ".join(subset.OPERATORS)
    comparisons = " ".join(subset.COMPARISONS)
    return f"""\
TensorCode program language (a bounded subset of Python; the program is parsed and
compiled, never executed)

Shape of a program
- Exactly one function: def name(<every input>, <every json parameter>): ... ending in
  return {{"output_name": value, ...}} naming exactly the requested outputs, each with
  its declared shape (scalars are shape []).
- Statements: name = expr; name += expr (also -= *= /= **=); pass;
  for i in range(a, b): (also range(b), range(a, b, step)). Loop bounds are integers known
  at compile time (literals, loop variables, arithmetic on them); loops are unrolled, at
  most {subset.MAX_UNROLLED_STATEMENTS} statements in total.
- Every tensor is float64. Integers exist only at compile time: loop variables, slice
  bounds, shapes, axes; // and % work only on them. True/False are 1/0.
- # comments are fine. Strings only appear as the keys of the returned dict.

Values and operators
- Numbers (1, 0.5, 1e-3); list literals of numbers or same-shape values ([1.0, 2.0],
  [a, b, c]) become tensors (at most {subset.MAX_LITERAL_ELEMENTS} numbers).
- Arithmetic: {operators}, unary -, with NumPy broadcasting. @ is matrix product.
- Comparisons {comparisons} give 0.0/1.0 tensors. Combine them arithmetically:
  a and b -> (a) * (b); a or b -> maximum(a, b); not a -> 1 - a.
- Functions: {unary}; minimum(a, b), maximum(a, b), clip(x, low, high),
  where(condition, a, b) (a where condition is nonzero, else b).
- Methods: {methods}, and the unary functions as methods (x.exp()).
  x.slice(start, stop, axis=0) keeps elements start..stop-1 of one axis;
  x.reshape(3, 4) / x.reshape() (size-1 tensor to a scalar);
  x.sum() / x.sum(axis=0, keepdims=True), likewise mean, max, min; x.dot(w) is x @ w.

Reading elements
- Indexing with [] does not compile. Read element i with x.slice(i, i + 1).reshape(),
  elements a..b-1 with x.slice(a, b), a row of a matrix with m.slice(i, i + 1).reshape(n).

Parameters
- Optional json block after the program: {{"threshold": 0.5, "w": [[1.0, 2.0]]}}. Each
  name becomes a float64 tensor argument of the function, starting at the written value;
  a later gradient fit adjusts only these (comparisons carry no gradient).

Not in the language (each is a compile error that says what to write instead)
- if/else, while, a if c else b, and/or/not, lambda, comprehensions, imports, modules
  (np.*, math.*), attributes other than the methods above, calls other than the listed
  functions, nested functions, recursion, print, None, docstrings.

Errors come back with the line, the column, the offending line and an instruction.

Example (inputs {{"features": (12,)}}, outputs {{"route": (), "covered": ()}}):
{EXAMPLE}
"""


SUBSET_SPEC: str = _build()

__all__ = ["SUBSET_SPEC", "EXAMPLE", "EXAMPLE_INPUTS", "EXAMPLE_OUTPUTS",
           "EXAMPLE_PARAMETERS"]
