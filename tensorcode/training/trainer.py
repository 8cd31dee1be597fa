"""The ``Trainer``: replay supervised experiences with gradients and update parameters.

A step re-expresses the experience's captured calls on a fresh tape: each operation
records its parameter symbols (in one fixed order, the trainer's layout), each call is
expressed from the output of the call it depends on (a gradient path) or from its
snapshotted external inputs (tape inputs, never gradient paths), and each supervision
records its loss. ``tape.differentiate`` turns the mean loss into gradient IR, the
network is lowered once per experience *structure* into a forward-only plan, and every
experience of that structure runs the same plan with its own feeds. The optimizer then
updates the trainer's table, and each operation's own table follows.

Checks happen before any update: a loss that no parameter reaches is *disconnected*, a
loss that reaches parameters only through steps without gradients (comparisons,
integer paths, recorded external results) is *nondifferentiable*, and a NaN or infinite
loss or gradient is *nonfinite*; each raises ``TrainingError`` and changes nothing.

``fit`` runs its updates in calls of up to ``steps_per_call``. A run of updates that
share one structure is one compiled call when the optimizer fuses and reveals nonfinite
values (``Optimizer.reveals_nonfinite``: the built-ins): the plan is then a step plan
(``entry.lower(optimizer=...)``) and ``run_steps`` takes the loss, the gradients and the
update K times in one call, on a copy of the parameters. Its K losses and the final
parameters are checked; if any is NaN or infinite, the optimizer goes back to its state
before the call and the K updates run one by one, each checked, so the error names the
exact update and the ones before it are kept. Updates that are not fused share one
snapshot of the optimizer state per call instead of one per update: a refused update
puts back that snapshot and redoes the updates before it (a step is deterministic, so
they come out bit for bit the same). Either way the trajectory equals one update at a
time, bit for bit. ``step`` takes the same fused path (one ``run_steps`` call of K=1).

An experience is prepared once: its calls converted to feeds (texts featurized and
padded, targets checked and converted) on the first ``fit`` or ``step`` that sees it,
then reused while it lives and keeps the same calls, supervisions and operation modes.
A ``fit`` stacks the feeds of each structure once (``_Bank``), and each ``run_steps``
call takes its rows in one gather, so the per-update work around the plan call is a
few array views, not a featurization.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..compiler.core import ir
from ..compiler.plans.step import StepPlan
from ..compiler.plans.tables import Gradients, Parameters
from ..compiler.plans.tape import Tape
from ..compiler.trace.autodiff import needs_gradient
from ..compiler.trace.expr import Expr
from ..errors import ArtifactError, TensorCodeError, TrainingError
from ..operations.base import Operation
from ..operations.execute import lower, resolve_backend, rewrap
from ..runtime import checkpoint, optim
from ..runtime.experience import ExternalRoot, OutputRef, Trace, trace
from ..runtime.optim import Optimizer
from ..runtime.progress import progress_bar
from ..runtime.random import Generator
from .losses import BUILTIN as BUILTIN_LOSSES
from .losses import LossFn, builtin_target, record_loss
from .tool import Tool

#: updates per call of ``fit`` by default (one compiled call, one optimizer snapshot)
STEPS_PER_CALL = 32


class _Step:
    """One lowered training structure: the plan (a step plan when the trainer fuses), its
    loss and gradient roots, and the random key its operations draw from (if any)."""

    def __init__(self, network: Any, adjoints: Any, plan: Any, feed_symbols: list[Expr],
                 key: Expr | None = None) -> None:
        self.network = network
        self.adjoints = adjoints
        self.plan = plan
        self.feed_symbols = feed_symbols
        self.key = key
        self.output_types: dict[int, Any] = {}


class _Refused(Exception):
    """An update whose result was nonfinite after the optimizer had changed its state:
    the caller puts the state back (``_Mark``) before raising ``error``."""

    def __init__(self, error: TrainingError) -> None:
        super().__init__(str(error))
        self.error = error


class _Mark:
    """What a run of updates may change, as it was before them: the parameter table (kept,
    not copied: a step builds a new table), one copy of the optimizer's state, the
    generator's counter and the step count."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.parameters = trainer.parameters
        self.restore_optimizer = trainer.optimizer.snapshot()
        self.counter = trainer.generator.counter
        self.steps = trainer.steps

    def restore(self) -> None:
        trainer = self.trainer
        self.restore_optimizer()
        trainer._adopt(self.parameters)
        generator = trainer.generator
        generator.advance((self.counter - generator.counter) % 2 ** 64)
        trainer.steps = self.steps


