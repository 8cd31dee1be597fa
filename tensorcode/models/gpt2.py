"""GPT-2: one tape holding the full-context expression and its decode twin, the loader
for the released checkpoint layout, and ``generate``.

``GptModel(config)`` records a ``tc.nn.Gpt`` on one tape: the full-context logits of
ids ``[batch, context]`` and their training loss, and the one-token decode step (the
newest token, its position and each layer's key/value cache in; logits and the updated
caches out). Both share every parameter symbol, so one table answers both; an entry
lowers only the roots it names, so training never schedules the decode step and
generation never schedules the full context.

At depth, compiling the whole model as one program would compile every block again.
The default ``strategy="layered"`` compiles one block body once (on a tape of its own,
with the same parameter order) and runs it per layer over a zero-copy view of that
layer's run of the model's table (``Gpt`` records each block's parameters
contiguously), with two small plans for the embedding and the head around it;
``strategy="whole"`` lowers the roots of the one tape directly. Both give the same
numbers (the tests check it).

``load(directory)`` reads GPT-2's released layout: ``config.json`` (``vocab_size``,
``n_positions``, ``n_embd``, ``n_layer``, ``n_head``, ``layer_norm_epsilon``) and
``model.safetensors`` (``wte.weight``, ``h.0.attn.c_attn.weight`` ``[in, out]``, ...,
optionally under a ``transformer.`` prefix). The causal-mask buffers some releases
store (``h.N.attn.bias``, ``h.N.attn.masked_bias``) are structure, not parameters,
and are skipped; an ``lm_head.weight`` must equal the tied ``wte.weight``. Everything
else goes through one ``named_restore_file``: a missing, extra or mis-shaped tensor is
refused from the file's header, naming it, before anything is read or changed; then
each value is read once into its place in the table, or, for a file saved in the
table's order, the table is a copy-on-write map of the file (no copy at all).
"""

from __future__ import annotations

import math
import os
import pathlib
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..compiler.backends import DEFAULT_BACKEND
from ..compiler.plans.network import Network
from ..compiler.plans.plan import BoundPlan, Plan
from ..compiler.plans.tables import Gradients, Parameters
from ..compiler.plans.tape import Tape
from ..compiler.trace.draws import check_sampling
from ..compiler.trace.expr import Expr
from ..errors import ArtifactError, CompileError, FeedError, ShapeError
from ..files import atomic_write_json
from ..files.strict_json import read_json
from ..files.tensorfile import TensorFile, save_tensors
from ..nn import init as initializers
from ..nn.transformer import Gpt, GptConfig, TransformerBlock
from ..runtime.checkpoint import named_restore, named_restore_file, named_snapshot
from ..runtime.progress import check_progress, progress_bar
from ..runtime.random import Generator, sample
from .gpt_training import LayeredTraining, check_layered_layout

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
STRATEGIES = ("layered", "whole")
#: the fewest new tokens for which ``generate`` shows a progress bar (on a terminal)
PROGRESS_TOKENS = 64
#: buffers some GPT-2 releases store beside the parameters: the causal mask, which the
#: model records as structure
_BUFFER_PATH = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")
#: a parameter of block N
_BLOCK_PATH = re.compile(r"^h\.(\d{1,9})\.")
_CONFIG_FIELDS = {"vocab_size": int, "n_positions": int, "n_embd": int, "n_layer": int,
                  "n_head": int, "layer_norm_epsilon": float}


