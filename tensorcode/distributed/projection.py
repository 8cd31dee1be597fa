"""When adding machines pays: the arithmetic of one data-parallel step.

A data-parallel step costs the compute of the shard plus the time to sum the gradients.
Training takes about 6 floating-point operations per parameter per sample (2 for the
forward pass, 4 for the backward pass), split evenly over the machines for a fixed
global batch; the gradients are one value per parameter whatever the batch. Summing
them with a ring all-reduce moves ``2 (M - 1) / M`` times the gradient bytes through
each machine's link; a star through one driver, which is what ``DataParallel`` does over
Ray's object store, moves ``2 M`` times the parameter bytes through the driver's link
(the parameters out to M workers, M gradient tables back). The projection assumes no
overlap of compute and communication, so it is a bound to check, not a promise.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TensorCodeError

#: floating-point operations per parameter per sample for a training step
FLOPS_PER_PARAMETER_SAMPLE = 6


@dataclass(frozen=True)
class Projection:
    """One configuration's step, in seconds and bytes (see ``project``)."""

    machines: int
    gbit_per_s: float
    flops_per_step: float
    compute_s: float
    gradient_bytes: int
    allreduce_s: float
    star_bytes: int
    star_s: float
    single_machine_s: float

    @property
    def step_s(self) -> float:
        """Compute plus the ring all-reduce, not overlapped."""
        return self.compute_s + self.allreduce_s

    @property
    def speedup(self) -> float:
        """One machine's step time over this step time (below 1: adding machines loses)."""
        return self.single_machine_s / self.step_s

    @property
    def communication_share(self) -> float:
        return self.allreduce_s / self.step_s


def project(parameters: int, samples_per_step: int, machines: int, gbit_per_s: float, *,
            flops_per_s: float, bytes_per_parameter: int = 4) -> Projection:
    """The projected step of a model with ``parameters`` trained on ``samples_per_step``
    samples (rows, or tokens for a language model) per step, split over ``machines``
    that each sustain ``flops_per_s`` and are linked at ``gbit_per_s``."""
    for name, value in (("parameters", parameters), ("samples_per_step", samples_per_step),
                        ("machines", machines), ("gbit_per_s", gbit_per_s),
                        ("flops_per_s", flops_per_s),
                        ("bytes_per_parameter", bytes_per_parameter)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise TensorCodeError(f"{name} must be a positive number, got {value!r}")
    flops = float(FLOPS_PER_PARAMETER_SAMPLE) * parameters * samples_per_step
    gradient_bytes = int(parameters) * int(bytes_per_parameter)
    bits_per_s = gbit_per_s * 1e9
    ring_bytes = 2.0 * (machines - 1) / machines * gradient_bytes
    star_bytes = 2 * int(machines) * gradient_bytes
    return Projection(machines=int(machines), gbit_per_s=float(gbit_per_s),
                      flops_per_step=flops, compute_s=flops / machines / flops_per_s,
                      gradient_bytes=gradient_bytes, allreduce_s=ring_bytes * 8 / bits_per_s,
                      star_bytes=star_bytes, star_s=star_bytes * 8 / bits_per_s,
                      single_machine_s=flops / flops_per_s)