class Trainer:
    """Trains operations on supervised experiences; see ``from_ops`` and ``from_tool``."""

    def __init__(self, operations: Mapping[str, Operation], optimizer: Any = None,
                 lr: float | None = None, losses: Mapping[str, LossFn] | None = None,
                 backend: str | None = None, seed: int = 0, tool: Any = None,
                 steps_per_call: int = STEPS_PER_CALL) -> None:
        self.operations = _check_operations(operations)
        self._owners: list[tuple[str, Operation]] = []
        seen: set[int] = set()
        for name, op in self.operations.items():
            if id(op) not in seen:
                seen.add(id(op))
                self._owners.append((name, op))
        self.steps_per_call = _check_steps_per_call(steps_per_call)
        self.losses = dict(losses or {})
        for name, fn in self.losses.items():
            if not isinstance(name, str) or not callable(fn):
                raise TypeError(f"losses maps names to callables, got {name!r}: {fn!r}")
        self.backend = resolve_backend(backend)
        self.generator = Generator(seed)
        self.tool = tool
        self.steps = 0
        self.progress: dict[str, Any] = {}
        # the trainer's layout: every deduplicated parameter, named "<binding>.<path>"
        tape = Tape()
        for name, op in self._owners:
            for path, payload in op.named_parameters():
                tape.parameter(np.zeros(payload.shape, payload.dtype), name=f"{name}.{path}")
        self._network = tape.into_network()
        self._layout = self._network.layout
        # each operation's slots of one dtype are one contiguous span of the trainer's
        # buffer for that dtype, so an operation's table is a view of the trainer's
        self._spans: list[tuple[Operation, dict[str, tuple[int, int]]]] = []
        payloads: list[np.ndarray] = []
        slots = self._layout.slots
        for _, op in self._owners:
            current = op.parameters.payloads()
            spans: dict[str, tuple[int, int]] = {}
            for slot in slots[len(payloads):len(payloads) + len(current)]:
                start, _stop = spans.get(slot.dtype, (slot.offset, slot.offset))
                spans[slot.dtype] = (start, slot.offset + slot.size)
            self._spans.append((op, spans))
            payloads += current
        self._parameters = Parameters.from_payloads(self._layout, payloads)
        self.optimizer = self._make_optimizer(optimizer)
        # the rate given here, else the one the optimizer was built with, else 0.01
        if lr is None:
            lr = getattr(self.optimizer, "constructed_lr", None)
        self.lr = _check_lr(0.01 if lr is None else lr)
        self._steps: dict[tuple, _Step] = {}
        # each experience's prepared feeds, kept while the experience lives: a later fit
        # or step on it pays no featurizing, padding or target conversion again
        self._prepared: weakref.WeakKeyDictionary[Trace, tuple[tuple, tuple[_Step, dict]]] = \
            weakref.WeakKeyDictionary()
        # the last fit's experiences and their feeds stacked per structure (``_Bank``)
        self._bank: tuple[list, dict[int, _Bank]] | None = None

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_ops(cls, operations: Mapping[str, Operation], optimizer: Any = None,
                 lr: float | None = None, losses: Mapping[str, LossFn] | None = None,
                 backend: str | None = None, seed: int = 0,
                 steps_per_call: int = STEPS_PER_CALL) -> Trainer:
        """Train an explicitly supervised program (``trace()`` + ``supervise()``); the
        operations' training modes are left as they are."""
        return cls(operations, optimizer=optimizer, lr=lr, losses=losses, backend=backend,
                   seed=seed, steps_per_call=steps_per_call)

    @classmethod
    def from_tool(cls, tool: Tool, optimizer: Any = None, lr: float | None = None,
                  losses: Mapping[str, LossFn] | None = None, backend: str | None = None,
                  seed: int = 0, steps_per_call: int = STEPS_PER_CALL) -> Trainer:
        """Train a tool's declared operations on its declared objective, with its
        training-mode policy applied. ``backend`` defaults to the tool's own (a tool built
        with ``backend="reference"`` trains on the reference backend), and so does the
        default optimizer's."""
        for attribute in ("operations", "objective", "set_training", "output|predict"):
            if not any(hasattr(tool, name) for name in attribute.split("|")):
                raise TypeError(f"{type(tool).__name__} is not a Tool: it lacks "
                                f"{attribute!r} (see tensorcode.training.Tool)")
        if backend is None:
            backend = getattr(tool, "backend", None)
        operations = tool.operations
        if callable(operations):
            operations = operations()
        # the tool's own loss callables (those its objective names), then the caller's
        losses = {**dict(getattr(tool, "losses", None) or {}), **dict(losses or {})}
        trainer = cls(operations, optimizer=optimizer, lr=lr, losses=losses, backend=backend,
                      seed=seed, tool=tool, steps_per_call=steps_per_call)
        if lr is None and getattr(trainer.optimizer, "constructed_lr", None) is None:
            trainer.lr = 0.001  # a tool's default rate
        tool.set_training(True)
        return trainer

    def _make_optimizer(self, optimizer: Any) -> Any:
        if optimizer is None:
            optimizer = optim.Sgd(backend=self.backend)
        elif not isinstance(optimizer, optim.Optimizer) and callable(optimizer):
            optimizer = optimizer(self._parameters)
        if not isinstance(optimizer, optim.Optimizer):
            raise TypeError(f"optimizer must be a tc.optim.Optimizer (or a factory taking "
                            f"the parameters), got {type(optimizer).__name__}")
        if optimizer.layout is not None:
            try:
                optimizer.bind(self._layout)
            except TensorCodeError as error:
                raise TrainingError(f"the optimizer must own exactly this trainer's "
                                    f"deduplicated trainable parameters: {error}") from None
        return optimizer

    # -- state --------------------------------------------------------------------------
    @property
    def parameters(self) -> Parameters:
        """Every trainable parameter, named ``<binding>.<path>``."""
        return self._parameters

    def _adopt(self, table: Parameters) -> None:
        buffers = table.buffers()
        for op, spans in self._spans:
            op.adopt_buffers({d: buffers[d][a:b] for d, (a, b) in spans.items()})
        self._parameters = table

    def fingerprints(self) -> dict[str, str]:
        """Each operation's fingerprint (what it means, not its values), by name: what a
        checkpoint records, so it never loads into operations that mean something else."""
        return {name: op.fingerprint() for name, op in self._owners}

    def modes(self) -> dict[str, bool]:
        """Each operation's training mode, by name (what checkpoints record)."""
        return {name: bool(op.training) for name, op in self._owners}

    # -- capture ------------------------------------------------------------------------
    def capture(self, inputs: Any, targets: Any, source: str) -> Trace:
        """Run the tool on ``inputs`` under a trace and supervise its prediction with
        ``targets`` on the tool's objective. No update happens."""
        if self.tool is None:
            raise TrainingError("an operation trainer has no objective to capture with; "
                                "trace the program with trace(), supervise its output and "
                                "pass the trace to step() or fit()")
        # a tool that checks targets turns them into its loss's form before anything runs;
        # the prediction sees only the inputs, never the target (feedback is not evidence)
        # a tool trained by teacher forcing (Chatbot) declares it: its supervised output
        # reads the target's earlier tokens as the model's input, by design
        teacher = getattr(self.tool, "teacher_forced", None)
        raw_targets = targets
        check_target = getattr(self.tool, "check_target", None)
        if check_target is not None:
            targets = check_target(inputs, targets)
        # the padded supervised output (a tool's ``output`` trims the padding)
        compute = (getattr(self.tool, "supervised_output", None)
                   or getattr(self.tool, "output", None) or self.tool.predict)
        session = trace()
        if teacher is not None:
            prediction = session.run(lambda: teacher(inputs, raw_targets))
        else:
            prediction = session.run(lambda: compute(inputs))
        session.supervise(prediction, targets, loss=self.tool.objective, source=source)
        return session

    # -- stepping -----------------------------------------------------------------------
    def step(self, experience: Trace) -> float:
        """One update on ``experience`` (the mean of its supervised losses); the loss, a
        ``numpy.float64`` (a float with ``.item()``, as NumPy's and PyTorch's scalars)."""
        lowered, feeds = self._prepare(experience)
        mark = _Mark(self)
        if self._fuses():
            done = self._run_fused([(lowered, feeds, 0)], mark,
                                   _Bank.single(feeds))
            if done is not None:
                return np.float64(done[0])
        return np.float64(self._run_single([(lowered, feeds, 0)], mark)[0])

    def fit(self, experiences: Sequence[Trace] | Trace, epochs: int = 1,
            progress: bool = True, shuffle: bool = True) -> list[float]:
        """``epochs`` passes over ``experiences`` (in an order drawn from the trainer's
        generator when ``shuffle``), one update each; returns one loss per update (each a
        ``numpy.float64``). One experience alone is taken as a list of one. Every
        experience is checked and lowered before the first update. Updates run in calls
        of up to ``steps_per_call`` (see the module doc): the same trajectory, faster. A
        refused update's ``TrainingError`` names it: its number in this fit, its epoch
        and the experience's position in ``experiences``."""
        if isinstance(experiences, Trace):
            experiences = [experiences]
        elif not isinstance(experiences, Iterable) or isinstance(experiences, (str, bytes)):
            raise TypeError(f"fit takes a list of experiences (Traces), got "
                            f"{type(experiences).__name__}")
        experiences = list(experiences)
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
            raise ValueError(f"epochs must be a non-negative int, got {epochs!r}")
        if not experiences:
            raise TrainingError("fit needs at least one experience")
        prepared = [self._prepare(e) for e in experiences]
        banks = self._banks(prepared) if self._fuses() else {}
        bar = progress_bar(epochs * len(prepared), "fit", progress, unit="update")
        # every epoch's order up front, so a call may run on into the next epoch: the
        # orders come from the generator's PCG64 stream, the plans' draws from its Philox
        # counter, so drawing them early changes no draw. After a refused update the
        # stream is put back to just after its epoch's order, as if drawn epoch by epoch.
        items: list[tuple[_Step, dict, int]] = []
        rows = _rows_in_banks(prepared)
        epoch_of: list[int] = []
        source_of: list[int] = []
        streams: list[dict] = []
        for epoch in range(epochs):
            order = (self.generator.permutation(len(prepared)) if shuffle
                     else range(len(prepared)))
            if shuffle:
                streams.append(self.generator.get_state())
            items += [prepared[int(k)] + (rows[int(k)],) for k in order]
            source_of += [int(k) for k in order]
            epoch_of += [epoch] * len(prepared)
        start = self.steps
        losses: list[float] = []
        try:
            for fused, chunk in _chunks(items, self.steps_per_call, self._fuses()):
                mark = _Mark(self)
                done = self._run_fused(chunk, mark, banks[id(chunk[0][0])]) if fused \
                    else None
                if done is None:
                    done = self._run_single(chunk, mark)
                losses += done
                if bar is not None and done:
                    bar.update(len(done))
                    bar.set_postfix(loss=f"{done[-1]:.4g}", refresh=False)
        except BaseException as error:
            refused = self.steps - start
            if shuffle and refused < len(items):
                stream = dict(streams[epoch_of[refused]])
                stream["philox"] = self.generator.get_state()["philox"]
                self.generator.set_state(stream)
            if isinstance(error, TrainingError) and refused < len(items):
                raise TrainingError(
                    f"update {refused + 1} of {len(items)} in this fit (epoch "
                    f"{epoch_of[refused] + 1}, experiences[{source_of[refused]}]) was refused: "
                    f"{error}") from None
            raise
        finally:
            if bar is not None:
                bar.close()
        return [np.float64(loss) for loss in losses]

    def _fuses(self) -> bool:
        """Whether runs of one structure go through ``run_steps``: more than one step per
        call, and an optimizer with a fused rule whose updates reveal nonfinite values."""
        optimizer = self.optimizer
        return (self.steps_per_call > 1 and bool(getattr(optimizer, "reveals_nonfinite", False))
                and type(optimizer).fused_rule is not Optimizer.fused_rule)

    def _step_plan(self, lowered: _Step) -> Any:
        """The step plan of ``lowered`` for the optimizer's current configuration (lowered
        again when its hyperparameters changed since), or None when it has none."""
        plan = lowered.plan
        if not isinstance(plan, StepPlan):
            return None
        if plan.rule.key() != self.optimizer.fused_rule(lowered.network.layout).key():
            plan = lower(lowered.network, lowered.adjoints.roots(), self.backend,
                         optimizer=self.optimizer)
            lowered.plan = plan
        return plan

    def _run_fused(self, chunk: list[tuple[_Step, dict, int]], mark: _Mark, bank: _Bank
                   ) -> list[float] | None:
        """The updates of ``chunk`` (one structure) in one ``run_steps`` call, committed
        when every loss and the final parameters are finite; None after putting the
        optimizer back otherwise (the caller then runs them one by one). Their feeds are
        rows of ``bank``, taken in one gather (a view when the rows are consecutive)."""
        lowered = chunk[0][0]
        plan = self._step_plan(lowered)
        if plan is None:
            return None
        count = len(chunk)
        batches = bank.take([row for _, _, row in chunk])
        if plan.takes_randomness:
            batches[lowered.key] = self.generator.key_states(count, plan.random_blocks)
        # the step overwrites the table it is given: a copy, adopted only when it holds
        candidate = rewrap(self._parameters, lowered.network.layout).clone()
        try:
            losses = plan.run_steps(candidate, self.optimizer, batches, self.lr)
        except BaseException:
            mark.restore()
            raise
        if not (np.all(np.isfinite(losses)) and not _nonfinite_slots(candidate)):
            # the optimizer reveals nonfinite values (``_fuses``), so finite results mean
            # that every update, one at a time, would have passed its checks
            mark.restore()
            return None
        if plan.takes_randomness:
            self.generator.advance(count * plan.random_blocks)
        self._adopt(rewrap(candidate, self._layout))
        self.steps += count
        return [float(loss) for loss in losses]

    def _run_single(self, chunk: list[tuple[_Step, dict, int]], mark: _Mark) -> list[float]:
        """The updates of ``chunk`` one at a time, sharing ``mark`` (one snapshot): an
        update refused before it changed anything raises at once, the earlier ones kept;
        one refused after the optimizer changed its state puts ``mark`` back and redoes
        the earlier ones first."""
        losses = []
        for position, (lowered, feeds, _) in enumerate(chunk):
            try:
                losses.append(self._update(lowered, feeds))
            except _Refused as refused:
                mark.restore()
                for again in chunk[:position]:
                    self._update(again[0], again[1])
                raise refused.error from None
        return losses

    def _update(self, lowered: _Step, feeds: dict) -> float:
        counter = self.generator.counter
        try:
            return self._apply_update(lowered, feeds)
        except BaseException:
            # a refused step changes nothing: put the plan's draws back (mod 2**64)
            self.generator.advance((counter - self.generator.counter) % 2 ** 64)
            raise

    def _apply_update(self, lowered: _Step, feeds: dict) -> float:
        table = rewrap(self._parameters, lowered.network.layout)
        run = lowered.plan.forward(table, feeds, generator=self.generator)
        loss = float(np.asarray(run.of(lowered.adjoints.loss)))
        if not math.isfinite(loss):
            raise TrainingError(f"the loss is {loss}: nonfinite, so no update was made; "
                                "lower the learning rate or check the targets")
        gradients = run.recorded_gradients(lowered.adjoints)
        for buffer in gradients.buffers().values():
            # min and max propagate NaN and reach infinities: two fast reductions
            if buffer.size and not (np.isfinite(buffer.min()) and np.isfinite(buffer.max())):
                bad = [s.name if s.name is not None else s.label
                       for s, g in zip(self._layout.slots, gradients.payloads())
                       if not np.all(np.isfinite(g))]
                raise TrainingError(f"the gradient of {', '.join(bad)} holds NaN or infinity "
                                    "(nonfinite); no update was made")
        gradients = rewrap(gradients, self._layout, Gradients)
        updated = self.optimizer.step(self._parameters, gradients, self.lr)
        bad = _nonfinite_slots(updated)
        if bad:  # the caller puts the optimizer's state back too: nothing changed
            raise _Refused(TrainingError(
                f"the update leaves {', '.join(bad)} holding NaN or infinity (nonfinite); "
                f"no update was made; lower the learning rate (now {self.lr!r})"))
        self._adopt(updated)
        self.steps += 1
        return loss

    # -- replay on a tape ---------------------------------------------------------------
    def _prepare(self, experience: Trace) -> tuple[_Step, dict]:
        """The lowered structure of ``experience`` and its feeds: converted (featurized,
        padded, targets checked) on the first call, then reused while the experience
        has the same calls and supervisions and the operations the same modes. Every
        call still checks that no captured output changed since capture."""
        if not isinstance(experience, Trace):
            raise TypeError(f"expected an experience (a Trace), got {type(experience).__name__}")
        if not experience.supervisions:
            raise TrainingError("this experience has no supervision; call "
                                "session.supervise(output, target, source=...) first")
        experience.validate()
        signature = (len(experience.calls), len(experience.supervisions),
                     tuple(self.modes().values()))
        cached = self._prepared.get(experience)
        if cached is not None and cached[0] == signature:
            return cached[1]
        prepared = self._convert(experience)
        self._prepared[experience] = (signature, prepared)
        return prepared

    def _banks(self, prepared: list[tuple[_Step, dict]]) -> dict[int, _Bank]:
        """The feeds of ``prepared`` stacked per structure (keyed by the structure's id),
        reused when a fit runs on the same prepared experiences as the last one."""
        last = self._bank
        if last is not None and len(last[0]) == len(prepared) and all(
                a is b for a, b in zip(last[0], prepared)):
            return last[1]
        groups: dict[int, list[dict]] = {}
        for lowered, feeds in prepared:
            groups.setdefault(id(lowered), []).append(feeds)
        banks = {key: _Bank.stack(found) for key, found in groups.items()}
        self._bank = (list(prepared), banks)
        return banks

    def _convert(self, experience: Trace) -> tuple[_Step, dict]:
        index_of = {id(op): k for k, (_, op) in enumerate(self._owners)}
        needed: set[int] = set()
        for record in experience.supervisions:
            needed.update(experience.example(record.ref).calls)
        calls = experience.calls
        key: list[Any] = []
        arrays: list[np.ndarray] = []
        plan_steps: list[tuple] = []
        for k in sorted(needed):
            call = calls[k]
            kinds: list[tuple] = []
            if call.operation.replay != "pure":
                # never re-run: consumers read its recorded result as a constant
                key.append((k, "recorded"))
                plan_steps.append((k, call, [("recorded",)]))
                continue
            if id(call.operation) not in index_of:
                raise TrainingError(f"call {k} used a {type(call.operation).__name__} that "
                                    "this trainer does not train; build the trainer with "
                                    "every operation the experience binds")
            refs = [isinstance(i, OutputRef) and calls[i.call].operation.replay == "pure"
                    for i in call.inputs]
            if any(refs) and not call.operation.accepts_tensors:
                raise TrainingError(
                    f"call {k}: {type(call.operation).__name__} takes non-tensor input, "
                    "so another operation's output cannot be a gradient path into it")
            # a referenced output's recorded value stands in for it during conversion;
            # the tape then uses the producing call's Expr at that position
            converted = call.operation.convert([_value(calls, i) for i in call.inputs])
            if any(refs) and len(converted) != len(call.inputs):
                raise TrainingError(f"call {k}: {type(call.operation).__name__}.convert must "
                                    "give one array per argument to take tensor inputs")
            for position, array in enumerate(converted):
                if any(refs) and refs[position]:
                    kinds.append(("ref", call.inputs[position].call))
                else:
                    kinds.append(("in", array.shape, array.dtype.name))
                    arrays.append(array)
            key.append((k, index_of[id(call.operation)], tuple(kinds)))
            plan_steps.append((k, call, kinds))
        # the structure names calls by their place in the closure, so experiences that
        # differ only in calls the losses do not need share a plan
        place = {k: n for n, k in enumerate(sorted(needed))}
        structure_calls = tuple(
            (place[entry[0]],) + entry[1:2] + (tuple(
                ("ref", place[kind[1]]) if kind[0] == "ref" else kind for kind in entry[2]),)
            if len(entry) == 3 else (place[entry[0]],) + entry[1:]
            for entry in key)
        targets = list(experience.supervisions)
        supervision_key = tuple((place[r.ref.call], r.loss, _target_signature(r.target))
                                for r in targets)
        # modes change what an operation expresses (dropout draws only while training)
        structure = (structure_calls, supervision_key, tuple(self.modes().values()))
        lowered = self._steps.get(structure)
        target_feeds: list[np.ndarray] = []
        if lowered is None:
            lowered, target_feeds = self._lower(plan_steps, targets)
            self._steps[structure] = lowered
        else:
            target_feeds = self._target_arrays(lowered, place, targets, calls)
        feed_arrays = arrays + target_feeds
        feeds = {s: a for s, a in zip(lowered.feed_symbols, feed_arrays)
                 if lowered.plan.reads(s)}  # a plan refuses feeds it does not read
        return lowered, feeds

    def _express(self, plan_steps: list[tuple]) -> tuple[Tape, list[Expr], dict[int, Any],
                                                          list[Expr]]:
        tape = Tape()
        built = []
        wrt: list[Expr] = []
        for _, op in self._owners:
            start = len(tape)
            built.append(op.build(tape))
            wrt += tape.parameters(since=start)
        if len(wrt) != len(self._layout.slots):
            raise TensorCodeError("internal: an operation recorded a different number of "
                                  "parameters than its table holds")
        index_of = {id(op): k for k, (_, op) in enumerate(self._owners)}
        produced: dict[int, Any] = {}
        feed_symbols: list[Expr] = []
        for k, call, kinds in plan_steps:
            op = call.operation
            if kinds and kinds[0][0] == "recorded":
                produced[k] = ("constant", None)
                continue
            inputs = []
            for kind in kinds:
                if kind[0] == "ref":
                    inputs.append(produced[kind[1]][1])
                else:
                    symbol = tape.input(np.zeros(kind[1], kind[2]))
                    feed_symbols.append(symbol)
                    inputs.append(symbol)
            output = op.express(built[index_of[id(op)]], inputs)
            produced[k] = ("tensor", output)
        return tape, wrt, produced, feed_symbols

    def _lower(self, plan_steps: list[tuple], targets: list
               ) -> tuple[_Step, list[np.ndarray]]:
        tape, wrt, produced, feed_symbols = self._express(plan_steps)
        calls_by_index = {k: call for k, call, _ in plan_steps}
        total = None
        target_feeds: list[np.ndarray] = []
        for record in targets:
            kind, output = produced[record.ref.call]
            operation = calls_by_index[record.ref.call].operation
            if kind != "tensor":
                raise TrainingError(
                    f"the supervised output of call {record.ref.call} came from "
                    f"{type(operation).__name__}, an external operation: its recorded result "
                    "is nondifferentiable")
            loss, feeds = record_loss(record.loss, tape, output, record.target, operation,
                                      self.losses)
            for symbol, array in feeds:
                feed_symbols.append(symbol)
                target_feeds.append(array)
            total = loss if total is None else total + loss
        assert total is not None
        if len(targets) > 1:
            total = total / len(targets)
        _check_connected(tape, total, wrt)
        adjoints = tape.differentiate(total, wrt)
        key = tape.drawn_key
        network = tape.into_network()
        plan = lower(network, adjoints.roots(), self.backend,
                     optimizer=self.optimizer if self._fuses() else None)
        lowered = _Step(network, adjoints, plan, feed_symbols, key)
        # keyed by place in the closure, like the structure the plan is cached under
        lowered.output_types = {n: ir.Type(produced[k][1].shape, produced[k][1].dtype)
                                for n, (k, _, _) in enumerate(plan_steps)
                                if produced[k][0] == "tensor"}
        return lowered, target_feeds

    def _target_arrays(self, lowered: _Step, place: dict[int, int], targets: list,
                       calls: Sequence[Any]) -> list[np.ndarray]:
        """The target feeds of an experience whose structure is already lowered (the
        losses are recorded on a scratch tape only to compute the same arrays)."""
        scratch = Tape()
        arrays: list[np.ndarray] = []
        for record in targets:
            call = calls[record.ref.call]
            out_type = lowered.output_types[place[record.ref.call]]
            if record.loss in BUILTIN_LOSSES and record.loss not in self.losses:
                # a built-in loss's feed needs no tape: check and convert directly
                arrays.append(builtin_target(record.loss, out_type.shape, out_type.dtype,
                                             record.target, call.operation)[1])
                continue
            output = scratch.input(np.zeros(out_type.shape, out_type.dtype))
            _, feeds = record_loss(record.loss, scratch, output, record.target,
                                   call.operation, self.losses)
            arrays += [array for _, array in feeds]
        return arrays

    # -- checkpoints --------------------------------------------------------------------
    def save_checkpoint(self, directory: Any, progress: Mapping[str, Any] | None = None
                        ) -> Any:
        """Write parameters, optimizer state, modes, ``steps``, ``progress`` and the
        generator: a directory checkpoint (``training.json`` + safetensors), or the
        standalone single-file form when ``directory`` is a path ending in
        ``.safetensors`` (the manifest in the file's metadata)."""
        if progress is not None:
            self.progress = dict(progress)
        save = checkpoint.save_file if str(directory).endswith(".safetensors") else \
            checkpoint.save
        return save(directory, self._parameters, optimizer=self.optimizer, steps=self.steps,
                    progress=self.progress, generator=self.generator, modes=self.modes(),
                    fingerprints=self.fingerprints())

    def load_checkpoint(self, directory: Any) -> dict:
        """Restore everything ``save_checkpoint`` wrote (a directory or a single
        ``.safetensors`` file) and return ``progress``. The checkpoint is read and hashed
        once, and every field (modes included) is checked before anything is committed:
        on any failure nothing changes (parameters, optimizer, modes, steps, generator)."""
        expected = self.modes()

        def check_modes(manifest: dict) -> None:
            _check_fingerprints(manifest.get("fingerprints"), self.fingerprints(), directory)
            modes = manifest["modes"]
            if not isinstance(modes, dict) or set(modes) != set(expected) or not all(
                    isinstance(v, bool) for v in modes.values()):
                raise ArtifactError(f"modes {modes!r:.200} do not match this trainer's "
                                    f"operations {sorted(expected)}", path=directory,
                                    field="modes")

        restored = checkpoint.load(directory, self._parameters, optimizer=self.optimizer,
                                   generator=self.generator, check=check_modes)
        modes = restored.modes
        assert modes is not None  # check_modes proved it
        self._adopt(restored.parameters)
        for name, op in self._owners:
            op.train(modes[name])
        self.steps = int(restored.steps)
        self.progress = dict(restored.progress or {})
        return dict(self.progress)


