"""Distillation: turn a workload a large model (the teacher) answers today into a small
subset program that TensorCode compiles, scores against the teacher on cases the author
never saw, and serves on the CPU, escalating what it does not claim.

It is a mechanism: it measures agreement with the teacher you supply; it does not claim
that any particular author can write a good program for your task.
"""

from ..errors import DistillationError
from .attempts import FEEDBACK_POLICY, Attempt, CaseSet
from .fit import fit
from .loop import distill
from .repair import repair
from .report import FIELDS
from .result import Distillation
from .router import Router
from .spec import SUBSET_SPEC

__all__ = ["distill", "Distillation", "Router", "repair", "fit", "SUBSET_SPEC",
           "DistillationError", "FIELDS", "FEEDBACK_POLICY", "Attempt", "CaseSet"]
