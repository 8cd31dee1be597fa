"""``fit``: tune a distilled program's declared parameters by gradient descent.

The program's IR (the artifact's graph; the source is never read) is copied onto a fresh
``Tape`` with a squared-error loss against the targets on top, and ``Tape.differentiate``
records the gradients as more IR. Comparisons carry no gradient, so a fit moves thresholds and
weights only through the program's smooth paths; it never changes the program's structure.

The loss of one case is the sum of squared differences over the teacher's outputs,
counted only where the program claims the case (``covered`` above 0.5, read at the current
parameters): abstained cases go to the fallback and say nothing about the answer. The
update is Adam (betas 0.9/0.999, eps 1e-8) with learning rate ``lr``; the parameters
with the lowest loss seen are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..compiler.backends import REFERENCE
from ..compiler.plans.document import replay
from ..compiler.plans.tape import Tape
from ..errors import TensorCodeError, TrainingError
from . import program as programs
from .attempts import CaseSet, score
from .cases import COVERED, case_key, claims, paired_cases
from .report import teacher_vs_truth
from .result import Distillation


def fit(result: Distillation, cases: Sequence[Mapping[str, Any]],
        targets: Sequence[Mapping[str, Any]], steps: int = 200, lr: float = 0.05
        ) -> Distillation:
    """A new ``Distillation`` whose declared parameters were fitted to ``targets`` on
    ``cases``; ``report["fit"]`` has the loss before and after, the parameters before
    and after and the number of cases used. Cases identical to a hidden acceptance case
    are excluded (``excluded_hidden``) so the acceptance score stays unseen; the others
    join the design set, since the program was tuned on them. ``no_gradient`` lists the
    parameters the loss never reached through a smooth path (used only in comparisons,
    for instance): the fit cannot move them."""
    if not isinstance(result, Distillation):
        raise TensorCodeError(f"fit needs a Distillation, got {type(result).__name__}")
    if not isinstance(steps, int) or steps < 0:
        raise TensorCodeError(f"steps must be a non-negative integer, got {steps!r}")
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise TensorCodeError(f"lr must be a positive number, got {lr!r}")
    new_cases, new_targets = paired_cases(cases, targets, result.inputs, result.outputs)
    start = result.parameters
    if not start:
        raise TrainingError("the program declares no parameters, so there is nothing to fit; "
                            "the author declares them in a json block")
    hidden = {case_key(c) for c in result.acceptance.cases}
    kept = [(c, t) for c, t in zip(new_cases, new_targets) if case_key(c) not in hidden]
    if not kept:
        raise TensorCodeError("no case is left to fit on: every case given is identical to a "
                              "hidden acceptance case")
    objective = _Objective(result)
    fit_cases = [c for c, _ in kept]
    fit_targets = [t for _, t in kept]
    values = {name: value.copy() for name, value in start.items()}
    first = best_loss = objective.loss_and_gradients(values, fit_cases, fit_targets)[0]
    best = {name: value.copy() for name, value in values.items()}
    moment = {name: np.zeros_like(v) for name, v in values.items()}
    second = {name: np.zeros_like(v) for name, v in values.items()}
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    history = [first]
    reached = dict.fromkeys(values, False)
    for step in range(1, steps + 1):
        loss, grads = objective.loss_and_gradients(values, fit_cases, fit_targets)
        for name, grad in grads.items():
            reached[name] = reached[name] or bool(np.any(grad != 0))
        if not np.isfinite(loss) or not all(np.isfinite(g).all() for g in grads.values()):
            raise TrainingError(f"the fit's loss or gradient became non-finite at step {step}; "
                                "lower lr or check the program's smooth paths")
        if loss < best_loss:
            best_loss, best = loss, {name: v.copy() for name, v in values.items()}
        for name, grad in grads.items():
            moment[name] = beta1 * moment[name] + (1 - beta1) * grad
            second[name] = beta2 * second[name] + (1 - beta2) * grad * grad
            m_hat = moment[name] / (1 - beta1 ** step)
            v_hat = second[name] / (1 - beta2 ** step)
            values[name] = values[name] - lr * m_hat / (np.sqrt(v_hat) + eps)
        history.append(loss)
    final_loss = objective.loss_and_gradients(values, fit_cases, fit_targets)[0]
    if final_loss < best_loss:
        best_loss, best = final_loss, values
    history.append(final_loss)
    fitted = result.program.with_parameters(best)
    return _refit_result(result, fitted, kept, len(new_cases) - len(kept), {
        "steps": steps, "lr": lr, "optimizer": "adam", "cases": len(kept),
        "executor": objective.executor,
        "excluded_hidden": len(new_cases) - len(kept), "loss_before": first,
        "loss_after": best_loss, "parameters_before": programs.parameters_to_json(start),
        "parameters_after": programs.parameters_to_json(best),
        "no_gradient": [name for name, hit in reached.items() if not hit and steps > 0],
        "loss_history": [float(h) for h in history[:: max(1, len(history) // 50)]]})


class _Objective:
    """The program's graph copied onto a tape with the loss of one case on top.

    With a compiled executor the loss and its gradients are lowered into one plan and
    evaluated over all cases in one compiled batch call per step; with the reference
    executor each case runs through the NumPy interpreter.
    """

    def __init__(self, result: Distillation) -> None:
        compiled = result.program.program
        tape = Tape()
        copies = replay(compiled.network.graph, tape)
        self.inputs = {name: copies[s.index] for name, s in compiled.inputs.items()}
        self.parameters = {name: copies[s.index] for name, s in compiled.parameters.items()}
        produced = {name: copies[s.index] for name, s in compiled.outputs.items()}
        self.covered = produced.get(COVERED)
        # targets are fed flat with at least one element (a batched scalar feed is the
        # one shape the batch path need not special-case)
        self.targets = {name: tape.input(np.zeros(max(1, int(np.prod(shape)))),
                                         name=f"target.{name}")
                        for name, shape in result.outputs.items()}
        loss = None
        for name in result.outputs:
            flat = produced[name].reshape(self.targets[name].shape)
            error = flat - self.targets[name]
            term = (error * error).sum()
            loss = term if loss is None else loss + term
        if loss is None:
            raise TrainingError("the program returns no outputs, so there is no loss to fit")
        self.loss = loss
        # a parameter read only through comparisons gets no gradient: the fit reports
        # it (no_gradient) rather than refusing the program
        self.adjoints = tape.differentiate(loss, list(self.parameters.values()),
                                           allow_disconnected=True)
        self.network = tape.into_network()
        self.template = self.network.parameters()
        self.plan = None
        self.executor = REFERENCE
        if result.executor != REFERENCE:
            roots = [loss, *self.adjoints.gradients]
            if self.covered is not None:
                roots.append(self.covered)
            self.plan = self.network.entry(roots).lower(result.executor)
            self.executor = result.executor

    def loss_and_gradients(self, values: Mapping[str, np.ndarray], cases: Sequence[Any],
                           targets: Sequence[Any]) -> tuple[float, dict[str, np.ndarray]]:
        table = self.template.replace({self.parameters[name]: np.asarray(value)
                                       for name, value in values.items()})
        if self.plan is not None:
            feeds = {symbol: np.stack([case[name] for case in cases])
                     for name, symbol in self.inputs.items()}
            feeds.update({symbol: np.stack([np.reshape(t[name], symbol.shape) for t in targets])
                          for name, symbol in self.targets.items()})
            batched = self.plan.forward_batch(
                table, {s: v for s, v in feeds.items() if self.plan.reads(s)})
            weight = (np.ones(len(cases)) if self.covered is None
                      else claims(np.asarray(batched.of(self.covered))).astype(np.float64))
            scale = 1.0 / max(1.0, float(weight.sum()))
            total = float(np.dot(weight, np.asarray(batched.of(self.loss)))) * scale
            grads = {}
            for name, symbol in self.parameters.items():
                per_case = np.asarray(batched.of(self.adjoints.of(symbol)))
                grads[name] = np.tensordot(weight, per_case, axes=(0, 0)) * scale
            return total, grads
        total = 0.0
        claimed = 0
        grads = {name: np.zeros_like(np.asarray(v)) for name, v in values.items()}
        for case, target in zip(cases, targets):
            feeds = {self.inputs[name]: case[name] for name in self.inputs}
            feeds.update({symbol: np.reshape(target[name], symbol.shape)
                          for name, symbol in self.targets.items()})
            run = self.network.forward(table, feeds)
            if self.covered is not None and not claims(float(run.of(self.covered))):
                continue
            claimed += 1
            total += float(run.of(self.loss))
            for name, symbol in self.parameters.items():
                grads[name] = grads[name] + run.of(self.adjoints.of(symbol))
        scale = 1.0 / max(1, claimed)
        return total * scale, {name: g * scale for name, g in grads.items()}


def _refit_result(result: Distillation, fitted: Any, kept: list, excluded: int,
                  summary: dict[str, Any]) -> Distillation:
    start = 1 + max([*result.design.indices, *result.acceptance.indices], default=-1)
    design = CaseSet([*result.design.indices, *range(start, start + len(kept))],
                     [*result.design.cases, *(c for c, _ in kept)],
                     [*result.design.targets, *(t for _, t in kept)])
    settings = result.settings
    atol, rtol, feedback = settings["atol"], settings["rtol"], settings["feedback_cases"]
    report = dict(result.report)
    report["design"] = score(fitted, result.abstains, design, result.outputs, atol, rtol,
                             feedback)
    report["acceptance"] = score(fitted, result.abstains, result.acceptance, result.outputs,
                                 atol, rtol, feedback)
    if result.acceptance.truth is not None:
        report["truth"] = {
            "program_vs_teacher": report["acceptance"],
            "program_vs_truth": score(fitted, result.abstains, result.acceptance,
                                      result.outputs, atol, rtol, feedback,
                                      against=result.acceptance.truth),
            "teacher_vs_truth": teacher_vs_truth(result.acceptance.targets,
                                                 result.acceptance.truth, result.outputs,
                                                 atol, rtol)}
    summary["design_before"] = {k: result.report["design"][k] for k in
                                ("cases", "covered", "agreed", "wrong", "errors")}
    summary["acceptance_before"] = {k: result.report["acceptance"][k] for k in
                                    ("cases", "covered", "agreed", "wrong", "errors")}
    report["fit"] = summary
    return Distillation(task=result.task, inputs=result.inputs, outputs=result.outputs,
                        program=fitted, source=result.source, report=report,
                        attempts=list(result.attempts), design=design,
                        acceptance=result.acceptance, settings=settings,
                        abstains=result.abstains, executor=result.executor)