def _check_fingerprints(saved: Mapping[str, Any] | None, own: dict[str, str],
                        directory: Any) -> None:
    """``ArtifactError`` naming the operation whose saved fingerprint differs from this
    trainer's (checkpoints written before fingerprints were recorded carry none)."""
    if saved is None:
        return
    if set(saved) != set(own):
        raise ArtifactError(f"the checkpoint holds operations {sorted(saved)}, this trainer "
                            f"trains {sorted(own)}", path=directory, field="fingerprints")
    for name in own:
        if saved[name] != own[name]:
            raise ArtifactError(f"operation {name!r} differs from the one the checkpoint was "
                                "saved from (its configuration, type or parameter shapes "
                                "changed, e.g. other labels or n-grams): fingerprint "
                                f"{str(saved[name])[:12]}... != {own[name][:12]}...",
                                path=directory, field=f"fingerprints.{name}")


def _value(calls: Sequence[Any], item: Any) -> Any:
    """The Python value an input carries (an external root, or a recorded result)."""
    if isinstance(item, ExternalRoot):
        return item.value
    return calls[item.call].value


def _target_signature(target: Any) -> Any:
    if isinstance(target, str):
        return ("str",)
    try:
        array = np.asarray(target)
    except Exception:
        array = None
    if array is not None and array.dtype.kind in "fiub":
        return ("array", array.shape, array.dtype.kind)
    if array is not None and array.dtype.kind == "U":
        return ("labels", array.shape)
    # a target a custom loss reads as a Python value is recorded into the plan, so
    # experiences share a plan only when such targets are equal
    return ("object", type(target).__name__, repr(target))