class GptModel:
    """A ``Gpt`` recorded on one tape with its state (see the module docstring).

    ``batch`` and ``context`` fix the full-context expression's ``[batch, context]``
    (``context`` defaults to the config's ``block_size``); ``logits(ids)`` accepts any
    ``[B, T]`` with ``T <= context``, padding on the right (causality makes the padding
    invisible to earlier positions) and running ``batch`` rows at a time. ``cache_length``
    is how many positions the decode cache holds (default ``context``). ``train=True``
    also records the loss's gradients for every parameter (``adjoints``) for the
    one-tape ``plan("train")``; ``train_step`` and ``gradients`` train through the
    layered plans instead (``tensorcode.models.gpt_training``) and need no ``train``.
    ``dtype`` is the parameters' (``"float64"`` for gradient checks).
    """

    def __init__(self, config: GptConfig, *, batch: int = 1, context: int | None = None,
                 cache_length: int | None = None, train: bool = False, seed: int = 0,
                 init: str = "gpt2", backend: str = DEFAULT_BACKEND, strategy: str = "layered",
                 dtype: str = "float32") -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if init not in ("gpt2", "zeros"):
            raise ValueError(f"init must be 'gpt2' (GPT-2's random initialization) or 'zeros' "
                             f"(a model about to be loaded), got {init!r}")
        self.config = config
        self.batch = _positive("batch", batch)
        self.context = _positive("context", context or config.block_size)
        self.cache_length = _positive("cache_length", cache_length or self.context)
        for name, value in (("context", self.context), ("cache_length", self.cache_length)):
            if value > config.block_size:
                raise ShapeError(f"GptModel: {name} {value} exceeds the context length "
                                 f"block_size={config.block_size}")
        self.backend = backend
        self.strategy = strategy
        self.seed = seed
        self.dtype = dtype
        self._initializer = initializers.zeros() if init == "zeros" else None
        tape = Tape()
        gpt = Gpt(tape, config, init=self._initializer, seed=seed, dtype=dtype)
        self.gpt = gpt
        b, t = self.batch, self.context
        self.ids = tape.input(np.zeros((b, t), np.int64), name="ids")
        self.targets = tape.input(np.zeros((b, t), np.int64), name="targets")
        self.full_logits = gpt(self.ids)
        self.loss = gpt.loss(self.full_logits, self.targets)
        self.adjoints = tape.differentiate(self.loss, gpt.parameters()) if train else None
        self.token = tape.input(np.zeros(b, np.int64), name="token")
        self.position = tape.input(np.zeros(1, np.int64), name="position")
        shape = gpt.cache_shape(b, self.cache_length)
        self.cache_inputs = [(tape.input(np.zeros(shape, dtype), name=f"h.{k}.keys"),
                              tape.input(np.zeros(shape, dtype), name=f"h.{k}.values"))
                             for k in range(config.n_layer)]
        self.step_logits, self.step_caches = gpt.step(self.token, self.position,
                                                      self.cache_inputs)
        self.network: Network = tape.into_network()
        self._parameters: Parameters | None = None  # the recorded initials, made when read
        self._plans: dict[str, Plan] = {}
        self._layered: _Layered | None = None
        self._training: LayeredTraining | None = None
        #: the file a mapped table reads (checked before each use); None: owned values
        self._mapped_file: MappedFile | None = None
        #: models recorded for other decode batch sizes, by padded row count (``generate``)
        self._batches: dict[int, GptModel] = {}
        self._shared_from: Parameters | None = None  # (a batch variant: whose table)

    # -- state ----------------------------------------------------------------------------
    @property
    def parameters(self) -> Parameters:
        """The current table (the recorded initials until ``restore`` or
        ``set_parameters``). A model built with ``init="zeros"`` starts from a table of
        zeros that costs no memory until written, so loading does not copy twice."""
        if self._parameters is None:
            if self._initializer is not None:
                layout = self.network.layout
                self._parameters = Parameters.adopt(
                    layout, {d: np.zeros(n, d) for d, n in layout.sizes.items()})
            else:
                self._parameters = self.network.parameters()
        return self._parameters

    def named_parameters(self) -> list[tuple[str, Expr]]:
        """GPT-2's paths and the symbols they name (what ``named_restore`` walks)."""
        return self.gpt.named_parameters()

    def state(self) -> dict[str, np.ndarray]:
        """The parameters under GPT-2's paths (copies)."""
        return named_snapshot(self.parameters, self.gpt)

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Take every parameter from ``snapshot`` (GPT-2's paths); refused, naming the
        path, when one is missing, extra, mis-shaped or of another dtype, and then
        nothing changes."""
        self.set_parameters(named_restore(self.parameters, self.gpt, snapshot))

    def set_parameters(self, parameters: Parameters) -> None:
        """Use ``parameters`` (a table of this model's network) from now on."""
        self.network.check_parameters(parameters)
        self._parameters = parameters
        self._mapped_file = None
        self._layered = None if self._layered is None else self._layered.rebind(parameters)

    def check_source(self) -> None:
        """For a table mapped from its file (``load(..., mapped=True)``): refuse with
        ``ArtifactError`` when that file changed since it was loaded. Every use calls
        this; it costs one ``stat`` and one small read."""
        if self._mapped_file is not None:
            self._mapped_file.check()

    # -- plans ----------------------------------------------------------------------------
    def plan(self, name: str) -> Plan:
        """The one-tape plan ``"logits"`` (full context), ``"train"`` (loss and
        gradients; needs ``train=True``) or ``"decode"`` (the decode twin), lowered once."""
        if name not in self._plans:
            if name == "logits":
                roots = [self.full_logits]
            elif name == "train":
                if self.adjoints is None:
                    raise CompileError("this model was built without gradients; build it "
                                       "with GptModel(config, train=True)")
                roots = self.adjoints.roots()
            elif name == "decode":
                roots = [self.step_logits, *(x for pair in self.step_caches for x in pair)]
            else:
                raise ValueError(f"unknown plan {name!r}; use 'logits', 'train' or 'decode'")
            self._plans[name] = self.network.entry(roots).lower(self.backend)
        return self._plans[name]

    def layered(self) -> _Layered:
        """The per-layer runner (one compiled block body for every layer)."""
        if self._layered is None:
            self._layered = _Layered(self)
        return self._layered

    # -- running --------------------------------------------------------------------------
    def logits(self, ids: Any) -> np.ndarray:
        """Float32 logits ``[B, T, vocab]`` of int token ids ``[B, T]``."""
        array = _ids(ids, self.config.vocab_size)
        self.check_source()
        rows, t = array.shape
        if t > self.context:
            raise FeedError(f"ids have {t} positions; this model was recorded for at most "
                            f"{self.context} (GptModel(..., context=...))")
        out = None
        for start in range(0, rows, self.batch):
            chunk = np.zeros((self.batch, self.context), np.int64)
            part = array[start:start + self.batch]
            chunk[:len(part), :t] = part
            if self.strategy == "layered":
                result = self.layered().logits(chunk)
            else:
                result = self.plan("logits").forward(self.parameters,
                                                      {self.ids: chunk}).of(self.full_logits)
            if result.shape[:2] == (rows, t) and result.flags.writeable:
                return result  # one whole chunk, a fresh array of this call: no copy
            if out is None:
                out = np.empty((rows, t, self.config.vocab_size), np.float32)
            out[start:start + len(part)] = result[:len(part), :t]
        return out if out is not None else np.empty((0, t, self.config.vocab_size), np.float32)

    def for_batch(self, rows: int) -> GptModel:
        """This model for decoding ``rows`` rows at a time: itself when ``rows`` is at
        most its ``batch`` (fewer rows are padded); otherwise a model recorded for the
        next power of two of rows, sharing this model's table (views of its buffers, no
        copy), recorded once per size and kept, so a new batch size costs one compile of
        its decode plans and no new weights."""
        rows = _positive("rows", rows)
        if rows <= self.batch:
            return self
        size = 1 << (rows - 1).bit_length()
        variant = self._batches.get(size)
        if variant is None:
            variant = GptModel(self.config, batch=size, context=self.context,
                               cache_length=self.cache_length, seed=self.seed, init="zeros",
                               backend=self.backend, strategy=self.strategy, dtype=self.dtype)
            self._batches[size] = variant
        table = self.parameters
        if variant._shared_from is not table:
            variant.set_parameters(Parameters.adopt(variant.network.layout,
                                                    dict(table.buffers())))
            variant._shared_from = table
        variant._mapped_file = self._mapped_file
        return variant

    def decoder(self) -> Decoder:
        """A fresh decoding state (empty caches) running the compiled decode step."""
        self.check_source()
        return Decoder(self)

    # -- training -------------------------------------------------------------------------
    def training(self) -> LayeredTraining:
        """The layered training step (one compiled block forward and one block backward
        for every layer; ``tensorcode.models.gpt_training``)."""
        if self._training is None:
            self._training = LayeredTraining(self)
        return self._training

    def gradients(self, ids: Any, targets: Any) -> tuple[float, Gradients]:
        """The loss of ``ids`` against next tokens ``targets`` (int ``[batch, context]``)
        and the gradients of every parameter, by the layered plans."""
        self.check_source()
        return self.training().gradients(ids, targets)

    def train_step(self, ids: Any, targets: Any, optimizer: Any, lr: float) -> float:
        """One optimizer step on ``ids``/``targets`` (int ``[batch, context]``) through
        the layered plans; the model keeps the new parameters. Returns the loss."""
        self.check_source()
        return self.training().step(ids, targets, optimizer, lr)


class _Layered:
    """One compiled block body run per layer over views of each layer's parameters."""

    def __init__(self, model: GptModel) -> None:
        config = model.config
        b, t, s = model.batch, model.context, model.cache_length
        # the edges: wte, wpe and ln_f, recorded in the model's order (its table's prefix)
        edge_tape = Tape()
        edge = Gpt(edge_tape, config, init=initializers.zeros(), with_blocks=False)
        self.ids = edge_tape.input(np.zeros((b, t), np.int64), name="ids")
        self.token = edge_tape.input(np.zeros(b, np.int64), name="token")
        self.position = edge_tape.input(np.zeros(1, np.int64), name="position")
        self.full_x = edge_tape.input(np.zeros((b, t, config.n_embd), np.float32), name="x")
        self.step_x = edge_tape.input(np.zeros((b, 1, config.n_embd), np.float32), name="x1")
        self.embedded = edge.embed(self.ids)
        self.step_embedded = edge.step_embed(self.token, self.position)
        self.full_head = edge.head(self.full_x)
        self.step_head = edge.head(self.step_x).reshape(b, config.vocab_size)
        self.edge_network = edge_tape.into_network()
        self.edge = edge
        # one block body
        block_tape = Tape()
        block = TransformerBlock(block_tape, config.n_embd, config.n_head,
                                 config.layer_norm_epsilon, init=initializers.zeros(),
                                 name="h.0")
        self.x = block_tape.input(np.zeros((b, t, config.n_embd), np.float32), name="x")
        self.x1 = block_tape.input(np.zeros((b, 1, config.n_embd), np.float32), name="x1")
        self.block_position = block_tape.input(np.zeros(1, np.int64), name="position")
        shape = (b, config.n_head, s, config.head_dim)
        self.keys = block_tape.input(np.zeros(shape, np.float32), name="keys")
        self.values = block_tape.input(np.zeros(shape, np.float32), name="values")
        self.query = block_tape.input(np.zeros((b, config.n_head, 1, config.head_dim),
                                               np.float32), name="query")
        self.block_out = block(self.x)
        # the decode step in two halves around the in-place cache write (see ``step``)
        self.step_qkv = block.step_project(self.x1)
        self.step_out = block.step_finish(self.x1, self.query, self.block_position, self.keys,
                                          self.values)
        self.block_network = block_tape.into_network()
        self.model = model
        self._check_layout()
        self._plans: dict[str, Plan] = {}
        self._bound: dict[str, list[BoundPlan]] = {}
        self.rebind(model.parameters)

    def _check_layout(self) -> None:
        check_layered_layout(self.model.network, self.edge_network, self.block_network,
                             self.model.config.n_layer, "float32", "use strategy='whole'")

    def rebind(self, parameters: Parameters) -> _Layered:
        """Views of ``parameters``: the edge table and one table per layer (no copy)."""
        buffer = parameters.buffers()["float32"]
        edge_size = self.edge_network.layout.sizes["float32"]
        block_size = self.block_network.layout.sizes["float32"]
        self.edge_parameters = Parameters.adopt(self.edge_network.layout,
                                                {"float32": buffer[:edge_size]})
        self.layer_parameters = [
            Parameters.adopt(self.block_network.layout,
                             {"float32": buffer[edge_size + k * block_size:
                                                edge_size + (k + 1) * block_size]})
            for k in range(self.model.config.n_layer)]
        self._bound = {}
        return self

    def _plan(self, name: str) -> Plan:
        if name not in self._plans:
            network, roots = {
                "embed": (self.edge_network, [self.embedded]),
                "step_embed": (self.edge_network, [self.step_embedded]),
                "head": (self.edge_network, [self.full_head]),
                "step_head": (self.edge_network, [self.step_head]),
                "block": (self.block_network, [self.block_out]),
                "step_project": (self.block_network, list(self.step_qkv)),
                "step_attend": (self.block_network, [self.step_out]),
            }[name]
            self._plans[name] = network.entry(roots).lower(self.model.backend)
        return self._plans[name]

    def _bind(self, name: str) -> list[BoundPlan]:
        if name not in self._bound:
            plan = self._plan(name)
            if name in ("block", "step_project", "step_attend"):
                self._bound[name] = [plan.bind(p) for p in self.layer_parameters]
            else:
                self._bound[name] = [plan.bind(self.edge_parameters)]
        return self._bound[name]

    def lower_decode(self) -> None:
        """Lower (or load from the plan cache) the four decode plans."""
        for name in ("step_embed", "step_project", "step_attend", "step_head"):
            self._bind(name)

    def logits(self, ids: np.ndarray) -> np.ndarray:
        (x,) = self._bind("embed")[0](ids)
        for bound in self._bind("block"):
            (x,) = bound(x)
        return self._bind("head")[0](x)[0]  # (each call's outputs are its own)

    def step(self, token: np.ndarray, position: np.ndarray,
             caches: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """The logits of one decode step; each layer's new key and value are written
        into ``caches`` (writable ``[B, H, S, D]`` arrays) in place, between the two
        halves of that layer's step, so no cache is copied."""
        (x,) = self._bind("step_embed")[0](token, position)
        at = int(position[0])
        for project, attend, (keys, values) in zip(self._bind("step_project"),
                                                   self._bind("step_attend"), caches):
            q, k, v = project(x)
            keys[:, :, at] = k[:, :, 0]
            values[:, :, at] = v[:, :, 0]
            (x,) = _call_in_order(attend, {self.x1: x, self.query: q,
                                           self.block_position: position,
                                           self.keys: keys, self.values: values})
        return self._bind("step_head")[0](x)[0]


def _call_in_order(bound: BoundPlan, feeds: dict[Expr, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Call a bound plan with ``feeds`` arranged in the order its plan reads inputs."""
    return bound(*[feeds[symbol] for symbol in bound.plan.inputs()])


class Decoder:
    """Decoding state: the position and each layer's key/value cache.

    ``feed(tokens)`` runs the compiled decode step once per token (token ids ``[B]``
    for each position) and returns the logits ``[B, vocab]`` after the last one.
    """

    def __init__(self, model: GptModel) -> None:
        self.model = model
        self.reset()
        if model.strategy == "layered":
            model.layered().lower_decode()
        else:
            plan = model.plan("decode")
            self._bound = plan.bind(model.parameters)

    def reset(self) -> None:
        """Empty the caches and start again at position 0 (the plans stay bound)."""
        model = self.model
        shape = model.gpt.cache_shape(model.batch, model.cache_length)
        self.caches = [(np.zeros(shape, np.float32), np.zeros(shape, np.float32))
                       for _ in range(model.config.n_layer)]
        self.position = 0

    def step(self, token: Any) -> np.ndarray:
        """Logits ``[B, vocab]`` after feeding ``token`` (int ids ``[B]``)."""
        model = self.model
        tokens = _ids(np.asarray(token).reshape(-1, 1), model.config.vocab_size).reshape(-1)
        if tokens.shape != (model.batch,):
            raise FeedError(f"decode step: expected {model.batch} token ids, got "
                            f"{tokens.shape[0]}")
        if self.position >= model.cache_length:
            raise FeedError(f"the decode cache holds {model.cache_length} positions and all "
                            "are used (GptModel(..., cache_length=...))")
        model.check_source()
        position = np.array([self.position], np.int64)
        if model.strategy == "layered":
            logits = model.layered().step(tokens, position, self.caches)
        else:
            feeds: dict[Expr, np.ndarray] = {model.token: tokens, model.position: position}
            for (k_in, v_in), (keys, values) in zip(model.cache_inputs, self.caches):
                feeds[k_in], feeds[v_in] = keys, values
            outs = _call_in_order(self._bound, feeds)
            logits = np.array(outs[0])
            self.caches = [(outs[1 + 2 * k], outs[2 + 2 * k])
                           for k in range(model.config.n_layer)]
        self.position += 1
        return logits


def select_next(logits: np.ndarray, generator: Any = None, temperature: float = 1.0,
                top_k: int | None = None) -> np.ndarray:
    """The next token of each row of ``logits`` ``[B, vocab]``: the argmax without a
    generator (greedy); with one, a draw from ``softmax(logits / temperature)`` kept to
    the ``top_k`` most likely tokens, through ``tc.random.sample`` (a compiled plan, so
    the same generator state draws the same tokens on every backend and run)."""
    if generator is None:
        return np.argmax(logits, axis=-1).astype(np.int64)
    return np.asarray(sample(logits, generator, temperature=temperature, top_k=top_k),
                      dtype=np.int64)


def generate(model: GptModel, prompt_ids: Any, max_new_tokens: int, generator: Any = None,
             temperature: float = 1.0, top_k: int | None = None, progress: bool = True
             ) -> np.ndarray:
    """Continue ``prompt_ids`` (``[T]`` or ``[B, T]``, any number of rows) by
    ``max_new_tokens`` tokens with the compiled decode step; returns the prompt followed
    by the new tokens, shaped like the prompt. Without a generator each token is the
    argmax (greedy); with a ``tc.random.Generator`` each is sampled (``select_next``,
    one draw per row) and ``generator`` advances, so a saved generator state replays
    the same continuation. A long generation (at least ``PROGRESS_TOKENS`` new tokens)
    shows a progress bar when stderr is a terminal and ``progress`` is on.

    Plans are specialized by shape: ``B`` rows run on ``model.for_batch(B)`` (the model
    itself up to its ``batch``, else one recorded for the next power of two, sharing
    the weights), padded with rows that change no real row, so a new batch size costs
    at most one compile of the decode plans."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or \
            max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
    if generator is not None:  # options checked before anything runs
        check_sampling(temperature, top_k, None)
        if not isinstance(generator, Generator):
            raise FeedError(f"generate: generator must be a tc.random.Generator, got "
                            f"{type(generator).__name__}")
    prompt = np.asarray(prompt_ids)
    flat = prompt.ndim == 1
    ids = _ids(prompt.reshape(1, -1) if flat else prompt, model.config.vocab_size)
    rows, length = ids.shape
    if length == 0 or rows == 0:
        raise FeedError(f"generate needs at least one prompt token in at least one row; got "
                        f"{list(ids.shape)}")
    total = length + max_new_tokens
    if total > model.cache_length:
        raise FeedError(f"{length} prompt and {max_new_tokens} new tokens exceed the "
                        f"decode cache of {model.cache_length} positions")
    model.check_source()
    runner = model.for_batch(rows)
    padded = np.zeros((runner.batch, length), np.int64)
    padded[:rows] = ids  # rows are independent: the padding rows change no real row
    decoder = runner.decoder()
    out = [ids[:, k] for k in range(length)]
    logits = None
    for k in range(length):
        logits = decoder.step(padded[:, k])
    step = np.zeros(runner.batch, np.int64)
    bar = progress_bar(max_new_tokens, "generate",
                       check_progress(progress) and max_new_tokens >= PROGRESS_TOKENS,
                       unit="token")
    try:
        for k in range(max_new_tokens):
            assert logits is not None
            token = select_next(logits[:rows], generator, temperature, top_k)
            out.append(token)
            if k + 1 < max_new_tokens:
                step[:rows] = token
                logits = decoder.step(step)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    result = np.stack(out, axis=1)
    return result[0] if flat else result


# -- the released layout -------------------------------------------------------------------
def read_config(directory: str | os.PathLike) -> GptConfig:
    """The ``GptConfig`` of a released ``config.json`` (validated, every field named)."""
    path = pathlib.Path(directory) / CONFIG_FILE
    document = read_json(path, what="GPT-2 config")
    if not isinstance(document, dict):
        raise ArtifactError("expected a JSON object", path)
    values: dict[str, Any] = {}
    for name, kind in _CONFIG_FIELDS.items():
        value = document.get(name, 1e-5 if name == "layer_norm_epsilon" else None)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ArtifactError(f"expected {kind.__name__}, got {value!r}", path, field=name)
        values[name] = value
    try:
        return GptConfig(vocab_size=values["vocab_size"], block_size=values["n_positions"],
                         n_layer=values["n_layer"], n_head=values["n_head"],
                         n_embd=values["n_embd"],
                         layer_norm_epsilon=values["layer_norm_epsilon"])
    except ShapeError as error:
        raise ArtifactError(str(error), path) from None


def released_entries(names: Any) -> tuple[dict[str, str], str | None]:
    """How a released file's tensor ``names`` map onto GPT-2's paths: ``({path: name},
    head)``, with a ``transformer.`` prefix removed, the causal-mask buffers left out,
    and ``head`` the ``lm_head.weight`` entry when there is one (it must equal the tied
    ``wte.weight``; the caller checks)."""
    names = list(names)
    body = [n for n in names if n != "lm_head.weight"]
    prefix = "transformer." if body and all(n.startswith("transformer.") for n in body) else ""
    entries = {}
    for name in body:
        local = name[len(prefix):]
        if not _BUFFER_PATH.match(local):
            entries[local] = name
    return entries, ("lm_head.weight" if "lm_head.weight" in names else None)


def released_snapshot(tensors: Mapping[str, np.ndarray], path: Any = None
                      ) -> dict[str, np.ndarray]:
    """GPT-2's paths from a released file's tensors: a ``transformer.`` prefix removed,
    the causal-mask buffers dropped, a tied ``lm_head.weight`` checked and dropped."""
    entries, head = released_entries(tensors)
    snapshot = {local: tensors[name] for local, name in entries.items()}
    if head is not None:
        _check_tied(tensors[head], snapshot.get("wte.weight"), path)
    return snapshot


def _check_tied(head: np.ndarray, wte: np.ndarray | None, path: Any) -> None:
    if wte is None or head.shape != wte.shape or not np.array_equal(head, wte):
        raise _untied(path)


def _untied(path: Any) -> ArtifactError:
    return ArtifactError("lm_head.weight differs from wte.weight; this model ties the "
                         "output head to the token embedding", path, field="lm_head.weight")


def load(directory: str | os.PathLike, *, mapped: bool | None = None, **options: Any
         ) -> GptModel:
    """A ``GptModel`` from GPT-2's released layout in ``directory`` (``config.json`` and
    ``model.safetensors``); ``options`` go to ``GptModel`` (``batch``, ``context``,
    ``cache_length``, ``backend``, ``strategy``, ``train``).

    The config is compared with the tensor file's header before anything is built:
    ``vocab_size`` and ``n_embd`` must be ``wte.weight``'s shape, ``n_positions`` the
    rows of ``wpe.weight`` and ``n_layer`` the number of ``h.N`` blocks the file holds,
    so no size in the config can ask for more than the file holds (``ArtifactError``
    naming the field). Then every tensor's name, shape and dtype is checked from the
    header before any value is read (``named_restore_file``), and each tensor is read
    once, straight into its place in the table. A tied ``lm_head.weight`` is read aside
    and compared with ``wte.weight`` before the table is used.

    ``mapped``: with ``True``, a file that holds the parameters in the table's order
    (as ``save`` writes them) becomes the table without a copy: a copy-on-write map of
    the file, read on first use. The contract: the file must not be rewritten in place
    or truncated while the model lives (replacing it atomically, as every TensorCode
    writer does, is safe). The map is made only of the file whose header was checked,
    unchanged since (a file truncated before or while loading is an ``ArtifactError``),
    and each use (``logits``, a decode step, training) checks the file's size,
    modification time, identity and header against what they were then, refusing a
    changed file with ``ArtifactError`` (load it again). A truncation *during* a call is
    the caller's error that no check can catch: reading a page past the new end ends the
    process with ``SIGBUS``. ``None`` (the default) maps a file whose permissions allow
    no writes and copies any other; ``False`` always copies (use it where the file may
    be changed in place)."""
    directory = pathlib.Path(directory)
    config = read_config(directory)
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise ArtifactError("no such file", path=weights)
    source = TensorFile(weights)
    entries, head = released_entries(source.entries)
    check_config_against_header(config, source, entries, directory / CONFIG_FILE)
    wte = entries.get("wte.weight")
    if head is not None and (wte is None or source.entries[head] != source.entries[wte]):
        raise _untied(weights)  # (another shape or dtype, known from the header)
    if mapped is None:
        mapped = not weights.stat().st_mode & 0o222
    model = GptModel(config, init="zeros", **options)
    try:
        parameters = named_restore_file(model.parameters, model.gpt, source, entries,
                                        mapped=mapped)
    except ArtifactError as error:  # (a mis-shaped or mistyped tensor: its own error)
        raise ArtifactError(str(error), weights) from None
    if head is not None:
        dtype, shape = source.entries[head]
        tied = np.empty(shape, dtype)
        source.read_into({head: tied})
        _check_tied(tied, parameters.of(model.gpt.wte.weights), weights)
    model.set_parameters(parameters)
    if any(not buffer.flags.owndata for buffer in parameters.buffers().values()):
        model._mapped_file = MappedFile(weights, source.header_bytes, source.signature)
    return model


def check_config_against_header(config: GptConfig, source: TensorFile,
                                entries: Mapping[str, str], config_path: Any) -> None:
    """Refuse a config whose sizes disagree with the tensors the file holds (before any
    model is built, so no size is trusted beyond what the file holds), then a file whose
    tensors are not the config's: a missing or unexpected tensor (an extra ``h.N`` block
    too) is named, as a mis-shaped one is, before the totals are compared."""
    def shape_of(path: str) -> tuple[int, ...]:
        if path not in entries:
            raise ArtifactError("is missing from the tensor file", source.path, field=path)
        shape = source.entries[entries[path]][1]
        if len(shape) != 2:
            raise ArtifactError(f"has shape {list(shape)}, expected two dimensions",
                                source.path, field=path)
        return shape

    vocab, width = shape_of("wte.weight")
    positions = shape_of("wpe.weight")[0]
    layers = {int(m.group(1)) for m in map(_BLOCK_PATH.match, entries) if m}
    held = len(layers)
    if layers and max(layers) != held - 1:  # (numbered 0..n-1 without a gap)
        missing = next(k for k in range(held) if k not in layers)
        raise ArtifactError(f"the tensor file's blocks skip h.{missing}", source.path,
                            field=f"h.{missing}")
    if held > config.n_layer:  # a block the config does not describe: name its tensor
        extra = next(path for path in entries if path.startswith(f"h.{config.n_layer}."))
        raise ArtifactError(f"is not a tensor of this model: config.json's n_layer is "
                            f"{config.n_layer}, so its blocks are h.0 to "
                            f"h.{config.n_layer - 1}", source.path, field=entries[extra])
    for field, stated, found, where in (
            ("vocab_size", config.vocab_size, vocab, "the rows of wte.weight"),
            ("n_embd", config.n_embd, width, "the columns of wte.weight"),
            ("n_positions", config.block_size, positions, "the rows of wpe.weight"),
            ("n_layer", config.n_layer, held, "the h.N blocks of the tensor file")):
        if stated != found:
            raise ArtifactError(f"is {stated}, but the tensor file holds {found} ({where})",
                                config_path, field=field)
    # every size is now one the file holds: the expected paths and shapes are recorded
    # (zero initials one element wide, so this costs no memory) and compared by name
    expected = {path: symbol.shape for path, symbol in Gpt(
        Tape(), config, init=initializers.zeros()).named_parameters()}
    for path in expected:
        if path not in entries:
            raise ArtifactError("is missing from the tensor file", source.path, field=path)
    for path, name in entries.items():
        if path not in expected:
            raise ArtifactError("is not a tensor of GPT-2's layout (a model of this config "
                                f"holds {len(expected)} tensors)", source.path, field=name)
    held_values = sum(math.prod(source.entries[name][1]) for name in entries.values())
    if held_values != config.parameter_count():
        wrong = next((path for path, shape in expected.items()
                      if tuple(source.entries[entries[path]][1]) != tuple(shape)), None)
        if wrong is not None:
            raise ShapeError(f"{wrong}: has shape {list(source.entries[entries[wrong]][1])} "
                             f"in {source.path}, the model expects {list(expected[wrong])}")
        raise ArtifactError(f"describes a model of {config.parameter_count()} parameters, but "
                            f"the tensor file holds {held_values} values", config_path,
                            field="(config)")


class MappedFile:
    """What a mapped model checks before each use: its file's identity, size,
    modification time and header, as they were when its header was read (the map is
    made of that file, unchanged: ``TensorFile.map_run``), so a truncation at any moment
    after the header was read is refused at the next use."""

    def __init__(self, path: pathlib.Path, header: bytes,
                 signature: tuple[int, int, int, int]) -> None:
        self.path = path
        self.header = header
        self.signature = signature

    def _signature(self) -> tuple[int, int, int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def check(self) -> None:
        """``ArtifactError`` when the file changed since it was mapped."""
        changed = self._signature() != self.signature
        if not changed:
            try:
                with open(self.path, "rb") as handle:
                    changed = handle.read(len(self.header)) != self.header
            except OSError:
                changed = True
        if changed:
            raise ArtifactError("the mapped weights file changed since it was loaded (it was "
                                "rewritten in place or truncated); its values can no longer "
                                "be trusted: load the model again, or load with "
                                "mapped=False to copy the weights", self.path)


def save(model: GptModel, directory: str | os.PathLike) -> pathlib.Path:
    """Write ``model`` in GPT-2's released layout (each file atomically)."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    c = model.config
    # in the table's order (wte, wpe, ln_f, h.0, ...), so ``load`` can map the file
    # as the table instead of copying it
    layout = model.parameters.layout
    index = {path: layout.index(symbol) for path, symbol in model.named_parameters()}
    state = model.state()
    save_tensors(directory / WEIGHTS_FILE, {path: state[path] for path in
                                            sorted(state, key=index.__getitem__)},
                 {"format": "pt"})
    atomic_write_json(directory / CONFIG_FILE, {
        "model_type": "gpt2", "vocab_size": c.vocab_size, "n_positions": c.block_size,
        "n_embd": c.n_embd, "n_layer": c.n_layer, "n_head": c.n_head,
        "layer_norm_epsilon": c.layer_norm_epsilon})
    return directory


# -- helpers -------------------------------------------------------------------------------
def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _ids(ids: Any, vocab_size: int) -> np.ndarray:
    """Int64 token ids ``[B, T]`` within the vocabulary."""
    array = np.asarray(ids)
    if array.ndim != 2 or array.dtype.kind not in "iu":
        raise FeedError(f"token ids must be an int array [B, T], got {array.dtype} "
                        f"{list(array.shape)}")
    if array.size and (array.min() < 0 or array.max() >= vocab_size):
        raise FeedError(f"token ids must lie in [0, {vocab_size}); got {int(array.min())}.."
                        f"{int(array.max())}")
    return np.ascontiguousarray(array, dtype=np.int64)


__all__ = ["GptModel", "Decoder", "load", "save", "read_config", "released_snapshot",
           "released_entries",
           "generate", "select_next", "STRATEGIES"]
