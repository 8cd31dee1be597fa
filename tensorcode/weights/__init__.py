"""Weight patches: render weights as text, read edit statements back, record changes.

``render`` writes tensors as integers times one scale each (text a language model can
read) and returns the rounded tensors the text shows. Edit statements such as
``w[6, 122] = 80`` or ``b[3] += -5`` (grammar: ``tensorcode/grammars/edits.lark``) are
parsed, never evaluated, and become a ``Patch``: per tensor the base and edited SHA-256
and one of four forms (sparse, dense, lowrank, projection). ``patch.apply`` refuses a
base whose hash differs, works on NumPy and PyTorch mappings, and ``save``/``load`` keep
it as a validated JSON artifact with rationale, evidence and author.
"""

from __future__ import annotations

from .algorithms import algorithm_parameters, patch_algorithm, replace_parameters
from .edits import EditError, apply_edits, parse_edits
from .forms import Dense, LowRank, Projection, Sparse
from .hashing import tensor_sha256
from .patch import Patch, TensorChange, build, diff
from .render import Rendering, render

__all__ = [
    "render", "Rendering", "algorithm_parameters", "replace_parameters", "patch_algorithm",
    "Patch", "TensorChange", "diff", "build", "LowRank", "Projection", "Sparse", "Dense",
    "EditError", "parse_edits", "apply_edits", "tensor_sha256",
]