def _check_connected(tape: Tape, loss: Expr, wrt: list[Expr]) -> None:
    """``TrainingError`` unless some parameter reaches ``loss`` through gradients."""
    nodes = tape.nodes()
    if not ir.Type(loss.shape, loss.dtype).is_float:
        raise TrainingError(f"the loss is {loss.dtype}: nondifferentiable")
    indices = {p.index for p in wrt}
    needs = needs_gradient(nodes, indices, loss.index)
    if needs[loss.index]:
        return
    reached = set(ir.closure(ir.Graph(nodes), [loss.index]))
    if reached & indices:
        raise TrainingError("the loss depends on the parameters only through steps without "
                            "gradients (comparisons, integer or recorded values): it is "
                            "nondifferentiable, so no update was made")
    raise TrainingError("the loss does not depend on any trainable parameter (disconnected): "
                        "supervise an output of an operation this trainer trains")


def _check_operations(operations: Any) -> dict[str, Operation]:
    if isinstance(operations, Operation):
        operations = {"0": operations}
    elif not isinstance(operations, Mapping):
        operations = {str(k): op for k, op in enumerate(operations)}
    if not operations:
        raise TrainingError("a trainer needs at least one operation")
    for name, op in operations.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"operation names must be nonempty strings without '/', got "
                             f"{name!r}")
        if not isinstance(op, Operation):
            raise TypeError(f"operation {name!r} is a {type(op).__name__}, not a "
                            "tensorcode.operations.Operation")
    return dict(operations)


