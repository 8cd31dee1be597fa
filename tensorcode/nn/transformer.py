"""Transformer building blocks: causal self-attention, the pre-norm block, and ``Gpt``.

Every block records two expressions of the same parameter symbols: the full-context
form (``x`` of shape ``[B, T, C]`` in, every position attending to the ones before it)
and the one-token decode form (``step``: the newest position's ``[B, 1, C]``, its
position and the key/value cache in; its output and the updated cache out). Training
lowers the first, generation the second, and because both read the same symbols one
parameter table answers both (the guide's twin idiom at the scale of a language model).

The parameter paths are GPT-2's (``wte.weight``, ``h.0.attn.c_attn.weight``,
``ln_f.bias``, ...) with its ``[in, out]`` weight layout and the output head tied to
the token embedding, so a released checkpoint restores with one ``named_restore``.

Shapes are static: the decode cache holds ``cache_length`` positions (the context
length by default) and a decode step masks out the positions not yet written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compiler.plans.tape import Tape
from ..compiler.trace.composites import where
from ..compiler.trace.expr import Expr
from ..errors import ShapeError
from . import init as initializers
from .modules import Embedding, LayerNorm, Linear, Module

#: the score a masked (future or unwritten) key gets before the softmax: far enough
#: below any real score that its weight is exactly zero in float32 and float64
MASKED_SCORE = -1e9


@dataclass(frozen=True)
class GptConfig:
    """The shape of a GPT-2-style model: vocabulary, context length (``block_size``),
    depth, heads and width; ``layer_norm_epsilon`` as in GPT-2's ``config.json``."""

    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    layer_norm_epsilon: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ShapeError(f"GptConfig.{name} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ShapeError(f"GptConfig: n_embd {self.n_embd} is not divisible by n_head "
                             f"{self.n_head}")
        if not (isinstance(self.layer_norm_epsilon, float) and self.layer_norm_epsilon > 0):
            raise ShapeError(f"GptConfig.layer_norm_epsilon must be a positive float, got "
                             f"{self.layer_norm_epsilon!r}")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def parameter_count(self) -> int:
        """Parameters in the tied model (the head reuses ``wte``)."""
        c, v, t, n = self.n_embd, self.vocab_size, self.block_size, self.n_layer
        block = (2 * 2 * c + (c * 3 * c + 3 * c) + (c * c + c) + (c * 4 * c + 4 * c)
                 + (4 * c * c + c))
        return v * c + t * c + n * block + 2 * c


def _split_heads(x: Expr, n_head: int) -> Expr:
    """``[B, T, C]`` -> ``[B, H, T, D]``."""
    b, t, c = x.shape
    return x.reshape(b, t, n_head, c // n_head).transpose(0, 2, 1, 3)


def _merge_heads(x: Expr) -> Expr:
    """``[B, H, T, D]`` -> ``[B, T, C]``."""
    b, h, t, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)


