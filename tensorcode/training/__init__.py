"""Training traced programs: the ``Trainer``, losses, experiences and calibration.

``Trainer.from_ops`` trains explicitly supervised traces; ``Trainer.from_tool`` trains a
``Tool``'s declared objective. ``load_experience`` reads experience files written by
``session.save``. ``TemperatureCalibration``, ``evaluate_calibration`` and
``fit_threshold`` calibrate and measure scores.
"""

from ..runtime.experience import load_experience
from .calibration import TemperatureCalibration, ThresholdFit, evaluate_calibration, fit_threshold
from .losses import BUILTIN as BUILTIN_LOSSES
from .tool import Tool
from .trainer import Trainer

__all__ = ["Trainer", "Tool", "load_experience", "TemperatureCalibration",
           "evaluate_calibration", "fit_threshold", "ThresholdFit", "BUILTIN_LOSSES"]