def _nonfinite_slots(table: Parameters) -> list[str]:
    """The slots of ``table`` holding NaN or infinity (empty when every value is finite;
    two fast reductions per buffer decide that)."""
    if all(not b.size or (np.isfinite(b.min()) and np.isfinite(b.max()))
           for b in table.buffers().values()):
        return []
    return [s.name if s.name is not None else s.label
            for s, v in zip(table.layout.slots, table.payloads()) if not np.all(np.isfinite(v))]


def _chunks(items: list[tuple[_Step, dict, int]], size: int, fuse: bool
            ) -> Iterator[tuple[bool, list[tuple[_Step, dict, int]]]]:
    """``items`` in order, as ``(fused, chunk)`` of at most ``size`` updates: with ``fuse``,
    each run of consecutive updates of one structure is a fused chunk (a lone update
    too: one ``run_steps`` call of K=1 costs less than the unfused step); without it, the
    updates are grouped as they come."""
    if not fuse:
        for start in range(0, len(items), size):
            yield False, items[start:start + size]
        return
    start = 0
    while start < len(items):
        stop = start + 1
        while stop < len(items) and stop - start < size and items[stop][0] is items[start][0]:
            stop += 1
        yield True, items[start:stop]
        start = stop


def _rows_in_banks(prepared: list[tuple[_Step, dict]]) -> list[int]:
    """Each prepared experience's row in its structure's ``_Bank``."""
    seen: dict[int, int] = {}
    rows = []
    for lowered, _ in prepared:
        row = seen.get(id(lowered), 0)
        rows.append(row)
        seen[id(lowered)] = row + 1
    return rows