class CausalSelfAttention(Module):
    """Multi-head self-attention with a causal mask: ``c_attn`` projects to queries,
    keys and values (``[C, 3C]``), ``c_proj`` mixes the heads back (``[C, C]``)."""

    def __init__(self, tape: Tape, n_embd: int, n_head: int,
                 init: Callable[..., Any] | None = None,
                 proj_init: Callable[..., Any] | None = None, name: str | None = None,
                 dtype: Any = "float32") -> None:
        super().__init__(tape, name)
        self.dtype = dtype
        if n_embd % n_head:
            raise ShapeError(f"CausalSelfAttention: n_embd {n_embd} is not divisible by "
                             f"n_head {n_head}")
        self.n_embd, self.n_head = int(n_embd), int(n_head)
        self.c_attn = self._linear("c_attn", self.n_embd, 3 * self.n_embd, init)
        self.c_proj = self._linear("c_proj", self.n_embd, self.n_embd, proj_init or init)

    def _linear(self, local: str, n_in: int, n_out: int,
                init: Callable[..., Any] | None) -> Linear:
        layer = Linear(self.tape, n_in, n_out, init=init, name=self._path(local),
                       weight_name="weight", dtype=self.dtype)
        self._child(local, layer)
        return layer

    def _qkv(self, x: Expr) -> tuple[Expr, Expr, Expr]:
        if x.ndim != 3 or x.shape[-1] != self.n_embd:
            raise ShapeError(f"CausalSelfAttention({self.n_embd}): input must be [B, T, "
                             f"{self.n_embd}], got {list(x.shape)}")
        qkv = self.c_attn(x)
        c = self.n_embd
        return tuple(_split_heads(qkv.slice(k * c, (k + 1) * c, axis=2), self.n_head)
                     for k in range(3))  # type: ignore[return-value]

    def _attend(self, q: Expr, k: Expr, v: Expr, allowed: Expr) -> Expr:
        """Softmax over keys of the scaled scores where ``allowed`` is nonzero."""
        scores = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(q.shape[-1]))
        weights = where(allowed, scores, MASKED_SCORE).softmax(axis=-1)
        return self.c_proj(_merge_heads(weights @ v))

    def __call__(self, x: Expr) -> Expr:
        """The full-context form: ``[B, T, C]`` -> ``[B, T, C]``."""
        q, k, v = self._qkv(x)
        t = x.shape[1]
        causal = np.tril(np.ones((t, t), dtype=x.dtype))
        return self._attend(q, k, v, self.tape.leaf(causal))

    def step(self, x: Expr, position: Expr, k_cache: Expr, v_cache: Expr
             ) -> tuple[Expr, Expr, Expr]:
        """The decode form: ``x`` ``[B, 1, C]`` at ``position`` (an int ``[1]`` input)
        with the cache ``[B, H, S, D]`` of keys and values at earlier positions; returns
        the output ``[B, 1, C]`` and both caches with this position written."""
        if x.shape[1] != 1:
            raise ShapeError(f"CausalSelfAttention.step takes one position, got {list(x.shape)}")
        q, k, v = self._qkv(x)
        length = k_cache.shape[2]
        if k_cache.shape != (x.shape[0], self.n_head, length, self.n_embd // self.n_head) or \
                v_cache.shape != k_cache.shape:
            raise ShapeError(f"CausalSelfAttention.step: caches must be [B, H, S, D] = "
                             f"{[x.shape[0], self.n_head, 'S', self.n_embd // self.n_head]}, "
                             f"got {list(k_cache.shape)} and {list(v_cache.shape)}")
        slots = self.tape.leaf(np.arange(length, dtype=position.dtype))
        here = (slots == position).reshape(1, 1, length, 1)
        k_new = where(here, k, k_cache)
        v_new = where(here, v, v_cache)
        return self.attend_cache(q, position, k_new, v_new), k_new, v_new

    def project(self, x: Expr) -> tuple[Expr, Expr, Expr]:
        """The queries, keys and values of ``x`` ``[B, T, C]``, each ``[B, H, T, D]``:
        the first half of a decode step whose caller writes the key and value into its
        caches in place (``attend_cache`` is the second half)."""
        return self._qkv(x)

    def attend_cache(self, q: Expr, position: Expr, k_cache: Expr, v_cache: Expr) -> Expr:
        """The decode form's attention of ``q`` ``[B, H, 1, D]`` at ``position`` over
        caches ``[B, H, S, D]`` that already hold this position's key and value; the
        slots after ``position`` are masked out. Returns ``[B, 1, C]``."""
        length = k_cache.shape[2]
        slots = self.tape.leaf(np.arange(length, dtype=position.dtype))
        allowed = (slots <= position).reshape(1, 1, 1, length).astype(q.dtype)
        return self._attend(q, k_cache, v_cache, allowed)


class FeedForward(Module):
    """GPT-2's feed-forward part: ``c_fc`` to four times the width, GELU, ``c_proj``."""

    def __init__(self, tape: Tape, n_embd: int, init: Callable[..., Any] | None = None,
                 proj_init: Callable[..., Any] | None = None, name: str | None = None,
                 dtype: Any = "float32") -> None:
        super().__init__(tape, name)
        self.c_fc = Linear(tape, n_embd, 4 * n_embd, init=init, name=self._path("c_fc"),
                           weight_name="weight", dtype=dtype)
        self._child("c_fc", self.c_fc)
        self.c_proj = Linear(tape, 4 * n_embd, n_embd, init=proj_init or init,
                             name=self._path("c_proj"), weight_name="weight", dtype=dtype)
        self._child("c_proj", self.c_proj)

    def __call__(self, x: Expr) -> Expr:
        return self.c_proj(self.c_fc(x).gelu())


class TransformerBlock(Module):
    """Pre-norm block: ``x + attn(ln_1(x))`` then ``x + mlp(ln_2(x))``."""

    def __init__(self, tape: Tape, n_embd: int, n_head: int, eps: float = 1e-5,
                 init: Callable[..., Any] | None = None,
                 proj_init: Callable[..., Any] | None = None, name: str | None = None,
                 dtype: Any = "float32") -> None:
        super().__init__(tape, name)
        self.dtype = dtype
        self.ln_1 = self._norm("ln_1", n_embd, eps)
        self.attn = CausalSelfAttention(tape, n_embd, n_head, init, proj_init,
                                        name=self._path("attn"), dtype=dtype)
        self._child("attn", self.attn)
        self.ln_2 = self._norm("ln_2", n_embd, eps)
        self.mlp = FeedForward(tape, n_embd, init, proj_init, name=self._path("mlp"),
                               dtype=dtype)
        self._child("mlp", self.mlp)

    def _norm(self, local: str, n_embd: int, eps: float) -> LayerNorm:
        norm = LayerNorm(self.tape, n_embd, eps, name=self._path(local), gain_name="weight",
                         dtype=self.dtype)
        self._child(local, norm)
        return norm

    def __call__(self, x: Expr) -> Expr:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def step(self, x: Expr, position: Expr, k_cache: Expr, v_cache: Expr
             ) -> tuple[Expr, Expr, Expr]:
        """The decode form (see ``CausalSelfAttention.step``)."""
        attended, k_new, v_new = self.attn.step(self.ln_1(x), position, k_cache, v_cache)
        x = x + attended
        return x + self.mlp(self.ln_2(x)), k_new, v_new

    def step_project(self, x: Expr) -> tuple[Expr, Expr, Expr]:
        """A decode step in two halves, for a caller that keeps its caches and writes
        each new key and value into them in place (no cache is copied): this first half
        gives the queries, keys and values ``[B, H, 1, D]`` of ``x`` ``[B, 1, C]``."""
        return self.attn.project(self.ln_1(x))

    def step_finish(self, x: Expr, q: Expr, position: Expr, k_cache: Expr, v_cache: Expr
                    ) -> Expr:
        """The second half: the block's output ``[B, 1, C]`` for ``x`` with queries ``q``
        at ``position``, over caches that already hold this position's key and value."""
        x = x + self.attn.attend_cache(q, position, k_cache, v_cache)
        return x + self.mlp(self.ln_2(x))


class _Blocks(Module):
    """The ``h`` container: block ``k`` under the path ``h.k``."""

    def __init__(self, tape: Tape, name: str | None) -> None:
        super().__init__(tape, name)
        self.blocks: list[TransformerBlock] = []

    def add(self, block: TransformerBlock) -> None:
        self._child(str(len(self.blocks)), block)
        self.blocks.append(block)


class Gpt(Module):
    """A GPT-2-style language model recorded on ``tape``.

    Construction records the parameters under GPT-2's paths. The order on the tape (and
    so in the parameter table) is ``wte``, ``wpe``, ``ln_f``, then ``h.0``, ``h.1``, ...:
    each block's parameters are one contiguous run of the table, which lets generation
    run one compiled block body per layer over views of that run. ``named_parameters``
    visits in GPT-2's order (``wte``, ``wpe``, ``h.*``, ``ln_f``).

    ``gpt(ids)`` records the full-context logits ``[B, T, vocab]`` of int token ids
    ``[B, T]``; ``gpt.loss(logits, targets)`` the mean next-token cross-entropy;
    ``gpt.step(token, position, caches)`` the one-token decode twin.
    """

    def __init__(self, tape: Tape, config: GptConfig, init: Callable[..., Any] | None = None,
                 dtype: Any = "float32", name: str | None = None, seed: int = 0,
                 with_blocks: bool = True) -> None:
        """``init`` draws every weight (default: GPT-2's N(0, 0.02), the residual
        projections scaled down by depth, from ``seed``); ``with_blocks=False`` records
        only the edges (``wte``, ``wpe``, ``ln_f``), the prefix of a full model's table."""
        super().__init__(tape, name)
        if not isinstance(config, GptConfig):
            raise TypeError(f"Gpt takes a GptConfig, got {type(config).__name__}")
        self.config = config
        c = config
        weight_init = init or initializers.normal(seed, 0.02)
        proj_init = init or initializers.normal(seed + 1, 0.02 / math.sqrt(2 * c.n_layer))
        position_init = init or initializers.normal(seed + 2, 0.01)
        self.wte = Embedding(tape, c.vocab_size, c.n_embd, init=weight_init, dtype=dtype,
                             name=self._path("wte"), weight_name="weight")
        self.wpe = Embedding(tape, c.block_size, c.n_embd, init=position_init, dtype=dtype,
                             name=self._path("wpe"), weight_name="weight")
        self.ln_f = LayerNorm(tape, c.n_embd, c.layer_norm_epsilon, dtype=dtype,
                              name=self._path("ln_f"), gain_name="weight")
        self.h = _Blocks(tape, self._path("h"))
        for k in range(c.n_layer if with_blocks else 0):
            self.h.add(TransformerBlock(tape, c.n_embd, c.n_head, c.layer_norm_epsilon,
                                        weight_init, proj_init, name=self._path(f"h.{k}"),
                                        dtype=dtype))
        for local, child in (("wte", self.wte), ("wpe", self.wpe), ("h", self.h),
                             ("ln_f", self.ln_f)):
            self._child(local, child)

    @property
    def blocks(self) -> list[TransformerBlock]:
        return self.h.blocks

    def embed(self, ids: Expr) -> Expr:
        """Token plus position embeddings of ids ``[B, T]`` (positions ``0..T-1``)."""
        if ids.ndim != 2 or ids.dtype not in ("int32", "int64"):
            raise ShapeError(f"Gpt: token ids must be int [B, T], got {ids.dtype} "
                             f"{list(ids.shape)}")
        t = ids.shape[1]
        if t > self.config.block_size:
            raise ShapeError(f"Gpt: {t} positions exceed the context length "
                             f"{self.config.block_size}")
        return self.wte(ids) + self.wpe.weights.slice(0, t, axis=0)

    def head(self, x: Expr) -> Expr:
        """Final norm and the tied output head: ``[..., C]`` -> ``[..., vocab]``."""
        return self.ln_f(x) @ self.wte.weights.T

    def __call__(self, ids: Expr) -> Expr:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    def loss(self, logits: Expr, targets: Expr) -> Expr:
        """Mean cross-entropy of ``logits`` ``[B, T, V]`` against next tokens ``[B, T]``."""
        b, t, v = logits.shape
        if targets.shape != (b, t):
            raise ShapeError(f"Gpt.loss: targets must be [{b}, {t}], got {list(targets.shape)}")
        return logits.reshape(b * t, v).cross_entropy(targets.reshape(b * t))

    def cache_shape(self, batch: int, length: int | None = None) -> tuple[int, int, int, int]:
        """One layer's key (or value) cache: ``[B, H, S, D]``."""
        c = self.config
        return (batch, c.n_head, length or c.block_size, c.head_dim)

    def step_embed(self, token: Expr, position: Expr) -> Expr:
        """The decode step's input: token ids ``[B]`` at ``position`` (int ``[1]``)."""
        return (self.wte(token) + self.wpe(position)).reshape(token.shape[0], 1,
                                                                self.config.n_embd)

    def step(self, token: Expr, position: Expr, caches: Sequence[tuple[Expr, Expr]]
             ) -> tuple[Expr, list[tuple[Expr, Expr]]]:
        """The one-token decode twin: logits ``[B, vocab]`` of ``token`` ``[B]`` at
        ``position`` given each layer's ``(keys, values)`` cache, and the updated caches."""
        if len(caches) != len(self.blocks):
            raise ShapeError(f"Gpt.step: expected {len(self.blocks)} layer caches, got "
                             f"{len(caches)}")
        x = self.step_embed(token, position)
        updated = []
        for block, (k_cache, v_cache) in zip(self.blocks, caches):
            x, k_new, v_new = block.step(x, position, k_cache, v_cache)
            updated.append((k_new, v_new))
        return self.head(x).reshape(token.shape[0], self.config.vocab_size), updated


__all__ = ["GptConfig", "Gpt", "CausalSelfAttention", "TransformerBlock", "MASKED_SCORE"]