class _Bank:
    """The feeds of every experience of one structure, stacked once (one array per fed
    symbol, one row per experience): a run of updates takes its rows in one gather
    instead of stacking the experiences' arrays again for every call."""

    def __init__(self, arrays: dict[Any, np.ndarray]) -> None:
        self.arrays = arrays

    @classmethod
    def stack(cls, feeds: list[dict]) -> _Bank:
        return cls({symbol: np.stack([f[symbol] for f in feeds]) for symbol in feeds[0]})

    @classmethod
    def single(cls, feeds: dict) -> _Bank:
        return cls({symbol: np.asarray(array)[None] for symbol, array in feeds.items()})

    def take(self, rows: list[int]) -> dict[Any, np.ndarray]:
        """The feeds of ``rows``, K on the leading axis: a view for consecutive rows."""
        start, count = rows[0], len(rows)
        if rows[-1] == start + count - 1 and all(
                r == start + k for k, r in enumerate(rows)):
            return {s: a[start:start + count] for s, a in self.arrays.items()}
        index = np.asarray(rows, np.intp)
        return {s: a.take(index, axis=0) for s, a in self.arrays.items()}


def _check_steps_per_call(steps: Any) -> int:
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps_per_call must be a positive int, got {steps!r}")
    return int(steps)


def _check_lr(lr: Any) -> float:
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) \
            or lr <= 0:
        raise ValueError(f"lr must be a positive finite number, got {lr!r}")
    return float(lr)


__all__ = ["Trainer"]
